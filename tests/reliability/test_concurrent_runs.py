"""Two runs against one warehouse at once (the same check runs in ./run reliability)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.concurrent import run_overlaps

# two syncs, a push during a sync, a push that waits (./run reliability adds a sync during
# a push, whose slowed answers cost half a minute more)
SLICE = (("sync", "sync", False), ("sync", "push", False), ("sync", "push", True))


@pytest.mark.slow
def test_a_second_run_fails_clearly_or_waits_and_nothing_is_corrupted(tmp_path: Path) -> None:
    results = run_overlaps(tmp_path, overlaps=SLICE)
    assert [(o.first, o.second, o.waits) for o in results] == list(SLICE)
    for overlap in results:
        assert overlap.ok, (overlap.describe(), overlap.problems)
        if not overlap.waits:
            assert overlap.second_line.startswith(f"feedback-sync {overlap.second}: error: ")
            assert f"is in use by another feedback-sync {overlap.first}" in overlap.second_line
            assert "--wait SECONDS" in overlap.second_line
