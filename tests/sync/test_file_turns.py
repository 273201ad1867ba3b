"""Runs of several datasets of one DuckDB file (the accounts) fetch side by side and take
turns at the file (``warehouse/runlock.py``), while two runs of one dataset never overlap.
The fixture ``project`` is in ``conftest.py``."""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest
from feedback_sync.app.cli import main
from feedback_sync.app.sync import SyncOptions, run_sync
from feedback_sync.errors import WarehouseBusy
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.warehouse import runlock
from feedback_sync.warehouse.target import Target, make_target

from reliability.kills import LiveRun
from tests.sync.accounts import assert_account_equals_truth, servers, write_settings
from tests.sync.harness import Harness

# every answer of the slowed account's server, until the test lets it go: far longer than
# the other account's whole run takes on a busy machine, so the slowed fetch is still going
SLOW_MS = 2000.0
CREATED = {"followers": {"create": 3}, "comments": {"create": 5}}


def _targets(tmp_path: Path, *datasets: str, pipelines: str = "pipelines") -> list[Target]:
    return [
        make_target(
            duckdb_path=tmp_path / "warehouse.duckdb",
            dataset=dataset,
            pipelines_dir=tmp_path / pipelines,
        )
        for dataset in datasets
    ]


def _in_thread(work: Callable[[], None]) -> threading.Thread:
    """``work`` run by another thread, as another process would (a thread's locks nest)."""
    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_two_datasets_of_one_file_run_together_and_take_turns_at_the_file(
    tmp_path: Path,
) -> None:
    acme, globex = _targets(tmp_path, "feedback_acme", "feedback_globex")
    events: list[str] = []
    said: list[str] = []
    acme_in_turn, acme_done = threading.Event(), threading.Event()

    def acme_run() -> None:
        with runlock.hold_run(acme, "sync"), runlock.turn(acme, "sync"):
            events.append("acme turn")
            acme_in_turn.set()
            assert acme_done.wait(30)
            events.append("acme turn ends")

    def globex_run() -> None:
        with runlock.hold_run(globex, "sync"):  # not held by acme's run: at once
            events.append("globex run")
            with runlock.turn(globex, "sync", said.append):  # the file: after acme's turn
                events.append("globex turn")

    first = _in_thread(acme_run)
    assert acme_in_turn.wait(30)
    second = _in_thread(globex_run)
    while not said and second.is_alive():
        second.join(runlock.POLL_SECONDS)
    acme_done.set()
    first.join(30)
    second.join(30)
    assert events == ["acme turn", "globex run", "acme turn ends", "globex turn"]
    # the one line it said names the file, the run writing it and that run's dataset
    (line,) = said
    assert line.startswith(f"sync: waiting for its turn at {tmp_path / 'warehouse.duckdb'}: ")
    assert f"another feedback-sync sync (process {os.getpid()}, since " in line
    assert "of the dataset feedback_acme is writing there" in line


def test_a_second_run_of_one_dataset_is_refused_even_from_another_working_folder(
    tmp_path: Path,
) -> None:
    """The dataset's lock beside the file keeps out a run of the same dataset whose dlt
    working folder (and so pipeline lock) is another (``--pipelines-dir``)."""
    (first,) = _targets(tmp_path, "feedback_acme")
    (elsewhere,) = _targets(tmp_path, "feedback_acme", pipelines="other-pipelines")
    assert first.working_root() != elsewhere.working_root()
    outcome: list[BaseException | None] = []

    def second_run() -> None:
        try:
            with runlock.hold_run(elsewhere, "sync"):
                outcome.append(None)
        except WarehouseBusy as exc:
            outcome.append(exc)

    with runlock.hold_run(first, "push"):  # no turn held: its run locks alone keep it out
        _in_thread(second_run).join(30)
    (refused,) = outcome
    assert isinstance(refused, WarehouseBusy)
    assert "(dataset feedback_acme)" in str(refused)
    assert f"is in use by another feedback-sync push (process {os.getpid()}, " in str(refused)


def test_the_locks_are_taken_in_one_order_only(tmp_path: Path) -> None:
    """A turn only inside the run's locks; no run lock taken afresh inside a turn (the
    order that keeps the waits from forming a circle)."""
    acme, globex = _targets(tmp_path, "feedback_acme", "feedback_globex")
    with pytest.raises(RuntimeError, match="inside hold_run"), runlock.turn(acme, "sync"):
        pass
    with runlock.hold_run(acme, "sync"), runlock.turn(acme, "sync"):
        with pytest.raises(RuntimeError, match="never inside it"), runlock.hold_run(globex, "sync"):
            pass
        with runlock.hold(acme, "models"):  # what it holds already nests
            pass


# --- the accounts, end to end ----------------------------------------------------------


@pytest.fixture
def two(project: Path) -> Iterator[tuple[RunningSandbox, RunningSandbox]]:
    """Accounts acme and globex, each on its own server, into the default DuckDB file."""
    with servers() as (acme, globex):
        write_settings(
            project,
            "[sources.feedback]\npage_size = 7\n"
            f'[sources.feedback.accounts.acme]\nbase_url = "{acme.base_url}"\n'
            f'[sources.feedback.accounts.globex]\nbase_url = "{globex.base_url}"\n',
            f'[sources.feedback.accounts.acme]\napi_key = "{acme.api_key}"\n'
            f'[sources.feedback.accounts.globex]\napi_key = "{globex.api_key}"\n',
        )
        yield acme, globex


@pytest.fixture
def slowed(project: Path, two: tuple[RunningSandbox, RunningSandbox]) -> Iterator[Harness]:
    """acme's server, every answer slowed until the test sets ``latency_ms`` back to 0."""
    harness = Harness(two[0], project / "data")
    harness.switches(latency_ms=SLOW_MS)
    try:
        yield harness
    finally:
        harness.close()


def _cli(project: Path, *args: str) -> LiveRun:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    env["RUNTIME__DLTHUB_TELEMETRY"] = "false"
    command = [sys.executable, "-m", "feedback_sync.app.cli", *args]
    return LiveRun([*command, "--pipelines-dir", str(project / "pipelines")], env)


def _loaded_at(project: Path, account: str) -> float:
    """When the account's last load completed (dlt's record of it), in epoch seconds."""
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        row = con.execute(
            f"select max(epoch_ms(inserted_at)) from feedback_{account}._dlt_loads"
        ).fetchone()
    assert row is not None and row[0] is not None
    return float(row[0]) / 1000


@pytest.mark.slow
def test_accounts_sharing_one_duckdb_file_fetch_side_by_side(
    project: Path, two: tuple[RunningSandbox, RunningSandbox], slowed: Harness
) -> None:
    """acme's answers are slowed until globex's run has loaded (its history step, right
    after the load, has begun): globex's load landed while acme was still fetching, and
    both landed exactly what their servers hold. A first sync, then a normal one (which
    reads the warehouse before its fetch, and must have closed it again)."""
    acme, globex = two
    for number, kind in enumerate(("first run", "incremental run")):
        if number:  # new rows at both servers (what a normal run reads), acme's slowed
            slowed.mutate(seed=7, counts=CREATED)
            other = Harness(globex, project)
            try:
                other.mutate(seed=8, counts=CREATED)
            finally:
                other.close()
            slowed.switches(latency_ms=SLOW_MS)
            slowed.mark_requests()
        run = _cli(project, "sync", "--parallel", "2", "--no-models", "--progress", "plain")
        try:
            assert run.wait_for_line(lambda line: "their loads take the file in turn" in line, 120)
            loaded = run.wait_for_line(
                lambda line: line.startswith("[globex] sync: recording history"), 120
            )
        finally:
            slowed.switches(latency_ms=0.0)
            run.finish()
        output = "\n".join(run.seen)
        assert loaded, output
        assert run.popen.returncode == 0, output
        assert f"[acme] sync: {kind}" in output and f"[globex] sync: {kind}" in output
        assert run.seen[-1].startswith("2 of 2 accounts synced in "), output
        # acme asked its server for more after globex's load had completed: still fetching
        asked = [request["at"] for request in slowed.requests()]
        assert min(asked) < _loaded_at(project, "globex") < max(asked)
        assert_account_equals_truth(project, acme, "acme")
        assert_account_equals_truth(project, globex, "globex")


def test_a_load_waits_for_the_turn_of_another_dataset_and_says_so(harness: Harness) -> None:
    """A run of another dataset of the file holds its turn when this sync's fetch ends:
    the sync waits for it (it does not fail), says so once, counts the wait as its own
    step, and lands everything."""
    (other,) = _targets(harness.tmp, "feedback_other")
    out = io.StringIO()
    taken, done = threading.Event(), threading.Event()

    def other_run() -> None:
        with runlock.hold_run(other, "push"), runlock.turn(other, "push"):
            taken.set()
            while "waiting for its turn" not in out.getvalue():
                done.wait(runlock.POLL_SECONDS)

    def after_extract(pipeline: object) -> None:
        _in_thread(other_run)
        assert taken.wait(30)

    options = SyncOptions(
        settings=harness.settings(), out=out, after_extract=after_extract, models=False
    )
    result = run_sync(harness.target(), options)
    (said,) = [line for line in out.getvalue().splitlines() if "waiting" in line]
    assert said.startswith(
        f"sync: waiting for its turn at {harness.tmp / 'warehouse.duckdb'}: another "
        f"feedback-sync push (process {os.getpid()}, since "
    )
    assert said.endswith(
        " UTC) of the dataset feedback_other is writing there (the datasets of one DuckDB "
        "file write one at a time)"
    )
    assert list(result.phases)[:4] == ["start", "fetch", "wait", "load"]
    assert result.phases["wait"] > 0
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_second_run_of_an_account_fails_at_once_while_another_account_runs_through(
    project: Path,
    two: tuple[RunningSandbox, RunningSandbox],
    slowed: Harness,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """While ``sync --account acme`` fetches (slowed), a second ``sync --account acme``
    fails at once naming the first run, and ``sync --account globex`` runs to its end
    into the same DuckDB file; then the first ends too."""
    acme, globex = two
    first = _cli(project, "sync", "--account", "acme", "--no-models", "--progress", "plain")
    try:
        assert first.wait_for_line(lambda line: line.startswith("sync: first run"), 120)
        pipelines = ["--pipelines-dir", str(project / "pipelines"), "--progress", "off"]
        again = main(["sync", "--account", "acme", "--no-models", *pipelines])
        again_err = capsys.readouterr().err
        other = main(["sync", "--account", "globex", "--no-models", *pipelines])
        other_out = capsys.readouterr().out
    finally:
        slowed.switches(latency_ms=0.0)
        first.finish()
    assert again == 1
    (error,) = [line for line in again_err.splitlines() if "error" in line]
    assert error.startswith("feedback-sync sync: error: the warehouse DuckDB ")
    assert "(dataset feedback_acme)" in error
    assert f"in use by another feedback-sync sync (process {first.popen.pid}, since " in error
    assert "nothing was done" in error and "Traceback" not in again_err
    assert other == 0, other_out
    asked = [request["at"] for request in slowed.requests()]
    assert _loaded_at(project, "globex") < max(asked)  # the first was still fetching
    assert first.popen.returncode == 0, "\n".join(first.seen)
    assert_account_equals_truth(project, acme, "acme")
    assert_account_equals_truth(project, globex, "globex")
