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
