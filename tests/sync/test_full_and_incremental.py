"""Full and normal syncs against the sandbox, asserting on what landed in DuckDB."""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

import pytest
from feedback_sync.source.resources import NAMES as RESOURCES

from tests.sync.harness import COLUMNS, Harness

ROOTS = list(RESOURCES)
# seeded changes of every kind in every resource (the PostgreSQL tests make the same)
CHANGES = {
    "followers": {"create": 3, "update": 2, "delete": 2},
    "comments": {"create": 6, "update": 2, "delete": 3},
    "announcements": {"create": 2, "update": 2, "delete": 1},
    "topics": {"create": 1, "update": 1, "delete": 1},
    "statuses": {"create": 1, "update": 1},
    "integration_links": {"create": 2, "delete": 1},
    "ideas": {"create": 1, "update": 1},
}


def _per_path(requests: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r["path"].removeprefix("/v1/") for r in requests)


def test_full_sync_equals_ground_truth(harness: Harness) -> None:
    result = harness.sync(full=True)
    harness.assert_equals_truth()
    # the Arrow schema the source yields agrees with its hints: dlt has nothing to warn of
    assert harness.dlt_warnings == []
    assert set(result.complete) == set(ROOTS)
    # the summary says where the time went, step by step, within the run's own time
    assert list(result.phases) == ["start", "fetch", "load", "history", "models"]
    assert all(seconds > 0 for seconds in result.phases.values())
    assert sum(result.phases.values()) <= result.seconds
    first = result.summary().splitlines()[0]
    assert f"(start {result.phases['start']:.1f}s, fetch {result.phases['fetch']:.1f}s, " in first
    assert result.table_rows["comments"] == len(harness.dump()["comments"])
    for con in harness.connect():
        for table in ROOTS:
            dupes = con.execute(
                f'select count(*) - count(distinct idx) from feedback."{table}"'
            ).fetchone()
            assert dupes == (0,), table
        # every child row hangs off a parent that exists, by the parent's idx
        for table in COLUMNS:
            if "__" not in table:
                continue
            root = table.split("__")[0]
            key = COLUMNS[table][0]
            orphans = con.execute(
                f'select count(*) from feedback."{table}" c left join feedback."{root}" p '
                f"on c.{key} = p.idx where p.idx is null"
            ).fetchone()
            assert orphans == (0,), table
        types = dict(
            con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_schema = 'feedback' and table_name = 'comments'"
            ).fetchall()
        )
    assert types["created_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types["idea_id"] == "BIGINT"
    # JSON travels as its text (Arrow has no JSON type dlt takes); the schema marks it
    assert types["content"] == "VARCHAR"
    schema = harness.target().pipeline().default_schema
    assert schema.tables["comments"]["columns"]["content"]["x-feedback-kind"] == "json"  # type: ignore[typeddict-item]


def test_first_run_without_full_reads_everything(harness: Harness) -> None:
    harness.sync()
    harness.assert_equals_truth()


@pytest.mark.slow
def test_normal_run_fetches_only_what_changed_then_full_equals_truth(harness: Harness) -> None:
    harness.sync(full=True)
    before = harness.dump()
    changes = harness.mutate(seed=5, counts=CHANGES)
    after = harness.dump()
    harness.mark_requests()
    result = harness.sync()
    requests = harness.requests()
    paths = _per_path(requests)

    # followers: resumed from the saved cursor: 3 new ones fit in one page of 7, plus
    # nothing else (the contract's cursor on the last page means one more empty page at most)
    follower_calls = [r for r in requests if r["path"] == "/v1/followers"]
    assert all("after" in r["params"] for r in follower_calls)
    assert len(follower_calls) <= 2

    # comments and links: only new ideas and ideas whose counts or updated_at moved
    def signature(idea: dict[str, Any]) -> tuple[Any, ...]:
        return (idea["comment_count"], idea["note_count"], idea["updated_at"])

    old = {i["idx"]: signature(i) for i in before["ideas"]}
    moved = {i["idx"] for i in after["ideas"] if old.get(i["idx"]) != signature(i)}
    polled = {r["params"]["idea_idx"][0] for r in requests if r["path"] == "/v1/comments"}
    assert polled == moved
    assert 0 < len(polled) < len(after["ideas"])
    # links: by each type the full run saw, not per idea (new links on any idea count)
    link_calls = [r for r in requests if r["path"] == "/v1/integration-links"]
    assert all("idea_idx" not in r["params"] for r in link_calls)
    assert {r["params"]["type"][0] for r in link_calls} == {
        link["type"] for link in before["integration_links"]
    }
    for r in requests:
        if r["path"] == "/v1/comments":
            assert r["params"]["included_types"] == ["comments,notes"]

    # announcements: the published_after window and the drafts, nothing else
    announcement_calls = [r for r in requests if r["path"] == "/v1/announcements"]
    assert announcement_calls
    for r in announcement_calls:
        assert "published_after" in r["params"] or r["params"].get("is_published") == ["false"]
    # small lists in full
    assert paths["topics"] >= 1 and paths["statuses"] >= 1 and paths["ideas"] >= 1
    assert set(paths) <= {
        "followers",
        "comments",
        "integration-links",
        "announcements",
        "topics",
        "statuses",
        "ideas",
    }

    # the new rows landed
    created_comments = set(changes["comments"]["created"])
    created_followers = set(changes["followers"]["created"])
    created_links = set(changes["integration_links"]["created"])
    created_link_ideas = {
        link["idea_idx"] for link in after["integration_links"] if link["idx"] in created_links
    }
    assert created_link_ideas - moved, "the seed should add a link to an unmoved idea"
    for con in harness.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.comments").fetchall()}
        assert created_comments <= landed
        landed = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
        assert created_followers <= landed
        sql = "select idx from feedback.integration_links"
        assert created_links <= {r[0] for r in con.execute(sql).fetchall()}
    # deletes of always-complete lists are applied on a normal run
    harness.assert_equals_truth(after, tables=["topics", "statuses", "ideas", "ideas__topics"])
    assert result.rows_removed.get("topics") == 1
    assert "followers" not in result.complete and "comments" not in result.complete

    # a full run then equals the ground truth exactly, deletes included
    full = harness.sync(full=True)
    harness.assert_equals_truth(after)
    assert full.rows_removed["followers"] == 2
    assert full.rows_removed["comments"] >= 3


@pytest.mark.slow
def test_nothing_changed_means_a_cheap_run(harness: Harness) -> None:
    harness.sync(full=True)
    harness.mark_requests()
    result = harness.sync()
    paths = _per_path(harness.requests())
    assert "comments" not in paths
    assert paths["followers"] == 1
    assert sum(v for k, v in result.rows_loaded.items() if k.startswith("comments")) == 0
    harness.assert_equals_truth()
    # the first normal run read each link type once from its start; the next one resumes
    types = {link["type"] for link in harness.dump()["integration_links"]}
    harness.mark_requests()
    harness.sync()
    link_calls = [r for r in harness.requests() if r["path"] == "/v1/integration-links"]
    assert {r["params"]["type"][0] for r in link_calls} == types
    assert all("after" in r["params"] for r in link_calls)
    assert len(link_calls) == len(types)
    harness.assert_equals_truth()


def test_resources_option_limits_what_is_read_and_loaded(harness: Harness) -> None:
    result = harness.sync(resources=["topics", "statuses"])
    paths = _per_path(harness.requests())
    assert set(paths) == {"topics", "statuses"}
    assert set(result.table_rows) == {"topics", "statuses"}
    harness.assert_equals_truth(tables=["topics", "statuses"])


@pytest.mark.slow
def test_a_full_run_that_adds_tables_still_removes_what_is_gone_from_the_others(
    harness: Harness,
) -> None:
    """A full run in which some tables are new (their first load appends, and nothing in
    them can be stale) and others are not: deletions at the source still leave the tables
    the warehouse had, with their child rows."""
    harness.sync(full=True, resources=["followers", "topics"])
    changes = harness.mutate(seed=21, counts={"followers": {"delete": 2}, "topics": {"delete": 1}})
    result = harness.sync(full=True)
    assert result.rows_removed["followers"] == 2
    assert result.rows_removed["topics"] == 1
    assert result.rows_removed.get("comments") is None
    for con in harness.connect():
        left = con.execute(
            "select count(*) from feedback.followers__companies where follower_idx in "
            f"({', '.join(repr(idx) for idx in changes['followers']['deleted'])})"
        ).fetchone()
        assert left == (0,)
    harness.assert_equals_truth()


def test_comments_alone_still_reads_ideas_but_does_not_load_them(harness: Harness) -> None:
    result = harness.sync(resources=["comments"])
    assert "ideas" not in result.table_rows
    harness.assert_equals_truth(tables=["comments", "comments__attachments"])


@pytest.mark.slow
def test_soft_deletes_keep_rows_with_deleted_at(harness: Harness) -> None:
    harness.sync(full=True, delete_mode="soft")
    changes = harness.mutate(seed=9, counts={"followers": {"delete": 2}, "comments": {"delete": 2}})
    result = harness.sync(full=True, delete_mode="soft")
    gone = set(changes["followers"]["deleted"])
    for con in harness.connect():
        marked = {
            r[0]
            for r in con.execute(
                "select idx from feedback.followers where _deleted_at is not null"
            ).fetchall()
        }
        assert marked == gone
        first = con.execute("select max(_deleted_at) from feedback.followers").fetchone()
    assert result.rows_marked["followers"] == 2  # marked, not removed: the rows stay
    assert "followers" not in result.rows_removed
    harness.assert_equals_truth(tables=["followers", "comments"], where="where _deleted_at is null")
    # a later full run keeps the first deletion time and marks nothing again
    again = harness.sync(full=True, delete_mode="soft")
    assert again.rows_marked.get("followers") is None
    for con in harness.connect():
        assert con.execute("select max(_deleted_at) from feedback.followers").fetchone() == first


@pytest.mark.parametrize("method", ["bearer", "basic", "query"])
def test_every_auth_method(harness: Harness, method: str) -> None:
    harness.sync(full=True, auth_method=method)
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_first_run_reads_every_ideas_links_even_as_types_turn_up(harness: Harness) -> None:
    # pages of one idea: many parallel per-idea calls; the first ones save the types they saw,
    # which must not switch the later calls of the same run to reading by type
    harness.sync(page_size=1)
    link_calls = [r for r in harness.requests() if r["path"] == "/v1/integration-links"]
    assert all("type" not in r["params"] for r in link_calls)
    ideas = {idea["idx"] for idea in harness.dump()["ideas"]}
    assert {r["params"]["idea_idx"][0] for r in link_calls} == ideas
    harness.assert_equals_truth()


@pytest.mark.slow
def test_new_comments_on_an_idea_cost_one_request(harness: Harness) -> None:
    # the per-idea state keeps how many comments lay before the saved cursor, so a resumed
    # walk whose short page brings the count to the total needs no empty confirming page
    harness.sync(full=True)
    harness.mutate(seed=9, counts={"comments": {"create": 3}})
    harness.mark_requests()
    harness.sync()
    calls = [r for r in harness.requests() if r["path"] == "/v1/comments"]
    ideas = [r["params"]["idea_idx"][0] for r in calls]
    assert calls and all("after" in r["params"] for r in calls)
    assert len(ideas) == len(set(ideas)), "an idea was asked twice"
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_machine_whose_state_is_behind_resumes_from_the_destinations(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two working folders on one warehouse (two machines, or a folder restored from a
    backup): a run from the folder whose state is behind takes the newer state the
    destination holds, and one whose state is current skips dlt's restore."""
    from dlt.pipeline.pipeline import Pipeline
    from feedback_sync.app.sync import SyncOptions, run_sync
    from feedback_sync.warehouse.target import make_target

    restores: list[str] = []
    real = Pipeline.sync_destination

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        restores.append(str(self.pipelines_dir))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "sync_destination", counted)
    here = harness.target()
    there = make_target(duckdb_path=here.duckdb_path, pipelines_dir=harness.tmp / "elsewhere")

    # here: a first run into no warehouse file skips the restore (there is nothing to find)
    harness.sync(full=True)
    assert len(restores) == 0
    harness.sync()  # here again: its state is the destination's
    assert len(restores) == 0

    harness.mutate(11, {"followers": {"create": 4}})
    elsewhere = run_sync(there, SyncOptions(settings=harness.settings(), out=io.StringIO()))
    assert elsewhere.rows_loaded.get("followers") == 4  # restored the cursor: only the new
    assert len(restores) == 1

    harness.mutate(12, {"followers": {"create": 2}})
    harness.mark_requests()
    result = harness.sync()  # here is behind now: it restores, then reads only the newest 2
    assert len(restores) == 2
    assert result.rows_loaded.get("followers") == 2
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_warehouse_file_deleted_under_a_kept_working_folder_is_filled_again(
    harness: Harness,
) -> None:
    """The DuckDB file is deleted (or moved) while dlt's working folder stays: the next
    normal run must not trust the folder's cursors, which describe rows the new file does
    not have; the warehouse ends up with every row again."""
    harness.sync(full=True)
    path = harness.target().duckdb_path
    assert path is not None
    path.unlink()
    harness.mutate(13, {"followers": {"create": 2}})
    harness.sync()
    harness.assert_equals_truth()
