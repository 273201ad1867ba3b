"""How a load runs its jobs: into tables a DuckDB file holds, one at a time
(``DuckDb.merge_load_workers``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from dlt.common.destination.client import RunnableLoadJob

from tests.sync.harness import Harness

# merged into tables the warehouse holds (ideas and comments): copies, then merges
CHANGES = {"comments": {"create": 3}, "ideas": {"update": 2}}


class _Overlap:
    """Counts the load jobs running at once, and the most there ever were."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.jobs: list[str] = []

    def wrap(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = RunnableLoadJob.run_managed
        overlap = self

        def run_managed(job: RunnableLoadJob, *args: Any, **kwargs: Any) -> None:
            with overlap.lock:
                overlap.running += 1
                overlap.most = max(overlap.most, overlap.running)
                overlap.jobs.append(job.file_name())
            try:
                original(job, *args, **kwargs)
            finally:
                with overlap.lock:
                    overlap.running -= 1

        monkeypatch.setattr(RunnableLoadJob, "run_managed", run_managed)


@pytest.mark.slow
def test_a_duckdb_load_into_the_tables_it_holds_runs_one_job_at_a_time(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.sync(full=True)
    harness.mutate(seed=5, counts=CHANGES)
    overlap = _Overlap()
    overlap.wrap(monkeypatch)
    harness.sync()
    # copies and merges both ran, and never two at once
    assert any(name.endswith(".sql") for name in overlap.jobs)
    assert any(name.endswith(".parquet") for name in overlap.jobs)
    assert overlap.most == 1
    harness.assert_equals_truth(tables=["ideas", "comments"])


@pytest.mark.slow
def test_the_merges_cache_goes_back_before_child_rows_are_replaced(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a load that merged, DuckDB hands back what the merges cached before the child
    tables are read whole for stale rows; a first load, or a load of no row, with nothing
    merged, does not."""
    from feedback_sync.warehouse import duckdb as duck
    from feedback_sync.warehouse import reconcile

    steps: list[str] = []
    real_release = duck.release_memory
    real_replace = reconcile.replace_children

    def release(con: Any, limit: str) -> bool:
        steps.append("release")
        return real_release(con, limit)

    def replace(*args: Any, **kwargs: Any) -> dict[str, int]:
        steps.append("replace children")
        return real_replace(*args, **kwargs)

    monkeypatch.setattr(duck, "release_memory", release)
    monkeypatch.setattr(reconcile, "replace_children", replace)
    harness.sync(full=True, models=False, history_ideas=False, history_companies=False)
    assert "release" not in steps  # a first load merges nothing
    steps.clear()
    harness.mutate(seed=5, counts=CHANGES)
    harness.sync(models=False, history_ideas=False, history_companies=False)
    assert steps == ["release", "replace children"]
    harness.assert_equals_truth(tables=["ideas", "comments"])
    steps.clear()
    harness.sync(models=False, history_ideas=False, history_companies=False)
    assert steps == []  # nothing changed: no row merged, no cache to give back
