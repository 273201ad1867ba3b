"""dlt's anonymous telemetry is off in feedback-sync's processes unless the user chose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedback_sync.app import telemetry

PROBE = """
import json, threading
import dlt, pyarrow as pa
from feedback_sync.app.telemetry import telemetry_off_unless_chosen
turned_off = telemetry_off_unless_chosen()
pipeline = dlt.pipeline("probe", destination="duckdb", dataset_name="d", pipelines_dir="p")
pipeline.run(pa.table({"id": [1]}), table_name="t")
print(json.dumps({
    "turned_off": turned_off,
    "telemetry": dlt.current.run_context().runtime_config.dlthub_telemetry,
    "threads": sorted(t.name for t in threading.enumerate()),
}))
"""


def test_a_folder_without_settings_runs_without_telemetry(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith(telemetry.ENV)}
    env["DLT_PROJECT_DIR"] = str(tmp_path)  # no .dlt there
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"turned_off": True, "telemetry": False, "threads": ["MainThread"]}
    assert "nanobind" not in done.stderr


def test_the_config_init_writes_leaves_telemetry_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its config.toml names dlthub_telemetry in a comment: no choice. (Taken for one, it
    left dlt's tracker thread running, and a sync from cron waited on it at exit.)"""
    from feedback_sync.app.init import init

    monkeypatch.setenv(telemetry.ENV, "")  # restored after the test, which sets it
    for name in [n for n in os.environ if n.endswith(telemetry.ENV)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DLT_PROJECT_DIR", str(tmp_path))
    init(tmp_path)
    assert "dlthub_telemetry" in (tmp_path / ".dlt" / "config.toml").read_text()
    assert telemetry.telemetry_off_unless_chosen() is True
    assert os.environ[telemetry.ENV] == "false"


@pytest.mark.parametrize(
    "chosen",
    [
        {"env": "RUNTIME__DLTHUB_TELEMETRY"},
        {"env": "FEEDBACK_SYNC__RUNTIME__DLTHUB_TELEMETRY"},
        {"file": "[runtime]\ndlthub_telemetry = true\n"},
        {"file": "[runtime]\n# a comment\ndlthub_telemetry = false\n"},
    ],
)
def test_a_users_own_choice_is_left_alone(
    chosen: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.endswith(telemetry.ENV)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DLT_PROJECT_DIR", str(tmp_path))
    if "env" in chosen:
        monkeypatch.setenv(chosen["env"], "true")
    else:
        (tmp_path / ".dlt").mkdir()
        (tmp_path / ".dlt" / "config.toml").write_text(chosen["file"])
    assert telemetry.telemetry_off_unless_chosen() is False
    assert os.environ.get(telemetry.ENV) in (None, "true")
