"""SIGKILL of a real ``feedback-sync sync --destination delta`` while it merges into the
Delta tables, commits the deletes there (one commit per table: a kill between two leaves
the run's journal owing the rest), and builds the models over the snapshots; the next run
recovers, with no key lost or landed twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.kills import run_campaign


@pytest.mark.slow
def test_a_sync_into_delta_killed_in_load_reconcile_and_models_recovers(tmp_path: Path) -> None:
    stages = ("load", "reconcile", "models")
    campaign = run_campaign(
        len(stages), seed=17, scale="tiny", workdir=tmp_path, delta=True, stages=stages
    )
    assert campaign.distribution() == dict.fromkeys(stages, 1), campaign.rounds
    for round_ in campaign.rounds:
        assert round_.ok, round_
    # a kill among the per-table delete commits leaves them owed: the rerun finished them
    assert any(r.resumed for r in campaign.rounds if r.stage == "reconcile"), campaign.rounds
    assert campaign.final_equal, campaign.final_problems
    assert campaign.rows_compared > 400
