"""Bad data from the API: each case lands as sent somewhere a person can find it, or the
run says what it could not do. Never a silent drop (docs/explanation/type-drift.md)."""

from __future__ import annotations

import json
import shutil
from typing import Any

import httpx
import pytest
from feedback_sync.warehouse import appends
from feedback_sync.warehouse.journal import Journal

from tests.sync.harness import Harness, Intercept


def _data(body: dict[str, Any]) -> list[Any]:
    data = body.get("data")
    return data if isinstance(data, list) else []


@pytest.mark.slow
def test_misshapen_and_unkeyed_items_land_as_variants_or_whole_in_rejected_rows(
    harness: Harness,
) -> None:
    harness.sync(full=True)
    dump = harness.dump()
    collide, unkeyed, misshapen = (f["idx"] for f in dump["followers"][:3])
    post = dump["announcements"][0]["idx"]
    idea = dump["ideas"][0]["idx"]
    sent: dict[str, Any] = {}

    def corrupt(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        path = request.url.path
        for item in _data(body):
            idx = item.get("idx")
            if path == "/v1/followers" and idx == collide:
                item["companies"] = [
                    {"id": "acct-x", "name": "X", "Renewal Date": "2027-01-01"},
                    {"id": "acct-y", "name": "Y", "Renewal Date": "2027-02-01", "renewal_date": 9},
                ]
                sent["collide"] = json.loads(json.dumps(item))
            elif path == "/v1/followers" and idx == unkeyed:
                del item["idx"]
                sent["unkeyed"] = json.loads(json.dumps(item))
            elif path == "/v1/followers" and idx == misshapen:
                item["companies"] = {"id": "acct-solo", "name": "Solo"}
                item["attributes"] = ["vip", "beta"]
            elif path == "/v1/announcements" and idx == post:
                item["author"] = "Newsroom"
                item["reaction_count"] = [["+1", 3]]
                item["brand_new"] = {"since": "v2", "Level": 1}
            elif path == "/v1/ideas" and idx == idea:
                item["topic_idxs"] = "top_1"
        if path == "/v1/topics" and _data(body):
            body["data"].append("not an object")
        return body

    result = harness.sync(full=True, transport=Intercept(rewrite=corrupt))
    assert "3 item(s) the API sent could not land as rows" in result.summary()
    assert not harness.dlt_warnings, harness.dlt_warnings
    for con in harness.connect():
        rejected = con.execute(
            "select resource, idx, reason, record, _dlt_load_id from feedback.rejected_rows "
            "order by resource, idx nulls last"
        ).fetchall()
        assert [(r[0], r[1]) for r in rejected] == [
            ("followers", collide),
            ("followers", None),
            ("topics", None),
        ]
        assert all(r[4] == result.load_id for r in rejected)
        assert rejected[0][2].startswith(
            "keys companies[1].'Renewal Date' and companies[1].'renewal_date' both become "
            "column 'renewal_date'"
        )
        assert json.loads(rejected[0][3]) == sent["collide"]  # whole, as sent
        assert rejected[1][2] == "it has no idx" and json.loads(rejected[1][3]) == sent["unkeyed"]
        assert rejected[2][2] == "the item is not an object but str 'not an object'"
        assert json.loads(rejected[2][3]) == "not an object"
        # the rejected follower with a key still exists at the source: its row stays; the
        # one without a key could be any row, so no follower was removed by this full run
        followers = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
        assert {collide, unkeyed} <= followers
        assert "followers" not in result.rows_removed
        # a nested value of another shape lands as sent, in a variant, listed as drift
        row = con.execute(
            "select companies__v_json, attributes__v_json from feedback.followers where idx = ?",
            [misshapen],
        ).fetchone()
        assert row is not None
        assert json.loads(row[0]) == {"id": "acct-solo", "name": "Solo"}
        assert json.loads(row[1]) == ["vip", "beta"]
        # its companies list is no list now: its old company rows went with it
        left = con.execute(
            "select count(*) from feedback.followers__companies where follower_idx = ?",
            [misshapen],
        ).fetchone()
        assert left == (0,)
        post_row = con.execute(
            "select author__v_text, reaction_count__v_json, brand_new__since, brand_new__level "
            "from feedback.announcements where idx = ?",
            [post],
        ).fetchone()
        assert post_row == ("Newsroom", '[["+1",3]]', "v2", 1)
        topics = con.execute(
            "select topic_idxs__v_text from feedback.ideas where idx = ?", [idea]
        ).fetchone()
        assert topics == ("top_1",)
        drift = set(
            con.execute(
                "select table_name, row_key, column_name, sent_type from staging.type_drift"
            ).fetchall()
        )
        assert {
            ("followers", misshapen, "companies", "json"),
            ("followers", misshapen, "attributes", "json"),
            ("announcements", post, "author", "text"),
            ("announcements", post, "reaction_count", "json"),
            ("ideas", idea, "topic_idxs", "text"),
        } <= drift
        custom = set(
            con.execute(
                "select table_name, field_name from staging.custom_fields where row_key = ?",
                [post],
            ).fetchall()
        )
        assert custom == {
            ("announcements", "brand_new__since"),
            ("announcements", "brand_new__level"),
        }
        staged = con.execute("select count(*) from staging.rejected_rows").fetchone()
        assert staged == (3,)

    # the source fixed: the next full run lands them and removes what is gone again
    harness.sync(full=True)
    harness.assert_equals_truth()


@pytest.mark.slow
def test_repeated_items_and_a_wrong_total_change_nothing(harness: Harness) -> None:
    """Every cursor list's pages start with the previous page's last two items (a list that
    moved under its reader), and ``pagination.total`` is off, up, then down."""
    harness.switches(page_overlap=2, total_offset=7)
    harness.sync(full=True)
    # every row once: the first load appends to new tables, then keeps one row per key
    harness.assert_equals_truth()
    assert _staged_tables(harness) == 0  # appended: nothing went through a staging merge
    harness.mutate(seed=4, counts={"followers": {"create": 3}, "comments": {"create": 5}})
    harness.switches(total_offset=-7)
    harness.sync()
    assert _staged_tables(harness) > 0  # the tables exist now: a repeat merges on its key
    harness.sync(full=True)
    harness.assert_equals_truth()


def _staged_tables(harness: Harness) -> int:
    for con in harness.connect():
        rows = con.execute(
            "select count(*) from information_schema.tables where table_schema = 'feedback_staging'"
        ).fetchall()
    return int(rows[0][0])


@pytest.mark.slow
def test_a_first_load_killed_before_its_repeats_were_dropped_is_finished_next_run(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run dies after its appended load, before keeping one row per key; the next run
    (a normal one, from a new working folder: the record of what is owed is in the
    warehouse) drops the repeats before anything else."""
    harness.switches(page_overlap=2)

    def killed(*args: Any) -> None:
        raise RuntimeError("killed after the load")

    monkeypatch.setattr(appends, "_drop_repeats", killed)
    with pytest.raises(RuntimeError, match="killed after the load"):
        harness.sync(full=True, models=False)
    monkeypatch.undo()
    assert _keys_twice(harness, "followers") > 0
    shutil.rmtree(harness.tmp / "pipelines")  # retried on another machine
    harness.switches(page_overlap=0)
    harness.sync(models=False)
    harness.assert_equals_truth()


def _keys_twice(harness: Harness, table: str) -> int:
    for con in harness.connect():
        rows = con.execute(
            f"select count(*) - count(distinct idx) from feedback.{table}"
        ).fetchall()
    return int(rows[0][0])


@pytest.mark.slow
def test_a_first_run_dead_before_its_load_has_its_package_loaded_without_repeats(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run dies between its extract and its load (its package pending): the next run
    loads that package, which appends, and settles what the dead run recorded."""
    harness.switches(page_overlap=2)

    def killed(*args: Any) -> None:
        raise RuntimeError("killed before the journal")

    monkeypatch.setattr(Journal, "write", killed)
    with pytest.raises(RuntimeError, match="killed before the journal"):
        harness.sync(full=True, models=False)
    monkeypatch.undo()
    harness.switches(page_overlap=0)
    result = harness.sync(models=False)
    assert result.recovered_packages == 1
    harness.assert_equals_truth()
