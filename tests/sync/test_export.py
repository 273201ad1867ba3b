"""Parquet files are written in row groups small enough for the sync's DuckDB memory limit."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from feedback_sync.warehouse.duckdb import DUCKDB_MEMORY_LIMIT
from feedback_sync.warehouse.parquet_files import write_parquet


@pytest.mark.slow
def test_wide_rows_export_within_the_default_memory_limit(tmp_path: Path) -> None:
    # ~380 MB of wide rows (like comments with their HTML and Markdown): with DuckDB's default
    # row groups of 122,880 rows this runs out of memory at the 256MB limit
    con = duckdb.connect(str(tmp_path / "w.duckdb"), config={"memory_limit": DUCKDB_MEMORY_LIMIT})
    try:
        con.execute(
            "create table t as select i as id, repeat(md5(i::varchar), 40) as body, "
            "repeat(md5((i + 1)::varchar), 20) as html from range(200000) r(i)"
        )
        final = tmp_path / "t.parquet"
        write_parquet(con.execute, "t", final)
    finally:
        con.close()
    # a connection of its own: a fetchone() leaves its result open, and DuckDB's module-level
    # connection is shared by every test this worker runs
    with duckdb.connect() as check:
        assert check.execute(f"select count(*) from '{final}'").fetchone() == (200_000,)
    assert not list(tmp_path.glob(".*.partial"))
