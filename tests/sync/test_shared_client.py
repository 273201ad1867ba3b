"""The sync's steps share one dlt SQL client per pipeline (``warehouse.base.connected``),
and DuckDB hands back what it cached between steps (``warehouse.duckdb.release_memory``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dlt
import duckdb
import pytest
from feedback_sync.warehouse.base import connected, dataset_tables
from feedback_sync.warehouse.duckdb import release_memory


def _pipeline(tmp_path: Path, name: str = "shared_client") -> Any:
    return dlt.pipeline(
        pipeline_name=name,
        destination=dlt.destinations.duckdb(str(tmp_path / "warehouse.duckdb")),
        dataset_name="feedback",
        pipelines_dir=str(tmp_path / "pipelines"),
    )


def _counting(pipeline: Any, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The clients ``pipeline.sql_client`` makes from here on."""
    made: list[object] = []
    real = pipeline.sql_client

    def counted(*args: Any, **kwargs: Any) -> Any:
        client = real(*args, **kwargs)
        made.append(client)
        return client

    monkeypatch.setattr(pipeline, "sql_client", counted)
    return made


def test_blocks_share_one_client_and_the_outer_block_keeps_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _pipeline(tmp_path)
    pipeline.run([{"idx": 1}, {"idx": 2}], table_name="ideas")
    made = _counting(pipeline, monkeypatch)

    with connected(pipeline) as first:
        assert dataset_tables(first) == [
            "_dlt_loads",
            "_dlt_pipeline_state",
            "_dlt_version",
            "ideas",
        ]
    assert first.native_connection is None  # closed after its block

    with connected(pipeline) as outer:
        with connected(pipeline) as inner:
            assert inner is outer
            inner.execute_sql(
                f"delete from {inner.make_qualified_table_name('ideas')} where idx = 1"
            )
        # the inner block's end did not close the connection the outer block uses
        rows = outer.execute_sql(f"select idx from {outer.make_qualified_table_name('ideas')}")
        assert rows == [(2,)]
    assert outer is first
    assert outer.native_connection is None
    assert len(made) == 1


def test_a_new_client_once_the_pipeline_has_its_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _pipeline(tmp_path, "shared_client_new")
    made = _counting(pipeline, monkeypatch)
    with connected(pipeline) as before:  # no schema yet: dlt makes one for the client
        before.execute_sql("select 1")
    pipeline.run([{"idx": 1}], table_name="ideas")
    with connected(pipeline) as after:
        assert after is not before
        rows = after.execute_sql(f"select count(*) from {after.make_qualified_table_name('ideas')}")
        assert rows == [(1,)]
    assert len(made) == 2


def _cached_bytes(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("select sum(memory_usage_bytes) from duckdb_memory()").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _limit(con: duckdb.DuckDBPyConnection) -> tuple[float, float]:
    """DuckDB's memory limit as it writes it ("244.1 MiB"): bytes, and the bytes of its
    unit (it writes a tenth of one)."""
    row = con.execute("select current_setting('memory_limit')").fetchone()
    assert row is not None
    number, unit = str(row[0]).split()
    size = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]
    return float(number) * size, size


@pytest.mark.parametrize("limit", ["256MB", "100MB", "1.5GB"])
def test_duckdb_hands_back_what_it_cached_and_keeps_its_limit(tmp_path: Path, limit: str) -> None:
    con = duckdb.connect(str(tmp_path / "w.duckdb"), config={"memory_limit": limit})
    con.execute("create table t as select range as i, md5(range::varchar) as s from range(400000)")
    con.execute("checkpoint")
    assert con.execute("select count(distinct s) from t").fetchall() == [(400000,)]
    was = _limit(con)
    cached = _cached_bytes(con)
    assert cached > 4_000_000  # the table's blocks, read into DuckDB's buffer pool

    assert release_memory(con, limit) is True
    assert _cached_bytes(con) < cached / 4
    assert _limit(con) == was  # set again as given, not as DuckDB wrote it (1.5GB: "1.3 GiB")
    assert release_memory(con, limit) is True  # and again: nothing lost on the way
    assert _limit(con) == was
    assert con.execute("select count(*), max(i) from t").fetchall() == [(400000, 399999)]


def test_another_limit_in_effect_is_left_alone(tmp_path: Path) -> None:
    """dlt's own setting (``global_config``) may give DuckDB another limit than the sync's:
    it is not replaced by the sync's, and nothing is evicted."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"), config={"memory_limit": "1.5GB"})
    con.execute("create table t as select range as i, md5(range::varchar) as s from range(400000)")
    con.execute("checkpoint")
    con.execute("select count(distinct s) from t").fetchall()
    was = _limit(con)
    cached = _cached_bytes(con)

    assert release_memory(con, "256MB") is False
    assert _limit(con) == was
    assert _cached_bytes(con) == cached


def test_a_limit_duckdb_cannot_meet_changes_nothing() -> None:
    # an in-memory database that may not spill: its temporary table must stay in memory,
    # and DuckDB refuses a limit below it
    con = duckdb.connect(config={"memory_limit": "256MB", "temp_directory": ""})
    con.execute(
        "create temporary table held as select range as i, random() as r from range(3000000)"
    )
    was = _limit(con)

    assert release_memory(con, "256MB") is False
    assert _limit(con) == was
    assert con.execute("select count(*) from held").fetchall() == [(3000000,)]
