"""The sync into a real PostgreSQL server (tests/support/postgres.py), compared with the truth."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from tests.sync.harness import Harness, Intercept
from tests.sync.test_full_and_incremental import CHANGES


@pytest.fixture
def pg(harness: Harness, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """The harness syncing into a new database on the worker's PostgreSQL server."""
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres_dsn)
    harness.destination = "postgres"
    return harness


@pytest.mark.slow
def test_full_normal_and_full_again_equal_the_server(pg: Harness) -> None:
    first = pg.sync(full=True, models=False)
    pg.assert_equals_truth()
    assert first.table_rows["followers"] == len(pg.dump()["followers"])
    changes = pg.mutate(seed=5, counts=CHANGES)
    after = pg.dump()
    normal = pg.sync(models=False)
    # a normal run lands what was created, and applies deletes of the always-complete lists
    for con in pg.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.comments").fetchall()}
        assert set(changes["comments"]["created"]) <= landed
    pg.assert_equals_truth(after, tables=["topics", "statuses", "ideas", "ideas__topics"])
    assert normal.rows_removed.get("topics") == 1
    # a full run then equals the server exactly, hard deletes included
    full = pg.sync(full=True, models=False)
    pg.assert_equals_truth(after)
    assert full.rows_removed["followers"] == 2
    assert full.rows_removed["comments"] >= 3
    assert pg.dlt_warnings == []


@pytest.mark.slow
def test_soft_deletes_mark_rows_in_postgres(pg: Harness) -> None:
    pg.sync(full=True, delete_mode="soft", models=False)
    changes = pg.mutate(seed=9, counts={"followers": {"delete": 2}, "comments": {"delete": 2}})
    result = pg.sync(full=True, delete_mode="soft", models=False)
    for con in pg.connect():
        sql = "select idx from feedback.followers where _deleted_at is not null"
        assert {r[0] for r in con.execute(sql).fetchall()} == set(changes["followers"]["deleted"])
        first = con.execute("select max(_deleted_at) from feedback.followers").fetchone()
    assert result.rows_marked["followers"] == 2
    pg.assert_equals_truth(tables=["followers", "comments"], where="where _deleted_at is null")
    again = pg.sync(full=True, delete_mode="soft", models=False)
    assert again.rows_marked.get("followers") is None
    for con in pg.connect():
        assert con.execute("select max(_deleted_at) from feedback.followers").fetchone() == first


def test_empty_text_null_and_awkward_characters_land_as_sent(pg: Harness) -> None:
    """The load goes through Parquet files and binary COPY: an empty string must stay an
    empty string (not NULL), NULL must stay NULL, and quotes, commas, backslashes, tabs, line
    breaks, ``\\N`` and Unicode survive."""
    awkward = 'a "quoted", comma\\backslash\nnew line\r\n\ttab ,"\\N ünï 🎉 汉字 NULL'

    sent: dict[str, str] = {}

    def rewrite(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path.endswith("/followers"):
            for follower in body["data"]:
                if len(sent) % 3 == 0:
                    follower["name"] = ""
                elif len(sent) % 3 == 1:
                    follower["name"] = awkward
                follower["avatar"] = None
                sent[follower["idx"]] = follower["name"]
        return body

    transport = Intercept(rewrite=rewrite)
    try:
        pg.sync(full=True, models=False, resources=["followers"], transport=transport)
    finally:
        transport.close()
    assert pg.dlt_warnings == []
    for con in pg.connect():
        names = dict(con.execute("select idx, name from feedback.followers").fetchall())
        avatars = {r[0] for r in con.execute("select avatar from feedback.followers").fetchall()}
    assert names == sent
    assert Counter(names.values())[""] > 5 and Counter(names.values())[awkward] > 5
    assert avatars == {None}


@pytest.mark.slow
def test_a_first_sync_appends_and_keeps_one_row_per_key_in_postgres(pg: Harness) -> None:
    """The first load appends to tables PostgreSQL does not have yet (no staging merge);
    items the pages repeat (``page_overlap``) keep one row per key (``ctid``); the next
    load merges."""
    pg.switches(page_overlap=2)
    pg.sync(full=True, models=False)
    pg.assert_equals_truth()
    for con in pg.connect():
        staged = con.execute(
            "select count(*) from information_schema.tables where table_schema = 'feedback_staging'"
        ).fetchall()
        assert staged == [(0,)]  # nothing was merged through a staging copy
    pg.mutate(seed=6, counts=CHANGES)
    pg.sync(full=True, models=False)
    pg.assert_equals_truth()


# what CHANGELOG.md's upgrade notes give to turn an earlier version's jsonb columns into the
# text columns this version makes (JSON travels as its text)
CONVERT = (
    "select format('alter table %I.%I alter column %I type text using %I::text', "
    "table_schema, table_name, column_name, column_name) from information_schema.columns "
    "where table_schema in ('feedback', 'feedback_staging') and data_type = 'jsonb'"
)
# the column an earlier version made jsonb, here made so again
ATTRIBUTES = (
    "select format('alter table %I.%I alter column attributes type jsonb using "
    "attributes::jsonb', table_schema, table_name) from information_schema.columns "
    "where table_schema in ('feedback', 'feedback_staging') "
    "and table_name = 'followers__companies' and column_name = 'attributes'"
)


def _attributes_type(pg: Harness) -> set[str]:
    for con in pg.connect():
        rows = con.execute(
            "select distinct data_type from information_schema.columns where table_schema "
            "in ('feedback', 'feedback_staging') and table_name = 'followers__companies' "
            "and column_name = 'attributes'"
        ).fetchall()
    return {r[0] for r in rows}


def _run_all(pg: Harness, query: str) -> None:
    for con in pg.connect():
        statements = con.execute(query).fetchall()
        assert statements
        for (statement,) in statements:
            con.execute(statement)


@pytest.mark.slow
def test_a_warehouse_with_jsonb_columns_loads_with_inserts_until_converted(
    pg: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """An earlier version made JSON columns jsonb, which COPY cannot write: such a warehouse
    is loaded with insert statements, saying so, until the upgrade notes' statements turn
    them into text; then through COPY again. Every run lands what the server holds."""
    pg.sync(full=True, models=False)
    pg.sync(full=True, models=False)  # a merge: dlt's staging dataset has the table too
    assert _attributes_type(pg) == {"character varying"}
    _run_all(pg, ATTRIBUTES)
    assert _attributes_type(pg) == {"jsonb"}

    pg.mutate(seed=6, counts={"followers": {"create": 3, "update": 3}})
    with caplog.at_level("WARNING", logger="feedback_sync"):
        pg.sync(full=True, models=False)
    said = [r.getMessage() for r in caplog.records if "are jsonb" in r.getMessage()]
    assert len(said) == 1 and "loads with insert statements" in said[0], said
    assert "feedback.followers__companies.attributes" in said[0]
    pg.assert_equals_truth()
    assert _attributes_type(pg) == {"jsonb"}

    _run_all(pg, CONVERT)
    assert _attributes_type(pg) == {"text"}
    caplog.clear()
    pg.mutate(seed=7, counts={"followers": {"create": 2, "update": 2}})
    with caplog.at_level("WARNING", logger="feedback_sync"):
        pg.sync(full=True, models=False)
    assert not [r for r in caplog.records if "are jsonb" in r.getMessage()]
    pg.assert_equals_truth()
    assert pg.dlt_warnings == []
