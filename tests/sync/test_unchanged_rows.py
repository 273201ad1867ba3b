"""A normal run loads only the ideas and announcements that changed; gone ideas still go.

What changed is worked out here from the sandbox's own dumps (before and after a seeded
change), not from the fingerprints under test; what landed is read from the warehouse.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from feedback_sync.source.idea_entries import fingerprint
from feedback_sync.source.screening import rejected_row
from feedback_sync.warehouse import reconcile

from tests.sync.harness import Harness, Intercept
from tests.sync.test_history import api

# ideas renamed and moved, new and deleted; a deleted topic leaves the ideas that had it;
# new comments move their ideas' counts
CHANGES = {
    "ideas": {"create": 1, "update": 2, "delete": 1},
    "topics": {"delete": 1},
    "comments": {"create": 3},
}


def _ideas(dump: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {idea["idx"]: idea for idea in dump["ideas"]}


def _load_ids(harness: Harness) -> dict[str, str]:
    for con in harness.connect():
        return dict(con.execute("select idx, _dlt_load_id from feedback.ideas").fetchall())
    raise AssertionError("no connection")


def test_a_fingerprint_follows_every_field_and_is_exact_past_64_bits() -> None:
    row = {"idx": "idea_1", "name": "Dark mode", "updated_at": datetime(2026, 1, 2, tzinfo=UTC)}
    assert fingerprint(row) == fingerprint(dict(row))
    assert len(fingerprint(row)) == 11
    assert fingerprint({**row, "name": "Dark mode!"}) != fingerprint(row)
    assert fingerprint({**row, "topics": []}) != fingerprint(row)
    big = {**row, "id": 2**64 + 1}  # orjson refuses it; the digest is still exact
    assert fingerprint(big) != fingerprint({**row, "id": 2**64 + 2})


@pytest.mark.slow
def test_a_normal_run_loads_only_the_ideas_that_changed(harness: Harness) -> None:
    harness.sync(full=True)
    before = _ideas(harness.dump())
    loads_before = _load_ids(harness)
    changes = harness.mutate(seed=31, counts=CHANGES)
    after = _ideas(harness.dump())
    changed = {idx for idx, idea in after.items() if before.get(idx) != idea}
    gone = set(before) - set(after)
    assert gone == set(changes["ideas"]["deleted"])
    # the topic deleted and the comments moved ideas beyond the ones updated
    assert len(changed) > len(changes["ideas"]["updated"]) + 1

    result = harness.sync()
    assert result.rows_loaded["ideas"] == len(changed)
    assert result.unchanged["ideas"] == len(after) - len(changed)
    assert result.rows_removed["ideas"] == len(gone) == 1
    assert "ideas" in result.complete
    assert f"ideas: {len(after) - len(changed):,} read and unchanged" in result.summary()
    harness.assert_equals_truth(tables=["ideas", "ideas__topics"])
    # the unchanged ideas' rows are the ones the full run loaded
    loads_now = _load_ids(harness)
    assert {idx for idx in loads_now if loads_now[idx] != loads_before.get(idx)} == changed

    # nothing changed since: no idea loads, none is removed
    again = harness.sync()
    assert again.rows_loaded.get("ideas", 0) == 0
    assert again.rows_loaded.get("ideas__topics", 0) == 0
    assert again.unchanged["ideas"] == len(after)
    assert "ideas" not in again.rows_removed
    # a full run loads every idea again
    full = harness.sync(full=True)
    assert full.rows_loaded["ideas"] == len(after)
    assert full.unchanged == {}  # neither ideas nor announcements
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_run_that_does_not_load_ideas_keeps_their_fingerprints(harness: Harness) -> None:
    harness.sync(full=True)
    changes = harness.mutate(seed=32, counts={"ideas": {"update": 1, "delete": 1}})
    comments_only = harness.sync(resources=["comments"])
    assert "ideas" not in comments_only.rows_loaded
    result = harness.sync()
    assert result.rows_loaded["ideas"] >= 1
    assert result.rows_removed["ideas"] == 1
    harness.assert_equals_truth(tables=["ideas", "ideas__topics"])
    for con in harness.connect():
        updated = changes["ideas"]["updated"][0]
        name = con.execute("select name from feedback.ideas where idx = ?", [updated]).fetchone()
        assert name is not None and name[0].endswith("(renamed)")


@pytest.mark.slow
def test_soft_mode_marks_an_idea_gone_on_a_normal_run_once(harness: Harness) -> None:
    harness.sync(full=True, delete_mode="soft")
    changes = harness.mutate(seed=33, counts={"ideas": {"delete": 1}})
    result = harness.sync(delete_mode="soft")
    assert result.rows_marked["ideas"] == 1
    deleted = changes["ideas"]["deleted"][0]
    for con in harness.connect():
        marked = con.execute(
            "select idx from feedback.ideas where _deleted_at is not null"
        ).fetchall()
        assert marked == [(deleted,)]
    again = harness.sync(delete_mode="soft")
    assert "ideas" not in again.rows_marked
    harness.assert_equals_truth(tables=["ideas"], where="where _deleted_at is null")


@pytest.mark.slow
def test_a_run_that_dies_before_its_deletes_leaves_them_to_the_next(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gone ideas are named in the run's journal: after a crash between the load and
    the deletes, the next run removes them, though its own read finds nothing gone."""
    harness.sync(full=True)
    changes = harness.mutate(seed=34, counts={"ideas": {"delete": 2}})
    real = reconcile.reconcile

    def crash(*args: Any, **kwargs: Any) -> dict[str, int]:
        raise RuntimeError("killed between the load and the deletes")

    monkeypatch.setattr(reconcile, "reconcile", crash)
    with pytest.raises(RuntimeError, match="killed"):
        harness.sync()
    monkeypatch.setattr(reconcile, "reconcile", real)
    for con in harness.connect():
        left = con.execute("select count(*) from feedback.ideas").fetchone()
        assert left == (len(harness.dump()["ideas"]) + 2,)  # loaded, not yet removed
    result = harness.sync()
    assert result.rows_removed["ideas"] == 2
    harness.assert_equals_truth(tables=["ideas", "ideas__topics"])
    for con in harness.connect():
        gone = changes["ideas"]["deleted"]
        found = con.execute(
            "select count(*) from feedback.ideas where idx in (?, ?)", gone
        ).fetchone()
        assert found == (0,)


@pytest.mark.slow
def test_a_normal_run_loads_only_the_posts_of_its_window_that_changed(harness: Harness) -> None:
    """Drafts are read on every run: one edited (through the API) loads again, the others
    and the window's unchanged posts do not; a new post loads."""
    harness.sync(full=True)
    quiet = harness.sync()  # the window, drafts and scheduled posts read again, all as loaded
    assert quiet.rows_loaded.get("announcements", 0) == 0
    read_again = quiet.unchanged["announcements"]
    drafts = [a for a in harness.dump()["announcements"] if a["published_at"] is None]
    assert drafts and read_again >= len(drafts)
    draft = drafts[0]
    body = {"name": draft["name"] + " (edited)", "author_idx": draft["author"]["idx"]}
    edited = api(harness, "post", f"/announcements/{draft['idx']}", content="Edited.", **body)
    assert edited.status_code == 200, edited.text
    created = harness.mutate(seed=35, counts={"announcements": {"create": 1}})

    result = harness.sync()
    assert result.rows_loaded["announcements"] == 2  # the edited draft and the new post
    assert result.unchanged["announcements"] == read_again - 1
    for con in harness.connect():
        landed = con.execute(
            "select idx, name from feedback.announcements where _dlt_load_id = ?",
            [result.load_id],
        ).fetchall()
    assert {idx for idx, _ in landed} == {draft["idx"], *created["announcements"]["created"]}
    assert (draft["idx"], body["name"]) in landed
    harness.assert_equals_truth(
        tables=["announcements", "announcements__categories", "announcements__ideas"]
    )
    # a full run loads every post again
    assert harness.sync(full=True).unchanged.get("announcements") is None


def _ideas_listing(request: httpx.Request) -> bool:
    return request.url.path == "/v1/ideas"


@pytest.mark.slow
def test_an_idea_listed_twice_loads_again_on_the_next_run(harness: Harness) -> None:
    """Which of two copies the merge kept is not known: the idea keeps no fingerprint, so
    the next run loads it again, and the run after leaves it."""
    harness.sync(full=True)
    first: dict[str, Any] = {}

    def twice(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if _ideas_listing(request) and "after" not in request.url.params and body["data"]:
            # a stale copy of the first idea ahead of it, as a listing that moved may send
            first.update(body["data"][0], name=body["data"][0]["name"] + " (a stale copy)")
            body["data"].insert(0, dict(first))
        return body

    listed = harness.sync(transport=Intercept(rewrite=twice))
    assert first and listed.rows_loaded["ideas"] >= 1
    again = harness.sync()
    assert again.rows_loaded["ideas"] == 1
    assert _load_ids(harness)[first["idx"]] == again.load_id
    harness.assert_equals_truth(tables=["ideas", "ideas__topics"])
    assert harness.sync().rows_loaded.get("ideas", 0) == 0


@pytest.mark.slow
def test_an_idea_rejected_on_a_full_run_is_removed_once_gone(harness: Harness) -> None:
    """A full run that rejects an idea (two keys that make one column) keeps its earlier
    row; a later normal run that no longer finds the idea removes it."""
    harness.sync(full=True)
    idea = sorted(_ideas(harness.dump()))[0]

    def collide(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        for item in body.get("data") or ():
            if _ideas_listing(request) and item.get("idx") == idea:
                item["Due Date"], item["due_date"] = "2027-01-01", "2027-02-01"
        return body

    def hide(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if _ideas_listing(request):
            body["data"] = [item for item in body["data"] if item.get("idx") != idea]
        return body

    rejected = harness.sync(full=True, transport=Intercept(rewrite=collide))
    assert rejected.rows_loaded["rejected_rows"] == 1
    assert idea in _load_ids(harness)  # its earlier row stays
    gone = harness.sync(transport=Intercept(rewrite=hide))
    assert gone.rows_removed["ideas"] == 1
    assert idea not in _load_ids(harness)


def test_an_item_whose_idx_is_empty_has_no_key_in_rejected_rows() -> None:
    """An empty idx is no key: the rejected row's idx is null, so the sync removes nothing
    of that resource that run and says why (an empty text would pass for a key)."""
    assert rejected_row("ideas", {"idx": "", "name": "x"}, "no idx")["idx"] is None
    assert rejected_row("ideas", {"idx": 7}, "no idx")["idx"] is None
    assert rejected_row("ideas", {"idx": "ide_1", "A b": 1, "a_b": 2}, "clash")["idx"] == "ide_1"


@pytest.mark.slow
def test_a_normal_run_loads_only_the_topics_and_statuses_that_changed(harness: Harness) -> None:
    """Topics and statuses are read whole on every run; only the rows that changed load,
    and a row the read no longer finds is removed by its key."""
    harness.sync(full=True)
    before = harness.dump()
    harness.mutate(
        seed=35,
        counts={
            "topics": {"create": 1, "update": 1, "delete": 1},
            "statuses": {"create": 1, "update": 1},
        },
    )
    after = harness.dump()
    result = harness.sync()
    for name in ("topics", "statuses"):
        old = {row["idx"]: row for row in before[name]}
        new = {row["idx"]: row for row in after[name]}
        changed = {idx for idx, row in new.items() if old.get(idx) != row}
        assert len(changed) == 2, name  # one created, one updated
        assert result.rows_loaded[name] == len(changed), name
        assert result.unchanged[name] == len(new) - len(changed), name
        assert result.rows_removed.get(name, 0) == len(set(old) - set(new)), name
    assert result.rows_removed["topics"] == 1
    harness.assert_equals_truth(tables=["topics", "statuses", "ideas", "ideas__topics"])

    # nothing changed since: no row of any table loads, nothing is removed
    again = harness.sync()
    assert {table: rows for table, rows in again.rows_loaded.items() if rows} == {}
    assert again.unchanged["topics"] == len(after["topics"])
    assert again.unchanged["statuses"] == len(after["statuses"])
    assert again.rows_removed == {}
    harness.assert_equals_truth(tables=["topics", "statuses"])

    # a full run loads every row again
    full = harness.sync(full=True)
    assert full.rows_loaded["topics"] == len(after["topics"])
    assert "topics" not in full.unchanged
    harness.assert_equals_truth()
