"""Every "Client must survive" variant of the contract, plus faults, against the sandbox."""

from __future__ import annotations

from typing import Any

import pytest

from tests.sync.harness import COLUMNS, Harness

CHANGES = {
    "followers": {"create": 9, "delete": 1},
    "comments": {"create": 12, "delete": 2},
    "announcements": {"create": 3, "update": 1},
    "integration_links": {"create": 3},
}


def _created_landed(harness: Harness, changes: dict[str, Any]) -> None:
    for resource in ("followers", "comments", "announcements"):
        created = set(changes[resource]["created"])
        for con in harness.connect():
            landed = {r[0] for r in con.execute(f"select idx from feedback.{resource}").fetchall()}
        assert created <= landed, f"{resource}: {created - landed} did not land"


def _round_trip(harness: Harness, whole_seconds: bool = False, **settings: Any) -> None:
    """Full sync equals truth; a change; a normal sync lands the new rows; full equals truth."""
    harness.sync(full=True, **settings)
    harness.assert_equals_truth(whole_seconds=whole_seconds)
    changes = harness.mutate(seed=11, counts=CHANGES)
    harness.sync(**settings)
    _created_landed(harness, changes)
    # and a second normal run has nothing left to fetch from the fan-out
    harness.mark_requests()
    harness.sync(**settings)
    assert not [r for r in harness.requests() if r["path"] == "/v1/comments"]
    harness.sync(full=True, **settings)
    harness.assert_equals_truth(whole_seconds=whole_seconds)


@pytest.mark.parametrize("variant", ["null", "repeat"])
@pytest.mark.slow
def test_last_page_after_variants(harness: Harness, variant: str) -> None:
    harness.switches(last_page_after=variant)
    _round_trip(harness)


@pytest.mark.slow
def test_announcements_newest_first(harness: Harness) -> None:
    harness.switches(announcement_order="newest_first")
    _round_trip(harness)


@pytest.mark.parametrize("mode", ["iso", "plain", "mixed"])
@pytest.mark.slow
def test_timestamp_formats(harness: Harness, mode: str) -> None:
    harness.switches(timestamp_format=mode)
    # the plain format carries whole seconds: links' microseconds are not served in it
    _round_trip(harness, whole_seconds=mode != "iso")


@pytest.mark.slow
def test_timestamp_format_changing_between_runs(harness: Harness) -> None:
    harness.sync(full=True)
    harness.switches(timestamp_format="iso")
    harness.mark_requests()
    harness.sync()
    # the same moments in another spelling are no change: no idea looks changed
    assert not [r for r in harness.requests() if r["path"] == "/v1/comments"]
    harness.assert_equals_truth()


@pytest.mark.slow
def test_without_ideas_endpoint(harness: Harness) -> None:
    harness.switches(ideas_endpoint=False)
    dump = harness.dump()
    # ideas reachable without /ideas: announcements and links by type; the rest configured
    types = sorted({link["type"] for link in dump["integration_links"]})
    mentioned = {i["idx"] for a in dump["announcements"] for i in a["ideas"]}
    mentioned |= {link["idea_idx"] for link in dump["integration_links"]}
    rest = sorted({i["idx"] for i in dump["ideas"]} - mentioned)
    assert rest, "the seed should have ideas only the configured list reaches"
    harness.overrides = {"integration_types": types, "idea_idxs": rest}
    result = harness.sync(full=True)
    assert result.ideas_endpoint is False
    # ideas known only by idx carry no name: the marts and their data tests still build
    assert result.models is not None and result.models_error is None, result.models_error
    tables = [t for t in COLUMNS if not t.startswith("ideas")]
    harness.assert_equals_truth(dump, tables=tables)
    for con in harness.connect():
        ideas = dict(con.execute("select idx, name from feedback.ideas").fetchall())
    assert set(ideas) == {i["idx"] for i in dump["ideas"]}
    names = {i["idx"]: i["name"] for a in dump["announcements"] for i in a["ideas"]}
    assert all(ideas[idx] == name for idx, name in names.items())

    # a normal run polls every known idea (nothing says which changed) and lands new comments
    changes = harness.mutate(seed=3, counts={"comments": {"create": 5}})
    result = harness.sync()
    for con in harness.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.comments").fetchall()}
    assert set(changes["comments"]["created"]) <= landed
    assert "ideas" not in result.complete


@pytest.mark.slow
def test_without_ideas_endpoint_ideas_seen_before_are_still_polled(harness: Harness) -> None:
    harness.sync(full=True)
    harness.switches(ideas_endpoint=False)
    changes = harness.mutate(seed=4, counts={"comments": {"create": 6}})
    harness.sync()
    for con in harness.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.comments").fetchall()}
    assert set(changes["comments"]["created"]) <= landed


def test_custom_attributes_disabled(harness: Harness) -> None:
    harness.switches(custom_attributes=False)
    harness.sync(full=True)
    tables = [t for t in COLUMNS if t not in ("followers__companies", "followers__attributes")]
    harness.assert_equals_truth(tables=tables)
    for con in harness.connect():
        existing = {
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema='feedback'"
            ).fetchall()
        }
    assert "followers__attributes" not in existing


@pytest.mark.slow
def test_integration_links_by_type(harness: Harness) -> None:
    dump = harness.dump()
    types = sorted({link["type"] for link in dump["integration_links"]})
    harness.overrides = {"integration_types": types}
    harness.sync(full=True)
    harness.assert_equals_truth(dump)
    changes = harness.mutate(seed=8, counts={"integration_links": {"create": 4}})
    harness.mark_requests()
    harness.sync()
    calls = [r for r in harness.requests() if r["path"] == "/v1/integration-links"]
    # one resumed chain per type, never per idea
    assert {r["params"]["type"][0] for r in calls} == set(types)
    assert all("idea_idx" not in r["params"] and "after" in r["params"] for r in calls)
    for con in harness.connect():
        landed = {
            r[0] for r in con.execute("select idx from feedback.integration_links").fetchall()
        }
    assert set(changes["integration_links"]["created"]) <= landed


@pytest.mark.slow
def test_rate_limited_server(harness: Harness) -> None:
    harness.switches(rate_limit_per_second=40)
    result = harness.sync(full=True)
    harness.assert_equals_truth()
    assert result.requests >= len(harness.requests())  # every answer, 429s included, counted


@pytest.mark.slow
def test_faults_at_five_percent_end_equal_to_truth(harness: Harness) -> None:
    harness.switches(
        faults={
            "rate": 0.05,
            "seed": 7,
            "kinds": ["429", "500", "502", "503", "drop", "truncate", "stall"],
            "stall_seconds": 2,
        }
    )
    result = harness.sync(full=True, timeout_seconds=0.5)
    assert result.retries > 0
    faults = [r for r in harness.requests() if r["fault"]]
    assert faults, "the server should have injected faults"
    harness.assert_equals_truth()
    changes = harness.mutate(seed=12, counts=CHANGES)
    harness.sync(timeout_seconds=0.5)
    _created_landed(harness, changes)
    harness.sync(full=True, timeout_seconds=0.5)
    harness.assert_equals_truth()
