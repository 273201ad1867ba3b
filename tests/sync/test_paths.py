"""Relative paths mean the folder the command runs in, whatever dlt's working folder remembers."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import duckdb
import pytest
from feedback_sync.app.sync import SyncOptions, run_sync
from feedback_sync.warehouse.target import make_target

from tests.sync.harness import Harness


def _loads(folder: Path) -> int:
    with duckdb.connect(str(folder / "data" / "warehouse.duckdb"), read_only=True) as con:
        row = con.execute("select count(*) from feedback._dlt_loads").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("destination", ["duckdb", "parquet"])
@pytest.mark.slow
def test_a_copied_project_folder_loads_into_its_own_warehouse(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, destination: str
) -> None:
    # the command-line defaults: data/warehouse.duckdb (or data/parquet/) and a pipelines
    # folder, relative to where the command runs
    duckdb_path = Path("data/warehouse.duckdb") if destination == "duckdb" else None
    target = make_target(destination, duckdb_path=duckdb_path, pipelines_dir=Path("pipelines"))
    first, copy = tmp_path / "first", tmp_path / "copy"
    first.mkdir()
    monkeypatch.chdir(first)
    run_sync(
        target,
        SyncOptions(full=True, settings=harness.settings(), out=io.StringIO(), models=False),
    )
    shutil.copytree(first, copy)
    before = first / "data"
    files_before = sorted((p.relative_to(before), p.stat().st_mtime_ns) for p in before.rglob("*"))

    harness.mutate(seed=4, counts={"comments": {"create": 3}})
    monkeypatch.chdir(copy)
    result = run_sync(
        target, SyncOptions(settings=harness.settings(), out=io.StringIO(), models=False)
    )

    assert result.table_rows.get("comments", 0) >= 3
    # the first folder was not touched; the copy holds the new load
    assert sorted((p.relative_to(before), p.stat().st_mtime_ns) for p in before.rglob("*")) == (
        files_before
    )
    if destination == "duckdb":
        assert (_loads(first), _loads(copy)) == (1, 2)
