"""Where the settings are found: the current folder's .dlt/, DLT_PROJECT_DIR, or
--project-dir, the same way in each."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sync.harness import Harness


def _project(harness: Harness, folder: Path) -> Path:
    dlt_folder = folder / ".dlt"
    dlt_folder.mkdir(parents=True)
    (dlt_folder / "config.toml").write_text(
        f'[sources.feedback]\nbase_url = "{harness.server.base_url}"\npage_size = 50\n'
    )
    (dlt_folder / "secrets.toml").write_text(
        f'[sources.feedback]\napi_key = "{harness.server.api_key}"\n'
    )
    return folder


def _sync(
    cwd: Path, *args: str, project_env: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "DLT_PROJECT_DIR"))
    }
    if project_env is not None:
        env["DLT_PROJECT_DIR"] = str(project_env)
    # the console script, as users run it
    command = [str(Path(sys.executable).with_name("feedback-sync")), *args, "sync", "--no-models"]
    return subprocess.run(
        [*command, "--pipelines-dir", str(cwd / "pipelines")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("how", ["current folder", "DLT_PROJECT_DIR", "--project-dir"])
@pytest.mark.slow
def test_settings_are_found_three_ways(harness: Harness, tmp_path: Path, how: str) -> None:
    project = _project(harness, tmp_path / "project")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if how == "current folder":
        done = _sync(project)
    elif how == "DLT_PROJECT_DIR":
        done = _sync(elsewhere, project_env=project)
    else:
        done = _sync(elsewhere, "--project-dir", str(project))
    assert done.returncode == 0, done.stderr
    assert "finished in" in done.stdout
    # the warehouse stays relative to the folder the command runs in
    ran_in = project if how == "current folder" else elsewhere
    assert (ran_in / "data" / "warehouse.duckdb").exists()


def test_without_settings_the_missing_one_is_named(tmp_path: Path) -> None:
    done = _sync(tmp_path)
    assert done.returncode == 2
    assert "missing setting SOURCES__FEEDBACK__BASE_URL" in done.stderr


def test_a_project_dir_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    done = _sync(tmp_path, "--project-dir", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"feedback-sync sync: error: --project-dir {tmp_path / 'nope'}: no such folder"
    ]
