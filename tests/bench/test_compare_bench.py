"""``./run bench compare`` cannot rot: this checkout against itself at ``tiny``, one round.
Nothing here asserts a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_compare_bench_runs_both_sides_and_prints_every_step() -> None:
    command = [sys.executable, "-m", "bench", "compare", str(ROOT), "--scale", "tiny"]
    done = subprocess.run(
        [*command, "--rounds", "2"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        line.split("|")[1].strip(): line
        for line in done.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| run")
    }
    assert set(rows) == {"full sync", "normal sync, nothing to do"}
    for line in rows.values():
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert re.fullmatch(r"\d+\.\d\d", cells[3])  # the ratio
        assert len(cells[4].split(", ")) == len(cells[5].split(", ")) == 2  # every round


def test_a_checkout_that_is_not_built_is_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench", "compare", str(tmp_path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"bench compare: no feedback-sync at {tmp_path}/.venv/bin/feedback-sync "
        "(build that checkout first)"
    ]
