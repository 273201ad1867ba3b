from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# dlt's anonymous telemetry stays off in tests (and in the subprocesses they start)
os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"
# each test process (an xdist worker) gets dlt's data folder of its own, inherited by the
# runs it starts: a run that passes no --pipelines-dir would otherwise use the shared
# default (/var/dlt as root), and its run lock, with another worker's run
os.environ["DLT_DATA_DIR"] = tempfile.mkdtemp(prefix="feedback-sync-dlt-")
# Ctrl-C as a person's terminal delivers it, in each test process and the runs it starts:
# a shell without job control starts a background command (`./run test &`, a CI runner's
# script) with SIGINT ignored, which a sync leaves ignored as under nohup
# (app/interrupts.py), so the tests of what a Ctrl-C does would see nothing happen
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from feedback_sync.sandbox.server import RunningSandbox

from tests.support import objectstore, postgres
from tests.sync.harness import Harness

atexit.register(shutil.rmtree, os.environ["DLT_DATA_DIR"], ignore_errors=True)

pytest_plugins = ["feedback_sync.sandbox.testing"]


@pytest.fixture
def harness(live_sandbox: RunningSandbox, tmp_path: Path) -> Iterator[Harness]:
    """A live tiny sandbox and a warehouse under ``tmp_path`` (tests/sync/harness.py)."""
    h = Harness(live_sandbox, tmp_path)
    try:
        yield h
    finally:
        h.close()


def _postgres_installable() -> bool:
    """Whether ``./run test`` could have installed PostgreSQL here (root with apt-get)."""
    return os.geteuid() == 0 and shutil.which("apt-get") is not None


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.Server]:
    """A throwaway PostgreSQL server for this test worker (tests/support/postgres.py).

    Skipped, with the reason in the summary, only where PostgreSQL cannot be installed (not
    root, or no apt-get); where it could have been, or on CI (``CI`` set), a missing server
    fails the tests instead.
    """
    try:
        with postgres.running() as server:
            yield server
    except postgres.PostgresUnavailable as exc:
        if os.environ.get("CI") or _postgres_installable():
            pytest.fail(f"PostgreSQL is required here and did not start: {exc}")
        pytest.skip(f"PostgreSQL tests SKIPPED: {exc}")


@pytest.fixture
def postgres_dsn(postgres_server: postgres.Server, request: pytest.FixtureRequest) -> str:
    """A new empty database on the worker's server, named after the test; its address."""
    name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:50].lower()
    postgres_server.psql(f'drop database if exists "{name}"')
    return postgres_server.create_database(name)


@pytest.fixture(scope="session")
def object_store() -> Iterator[objectstore.Store]:
    """A throwaway S3-compatible store with one bucket for this test worker
    (tests/support/objectstore.py; moto is a development dependency, so never skipped)."""
    with objectstore.running() as store:
        yield store


@pytest.fixture(scope="session")
def azure_store() -> Iterator[objectstore.AzureStore]:
    """A throwaway Azurite with one container for this test worker (tests/support/objectstore.py).

    Skipped, saying so, only where Azurite cannot be installed (no npm); on CI, or where
    ``./run test`` could have installed it, a missing Azurite fails the tests instead.
    """
    try:
        with objectstore.running_azure() as store:
            yield store
    except objectstore.ObjectStoreUnavailable as exc:
        if os.environ.get("CI") or shutil.which("npm"):
            pytest.fail(f"Azurite is required here and did not start: {exc}")
        pytest.skip(f"Delta-on-Azure tests SKIPPED: {exc}")


# Test files by their measured time in seconds (a fresh-clone `./run test --durations=N` on
# 2 cores, summed per file). xdist hands whole files (--dist loadfile) to
# whichever worker is free, in collection order; starting with the longest files keeps one
# long file from running alone at the end (longest-first scheduling). A file not listed
# counts as quick; a stale figure only costs balance, never correctness.
FILE_SECONDS = {
    "tests/sync/test_cli_and_secrets.py": 240,
    "tests/sync/test_variants.py": 164,
    "tests/flows/test_deploy.py": 156,
    "tests/flows/test_flow.py": 139,
    "tests/reliability/test_kill_slice.py": 127,
    "tests/push/test_push.py": 100,
    "tests/sync/test_full_and_incremental.py": 92,
    "tests/push/test_kill.py": 84,
    "tests/sync/test_resilience.py": 75,
    "tests/bench/test_bench.py": 90,
    "tests/bench/test_warehouses_bench.py": 28,
    "tests/sync/test_type_drift.py": 70,
    "tests/postgres/test_kill_postgres.py": 52,
    "tests/delta/test_delta_azure.py": 50,
    "tests/delta/test_kill_delta.py": 45,
    "tests/flows/test_flow_warehouses.py": 40,
    "tests/delta/test_delta_objectstore.py": 140,
    "tests/postgres/test_push_postgres.py": 35,
    "tests/delta/test_delta.py": 30,
    "tests/postgres/test_cli_postgres.py": 30,
    "tests/postgres/test_sync_postgres.py": 25,
    "tests/postgres/test_models_postgres.py": 15,
    "tests/postgres/test_passwordless.py": 25,
    "tests/models/test_warehouse_file_names.py": 18,
    "tests/sync/test_json_output.py": 8,
    "tests/sync/test_warehouse_identity.py": 45,
    "tests/sync/test_summary_adds_up.py": 25,
    "tests/docs/test_tutorials.py": 20,
    "tests/sync/test_interrupts.py": 15,
    "tests/sync/test_failed_first_run.py": 12,
    "tests/sync/test_setting_names.py": 10,
    "tests/sync/test_progress.py": 8,
    "tests/sync/test_cron_recipe.py": 9,
    "tests/reliability/test_concurrent_runs.py": 61,
    "tests/models/test_models.py": 51,
    "tests/reliability/test_fault_slice.py": 49,
    "tests/sandbox/test_control_and_seed.py": 47,
    "tests/install/test_wheel.py": 150,
    # the fast tests again, on the lowest allowed versions (a pytest run of its own)
    "tests/install/test_lowest.py": 270,
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first (FILE_SECONDS); the order within a file is kept."""
    root = Path(__file__).resolve().parent.parent

    def weight(item: pytest.Item) -> int:
        path = Path(str(item.fspath)).resolve()
        return -FILE_SECONDS.get(path.relative_to(root).as_posix(), 0)

    items.sort(key=weight)
