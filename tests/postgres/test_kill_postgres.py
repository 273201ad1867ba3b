"""SIGKILL of a real ``feedback-sync sync --destination postgres`` while it loads into
PostgreSQL, removes deleted rows there, and builds the models there; the next run recovers."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliability.kills import run_campaign


@pytest.mark.slow
def test_a_sync_into_postgres_killed_in_load_reconcile_history_and_models_recovers(
    tmp_path: Path, postgres_dsn: str
) -> None:
    stages = ("load", "reconcile", "history", "models")
    campaign = run_campaign(
        len(stages),
        seed=11,
        scale="tiny",
        workdir=tmp_path,
        postgres_dsn=postgres_dsn,
        stages=stages,
    )
    assert campaign.distribution() == dict.fromkeys(stages, 1), campaign.rounds
    for round_ in campaign.rounds:
        assert round_.ok, round_
    assert campaign.final_equal, campaign.final_problems
    assert campaign.rows_compared > 400
