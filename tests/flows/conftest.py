"""Fixtures for the Prefect flow tests: one Prefect test server per session, and a live
sandbox whose API key is recognisable, so a test can search for it everywhere.

Prefect keeps its home (profiles, local result storage) in a temporary folder, never in
the user's ``~/.prefect``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_HOME = tempfile.mkdtemp(prefix="feedback-sync-prefect-")
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
os.environ["PREFECT_HOME"] = _HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DO_NOT_TRACK"] = "1"

from feedback_sync.sandbox.app import create_app  # noqa: E402
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread  # noqa: E402

from tests.flows.prefect_api import PrefectApi  # noqa: E402
from tests.support.prefect_local import LocalPrefect  # noqa: E402

# recognisable in any text it might leak into
SECRET_KEY = "fsync-SECRET-7Q2xK9mZ-4d1e"
LIMIT = "feedback-sync-duckdb-flow"


@pytest.fixture(scope="module")
def prefect_server() -> Iterator[PrefectApi]:
    """A Prefect test server for one test module, with the writer limit of ``flow.duckdb``.

    Per module, not per session: while it runs, Prefect's events client keeps a websocket
    whose keepalive pings draw from the global ``random`` module in a background thread,
    which makes Hypothesis tests that later share the worker process fail ("Do not use the
    `random` module inside strategies"). Leaving the harness drains and stops that client.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        with get_client(sync_client=True) as client:
            client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=LIMIT, limit=1)
            )
        api = PrefectApi(str(PREFECT_API_URL.value()))
        try:
            yield api
        finally:
            api.close()


@pytest.fixture
def secret_sandbox() -> Iterator[RunningSandbox]:
    with serve_in_thread(create_app("tiny", 1, api_key=SECRET_KEY)) as running:
        yield running


@pytest.fixture
def flow_env(
    prefect_server: PrefectApi,
    secret_sandbox: RunningSandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    """The worker-like environment a deployment runs in: configuration the dlt way."""
    env = {
        "SOURCES__FEEDBACK__BASE_URL": secret_sandbox.base_url,
        "SOURCES__FEEDBACK__API_KEY": SECRET_KEY,
        "SOURCES__FEEDBACK__PAGE_SIZE": "7",
        "SOURCES__FEEDBACK__MAX_CONCURRENCY": "4",
        "SOURCES__FEEDBACK__TIMEOUT_SECONDS": "5",
        "DESTINATION__DUCKDB__CREDENTIALS": str(tmp_path / "flow.duckdb"),
        "FLOWS__SYNC_RETRY_DELAY_SECONDS": "0",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return tmp_path


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalPrefect]:
    """A real ``prefect server`` of the test's own (workers are started by the test).

    The scheduler stays off: the deployments' schedules must not add runs to the test's."""
    local = LocalPrefect(
        tmp_path / "prefect", {"PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false"}
    )
    local.home.mkdir()
    try:
        local.start_server()
        yield local
    finally:
        local.close()
