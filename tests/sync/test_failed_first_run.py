"""A first sync that commits nothing (a wrong key, an unreachable server, Ctrl-C before the
first load) leaves nothing in the folder it ran in: no warehouse file, no lock file, no
empty ``data/`` folder."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support.cli import CLI, cli_env
from tests.sync.harness import Harness


def _left(folder: Path) -> list[str]:
    """What is in ``folder`` beside dlt's own data folder (``cli_env`` puts it there)."""
    found = (p.relative_to(folder) for p in folder.rglob("*"))
    return sorted(str(p) for p in found if p.parts[0] != "dlt")


@pytest.mark.parametrize("destination", ["duckdb", "parquet"])
def test_a_wrong_key_leaves_nothing(harness: Harness, tmp_path: Path, destination: str) -> None:
    env = cli_env(harness.server, tmp_path, SOURCES__FEEDBACK__API_KEY="wrong-key")
    done = subprocess.run(
        [*CLI, "sync", "--destination", destination],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "(HTTP 401): invalid API key" in done.stderr
    assert _left(tmp_path) == []


@pytest.mark.slow
def test_an_unreachable_server_leaves_nothing(harness: Harness, tmp_path: Path) -> None:
    env = cli_env(harness.server, tmp_path, SOURCES__FEEDBACK__BASE_URL="http://127.0.0.1:9/v1")
    done = subprocess.run(
        [*CLI, "sync"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert _left(tmp_path) == []


@pytest.mark.slow
def test_ctrl_c_before_the_first_load_leaves_nothing(harness: Harness, tmp_path: Path) -> None:
    harness.switches(latency_ms=200)  # a fetch long enough to be interrupted
    env = cli_env(harness.server, tmp_path)
    harness.mark_requests()
    process = subprocess.Popen(
        [*CLI, "sync", "--progress", "plain"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not harness.requests() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert harness.requests(), "the sync never started fetching"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert _left(tmp_path) == []


def test_a_lock_file_removed_by_its_holder_never_lets_two_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that waits on a lock file its holder then removes (no warehouse was made)
    locks the file at the path, not the removed one: a third run meets it there."""
    from feedback_sync.errors import WarehouseBusy
    from feedback_sync.warehouse import runlock
    from feedback_sync.warehouse.target import make_target

    monkeypatch.chdir(tmp_path)
    target = make_target(pipelines_dir=tmp_path / "pipelines")  # data/warehouse.duckdb: not made
    events: list[str] = []
    second_holds = threading.Event()
    release_second = threading.Event()

    def second() -> None:
        with runlock.hold(target, "sync", wait_seconds=30):
            events.append("second holds")
            second_holds.set()
            release_second.wait(30)

    def third() -> None:
        try:
            with runlock.hold(target, "sync"):
                events.append("third holds")
        except WarehouseBusy:
            events.append("third refused")

    with runlock.hold(target, "sync"):
        waiting = threading.Thread(target=second)
        waiting.start()
        time.sleep(3 * runlock.POLL_SECONDS)  # the second run waits on the file now there
    assert second_holds.wait(30)
    assert (tmp_path / "data" / "warehouse.duckdb.lock").exists()  # the second made it again
    refused = threading.Thread(target=third)
    refused.start()
    refused.join(30)
    release_second.set()
    waiting.join(30)
    assert events == ["second holds", "third refused"]
    assert not (tmp_path / "data").exists()  # and the last out removed it again
