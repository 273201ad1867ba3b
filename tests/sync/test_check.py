"""``feedback-sync check``: one line per check, exit 0 / 1 / 2, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedback_sync.sandbox.server import RunningSandbox

from tests.support.objectstore import Store
from tests.support.postgres import Server

CLI = [str(Path(sys.executable).with_name("feedback-sync"))]
CHECKS = ["settings", "api", "history", "warehouse", "models", "push"]


def _check(
    cwd: Path, server: RunningSandbox | None, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "DLT_", "PUSH__", "MODELS__"))
    }
    if server is not None:
        clean["SOURCES__FEEDBACK__BASE_URL"] = server.base_url
        clean["SOURCES__FEEDBACK__API_KEY"] = server.api_key
    return subprocess.run(
        [*CLI, "check", *args],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _lines(done: subprocess.CompletedProcess[str]) -> dict[str, tuple[str, str]]:
    """check name -> (ok | FAILED, what it said)."""
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("check: "):
            name, state, said = line.removeprefix("check: ").split(maxsplit=2)
            found[name] = (state, said)
    return found


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("destination", ["duckdb", "parquet", "delta"])
def test_a_good_setup_passes_and_leaves_nothing(
    live_sandbox: RunningSandbox, tmp_path: Path, destination: str
) -> None:
    (tmp_path / "data").mkdir()
    before = _tree(tmp_path)
    done = _check(tmp_path, live_sandbox, "--destination", destination)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = _lines(done)
    assert list(lines) == CHECKS
    assert all(state == "ok" for state, _ in lines.values()), done.stdout
    assert "the key accepted" in lines["api"][1]
    kept = "no history kept (Delta" if destination == "delta" else "kept for ideas (ideas_history)"
    assert lines["history"][1].startswith(kept), lines["history"]
    assert "a file was written in" in lines["warehouse"][1]
    assert done.stdout.strip().splitlines()[-1].startswith("all 6 checks passed in ")
    assert _tree(tmp_path) == before  # no warehouse, no probe, no working folder
    assert live_sandbox.api_key not in done.stdout + done.stderr


def test_an_existing_warehouse_is_opened_for_writing(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    import duckdb

    duckdb.connect(str(tmp_path / "w.duckdb")).close()
    done = _check(tmp_path, live_sandbox, DESTINATION__DUCKDB__CREDENTIALS="w.duckdb")
    assert done.returncode == 0, done.stdout
    assert _lines(done)["warehouse"] == ("ok", "w.duckdb: opened for writing")


def test_a_wrong_key_fails_the_api_check(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    done = _check(tmp_path, live_sandbox, SOURCES__FEEDBACK__API_KEY="not-the-key-4711")
    assert done.returncode == 1
    state, said = _lines(done)["api"]
    assert state == "FAILED"
    assert said.startswith("the API refused the key (HTTP 401")
    assert "SOURCES__FEEDBACK__API_KEY" in said
    assert "not-the-key-4711" not in done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("1 of 6 checks failed (api)")


def test_a_wrong_address_fails_the_api_check(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _check(
        tmp_path,
        None,
        SOURCES__FEEDBACK__BASE_URL=f"http://127.0.0.1:{port}/v1",
        SOURCES__FEEDBACK__API_KEY="k-1234",
    )
    assert done.returncode == 1
    state, said = _lines(done)["api"]
    assert state == "FAILED"
    assert f"no connection to http://127.0.0.1:{port}/v1" in said
    assert "connection refused" in said


def test_an_address_that_is_not_the_api_fails(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    """The right server, a wrong path: every request would be a 404."""
    wrong = live_sandbox.base_url.removesuffix("/v1") + "/api/v1"
    done = _check(tmp_path, live_sandbox, SOURCES__FEEDBACK__BASE_URL=wrong)
    assert done.returncode == 1
    state, said = _lines(done)["api"]
    assert state == "FAILED" and "answered 404" in said and "base_url" in said


@pytest.mark.parametrize("case", ["folder is a file", "not a DuckDB file"])
def test_an_unwritable_warehouse_fails_its_check(
    live_sandbox: RunningSandbox, tmp_path: Path, case: str
) -> None:
    if case == "folder is a file":
        (tmp_path / "data").write_text("")
        path, said = "data/w.duckdb", f"{tmp_path / 'data'} is a file, where data should be"
    else:  # (a folder without write permission: the tests run as root, who writes anyway)
        (tmp_path / "w.duckdb").write_text("not a database")
        path, said = "w.duckdb", "cannot open w.duckdb for writing: IO Error: "
    done = _check(tmp_path, live_sandbox, DESTINATION__DUCKDB__CREDENTIALS=path)
    assert done.returncode == 1, done.stdout
    state, line = _lines(done)["warehouse"]
    assert state == "FAILED" and line.startswith(said), line
    assert _lines(done)["api"][0] == "ok"  # a failing check does not stop the others


def test_a_malformed_setting_is_exit_2(tmp_path: Path) -> None:
    done = _check(tmp_path, None, SOURCES__FEEDBACK__API_KEY="k-1234")
    assert done.returncode == 2
    lines = _lines(done)
    assert lines["settings"][0] == "FAILED"
    assert "SOURCES__FEEDBACK__BASE_URL" in lines["settings"][1]
    assert lines["api"] == ("FAILED", "not asked: the settings are not valid")
    assert lines["history"] == ("FAILED", "not known: the settings are not valid")
    assert lines["warehouse"][0] == "ok"


def test_history_asked_of_delta_is_a_bad_setting(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    done = _check(
        tmp_path, live_sandbox, "--destination", "delta", SOURCES__FEEDBACK__HISTORY_IDEAS="true"
    )
    assert done.returncode == 2, done.stdout
    state, said = _lines(done)["history"]
    assert state == "FAILED"
    assert said.startswith("SOURCES__FEEDBACK__HISTORY_IDEAS (history_ideas in [sources.feedback])")
    assert "keeps no history" in said


def test_a_broken_sql_folder_fails_the_models_check(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    (tmp_path / "my-sql").mkdir()
    done = _check(tmp_path, live_sandbox, "--sql-dir", "my-sql")
    assert done.returncode == 1
    state, said = _lines(done)["models"]
    assert state == "FAILED" and "sources.toml" in said


@pytest.mark.slow
def test_postgres_is_connected_to_and_its_privileges_asked(
    live_sandbox: RunningSandbox, postgres_server: Server, postgres_dsn: str, tmp_path: Path
) -> None:
    done = _check(
        tmp_path,
        live_sandbox,
        "--destination",
        "postgres",
        DESTINATION__POSTGRES__CREDENTIALS=postgres_dsn,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    state, said = _lines(done)["warehouse"]
    assert state == "ok" and said.endswith("connected; the login may create schemas and tables")
    assert postgres_server.password not in done.stdout + done.stderr
    assert _tree(tmp_path) == []  # dlt's working folder was a temporary one

    wrong = postgres_dsn.replace(postgres_server.password, "not-the-password")
    refused = _check(
        tmp_path,
        live_sandbox,
        "--destination",
        "postgres",
        DESTINATION__POSTGRES__CREDENTIALS=wrong,
    )
    assert refused.returncode == 2, refused.stdout
    state, said = _lines(refused)["warehouse"]
    assert state == "FAILED" and said.startswith("the destination refused the login")
    assert "not-the-password" not in refused.stdout + refused.stderr


@pytest.mark.slow
def test_a_bucket_is_probed_with_an_object_removed_again(
    live_sandbox: RunningSandbox, object_store: Store, tmp_path: Path
) -> None:
    env = object_store.dlt_env(tmp_path.name)
    done = _check(tmp_path, live_sandbox, "--destination", "delta", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    state, said = _lines(done)["warehouse"]
    assert state == "ok"
    assert (
        said
        == f"{object_store.bucket_url(tmp_path.name)}/feedback/: an object was written and removed"
    )
    assert object_store.keys(tmp_path.name) == []
