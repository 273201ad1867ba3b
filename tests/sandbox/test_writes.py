"""Every write operation answers as the spec and contract say, with its side effects."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from feedback_sync.sandbox.app import SandboxApp

from tests.sandbox.helpers import idxs, set_switches, store_order, walk

DELETED = {"success": True}


def error(response: httpx.Response, status: int, *words: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["error"] is True and isinstance(body["code"], str)
    for word in words:
        assert word in body["message"], body
    return body


async def test_follower_create_update_merge_and_delete(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    created = await sandbox_client.post(
        "/followers",
        params={"include_attributes": "true"},
        json={
            "name": "Zoë Ødegaard",
            "email": "Zoe@Example.com",
            "attributes": {"plan": "pro", "NPS score": 9},
            "companies": [
                {"id": "c-1", "name": "Nordwind", "monthly_spend": 120.5, "plan": "gold"}
            ],
        },
    )
    assert created.status_code == 200
    follower = created.json()["data"]
    assert follower["name"] == "Zoë Ødegaard" and follower["email"] == "Zoe@Example.com"
    assert follower["created_at"] == follower["updated_at"]
    assert follower["companies"] == [
        {"id": "c-1", "name": "Nordwind", "monthly_spend": 120.5, "attributes": {"plan": "gold"}}
    ]
    idx = follower["idx"]
    assert idx.startswith("flw_")

    updated = await sandbox_client.post(
        f"/followers/{idx}",
        params={"include_attributes": "true"},
        json={
            "attributes": {"plan": "enterprise", "beta-tester": True},
            "companies": [
                {"id": "c-1", "name": "Nordwind AB", "seats": 40},
                {"id": "c-2", "name": "Café Étoile"},
            ],
        },
    )
    data = updated.json()["data"]
    assert data["attributes"] == {"plan": "enterprise", "NPS score": 9, "beta-tester": True}
    assert [c["id"] for c in data["companies"]] == ["c-1", "c-2"]
    assert data["companies"][0] == {
        "id": "c-1",
        "name": "Nordwind AB",
        "monthly_spend": 120.5,
        "attributes": {"plan": "gold", "seats": 40},
    }
    assert data["updated_at"] > data["created_at"]
    assert data["name"] == "Zoë Ødegaard"

    empty = await sandbox_client.post(f"/followers/{idx}")
    assert empty.status_code == 200

    search = await sandbox_client.get("/followers/search", params={"email": "zoe@example.COM"})
    assert idxs(search.json()["data"]) == [idx]

    assert (await sandbox_client.delete(f"/followers/{idx}")).json() == {
        "success": True,
        "message": "Follower deleted",
    }
    assert idx not in sandbox_app.state.store.followers.by_idx
    error(await sandbox_client.delete(f"/followers/{idx}"), 404, idx)
    error(await sandbox_client.post(f"/followers/{idx}", json={"name": "x"}), 404, idx)


async def test_follower_email_is_unique_case_insensitive(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    taken = next(iter(sandbox_app.state.store.followers)).email
    error(
        await sandbox_client.post("/followers", json={"name": "A", "email": taken.upper()}),
        400,
        "email",
    )
    other = list(sandbox_app.state.store.followers)[1]
    error(await sandbox_client.post(f"/followers/{other.idx}", json={"email": taken}), 400, "email")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"email": "a@b.c"}, "name"),
        ({"name": "A"}, "email"),
        ({"name": 5, "email": "a@b.c"}, "name"),
        ({"name": "A", "email": "not-an-email"}, "email"),
        ({"name": "A", "email": "a@b.c", "attributes": ["x"]}, "attributes"),
        ({"name": "A", "email": "a@b.c", "attributes": {"k": {"nested": 1}}}, "attributes.k"),
        ({"name": "A", "email": "a@b.c", "companies": {"id": "1"}}, "companies"),
        ({"name": "A", "email": "a@b.c", "companies": [{"id": 1, "name": "X"}]}, "companies[0].id"),
        ({"name": "A", "email": "a@b.c", "companies": [{"id": "1"}]}, "companies[0].name"),
        (
            {
                "name": "A",
                "email": "a@b.c",
                "companies": [{"id": "1", "name": "X", "monthly_spend": "lots"}],
            },
            "companies[0].monthly_spend",
        ),
    ],
)
async def test_follower_create_validation(
    sandbox_client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    error(await sandbox_client.post("/followers", json=body), 400, field)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"", b"null"])
async def test_invalid_json_bodies_are_400(sandbox_client: httpx.AsyncClient, raw: bytes) -> None:
    response = await sandbox_client.post(
        "/followers", content=raw, headers={"Content-Type": "application/json"}
    )
    body = error(response, 400, "body")
    assert body["code"] == "invalid_request"


async def test_custom_attributes_disabled_is_403(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    set_switches(sandbox_app, custom_attributes=False)
    body = error(
        await sandbox_client.post(
            "/followers", json={"name": "A", "email": "a@example.com", "attributes": {"k": "v"}}
        ),
        403,
        "custom attributes",
    )
    assert body["code"] == "custom_attributes_disabled"
    idx = store_order(sandbox_app, "followers")[0]
    error(await sandbox_client.post(f"/followers/{idx}", json={"companies": []}), 403)
    plain = await sandbox_client.post("/followers", json={"name": "A", "email": "a@example.com"})
    assert plain.status_code == 200 and "attributes" not in plain.json()["data"]


async def test_delete_follower_with_content_delete_removes_comments(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    author = next(idx for idx, owned in store.comments_by_follower.items() if owned)
    owned = set(store.comments_by_follower[author])
    ideas = {store.comments.by_idx[c].idea_idx for c in owned}
    before = {
        i: store.ideas.by_idx[i].comment_count + store.ideas.by_idx[i].note_count for i in ideas
    }
    response = await sandbox_client.delete(f"/followers/{author}", params={"content": "delete"})
    assert response.json() == {"success": True, "message": "Follower deleted"}
    assert not owned & set(store.comments.by_idx)
    after = {
        i: store.ideas.by_idx[i].comment_count + store.ideas.by_idx[i].note_count for i in ideas
    }
    assert sum(before.values()) - sum(after.values()) == len(owned)


async def test_delete_follower_with_reassign_moves_comments_to_anonymous(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    authors = [idx for idx, owned in store.comments_by_follower.items() if owned][:2]
    moved = set().union(*(store.comments_by_follower[a] for a in authors))
    for author in authors:
        response = await sandbox_client.delete(
            f"/followers/{author}", params={"content": "reassign"}
        )
        assert response.status_code == 200
    anonymous = store.followers.by_idx[store.anonymous_follower_idx or ""]
    assert anonymous.name == "Anonymous"
    assert all(store.comments.by_idx[c].follower_idx == anonymous.idx for c in moved)
    anonymous_rows = [f for f in store.followers if f.name == "Anonymous"]
    assert len(anonymous_rows) == 1


async def test_delete_follower_bad_content_is_400(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    idx = store_order(sandbox_app, "followers")[0]
    error(
        await sandbox_client.delete(f"/followers/{idx}", params={"content": "archive"}),
        400,
        "content",
    )
    assert idx in sandbox_app.state.store.followers.by_idx


def announcement_body(app: SandboxApp, **overrides: Any) -> dict[str, Any]:
    store = app.state.store
    body = {
        "name": "Dark mode is here",
        "author_idx": next(iter(store.users)),
        "content": "## Dark mode\n\nIt is **here**. See [docs](https://docs.example.com).",
        "idea_idxs": store_order(app, "ideas")[:2],
        "category_idxs": list(store.categories)[:1],
    }
    return body | overrides


async def test_announcement_lifecycle(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    draft = (
        await sandbox_client.post("/announcements", json=announcement_body(sandbox_app))
    ).json()["data"]
    assert draft["published_at"] is None and draft["is_published"] is False
    assert draft["slug"] == "dark-mode-is-here"
    assert draft["content_html"].startswith("<h2>Dark mode</h2>")
    assert "<strong>here</strong>" in draft["content_html"]
    assert draft["excerpt"] == "Dark mode It is here. See docs."
    assert [i["idx"] for i in draft["ideas"]] == store_order(sandbox_app, "ideas")[:2]
    assert draft["reaction_count"] == {}
    assert set(draft["author"]) == {"idx", "name", "avatar"}
    again = (
        await sandbox_client.post("/announcements", json=announcement_body(sandbox_app))
    ).json()["data"]
    assert again["slug"] == "dark-mode-is-here-2"

    idx = draft["idx"]
    got = (await sandbox_client.get(f"/announcements/{idx}")).json()["data"]
    assert got == draft
    published = (
        await sandbox_client.post(
            f"/announcements/{idx}",
            json=announcement_body(sandbox_app, published_at="2026-10-01T10:00:00Z", idea_idxs=[]),
        )
    ).json()["data"]
    assert published["is_published"] is True
    assert published["published_at"] == "2026-10-01 10:00:00"
    assert published["ideas"] == []
    assert published["updated_at"] > draft["updated_at"]
    future = (
        await sandbox_client.post(
            f"/announcements/{idx}", json=announcement_body(sandbox_app, published_at="2030-01-01")
        )
    ).json()["data"]
    assert future["is_published"] is False and future["published_at"] == "2030-01-01 00:00:00"

    assert (await sandbox_client.delete(f"/announcements/{idx}")).json() == {
        "success": True,
        "message": "Announcement deleted",
    }
    error(await sandbox_client.get(f"/announcements/{idx}"), 404, idx)
    error(await sandbox_client.delete(f"/announcements/{idx}"), 404)
    error(
        await sandbox_client.post(f"/announcements/{idx}", json=announcement_body(sandbox_app)), 404
    )


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"name": None}, "name"),
        ({"author_idx": "usr_nobody"}, "author_idx"),
        ({"author_idx": None}, "author_idx"),
        ({"content": 3}, "content"),
        ({"idea_idxs": ["ide_nope"]}, "idea_idxs"),
        ({"idea_idxs": "ide_x"}, "idea_idxs"),
        ({"category_idxs": ["cat_nope"]}, "category_idxs"),
        ({"published_at": "soon"}, "published_at"),
        ({"published_at": 12}, "published_at"),
    ],
)
async def test_announcement_validation(
    sandbox_client: httpx.AsyncClient,
    sandbox_app: SandboxApp,
    overrides: dict[str, Any],
    field: str,
) -> None:
    body = {k: v for k, v in announcement_body(sandbox_app, **overrides).items() if v is not None}
    error(await sandbox_client.post("/announcements", json=body), 400, field)
    idx = store_order(sandbox_app, "announcements")[0]
    error(await sandbox_client.post(f"/announcements/{idx}", json=body), 400, field)


async def test_comment_lifecycle_bumps_idea_counts(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    idea = next(iter(store.ideas))
    counts = (idea.comment_count, idea.note_count)
    author = store_order(sandbox_app, "followers")[3]
    message = "First paragraph 🎉\nsame paragraph\n\nSecond <b>para</b>"
    note = (
        await sandbox_client.post(
            "/comments",
            json={
                "author_idx": author,
                "idea_idx": idea.idx,
                "message": message,
                "is_private": True,
            },
        )
    ).json()["data"]
    assert note["type"] == "note" and note["is_private"] is True
    assert note["idea_id"] == idea.id
    assert note["follower"]["idx"] == author
    assert note["content"] == [
        {"type": "paragraph", "children": [{"text": "First paragraph 🎉\nsame paragraph"}]},
        {"type": "paragraph", "children": [{"text": "Second <b>para</b>"}]},
    ]
    assert note["content_html"] == (
        "<p>First paragraph 🎉\nsame paragraph</p><p>Second &lt;b&gt;para&lt;/b&gt;</p>"
    )
    assert note["content_markdown"] == message
    assert (idea.comment_count, idea.note_count) == (counts[0], counts[1] + 1)
    idea_row = next(r for r in (await walk(sandbox_client, "/ideas"))[0] if r["idx"] == idea.idx)
    assert idea_row["updated_at"] == note["created_at"]

    public = (
        await sandbox_client.post(
            "/comments", json={"author_idx": author, "idea_idx": idea.idx, "message": "hello"}
        )
    ).json()["data"]
    assert public["type"] == "comment" and public["is_private"] is False

    edited = (
        await sandbox_client.post(f"/comments/{note['idx']}", json={"message": "changed"})
    ).json()["data"]
    assert edited["message"] == "changed" and edited["content_markdown"] == "changed"
    assert edited["content"] == [{"type": "paragraph", "children": [{"text": "changed"}]}]
    assert edited["updated_at"] > note["updated_at"]
    assert edited["created_at"] == note["created_at"]

    assert (await sandbox_client.delete(f"/comments/{note['idx']}")).json() == {
        "success": True,
        "message": "Comment deleted",
    }
    assert (idea.comment_count, idea.note_count) == (counts[0] + 1, counts[1])
    error(await sandbox_client.delete(f"/comments/{note['idx']}"), 404)
    error(await sandbox_client.post(f"/comments/{note['idx']}", json={"message": "x"}), 404)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"idea_idx": "IDEA", "message": "m"}, "author_idx"),
        ({"author_idx": "AUTHOR", "message": "m"}, "idea_idx"),
        ({"author_idx": "AUTHOR", "idea_idx": "IDEA"}, "message"),
        (
            {"author_idx": "AUTHOR", "idea_idx": "IDEA", "message": "m", "is_private": "yes"},
            "is_private",
        ),
        ({"author_idx": "flw_nobody", "idea_idx": "IDEA", "message": "m"}, "author_idx"),
        ({"author_idx": "AUTHOR", "idea_idx": "ide_nope", "message": "m"}, "idea_idx"),
    ],
)
async def test_comment_validation(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp, body: dict[str, Any], field: str
) -> None:
    real = {
        "AUTHOR": store_order(sandbox_app, "followers")[0],
        "IDEA": store_order(sandbox_app, "ideas")[0],
    }
    body = {k: real.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    error(await sandbox_client.post("/comments", json=body), 400, field)
    comment = store_order(sandbox_app, "comments")[0]
    error(await sandbox_client.post(f"/comments/{comment}", json={"message": ""}), 400, "message")


async def test_topics_unwrapped_and_delete_updates_ideas(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    created = (await sandbox_client.post("/topics")).json()
    assert created["name"] == "New topic" and "data" not in created
    assert created["order"] == len(store.topics) and created["idea_count"] == 0
    renamed = (
        await sandbox_client.post(f"/topics/{created['idx']}", json={"name": "Exports"})
    ).json()
    assert renamed["name"] == "Exports" and renamed["idx"] == created["idx"]

    used = next(t for t in store.topics if store.topic_idea_count[t.idx] > 0)
    users = [i for i in store.ideas if used.idx in i.topic_idxs]
    listed = {
        t["idx"]: t
        for t in (await sandbox_client.get("/topics", params={"limit": 100})).json()["data"]
    }
    assert listed[used.idx]["idea_count"] == len(users)
    assert (await sandbox_client.delete(f"/topics/{used.idx}")).json() == {
        "success": True,
        "message": "Topic deleted",
    }
    assert all(used.idx not in i.topic_idxs for i in users)
    error(await sandbox_client.post(f"/topics/{used.idx}", json={"name": "x"}), 404)
    error(await sandbox_client.delete(f"/topics/{used.idx}"), 404)
    error(await sandbox_client.post("/topics", json={"name": 7}), 400, "name")


async def test_statuses_unwrapped_palette_and_in_use_delete(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    store = sandbox_app.state.store
    created = await sandbox_client.post("/statuses", json={"name": "Beta", "color": "#000000"})
    status = created.json()
    assert created.status_code == 200 and "data" not in status
    assert status["color"].startswith("#") and status["color"] != "#000000"
    renamed = (
        await sandbox_client.post(f"/statuses/{status['idx']}", json={"name": "Public beta"})
    ).json()
    assert renamed["name"] == "Public beta"
    assert (await sandbox_client.delete(f"/statuses/{status['idx']}")).json() == {
        "success": True,
        "message": "Status deleted",
    }
    in_use = next(i.status_idx for i in store.ideas if i.status_idx)
    error(await sandbox_client.delete(f"/statuses/{in_use}"), 400, "in use")
    error(await sandbox_client.post("/statuses", json={}), 400, "name")
    error(await sandbox_client.post("/statuses/sts_nope", json={"name": "x"}), 404)
    error(await sandbox_client.delete("/statuses/sts_nope"), 404)


async def test_unknown_routes_and_methods_answer_json(sandbox_client: httpx.AsyncClient) -> None:
    assert error(await sandbox_client.get("/votes"), 404)["code"] == "not_found"
    assert error(await sandbox_client.put("/followers"), 405)["code"] == "method_not_allowed"


async def test_nested_company_attributes_are_named_in_the_error(
    sandbox_client: httpx.AsyncClient,
) -> None:
    body = {
        "name": "A",
        "email": "a@b.c",
        "companies": [{"id": "1", "name": "X", "attributes": {"tier": ["gold"]}}],
    }
    error(await sandbox_client.post("/followers", json=body), 400, "companies[0].attributes.tier")
