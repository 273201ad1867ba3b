"""The flow ``feedback-push`` with two accounts configured by environment variables: every
account pushed to its own server, each with its own writer slot and artifacts; one
account's server down fails the run naming it, after the other was pushed."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dlt.common.configuration.container import Container
from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext
from feedback_sync.app.cli import main
from feedback_sync.flows import lineage
from feedback_sync.flows.push import feedback_push
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread
from feedback_sync.warehouse.target import make_target

from tests.flows.prefect_api import PrefectApi
from tests.push.helpers import write_csv

pytestmark = pytest.mark.slow

KEYS = {"acme": "acme-flow-key-1234", "globex": "globex-flow-key-5678"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(name: str, port: int = 0) -> contextlib.AbstractContextManager[RunningSandbox]:
    seed = 1 if name == "acme" else 2
    return serve_in_thread(create_app("tiny", seed, api_key=KEYS[name]), port=port)


def _topics(server: RunningSandbox) -> set[str]:
    dump = httpx.get(f"{server.root_url}/_sandbox/dump", timeout=30).json()
    return {t["name"] for t in dump["topics"]}


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefect_server: PrefectApi
) -> Iterator[Path]:
    """An empty project folder, the current one; the accounts are configured by the
    environment alone."""
    for name in list(os.environ):
        if name.startswith(("SOURCES__", "PUSH__", "DESTINATION__")):
            monkeypatch.delenv(name)
    (tmp_path / ".dlt").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLT_PROJECT_DIR", str(tmp_path))
    monkeypatch.setenv("SOURCES__FEEDBACK__ACCOUNT_NAMES", '["acme", "globex"]')
    monkeypatch.setenv("SOURCES__FEEDBACK__PAGE_SIZE", "7")
    monkeypatch.setenv("SOURCES__FEEDBACK__MAX_RETRIES", "1")
    monkeypatch.setenv("SOURCES__FEEDBACK__TIMEOUT_SECONDS", "2")
    monkeypatch.setenv("PUSH__CURATED_DIR", str(tmp_path / "curated"))
    run_context = Container()[PluggableRunContext]
    before = run_context.context.run_dir
    run_context.reload(str(tmp_path))
    yield tmp_path
    run_context.reload(before)


def _account(monkeypatch: pytest.MonkeyPatch, name: str, server: RunningSandbox) -> None:
    monkeypatch.setenv(f"SOURCES__FEEDBACK__ACCOUNTS__{name.upper()}__BASE_URL", server.base_url)
    monkeypatch.setenv(f"SOURCES__FEEDBACK__ACCOUNTS__{name.upper()}__API_KEY", KEYS[name])


def _synced(project: Path) -> None:
    """Every account synced into Parquet, and the models over every account built."""
    where = ["--destination", "parquet", "--pipelines-dir", str(project / "pipelines")]
    assert main(["sync", *where, "--progress", "off"]) == 0


def _limits(project: Path) -> None:
    """The writer slot of each account's Parquet folder."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    target = make_target("parquet", parquet_dir=project / "data" / "parquet")
    with get_client(sync_client=True) as client:
        for account in KEYS:
            name = lineage.concurrency_limit(target.for_account(account))
            with contextlib.suppress(Exception):  # made by an earlier test of the module
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name=name, limit=1)
                )


def test_the_push_flow_pushes_every_account_and_fails_naming_the_one_down(
    project: Path, monkeypatch: pytest.MonkeyPatch, prefect_server: PrefectApi
) -> None:
    port = _free_port()
    with _server("acme") as acme:
        with _server("globex", port) as globex:
            _account(monkeypatch, "acme", acme)
            _account(monkeypatch, "globex", globex)
            _synced(project)
            _limits(project)
            # acme's key from its own Secret block, over a stale one in the environment
            from prefect.blocks.system import Secret

            Secret(value=KEYS["acme"]).save("feedback-api-key-acme", overwrite=True)
            monkeypatch.setenv("SOURCES__FEEDBACK__ACCOUNTS__ACME__API_KEY", "stale-acme-key")
            write_csv(
                project / "curated" / "topics.csv",
                [
                    {"topic_key": "roadmap", "name": "Acme roadmap", "account": "acme"},
                    {"topic_key": "roadmap", "name": "Globex roadmap", "account": "globex"},
                ],
            )
            parquet = str(project / "data" / "parquet")
            state = feedback_push(
                apply=True, destination="parquet", parquet_dir=parquet, return_state=True
            )
            assert state.is_completed(), state.message
            assert _topics(acme) >= {"Acme roadmap"} and "Globex roadmap" not in _topics(acme)
            assert _topics(globex) >= {"Globex roadmap"} and "Acme roadmap" not in _topics(globex)
            target = make_target("parquet", parquet_dir=project / "data" / "parquet")
            for account in KEYS:
                key = lineage.artifact_key(target.for_account(account), "push-preview")
                report = prefect_server.artifacts(key)[0]["data"]
                assert f"feedback-push {account} (apply)" in report
                assert KEYS["acme"] not in report and KEYS["globex"] not in report

        # globex's server is down: acme is still pushed (nothing to send), the run fails
        write_csv(
            project / "curated" / "topics.csv",
            [
                {"topic_key": "roadmap", "name": "Acme roadmap 2", "account": "acme"},
                {"topic_key": "roadmap", "name": "Globex roadmap 2", "account": "globex"},
            ],
        )
        state = feedback_push(
            apply=True, destination="parquet", parquet_dir=parquet, return_state=True
        )
        assert state.is_failed()
        assert "1 of 2 account(s): globex (failed: " in str(state.message), state.message
        assert "Acme roadmap 2" in _topics(acme)

        state = feedback_push(account="initech", destination="parquet", return_state=True)
        assert state.is_failed()
        assert "the parameter account initech: no such account; configured: acme, globex" in str(
            state.message
        )
