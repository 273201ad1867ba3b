"""The SQL models of sql/, written once, built on DuckDB and on PostgreSQL from the same
sandbox data: every mart and staging view must hold the same rows, value by value."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.errors import ModelError
from feedback_sync.models.project import LAYERS, SQL_DIR, apply, load_project
from feedback_sync.warehouse.engines.postgres import to_postgres

from tests.sync.harness import Harness, PostgresReader


def _value(value: Any) -> Any:
    """One spelling for both engines: a MAP (DuckDB) and a JSON object (PostgreSQL) as a
    sorted dict; JSON text as what it encodes; an aware time as UTC."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, list):
        return json.dumps(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.timestamp()
    return value


# each warehouse has its own loads: the id of the load that brought a row differs
PER_WAREHOUSE = {"load_id"}


def _rows(con: Any, relation: str) -> Counter[tuple[Any, ...]]:
    cursor = con.execute(f"select * from {relation}")
    names = [d[0] for d in cursor.description]
    return Counter(
        tuple((n, _value(v)) for n, v in zip(names, row, strict=True) if n not in PER_WAREHOUSE)
        for row in cursor.fetchall()
    )


@pytest.fixture
def both(harness: Harness, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """The same sandbox data synced into DuckDB and into PostgreSQL, models built on each."""
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres_dsn)
    # a drifted value and a field the spec does not declare, so type_drift, custom_fields
    # and the try_cast of a variant have rows to compare
    harness.switches(number_drift=1, company_fields="top_level")
    for destination in ("duckdb", "postgres"):
        result = harness.sync(full=True, destination=destination)
        assert result.models is not None and not result.models_error, result.models_error
    return harness


@pytest.mark.slow
def test_every_model_holds_the_same_rows_on_duckdb_and_postgres(both: Harness) -> None:
    duck = duckdb.connect(str(both.target("duckdb").duckdb_file()), read_only=True)
    pg = PostgresReader(_dsn())
    try:
        relations = duck.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_schema in ('staging', 'marts') order by 1, 2"
        ).fetchall()
        assert len(relations) >= 20
        on_pg = pg.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_schema in ('staging', 'marts') order by 1, 2"
        ).fetchall()
        assert sorted(relations) == sorted(on_pg)
        compared = 0
        for schema, name in relations:
            relation = f'"{schema}"."{name}"'
            on_duckdb, on_postgres = _rows(duck, relation), _rows(pg, relation)
            assert on_duckdb == on_postgres, (
                f"{relation}: {sum((on_duckdb - on_postgres).values())} rows only on DuckDB, "
                f"e.g. {list(on_duckdb - on_postgres)[:2]}; "
                f"{sum((on_postgres - on_duckdb).values())} only on PostgreSQL, "
                f"e.g. {list(on_postgres - on_duckdb)[:2]}"
            )
            compared += sum(on_duckdb.values())
        assert compared > 900
        drift = duck.execute("select count(*) from staging.type_drift").fetchone()
        assert drift is not None and drift[0] > 0
        assert set(LAYERS) == {"staging", "marts"}
    finally:
        duck.close()
        pg.close()


def _dsn() -> str:
    import os

    return os.environ["DESTINATION__POSTGRES__CREDENTIALS"]


@pytest.mark.slow
def test_a_failing_model_on_postgres_names_itself_and_keeps_the_previous_build(
    both: Harness, tmp_path: Path
) -> None:
    broken = tmp_path / "sql"
    shutil.copytree(SQL_DIR, broken)
    (broken / "marts" / "idea_engagement.sql").write_text(
        "-- idea_engagement: broken\n-- grain: none\n-- columns:\n--   x: y\n"
        "select no_such_column from {{ ref('ideas') }}\n"
    )
    pg = PostgresReader(_dsn())
    try:
        before = pg.execute("select count(*), sum(public_comments) from marts.idea_engagement")
        before_row = before.fetchone()
        with pytest.raises(ModelError) as caught:
            apply(both.target("postgres"), load_project(broken))
        message = str(caught.value)
        assert "marts.idea_engagement" in message and "no_such_column" in message
        after = pg.execute("select count(*), sum(public_comments) from marts.idea_engagement")
        assert after.fetchone() == before_row
        # the staging schema, dropped and made anew inside the build, is back as it was
        views = pg.execute(
            "select count(*) from information_schema.views where table_schema = 'staging'"
        ).fetchone()
        assert views is not None and views[0] >= 15
    finally:
        pg.close()


def test_the_postgres_rewrites() -> None:
    sql = to_postgres(
        "select map_from_entries(list(struct_pack(k := t, v := n) order by t) "
        "filter (where t is not null)) as m, coalesce(x, map()::map(varchar, bigint)) as e, "
        "try_cast(s as double) as d, round(f, 2) as r from (select 1) ",
        "staging",
    )
    assert "JSONB_OBJECT_AGG(t, n) FILTER(WHERE NOT t IS NULL)" in sql
    assert "CAST('{}' AS JSONB)" in sql
    assert '"staging".feedback_sync_try_double_precision(CAST(s AS TEXT))' in sql
    assert "CAST(ROUND(CAST(f AS DECIMAL), 2) AS DOUBLE PRECISION)" in sql
    assert "AS _subquery_0" in sql


# the note's figure, as sql/push/idea_notes.sql spells it (the test checks it is there)
NOTE_FIGURE = "format('{:,.2f}', round(cast(cast(x as varchar) as decimal(38, 10)), 2))"


def test_the_note_figure_rounds_the_same_on_both_engines(postgres_dsn: str) -> None:
    """Ties at the cent (0.125, 2.675, a sum's shortest form) round half away from zero on
    both: DuckDB's ``format`` of the bare double rounds half to even (0.125 -> 0.12), and
    PostgreSQL's ``to_char`` of the numeric half away from zero (0.13)."""
    note = (SQL_DIR / "push" / "idea_notes.sql").read_text()
    assert NOTE_FIGURE.replace("(x ", "(commenter_monthly_spend ") in note
    values = [0.125, 2.675, 1.005, 2.665, -0.125, 0.005, 1234567.125, 3200.5, 0.1 + 0.2, 1e12 / 3]
    rows = " union all ".join(
        f"select cast({v!r} as double) as x, {i} as n" for i, v in enumerate(values)
    )
    sql = f"select n, {NOTE_FIGURE} from ({rows}) as t order by n"
    on_duckdb = duckdb.connect().execute(sql).fetchall()
    pg = PostgresReader(postgres_dsn)
    try:
        on_postgres = pg.execute(to_postgres(sql, "public")).fetchall()
    finally:
        pg.close()
    assert on_postgres == on_duckdb
    assert [f for _, f in on_duckdb][:5] == ["0.13", "2.68", "1.01", "2.67", "-0.13"]


def test_a_rebuild_keeps_what_others_built_on_the_models(
    harness: Harness, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A BI team's read-only role, its grants and default privileges, and its views over
    the marts (one over another, one materialized) survive a models rebuild; a view that no
    longer compiles against new models fails the build by name, changing nothing."""
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres_dsn)
    result = harness.sync(full=True, destination="postgres")
    assert result.models is not None and not result.models_error, result.models_error
    pg = PostgresReader(postgres_dsn)
    try:
        for sql in (
            "drop role if exists bi_reader",
            "create role bi_reader nologin",
            "grant usage on schema marts, staging to bi_reader",
            "grant select on all tables in schema marts to bi_reader",
            "alter default privileges in schema staging grant select on tables to bi_reader",
            "create schema bi",
            "create view bi.topics as select topic_idx, topic_name, ideas from marts.topic_summary",
            "create view bi.topic_count as select count(*) as n from bi.topics",
            "create materialized view bi.names as select topic_name from staging.topics",
            "grant usage on schema bi to bi_reader",
            "grant select on bi.topics, bi.topic_count to bi_reader",
        ):
            pg.execute(sql)
        before = pg.execute("select * from bi.topics order by 1").fetchall()
        assert before

        apply(harness.target("postgres"))

        assert pg.execute("select * from bi.topics order by 1").fetchall() == before
        assert pg.execute("select n from bi.topic_count").fetchall() == [(len(before),)]
        assert len(pg.execute("select * from bi.names").fetchall()) == len(before)
        can = pg.execute(
            "select has_schema_privilege('bi_reader', 'marts', 'usage'), "
            "has_table_privilege('bi_reader', 'marts.topic_summary', 'select'), "
            "has_table_privilege('bi_reader', 'marts.idea_engagement', 'select'), "
            "has_table_privilege('bi_reader', 'bi.topic_count', 'select'), "
            "has_table_privilege('bi_reader', 'staging.topics', 'select'), "
            "has_table_privilege('bi_reader', 'marts.topic_summary', 'insert')"
        ).fetchall()
        assert can == [(True, True, True, True, True, False)]

        # a release whose mart drops a column a BI view reads: refused, nothing changed
        renamed = tmp_path / "sql"
        shutil.copytree(SQL_DIR, renamed)
        mart = renamed / "marts" / "topic_summary.sql"
        # the column, everywhere the file names it (its SQL, its doc, its data tests)
        mart.write_text(re.sub(r"\bideas\b", "idea_count", mart.read_text()))
        with pytest.raises(ModelError, match=r"the view bi\.topics, which reads the models"):
            apply(harness.target("postgres"), load_project(renamed))
        columns = pg.execute(
            "select column_name from information_schema.columns "
            "where table_schema = 'marts' and table_name = 'topic_summary'"
        ).fetchall()
        assert ("ideas",) in columns and ("idea_count",) not in columns
        assert pg.execute("select * from bi.topics order by 1").fetchall() == before
    finally:
        pg.execute("drop schema if exists bi cascade")
        pg.execute("drop owned by bi_reader")
        pg.execute("drop role if exists bi_reader")
        pg.close()
