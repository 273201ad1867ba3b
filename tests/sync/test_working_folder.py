"""dlt's working folder does not grow with every run: loaded packages lose their data files,
and only the newest ones are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from feedback_sync.errors import ConfigError
from feedback_sync.sandbox.server import RunningSandbox

from tests.sync.harness import Harness

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


def _loaded(pipelines_dir: Path) -> dict[str, list[Path]]:
    """Each loaded package in the one warehouse's dlt working folder under
    ``pipelines_dir``: its data files (Parquet, SQL, inserts)."""
    (working,) = pipelines_dir.glob("*/feedback_sync")
    folder = working / "load" / "loaded"
    return {
        package.name: sorted(p for p in package.rglob("*.*") if p.parent.name == "completed_jobs")
        for package in folder.iterdir()
    }


def _committed_loads(harness: Harness) -> list[str]:
    with duckdb.connect(str(harness.tmp / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute("select load_id from feedback._dlt_loads order by load_id").fetchall()
    return [str(load_id) for (load_id,) in rows]


@pytest.mark.slow
def test_only_the_newest_packages_stay_and_without_their_data_files(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEEDBACK_SYNC_KEEP_PACKAGES", "2")
    load_ids = [harness.sync(full=True, models=False).load_id]
    for seed in (11, 12):
        harness.mutate(seed=seed, counts={"comments": {"create": 2, "update": 1}})
        load_ids.append(harness.sync(models=False).load_id)

    loaded = _loaded(harness.tmp / "pipelines")
    assert sorted(loaded) == sorted(load_ids[1:])  # the first run's package is gone
    assert loaded == {load_id: [] for load_id in load_ids[1:]}  # and no data files kept
    # the warehouse keeps every load: only dlt's local copies went
    assert _committed_loads(harness) == load_ids


@pytest.mark.slow
def test_a_users_own_settings_keep_packages_and_files(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    # the user's project config, as the command line reads it from the folder it runs in
    # (the layer the sync's own default is written to, so it must not overwrite it)
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / "config.toml").write_text(
        "[runtime]\ndlthub_telemetry = false\n\n[load]\ndelete_completed_jobs = false\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "LOAD__"))}
    env |= {
        "SOURCES__FEEDBACK__BASE_URL": live_sandbox.base_url,
        "SOURCES__FEEDBACK__API_KEY": live_sandbox.api_key,
        "FEEDBACK_SYNC_KEEP_PACKAGES": "0",
    }
    for args in (["--full"], []):
        done = subprocess.run(
            [*CLI, "sync", "--no-models", "--pipelines-dir", "pipelines", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr

    loaded = _loaded(tmp_path / "pipelines")
    assert len(loaded) == 2
    # each package still holds its data files (the full sync's: every table's Parquet)
    assert all(loaded.values())
    assert any(p.suffix == ".parquet" for p in loaded[min(loaded, key=float)])


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
