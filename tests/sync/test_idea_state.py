"""The per-idea state (comments and links): one packed string per idea, older lists still read."""

from __future__ import annotations

from typing import Any

import pytest
from feedback_sync.source.idea_entries import pack_idea, unpack_idea

from tests.sync.harness import Harness


@pytest.mark.parametrize(
    ("cursor", "signature", "total"),
    [
        ("Y29tbWVudHM6MTc3", "cdf94ad3", 4),
        ("a|cursor|with|bars", "cdf94ad3", 0),
        (None, "777cb949", None),
        ("c", None, 12),
        (None, None, None),
    ],
)
def test_an_entry_packs_and_unpacks(cursor: Any, signature: Any, total: Any) -> None:
    packed = pack_idea(cursor, signature, total)
    assert isinstance(packed, str)
    assert unpack_idea(packed) == (cursor, signature, total)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        # what earlier versions saved
        (["c1", "cdf94ad3", 4], ("c1", "cdf94ad3", 4)),
        ([None, "777cb949"], (None, "777cb949", None)),
        # damaged entries read as unknown (the idea is polled again), or lose what is bad
        ("no bars", (None, None, None)),
        ("sig|x1|cursor", (None, None, None)),
        ("sig|\u00b2|cursor", (None, None, None)),  # a digit to isdigit(), not to int()
        (["c1", "sig", "4"], ("c1", "sig", None)),
        ([1, 2, 3, 4], (None, None, None)),
        ({"cursor": "c"}, (None, None, None)),
        (None, (None, None, None)),
    ],
)
def test_old_and_damaged_entries_read_safely(entry: Any, expected: Any) -> None:
    assert unpack_idea(entry) == expected


def _resource_state(harness: Harness, resource: str) -> dict[str, Any]:
    state = harness.target().pipeline().state
    saved: dict[str, Any] = state["sources"]["feedback"]["resources"][resource]
    return saved


def _idea_state(harness: Harness, resource: str) -> dict[str, Any]:
    ideas: dict[str, Any] = _resource_state(harness, resource)["ideas"]
    return ideas


@pytest.mark.slow
def test_state_holds_one_string_per_idea_and_old_lists_still_resume(harness: Harness) -> None:
    harness.sync(full=True)
    comments = _idea_state(harness, "comments")
    ideas = {idea["idx"] for idea in harness.dump()["ideas"]}
    assert set(comments) == ideas
    assert all(isinstance(entry, str) for entry in comments.values())
    assert all(unpack_idea(entry)[0] for entry in comments.values()), "a cursor per idea"
    links = _idea_state(harness, "integration_links")
    assert links and all(isinstance(entry, str) for entry in links.values())

    # the state as the previous version wrote it: [cursor, signature, total] lists
    pipeline = harness.target().pipeline()
    with pipeline.managed_state() as state:
        saved = state["sources"]["feedback"]["resources"]["comments"]["ideas"]
        for idx, entry in saved.items():
            saved[idx] = list(unpack_idea(entry))
    harness.mutate(seed=9, counts={"comments": {"create": 3}})
    harness.mark_requests()
    harness.sync()
    calls = [r for r in harness.requests() if r["path"] == "/v1/comments"]
    # only the touched ideas are asked, each from its saved cursor
    assert 0 < len(calls) < len(ideas)
    assert all("after" in r["params"] for r in calls)
    harness.assert_equals_truth()
    assert all(isinstance(entry, str) for entry in _idea_state(harness, "comments").values())
    # links are read by type once a full run saw the types: their per-idea entries are gone
    links_state = _resource_state(harness, "integration_links")
    assert links_state["seen_types"] and "ideas" not in links_state
