"""Child tables after the Arrow path: lists replaced whole, drift kept, new lists landed."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.sync.harness import Harness, Intercept


def _children(harness: Harness, table: str, key: str, parent: str, destination: str) -> int:
    return sum(
        harness.table_rows(
            table, destination=destination, where=f"where {key} = '{parent}'"
        ).values()
    )


@pytest.mark.parametrize("destination", ["duckdb", "parquet"])
@pytest.mark.slow
def test_a_list_that_shrank_loses_its_old_child_rows(harness: Harness, destination: str) -> None:
    harness.sync(destination=destination)
    truth = harness.dump()
    with_companies = [f for f in truth["followers"] if len(f.get("companies") or []) >= 2]
    with_attributes = [f for f in truth["followers"] if len(f.get("attributes") or {}) >= 2]
    assert with_companies and with_attributes
    emptied, shrunk = with_companies[0]["idx"], with_attributes[-1]["idx"]
    assert emptied != shrunk
    before = _children(harness, "followers__attributes", "follower_idx", shrunk, destination)
    assert before >= 2
    untouched = {
        f["idx"]: len(f.get("companies") or [])
        for f in truth["followers"][1:6]
        if f["idx"] != emptied
    }

    def drop(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path == "/v1/followers":
            for row in body["data"]:
                if row["idx"] == emptied:
                    row["companies"] = []
                if row["idx"] == shrunk:
                    first = next(iter(row["attributes"]))
                    row["attributes"] = {first: row["attributes"][first]}
        return body

    result = harness.sync(destination=destination, full=True, transport=Intercept(rewrite=drop))
    assert _children(harness, "followers__companies", "follower_idx", emptied, destination) == 0
    assert _children(harness, "followers__attributes", "follower_idx", shrunk, destination) == 1
    for idx, count in untouched.items():
        assert _children(harness, "followers__companies", "follower_idx", idx, destination) == count
    assert result.rows_removed["followers__attributes"] == before - 1
    assert result.rows_removed["followers__companies"] == len(with_companies[0]["companies"])


def test_a_value_of_another_type_lands_in_a_variant_column(harness: Harness) -> None:
    def drift(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path == "/v1/topics" and body["data"]:
            body["data"][-1]["name"] = 42
        return body

    harness.sync(resources=["topics"], transport=Intercept(rewrite=drift))
    for con in harness.connect():
        names = con.execute(
            "select count(*) filter (where name is not null), "
            "count(*) filter (where name__v_bigint = 42) from feedback.topics"
        ).fetchone()
    total = len(harness.dump()["topics"])
    assert names == (total - 1, 1)


def test_a_new_list_field_becomes_a_child_table(harness: Harness) -> None:
    def tags(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path == "/v1/statuses":
            for row in body["data"]:
                row["tags"] = ["a", ["b", 1]]
                row["owner"] = {"name": "Ana", "teams": ["x"]}
        return body

    harness.sync(resources=["statuses"], transport=Intercept(rewrite=tags))
    statuses = len(harness.dump()["statuses"])
    for con in harness.connect():
        rows = con.execute(
            "select _dlt_list_idx, value, value__v_json, count(*) from feedback.statuses__tags "
            "group by all order by 1"
        ).fetchall()
        owner = con.execute(
            "select distinct owner__name, owner__teams from feedback.statuses"
        ).fetchall()
        keys = con.execute(
            "select count(*) from feedback.statuses__tags t "
            "join feedback.statuses s on t.status_idx = s.idx"
        ).fetchone()
    # a list among the strings is not text: it keeps its own (JSON) variant column
    assert rows == [(0, "a", None, statuses), (1, None, '["b",1]', statuses)]
    assert owner == [("Ana", '["x"]')]
    assert keys == (2 * statuses,)


@pytest.mark.slow
def test_a_parent_table_dropped_by_hand_still_has_its_old_child_rows_replaced(
    harness: Harness,
) -> None:
    """Someone drops ``followers`` and keeps ``followers__companies``: the next run makes
    the parent table anew (its first load appends), and the child rows of a follower that
    came back without companies are still removed, since the child table had them."""
    import duckdb

    harness.sync()
    truth = harness.dump()
    emptied = next(f for f in truth["followers"] if len(f.get("companies") or []) >= 2)["idx"]
    path = harness.target().duckdb_path
    assert path is not None
    with duckdb.connect(str(path)) as con:
        con.execute("drop table feedback.followers")

    def drop(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path == "/v1/followers":
            for row in body["data"]:
                if row["idx"] == emptied:
                    row["companies"] = []
        return body

    result = harness.sync(full=True, transport=Intercept(rewrite=drop))
    assert _children(harness, "followers__companies", "follower_idx", emptied, "duckdb") == 0
    assert result.rows_removed["followers__companies"] >= 2
    assert harness.table_rows("followers")
