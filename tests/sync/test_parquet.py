"""The Parquet output holds the current rows: the same as DuckDB after full and normal runs."""

from __future__ import annotations

import duckdb
import pytest

from tests.sync.harness import COLUMNS, Harness, diff

CHANGES = {
    "followers": {"create": 4, "update": 3, "delete": 2},
    "comments": {"create": 8, "update": 2, "delete": 3},
    "announcements": {"create": 2, "update": 2, "delete": 1},
    "topics": {"create": 1, "delete": 1},
    "integration_links": {"create": 2, "delete": 1},
}


def _same_as_duckdb(harness: Harness) -> None:
    problems = []
    for table in COLUMNS:
        in_duckdb = harness.table_rows(table)
        in_parquet = harness.table_rows(table, destination="parquet")
        if in_duckdb != in_parquet:
            problems.append(f"{table}: {diff(in_duckdb, in_parquet)}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_parquet_matches_duckdb_after_full_and_normal_runs(harness: Harness) -> None:
    for destination in ("duckdb", "parquet"):
        harness.sync(full=True, destination=destination)
    harness.assert_equals_truth(destination="parquet")
    _same_as_duckdb(harness)

    harness.mutate(seed=21, counts=CHANGES)
    for destination in ("duckdb", "parquet"):
        harness.sync(destination=destination)
    _same_as_duckdb(harness)

    harness.mutate(seed=22, counts=CHANGES)
    for destination in ("duckdb", "parquet"):
        result = harness.sync(full=True, destination=destination)
    assert result.rows_removed  # the Parquet run reconciled deletes too
    assert list(result.phases) == ["start", "fetch", "load", "history", "parquet", "models"]
    harness.assert_equals_truth(destination="parquet")
    _same_as_duckdb(harness)


def test_parquet_files_are_plain_and_complete(harness: Harness) -> None:
    result = harness.sync(destination="parquet")
    folder = harness.tmp / "parquet"
    files = sorted(p.stem for p in folder.glob("*.parquet"))
    assert files == sorted(result.table_rows)
    assert not list(folder.glob(".*.partial"))
    with duckdb.connect() as con:
        # one glob-free read per table, no table format needed; no duplicate keys
        n, distinct = con.execute(
            f"select count(*), count(distinct idx) from read_parquet('{folder}/followers.parquet')"
        ).fetchone() or (0, 0)
    assert n == distinct == result.table_rows["followers"]


@pytest.mark.slow
def test_normal_parquet_run_rewrites_only_touched_tables(harness: Harness) -> None:
    harness.sync(full=True, destination="parquet")
    folder = harness.tmp / "parquet"
    before = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.parquet")}
    harness.mutate(seed=3, counts={"comments": {"create": 2}})
    result = harness.sync(destination="parquet")
    after = {p.name: p.stat().st_mtime_ns for p in folder.glob("*.parquet")}
    rewritten = {name.removesuffix(".parquet") for name in after if after[name] != before[name]}
    assert "comments.parquet" in {f"{t}.parquet" for t in rewritten}
    assert "followers" not in rewritten
    assert rewritten == set(result.exported)
