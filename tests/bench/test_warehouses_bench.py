"""``./run bench warehouses`` cannot rot: a run at ``tiny`` into every warehouse, and what it
wrote. Nothing here asserts a time."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import postgres

ROOT = Path(__file__).resolve().parents[2]
RUNS = [f"full sync -> {name}" for name in ("DuckDB", "PostgreSQL", "Parquet", "Delta")] + [
    f"normal sync, {what} -> {name}"
    for what in ("nothing changed", "1% changed")
    for name in ("Parquet", "Delta")
]


@pytest.mark.slow
def test_the_warehouses_bench_runs_at_tiny_and_writes_every_run(
    postgres_server: postgres.Server, tmp_path: Path
) -> None:
    # postgres_server: PostgreSQL is here (or the test says loudly why not); the bench starts
    # its own, durable, server
    output = tmp_path / "RESULTS-warehouses.md"
    command = [sys.executable, "-m", "bench", "warehouses", "--scale", "tiny"]
    command += ["--output", str(output), "--workdir", str(tmp_path / "work")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

    text = output.read_text()
    assert text.startswith("# Benchmarks: the sync into each warehouse")
    rows = re.findall(r"^\| ((?:full|normal) sync[^|]* -> \w+) \|", text, flags=re.MULTILINE)
    assert rows == RUNS
    # every run was a real sync: its own summary line, into the warehouse it names
    summaries = dict(re.findall(r"^- ([^:]+): `(.+)`$", text, flags=re.MULTILINE))
    assert sorted(summaries) == sorted(RUNS)
    assert all(" finished in " in line for line in summaries.values())
    assert "into postgres" in summaries["full sync -> PostgreSQL"]
    assert "into Delta tables" in summaries["full sync -> Delta"]
    target = r"\| full sync into PostgreSQL within 1.5x of DuckDB \| \*\*(met|missed)\*\*: "
    assert re.search(target, text)
