"""Every list walks to exactly the store's items, once each, in the contract's order."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from feedback_sync.sandbox.app import SandboxApp

from tests.sandbox.helpers import idxs, set_switches, store_order, walk, walk_links

PLAIN = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


@pytest.mark.parametrize(
    ("path", "table"),
    [
        ("/followers", "followers"),
        ("/announcements", "announcements"),
        ("/statuses", "statuses"),
        ("/ideas", "ideas"),
    ],
)
async def test_cursor_list_walks_every_item_once_oldest_first(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp, path: str, table: str
) -> None:
    rows, paginations = await walk(sandbox_client, path, limit=3)
    expected = store_order(sandbox_app, table)
    assert idxs(rows) == expected
    assert len(set(idxs(rows))) == len(expected) > 0
    assert all(p["total"] == len(expected) for p in paginations)
    assert paginations[0]["before"] is None
    assert all(p["before"] is not None for p in paginations[1:] if p["after"])
    created = [row["created_at"] for row in rows]
    assert created == sorted(created)


async def test_last_page_keeps_a_cursor_and_the_empty_page_after_it_is_null(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    total = len(sandbox_app.state.store.followers)
    last = (await sandbox_client.get("/followers", params={"limit": total})).json()
    assert len(last["data"]) == total
    assert last["pagination"]["after"] is not None
    empty = (
        await sandbox_client.get("/followers", params={"after": last["pagination"]["after"]})
    ).json()
    assert empty["data"] == []
    assert empty["pagination"] == {"total": total, "before": None, "after": None}


async def test_a_saved_cursor_resumes_with_only_newer_items(
    sandbox_client: httpx.AsyncClient,
) -> None:
    _rows, paginations = await walk(sandbox_client, "/followers", limit=100)
    saved = paginations[-1]["after"] or paginations[-2]["after"]
    created = await sandbox_client.post(
        "/followers", json={"name": "Late Comer", "email": "late@example.com"}
    )
    assert created.status_code == 200
    resumed = (await sandbox_client.get("/followers", params={"after": saved})).json()
    assert idxs(resumed["data"]) == [created.json()["data"]["idx"]]


async def test_a_cursor_stays_valid_when_its_item_is_deleted(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    first = (await sandbox_client.get("/followers", params={"limit": 5})).json()
    cursor = first["pagination"]["after"]
    gone = first["data"][-1]["idx"]
    assert (await sandbox_client.delete(f"/followers/{gone}")).status_code == 200
    rest, _ = await walk(sandbox_client, "/followers", limit=50)
    after = (await sandbox_client.get("/followers", params={"after": cursor, "limit": 100})).json()
    assert idxs(after["data"]) == store_order(sandbox_app, "followers")[4:]
    assert gone not in idxs(rest)


@pytest.mark.parametrize(
    "types", ["comments", "notes", "comments|notes", "comments,notes", "notes,comments", None]
)
async def test_comment_lists_by_idea_and_type(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp, types: str | None
) -> None:
    store = sandbox_app.state.store
    seen: list[str] = []
    for idea_idx in store_order(sandbox_app, "ideas"):
        params = {"idea_idx": idea_idx}
        if types is not None:
            params["included_types"] = types
        rows, paginations = await walk(sandbox_client, "/comments", params, limit=4)
        wanted = {"notes": {"note"}, "comments": {"comment"}, None: {"comment"}}.get(
            types, {"comment", "note"}
        )
        expected = [
            c.idx
            for c in store.comments
            if c.idea_idx == idea_idx and ("note" if c.is_private else "comment") in wanted
        ]
        assert idxs(rows) == expected
        assert all(p["total"] == len(expected) for p in paginations)
        assert all(row["type"] in wanted for row in rows)
        assert all(row["idea_id"] == store.ideas.by_idx[idea_idx].id for row in rows)
        seen += idxs(rows)
    assert len(seen) == len(set(seen))
    if types in ("comments|notes", "comments,notes", "notes,comments"):
        assert sorted(seen) == sorted(store.comments.by_idx)


async def test_topics_page_by_number(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    rows, page = [], 1
    paginations = []
    while True:
        body = (await sandbox_client.get("/topics", params={"limit": 4, "offset": page})).json()
        rows += body["data"]
        paginations.append(body["pagination"])
        if body["pagination"]["after"] is None:
            break
        assert body["pagination"]["after"] == str(page + 1)
        page += 1
    assert idxs(rows) == store_order(sandbox_app, "topics")
    assert paginations[0]["before"] is None
    assert paginations[1]["before"] == "1"
    assert [row["order"] for row in rows] == sorted(row["order"] for row in rows)
    default = (await sandbox_client.get("/topics")).json()
    assert idxs(default["data"]) == idxs(rows)[:20]
    beyond = (await sandbox_client.get("/topics", params={"offset": 99})).json()
    assert beyond["data"] == [] and beyond["pagination"]["after"] is None


async def test_integration_links_by_idea_by_type_and_both(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    by_type: list[str] = []
    for link_type in sorted({link.type for link in store.links}):
        rows = await walk_links(sandbox_client, {"type": link_type})
        assert all(row["type"] == link_type for row in rows)
        by_type += idxs(rows)
    assert sorted(by_type) == sorted(store.links.by_idx)
    by_idea: list[str] = []
    for idea_idx in store_order(sandbox_app, "ideas"):
        rows = await walk_links(sandbox_client, {"idea_idx": idea_idx})
        assert all(row["idea_idx"] == idea_idx for row in rows)
        by_idea += idxs(rows)
    assert sorted(by_idea) == sorted(by_type)
    link = next(iter(store.links))
    both = await walk_links(sandbox_client, {"idea_idx": link.idea_idx, "type": link.type})
    assert link.idx in idxs(both)
    assert all(r["idea_idx"] == link.idea_idx and r["type"] == link.type for r in both)
    assert all(ISO.match(row["created_at"]) for row in both)


async def test_integration_link_last_page_and_empty_result(
    sandbox_client: httpx.AsyncClient,
) -> None:
    body = (await sandbox_client.get("/integration-links", params={"type": "nope"})).json()
    assert body == {
        "data": [],
        "pagination": {
            "total": 0,
            "count": 0,
            "hasNextPage": False,
            "startCursor": None,
            "endCursor": None,
        },
        "meta": [],
    }


async def test_announcement_filters(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    now = store.clock.now()
    every = list(store.announcements)
    published = [a.idx for a in every if a.published_at is not None and a.published_at <= now]
    unpublished = [a.idx for a in every if a.idx not in published]
    assert published and unpublished
    rows, _ = await walk(sandbox_client, "/announcements", {"is_published": "true"})
    assert idxs(rows) == published
    rows, _ = await walk(sandbox_client, "/announcements", {"is_published": "false"})
    assert idxs(rows) == unpublished
    rows, _ = await walk(sandbox_client, "/announcements", {"is_published": ""})
    assert len(rows) == len(every)

    category = next(iter(store.categories))
    other = list(store.categories)[1]
    response = await sandbox_client.get(
        "/announcements",
        params=[
            ("category_idxs[]", category),
            ("category_idxs[]", other),
            ("category_idxs[]", "cat_unknown"),
            ("limit", 100),
        ],
    )
    expected = [a.idx for a in every if {category, other} & set(a.category_idxs)]
    assert idxs(response.json()["data"]) == expected
    assert response.json()["pagination"]["total"] == len(expected)

    dated = sorted(a.published_at for a in every if a.published_at is not None)
    middle = dated[len(dated) // 2]
    from feedback_sync.sandbox.timefmt import format_iso

    moment = format_iso(middle)
    rows, _ = await walk(sandbox_client, "/announcements", {"published_after": moment})
    assert idxs(rows) == [a.idx for a in every if a.published_at and a.published_at >= middle]
    rows, _ = await walk(sandbox_client, "/announcements", {"published_before": moment})
    assert idxs(rows) == [a.idx for a in every if a.published_at and a.published_at <= middle]
    day = moment[:10]
    rows, _ = await walk(
        sandbox_client, "/announcements", {"published_after": day, "published_before": day}
    )
    assert all(row["published_at"][:10] == day for row in rows)
    assert middle in [a.published_at for a in every if a.idx in idxs(rows)]


async def test_scheduled_post_becomes_published_when_the_clock_passes_it(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    now = store.clock.now()
    scheduled = [a for a in store.announcements if a.published_at and a.published_at > now]
    assert scheduled, "tiny data should hold a scheduled post"
    post = scheduled[0]
    before = idxs((await walk(sandbox_client, "/announcements", {"is_published": "true"}))[0])
    assert post.idx not in before
    store.clock.set(post.published_at)
    after = idxs((await walk(sandbox_client, "/announcements", {"is_published": "true"}))[0])
    assert post.idx in after
    got = (await sandbox_client.get(f"/announcements/{post.idx}")).json()["data"]
    assert got["is_published"] is True


async def test_include_attributes(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    plain = (await sandbox_client.get("/followers", params={"limit": 5})).json()["data"]
    assert all("attributes" not in row and "companies" not in row for row in plain)
    full = (
        await sandbox_client.get("/followers", params={"limit": 100, "include_attributes": "true"})
    ).json()["data"]
    assert all(isinstance(row["attributes"], dict) for row in full)
    with_company = [row for row in full if row["companies"]]
    assert with_company
    company = with_company[0]["companies"][0]
    assert set(company) == {"id", "name", "monthly_spend", "attributes"}
    set_switches(sandbox_app, custom_attributes=False)
    off = (
        await sandbox_client.get("/followers", params={"limit": 5, "include_attributes": "true"})
    ).json()["data"]
    assert all("attributes" not in row for row in off)


async def test_search_followers_by_whole_email_any_case(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    follower = next(iter(sandbox_app.state.store.followers))
    body = (
        await sandbox_client.get(
            "/followers/search",
            params={"email": follower.email.upper(), "include_attributes": "true"},
        )
    ).json()
    assert idxs(body["data"]) == [follower.idx]
    assert "attributes" in body["data"][0]
    assert body["pagination"]["total"] == 1
    partial = (
        await sandbox_client.get("/followers/search", params={"email": follower.email[:-2]})
    ).json()
    assert partial["data"] == [] and partial["pagination"]["total"] == 0
    missing = await sandbox_client.get("/followers/search")
    assert missing.status_code == 400 and "email" in missing.json()["message"]


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": "101"}, "limit"), ({"limit": "0"}, "limit"), ({"after": "garbled"}, "after")],
)
async def test_search_followers_checks_limit_and_cursor_like_every_list(
    sandbox_client: httpx.AsyncClient,
    sandbox_app: SandboxApp,
    params: dict[str, str],
    field: str,
) -> None:
    follower = next(iter(sandbox_app.state.store.followers))
    response = await sandbox_client.get(
        "/followers/search", params={"email": follower.email, **params}
    )
    body = response.json()
    assert response.status_code == 400 and body["code"] == "invalid_request"
    assert field in body["message"]


async def test_search_followers_resumes_from_its_cursor(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    follower = next(iter(sandbox_app.state.store.followers))
    first = (await sandbox_client.get("/followers/search", params={"email": follower.email})).json()
    after = first["pagination"]["after"]
    assert after is not None
    again = (
        await sandbox_client.get(
            "/followers/search", params={"email": follower.email, "after": after}
        )
    ).json()
    # past the one match: nothing more, and the total still counts the match
    assert again["data"] == [] and again["pagination"]["total"] == 1


async def test_variant_after_null_on_last_page(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    set_switches(sandbox_app, last_page_after="null")
    rows, paginations = await walk(sandbox_client, "/followers", limit=7)
    assert idxs(rows) == store_order(sandbox_app, "followers")
    assert paginations[-1]["after"] is None and paginations[-1] is not paginations[0]
    assert all(p["after"] for p in paginations[:-1])


async def test_variant_repeated_cursor_on_last_page(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    set_switches(sandbox_app, last_page_after="repeat")
    first = (await sandbox_client.get("/statuses", params={"limit": 3})).json()
    cursor = first["pagination"]["after"]
    last = (await sandbox_client.get("/statuses", params={"limit": 3, "after": cursor})).json()
    assert last["pagination"]["after"] == cursor  # a naive client would loop here


@pytest.mark.parametrize("newest_first", [False, True])
async def test_variant_pages_overlap_and_the_total_is_off(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp, newest_first: bool
) -> None:
    order = "newest_first" if newest_first else "oldest_first"
    set_switches(sandbox_app, page_overlap=2, total_offset=-3, announcement_order=order)
    first = (await sandbox_client.get("/announcements", params={"limit": 5})).json()
    cursor = first["pagination"]["after"]
    second = await sandbox_client.get("/announcements", params={"limit": 5, "after": cursor})
    second_page = second.json()
    # the end of the page before, again, then the five that follow it
    assert idxs(second_page["data"][:2]) == idxs(first["data"][-2:])
    rows, _ = await walk(sandbox_client, "/announcements", limit=5)
    expected = store_order(sandbox_app, "announcements")
    expected = list(reversed(expected)) if newest_first else expected
    assert list(dict.fromkeys(idxs(rows))) == expected  # every item, some twice
    assert idxs(second_page["data"][2:]) == expected[5:10]
    assert first["pagination"]["total"] == len(expected) - 3
    idea = next(iter(sandbox_app.state.store.links)).idea_idx
    links = (await sandbox_client.get("/integration-links", params={"idea_idx": idea})).json()
    of_idea = sum(1 for link in sandbox_app.state.store.links if link.idea_idx == idea)
    assert links["pagination"]["total"] == max(0, of_idea - 3)


async def test_variant_announcements_newest_first(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    set_switches(sandbox_app, announcement_order="newest_first")
    rows, _ = await walk(sandbox_client, "/announcements", limit=5)
    assert idxs(rows) == list(reversed(store_order(sandbox_app, "announcements")))


@pytest.mark.parametrize("mode", ["iso", "plain", "mixed", "contract"])
async def test_variant_timestamp_formats(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp, mode: str
) -> None:
    set_switches(sandbox_app, timestamp_format=mode)
    followers = (await sandbox_client.get("/followers", params={"limit": 40})).json()["data"]
    idea = next(iter(sandbox_app.state.store.links)).idea_idx
    links = (await sandbox_client.get("/integration-links", params={"idea_idx": idea})).json()
    stamps = [r["created_at"] for r in followers]
    link_stamps = [r["created_at"] for r in links["data"]]
    if mode == "iso":
        assert all(ISO.match(s) for s in stamps + link_stamps)
    elif mode == "plain":
        assert all(PLAIN.match(s) for s in stamps + link_stamps)
    elif mode == "contract":
        assert all(PLAIN.match(s) for s in stamps) and all(ISO.match(s) for s in link_stamps)
    else:
        assert any(ISO.match(s) for s in stamps) and any(PLAIN.match(s) for s in stamps)


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/followers", {"limit": "0"}, "limit"),
        ("/followers", {"limit": "101"}, "limit"),
        ("/followers", {"limit": "ten"}, "limit"),
        ("/statuses", {"limit": "2.5"}, "limit"),
        ("/followers", {"after": "garbled!!"}, "after"),
        ("/followers", {"after": "YW5ub3VuY2VtZW50czoxOmFubl8x"}, "after"),  # another list's
        ("/ideas", {"after": "x"}, "after"),
        ("/topics", {"offset": "0"}, "offset"),
        ("/topics", {"offset": "-1"}, "offset"),
        ("/followers", {"include_attributes": "maybe"}, "include_attributes"),
        ("/announcements", {"is_published": "yes"}, "is_published"),
        ("/announcements", {"published_after": "last week"}, "published_after"),
        ("/announcements", {"published_before": "2025-03-04T05:06:07"}, "published_before"),
        ("/comments", {}, "idea_idx"),
        ("/integration-links", {}, "idea_idx"),
    ],
)
async def test_bad_list_requests_are_400_naming_the_field(
    sandbox_client: httpx.AsyncClient, path: str, params: dict[str, str], field: str
) -> None:
    response = await sandbox_client.get(path, params=params)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] is True and body["code"] == "invalid_request"
    assert field in body["message"]


async def test_bad_included_types_is_400(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    idea = store_order(sandbox_app, "ideas")[0]
    response = await sandbox_client.get(
        "/comments", params={"idea_idx": idea, "included_types": "comments;votes"}
    )
    assert response.status_code == 400 and "included_types" in response.json()["message"]


@pytest.mark.parametrize("path", ["/comments", "/integration-links"])
async def test_unknown_idea_is_404(sandbox_client: httpx.AsyncClient, path: str) -> None:
    response = await sandbox_client.get(path, params={"idea_idx": "ide_missing"})
    assert response.status_code == 404
    assert response.json() == {
        "error": True,
        "message": "idea 'ide_missing' not found",
        "code": "not_found",
    }


async def test_ideas_endpoint_switch(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    set_switches(sandbox_app, ideas_endpoint=False)
    response = await sandbox_client.get("/ideas")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def _companies(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for row in rows for c in row.get("companies", ())}


async def test_company_numbers_drift_by_seed_and_custom_fields_can_sit_at_the_top_level(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    params = {"include_attributes": "true"}
    plain, _ = await walk(sandbox_client, "/followers", params, limit=50)
    assert all("seats" in c["attributes"] for c in _companies(plain).values())
    set_switches(sandbox_app, number_drift=1, company_fields="top_level")
    first, _ = await walk(sandbox_client, "/followers", params, limit=50)
    companies = _companies(first)
    assert all(c["attributes"] == {} and "seats" in c for c in companies.values())
    spends = [c["monthly_spend"] for c in companies.values() if "monthly_spend" in c]
    kinds = {type(v).__name__ for v in spends}
    assert kinds == {"int", "float", "str"}, kinds
    assert any(isinstance(v, float) and not v.is_integer() for v in spends)
    # the ground truth is what was served, drift included
    dump = (await sandbox_client.get("http://sandbox/_sandbox/dump")).json()
    assert _companies(dump["followers"]) == companies
    # another seed drifts the same companies again: some change type between two reads
    set_switches(sandbox_app, number_drift=2)
    second = _companies((await walk(sandbox_client, "/followers", params, limit=50))[0])
    changed = [
        cid
        for cid, c in companies.items()
        if type(c.get("seats")) is not type(second[cid].get("seats"))
    ]
    assert changed
