"""One SIGKILL in each stage (the whole campaign runs in ``./run reliability``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.kills import STAGES, run_campaign


@pytest.mark.slow
def test_a_run_killed_in_each_stage_is_recovered_by_the_next(tmp_path: Path) -> None:
    """SIGKILL in extract, normalize, load, reconcile, history, models and push, one each (the
    whole campaign: ./run reliability); the same command again recovers every time."""
    campaign = run_campaign(len(STAGES), seed=5, scale="tiny", workdir=tmp_path)
    assert campaign.distribution() == dict.fromkeys(STAGES, 1), campaign.rounds
    for round_ in campaign.rounds:
        assert round_.ok, round_
    assert campaign.final_equal, campaign.final_problems
    assert campaign.rows_compared > 400
