"""Runs of several datasets of one DuckDB file (the accounts) fetch side by side and take
turns at the file (``warehouse/runlock.py``), while two runs of one dataset never overlap."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from feedback_sync.errors import WarehouseBusy
from feedback_sync.warehouse import runlock
from feedback_sync.warehouse.target import Target, make_target


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
