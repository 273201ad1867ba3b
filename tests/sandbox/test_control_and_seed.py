"""The control interface and the seeded data: clock, mutations, dump, log, reset, scales."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from feedback_sync.sandbox.app import SandboxApp, create_app
from feedback_sync.sandbox.seed import SCALES, build_store
from feedback_sync.sandbox.testing import SandboxTransport
from feedback_sync.sandbox.timefmt import parse_body_moment

from tests.sandbox.helpers import idxs, walk


@pytest.fixture
async def control(sandbox_app: SandboxApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=SandboxTransport(sandbox_app), base_url="http://sandbox/_sandbox"
    ) as c:
        yield c


async def dump_of(app: SandboxApp) -> dict[str, Any]:
    async with httpx.AsyncClient(transport=SandboxTransport(app), base_url="http://s") as c:
        response = await c.get("/_sandbox/dump")
    assert response.status_code == 200
    return orjson.loads(response.content)  # type: ignore[no-any-return]


async def test_health_and_settings(control: httpx.AsyncClient) -> None:
    health = (await control.get("/health")).json()
    assert health["ok"] and health["scale"] == "tiny" and health["counts"]["followers"] == 40
    settings = (await control.get("/settings")).json()
    assert "api_key" not in settings and settings["custom_attributes"] is True
    changed = await control.post("/settings", json={"latency_ms": 5, "faults": {"rate": 0.1}})
    assert changed.json()["latency_ms"] == 5 and changed.json()["faults"]["rate"] == 0.1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"bogus": 1}, "bogus"),
        ({"custom_attributes": "yes"}, "custom_attributes"),
        ({"rate_limit_per_second": 0}, "rate_limit_per_second"),
        ({"timestamp_format": "epoch"}, "timestamp_format"),
        ({"faults": {"rate": 2}}, "faults.rate"),
        ({"faults": {"kinds": ["meteor"]}}, "meteor"),
        ({"faults": {"script": [{"kind": "500", "count": 0}]}}, "count"),
    ],
)
async def test_bad_settings_are_refused_whole(
    control: httpx.AsyncClient, body: dict[str, Any], words: str
) -> None:
    before = (await control.get("/settings")).json()
    response = await control.post("/settings", json={"latency_ms": 9, **body})
    assert response.status_code == 400 and words in response.json()["message"]
    assert (await control.get("/settings")).json() == before


async def test_clock_set_advance_and_run(
    control: httpx.AsyncClient, sandbox_client: httpx.AsyncClient
) -> None:
    set_to = (await control.post("/clock", json={"now": "2027-01-01T00:00:00Z"})).json()
    assert set_to == {"now": "2027-01-01T00:00:00.000000Z", "running": False}
    moved = (await control.post("/clock", json={"advance_seconds": 90})).json()
    assert moved["now"] == "2027-01-01T00:01:30.000000Z"
    topic = (await sandbox_client.post("/topics", json={"name": "t"})).json()
    assert topic["created_at"] == "2027-01-01 00:01:30"
    # a fixed clock ticks one second per write, so writes stay strictly ordered
    assert (await control.get("/clock")).json()["now"] == "2027-01-01T00:01:31.000000Z"
    running = (await control.post("/clock", json={"running": True})).json()
    assert running["running"] is True
    bad = await control.post("/clock", json={"now": "tomorrow"})
    assert bad.status_code == 400 and "now" in bad.json()["message"]


async def test_mutate_is_seeded_and_goes_through_the_store(sandbox_app: SandboxApp) -> None:
    plan = {"seed": 7, "fraction": 0.2}
    results = []
    for _ in range(2):
        app = create_app("tiny", 1, api_key="k")
        async with httpx.AsyncClient(transport=SandboxTransport(app), base_url="http://s") as c:
            response = await c.post("/_sandbox/mutate", json=plan)
            assert response.status_code == 200
            results.append((response.json(), await dump_of(app)))
    (changes, dump), (changes_again, dump_again) = results
    assert changes == changes_again and dump == dump_again
    for resource in ("followers", "announcements", "comments", "integration_links", "ideas"):
        assert changes[resource]["created"], resource
        assert changes[resource]["updated"], resource
        assert changes[resource]["deleted"], resource
    present = {row["idx"] for row in dump["comments"]}
    created = set(changes["comments"]["created"])
    assert created & present
    # the rest went with ideas deleted later in the batch (ideas are changed last)
    assert len(created - present) <= 3 * len(changes["ideas"]["deleted"])
    assert not set(changes["followers"]["deleted"]) & {row["idx"] for row in dump["followers"]}
    # counts on ideas stay true to the comments that exist
    per_idea = Counter((row["idea_idx"], row["type"]) for row in dump["comments"])
    for idea in dump["ideas"]:
        assert idea["comment_count"] == per_idea[(idea["idx"], "comment")]
        assert idea["note_count"] == per_idea[(idea["idx"], "note")]


async def test_mutate_by_counts_and_bad_plans(
    control: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    before = len(sandbox_app.state.store.comments)
    response = await control.post("/mutate", json={"comments": {"create": 5}})
    assert len(response.json()["comments"]["created"]) == 5
    assert len(sandbox_app.state.store.comments) == before + 5
    for body, word in [
        ({"votes": {"create": 1}}, "votes"),
        ({"comments": {"upsert": 1}}, "upsert"),
        ({"fraction": 3}, "fraction"),
        ({"comments": {"create": -1}}, "create"),
    ]:
        bad = await control.post("/mutate", json=body)
        assert bad.status_code == 400 and word in bad.json()["message"]


async def test_dump_is_the_ground_truth_the_api_serves(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    from feedback_sync.sandbox.state import SandboxState

    state: SandboxState = sandbox_app.state
    state.configure({"timestamp_format": "iso"})
    dump = await dump_of(sandbox_app)
    followers, _ = await walk(sandbox_client, "/followers", {"include_attributes": "true"}, 50)
    assert followers == dump["followers"]
    announcements, _ = await walk(sandbox_client, "/announcements", limit=50)
    assert announcements == dump["announcements"]
    ideas, _ = await walk(sandbox_client, "/ideas", limit=50)
    assert ideas == dump["ideas"]
    idea = dump["ideas"][0]["idx"]
    comments, _ = await walk(
        sandbox_client, "/comments", {"idea_idx": idea, "included_types": "comments,notes"}, 50
    )
    expected = [
        {k: v for k, v in row.items() if k != "idea_idx"}
        for row in dump["comments"]
        if row["idea_idx"] == idea
    ]
    assert comments == expected
    assert len(dump["integration_links"]) == 30 and len(dump["topics"]) == 6
    assert {"categories", "users", "companies", "now"} <= set(dump)


async def test_request_log_counts_what_was_asked(
    control: httpx.AsyncClient, sandbox_client: httpx.AsyncClient
) -> None:
    await control.delete("/requests")
    start = (await control.get("/requests")).json()["last_seq"]
    await sandbox_client.get("/followers", params={"limit": 3})
    await sandbox_client.get("/followers", params={"limit": 100})
    await sandbox_client.get("/nope")
    entries = (await control.get("/requests", params={"since": start})).json()["requests"]
    v1 = [e for e in entries if e["path"].startswith("/v1")]
    assert [(e["method"], e["path"], e["status"]) for e in v1] == [
        ("GET", "/v1/followers", 200),
        ("GET", "/v1/followers", 200),
        ("GET", "/v1/nope", 404),
    ]
    assert v1[1]["params"] == {"limit": ["100"]}
    assert (await control.get("/requests", params={"since": "x"})).status_code == 400


async def test_reset_rebuilds_the_store(
    control: httpx.AsyncClient, sandbox_client: httpx.AsyncClient
) -> None:
    await sandbox_client.post("/topics", json={"name": "gone after reset"})
    reset = (await control.post("/reset", json={"scale": "tiny", "seed": 2})).json()
    assert reset["seed"] == 2 and reset["counts"]["topics"] == 6
    topics = (await sandbox_client.get("/topics")).json()["data"]
    assert "gone after reset" not in [t["name"] for t in topics]
    assert (await control.post("/reset", json={"scale": "huge"})).status_code == 400


async def test_same_seed_same_data_other_seed_other_data() -> None:
    first = await dump_of(create_app("tiny", 5, api_key="k"))
    second = await dump_of(create_app("tiny", 5, api_key="k"))
    third = await dump_of(create_app("tiny", 6, api_key="k"))
    assert first == second
    assert first["followers"] != third["followers"]


def test_seeded_shape_is_realistic() -> None:
    store = build_store("demo", 1)
    size = SCALES["demo"]
    assert len(store.followers) == size.followers and len(store.comments) == size.comments
    now = store.clock.now()
    announcements = list(store.announcements)
    assert any(a.published_at is None for a in announcements)
    assert any(a.published_at and a.published_at > now for a in announcements)
    assert any(a.reactions for a in announcements)
    assert any(len(emoji) > 1 for a in announcements for emoji in a.reactions)  # modifiers
    comments = list(store.comments)
    assert 0.15 < sum(c.is_private for c in comments) / len(comments) < 0.35
    assert any(c.attachments for c in comments)
    per_idea = Counter(c.idea_idx for c in comments)
    top = sum(n for _, n in per_idea.most_common(len(store.ideas) // 10))
    assert top / len(comments) > 0.4  # a tenth of the ideas draw most of the discussion
    followers = list(store.followers)
    companies = Counter(len(f.company_ids) for f in followers)
    assert set(companies) == {0, 1, 2, 3}
    keys = {k for f in followers for k in f.attributes}
    assert {"Signup Source", "a.b.c", "select", "$lifetime_value"} <= keys
    assert any(not f.name.isascii() for f in followers)
    assert all(c.attributes for c in store.companies.values())
    assert len({f.email.lower() for f in followers}) == len(followers)


async def test_ideas_discoverable_without_the_extension(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    """Without /ideas, every idea with activity is still reachable through other lists."""
    sandbox_app.state.configure({"ideas_endpoint": False})
    announcements, _ = await walk(sandbox_client, "/announcements", limit=50)
    seen = {idea["idx"] for a in announcements for idea in a["ideas"]}
    for link_type in {link.type for link in sandbox_app.state.store.links}:
        body = (
            await sandbox_client.get("/integration-links", params={"type": link_type, "limit": 100})
        ).json()
        seen |= {row["idea_idx"] for row in body["data"]}
    assert seen and seen <= set(sandbox_app.state.store.ideas.by_idx)
    assert idxs([{"idx": i} for i in sorted(seen)])


@pytest.mark.slow
def test_large_scale_has_the_promised_sizes_and_stays_consistent() -> None:
    store = build_store("large", 1)
    assert len(store.followers) >= 200_000
    assert len(store.ideas) >= 20_000
    assert len(store.comments) >= 500_000
    assert len(store.announcements) >= 20_000
    assert len(store.links) >= 100_000
    assert len(store.followers.order) == len(store.followers.by_idx)
    assert len(store.comments.order) == len(store.comments.by_idx)
    assert sum(len(keys) for keys in store.comments_by_idea.groups.values()) == len(store.comments)
    assert sum(len(k) for k in store.links_by_type.groups.values()) == len(store.links)
    assert sum(i.comment_count + i.note_count for i in store.ideas) == len(store.comments)
    assert len(store.email_index) == len(store.followers)


async def test_an_idea_moves_between_statuses_and_the_move_is_recorded(
    sandbox_app: SandboxApp, control: httpx.AsyncClient
) -> None:
    store = sandbox_app.state.store
    idea = next(iter(store.ideas.by_idx.values()))
    other = next(s for s in store.statuses.by_idx if s != idea.status_idx)
    before = idea.status_idx
    await control.post("/clock", json={"now": "2026-05-01T10:00:00Z"})
    moved = await control.post(f"/ideas/{idea.idx}/status", json={"status_idx": other})
    assert moved.status_code == 200, moved.text
    assert moved.json() == {
        "idx": idea.idx,
        "status_idx": other,
        "updated_at": "2026-05-01T10:00:00.000000Z",
    }
    # the API serves the move, with updated_at at the move
    async with httpx.AsyncClient(
        transport=SandboxTransport(sandbox_app),
        base_url="http://sandbox/v1",
        headers={"Authorization": f"Bearer {sandbox_app.state.settings.api_key}"},
    ) as api:
        ideas, _ = await walk(api, "/ideas", limit=100)
    served = next(i for i in ideas if i["idx"] == idea.idx)
    assert served["status_idx"] == other and served["updated_at"] == "2026-05-01 10:00:00"
    # a move to the status it is in already moves nothing and records nothing
    await control.post(f"/ideas/{idea.idx}/status", json={"status_idx": other})
    dump = await dump_of(sandbox_app)
    assert dump["status_moves"] == [
        {
            "idea_idx": idea.idx,
            "from_status_idx": before,
            "to_status_idx": other,
            "at": parse_body_moment("2026-05-01T10:00:00Z"),
        }
    ]
    # refusals name what was wrong
    unknown_status = await control.post(f"/ideas/{idea.idx}/status", json={"status_idx": "sts_x"})
    assert unknown_status.status_code == 404 and "sts_x" in unknown_status.json()["message"]
    unknown_idea = await control.post("/ideas/ide_nope/status", json={"status_idx": other})
    assert unknown_idea.status_code == 404 and "ide_nope" in unknown_idea.json()["message"]
    bad = await control.post(f"/ideas/{idea.idx}/status", json={"status": other})
    assert bad.status_code == 400 and "status" in bad.json()["message"]


async def test_mutate_moves_ideas_and_changes_spend_on_the_record(
    sandbox_app: SandboxApp, control: httpx.AsyncClient
) -> None:
    store = sandbox_app.state.store
    statuses = {i.idx: i.status_idx for i in store.ideas.by_idx.values()}
    spends = {c.id: c.monthly_spend for c in store.companies.values()}
    response = await control.post(
        "/mutate", json={"ideas": {"update": 6}, "followers": {"update": 30}, "seed": 3}
    )
    assert response.status_code == 200
    dump = await dump_of(sandbox_app)
    moves = dump["status_moves"]
    assert moves, "an idea update moves the idea"
    for move in moves:  # an idea moved twice: each move starts where the last one ended
        assert move["from_status_idx"] == statuses[move["idea_idx"]] != move["to_status_idx"]
        statuses[move["idea_idx"]] = move["to_status_idx"]
    for idea_idx in {m["idea_idx"] for m in moves}:
        last = [m for m in moves if m["idea_idx"] == idea_idx][-1]
        assert store.ideas.by_idx[idea_idx].status_idx == last["to_status_idx"]
        assert store.ideas.by_idx[idea_idx].updated == last["at"]
    changes = dump["spend_changes"]
    assert changes, "follower updates change some companies' spend"
    for change in changes:
        assert change["from_spend"] == spends[change["company_id"]] != change["to_spend"]
        spends[change["company_id"]] = change["to_spend"]
        follower = store.followers.by_idx[change["follower_idx"]]
        assert change["company_id"] in follower.company_ids and follower.updated >= change["at"]
    for company_id in {c["company_id"] for c in changes}:
        assert store.companies[company_id].monthly_spend == spends[company_id]
