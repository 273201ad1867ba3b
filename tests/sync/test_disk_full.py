"""A full disk under the Parquet folder: a small tmpfs, in a private mount namespace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from feedback_sync.sandbox.server import RunningSandbox

from tests.sync.harness import COLUMNS, Harness, expected_rows, landed_rows

ROOT = Path(__file__).resolve().parents[2]


def _namespace() -> list[str]:
    """``unshare`` for a private mount namespace (as root, or mapped to root in a user one)."""
    unshare = shutil.which("unshare")
    if sys.platform != "linux" or unshare is None:
        pytest.fail("this test needs Linux and util-linux's unshare (a tmpfs of its own)")
    if os.geteuid() == 0:
        return [unshare, "--mount", "--propagation", "private"]
    return [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"]


@pytest.mark.slow
def test_a_full_parquet_folder_fails_with_one_line_and_changes_nothing(
    live_sandbox: RunningSandbox, harness: Harness, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    env.update(
        SOURCES__FEEDBACK__BASE_URL=live_sandbox.base_url,
        SOURCES__FEEDBACK__API_KEY=live_sandbox.api_key,
    )
    args = {
        "workdir": str(tmp_path),
        "size": "48m",
        "control": f"{live_sandbox.root_url}/_sandbox",
    }
    done = subprocess.run(
        [*_namespace(), sys.executable, "-m", "tests.sync.disk_full_driver", json.dumps(args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["first"]["code"] == 0, report["first"]["stderr"]
    assert report["free_bytes"] == 0
    failed = report["full"]
    assert failed["code"] == 1, failed
    errors = [line for line in failed["stderr"].splitlines() if line.startswith("feedback-sync ")]
    assert len(errors) == 1, failed["stderr"]
    assert errors[0].startswith("feedback-sync sync: error: the disk is full: ")
    assert "No space left on device" in errors[0] and str(tmp_path / "parquet") in errors[0]
    assert "the next run finishes what this one left" in errors[0]
    assert "Traceback" not in failed["stderr"]
    # nothing committed, no file changed, nothing half-written left behind
    assert report["loads_after_failure"] == report["loads_before"]
    assert report["parquet_changed"] == []
    # DuckDB's write-ahead log may stay (its next open reads what it holds); nothing else
    assert [f for f in report["new_files"] if not f.endswith(".wal")] == []
    # space again: the next run catches up by itself
    assert report["freed"]["code"] == 0, report["freed"]["stderr"]
    assert "loading what the previous run left pending" in report["freed"]["stderr"]
    truth = expected_rows(harness.dump())
    with duckdb.connect() as con:
        for table in COLUMNS:
            file = tmp_path / "out" / f"{table}.parquet"
            assert landed_rows(con, table, f"read_parquet('{file}')") == truth[table], table
