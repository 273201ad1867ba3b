"""A seeded slice of the fault matrix (``./run reliability`` runs all of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.matrix import RATE_LIMIT, exhausted_cell, push_cell, rate_limit_cell, sync_cells

MIXED = "429_bare+502+stall+drop+truncate"


@pytest.mark.slow
def test_sync_and_push_under_mixed_faults_end_equal_and_apply_nothing_twice(
    tmp_path: Path,
) -> None:
    cells = [
        *sync_cells(MIXED, 0.1, 11, tmp_path / "sync"),
        push_cell(MIXED, 0.1, 11, tmp_path / "push"),
    ]
    for cell in cells:
        assert cell.ok, cell
        assert cell.faults > 0, f"{cell.check} met no fault: the slice tests nothing"
    full, normal, push = cells
    assert full.outcome == normal.outcome == "equal"
    assert full.rows_compared > 400 and normal.rows_compared > full.rows_compared
    assert push.writes >= 20 and push.writes_twice == 0 and push.writes_lost == 0


@pytest.mark.slow
def test_a_rate_limited_server_is_never_asked_faster_than_its_limit(tmp_path: Path) -> None:
    cell, busiest = rate_limit_cell(5, tmp_path)
    assert cell.outcome == "equal", cell
    assert cell.requests > 2 * RATE_LIMIT  # long enough for the pace to matter
    assert busiest <= RATE_LIMIT


@pytest.mark.slow
def test_retries_that_run_out_fail_in_one_line_and_change_nothing(tmp_path: Path) -> None:
    cell = exhausted_cell("502", 3, tmp_path)
    assert cell.outcome == "failed cleanly", cell
    assert "gave up after 3 attempts" in cell.message and "\n" not in cell.message
    assert cell.rows_compared > 400  # the next run, faults gone, ended equal
