"""dlt's working folder does not grow with every run: loaded packages lose their data files,
and only the newest ones are kept."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from pipelines.feedback.errors import ConfigError
from tests.sync.harness import Harness


def _loaded(harness: Harness) -> dict[str, list[Path]]:
    """Each loaded package in dlt's working folder: its data files (Parquet, SQL, inserts)."""
    folder = harness.tmp / "pipelines" / "feedback_sync" / "load" / "loaded"
    return {
        package.name: sorted(p for p in package.rglob("*.*") if p.parent.name == "completed_jobs")
        for package in folder.iterdir()
    }


def _committed_loads(harness: Harness) -> list[str]:
    with duckdb.connect(str(harness.tmp / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute("select load_id from feedback._dlt_loads order by load_id").fetchall()
    return [str(load_id) for (load_id,) in rows]


def _three_runs(harness: Harness) -> list[str]:
    load_ids = [harness.sync(full=True, models=False).load_id]
    for seed in (11, 12):
        harness.mutate(seed=seed, counts={"comments": {"create": 2, "update": 1}})
        load_ids.append(harness.sync(models=False).load_id)
    assert all(load_ids)
    return [str(i) for i in load_ids]


def test_only_the_newest_packages_stay_and_without_their_data_files(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEEDBACK_SYNC_KEEP_PACKAGES", "2")
    load_ids = _three_runs(harness)

    loaded = _loaded(harness)
    assert sorted(loaded) == sorted(load_ids[1:])  # the first run's package is gone
    assert loaded == {load_id: [] for load_id in load_ids[1:]}  # and no data files kept
    # the warehouse keeps every load: only dlt's local copies went
    assert _committed_loads(harness) == load_ids


def test_a_users_own_settings_keep_packages_and_files(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEEDBACK_SYNC_KEEP_PACKAGES", "0")
    monkeypatch.setenv("LOAD__DELETE_COMPLETED_JOBS", "false")
    load_ids = _three_runs(harness)

    loaded = _loaded(harness)
    assert sorted(loaded) == load_ids
    # each package still holds the data files of its tables (the full sync's: every table)
    assert all(loaded[load_id] for load_id in load_ids)
    assert any(p.suffix == ".parquet" for p in loaded[load_ids[0]])


@pytest.mark.parametrize("value", ["-1", "some", "2.5"])
def test_a_bad_keep_setting_fails_before_anything_is_fetched(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("FEEDBACK_SYNC_KEEP_PACKAGES", value)
    harness.mark_requests()
    with pytest.raises(ConfigError, match=rf"FEEDBACK_SYNC_KEEP_PACKAGES .* got '{value}'"):
        harness.sync(full=True, models=False)
    assert harness.requests() == []
    assert not (harness.tmp / "pipelines").exists()
