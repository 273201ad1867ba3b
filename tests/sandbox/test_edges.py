"""Edge cases: each pins a bug or deviation found in review so it cannot come back."""

from __future__ import annotations

import httpx
import pytest
from feedback_sync.sandbox.app import SandboxApp
from feedback_sync.sandbox.testing import TEST_API_KEY, SandboxTransport

from tests.sandbox.helpers import idxs, set_switches, store_order, walk


@pytest.mark.parametrize(
    "moment", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "1800-01-01"]
)
async def test_out_of_range_published_at_is_400_and_not_stored(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp, moment: str
) -> None:
    before = len(sandbox_app.state.store.announcements)
    response = await sandbox_client.post(
        "/announcements",
        json={
            "name": "Far",
            "author_idx": next(iter(sandbox_app.state.store.users)),
            "content": "x",
            "published_at": moment,
        },
    )
    assert response.status_code == 400 and "published_at" in response.json()["message"]
    assert len(sandbox_app.state.store.announcements) == before
    assert (await sandbox_client.get("/announcements", params={"limit": 100})).status_code == 200


async def test_running_clock_resume_sees_every_item_created_in_the_same_second(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    sandbox_app.state.store.clock.set(running=True)
    _, paginations = await walk(sandbox_client, "/followers", limit=100)
    saved = next(p["after"] for p in reversed(paginations) if p["after"])
    created = []
    for n in range(6):
        response = await sandbox_client.post(
            "/followers", json={"name": f"Burst {n}", "email": f"burst{n}@example.com"}
        )
        created.append(response.json()["data"]["idx"])
    stamps = {sandbox_app.state.store.followers.by_idx[idx].created for idx in created}
    assert len(stamps) < len(created)  # several share a second: the case that broke
    resumed = (await sandbox_client.get("/followers", params={"after": saved})).json()
    assert idxs(resumed["data"]) == created


async def test_trailing_slash_is_404_and_never_echoes_the_key(sandbox_app: SandboxApp) -> None:
    async with httpx.AsyncClient(
        transport=SandboxTransport(sandbox_app), base_url="http://sandbox/v1"
    ) as client:
        response = await client.get("/followers/", params={"api_key": TEST_API_KEY})
    assert response.status_code == 404
    assert TEST_API_KEY not in response.text and TEST_API_KEY not in str(response.headers)


async def test_follower_writes_show_attributes_only_when_asked(
    sandbox_client: httpx.AsyncClient,
) -> None:
    body = {"name": "A", "email": "a@example.com", "companies": [{"id": "c9", "name": "C"}]}
    plain = (await sandbox_client.post("/followers", json=body)).json()["data"]
    assert "attributes" not in plain and "companies" not in plain
    full = (
        await sandbox_client.post(
            f"/followers/{plain['idx']}", json={}, params={"include_attributes": "true"}
        )
    ).json()["data"]
    # a company created without monthly_spend leaves the number out rather than sending null
    assert full["companies"] == [{"id": "c9", "name": "C", "attributes": {}}]


async def test_follower_update_checks_the_idx_before_the_body(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    response = await sandbox_client.post("/followers/flw_nope", json={"name": 5})
    assert response.status_code == 404
    set_switches(sandbox_app, custom_attributes=False)
    response = await sandbox_client.post("/followers/flw_nope", json={"attributes": {"k": 1}})
    assert response.status_code == 404


@pytest.mark.parametrize("raw", ["5\n", "٣", " 5", "+5"])
async def test_limit_must_be_plain_ascii_digits(
    sandbox_client: httpx.AsyncClient, raw: str
) -> None:
    response = await sandbox_client.get("/followers", params={"limit": raw})
    assert response.status_code == 400


async def test_unknown_auth_scheme_falls_back_to_the_query_key(sandbox_app: SandboxApp) -> None:
    async with httpx.AsyncClient(
        transport=SandboxTransport(sandbox_app), base_url="http://sandbox/v1"
    ) as client:
        response = await client.get(
            "/statuses",
            params={"api_key": TEST_API_KEY},
            headers={"Authorization": "Token whatever"},
        )
    assert response.status_code == 200


async def test_null_topic_name_means_not_given(
    sandbox_client: httpx.AsyncClient, sandbox_app: SandboxApp
) -> None:
    created = (await sandbox_client.post("/topics", json={"name": None})).json()
    assert created["name"] == "New topic"
    idx = store_order(sandbox_app, "topics")[0]
    kept = (await sandbox_client.post(f"/topics/{idx}", json={"name": None})).json()
    assert kept["name"] == sandbox_app.state.store.topics.by_idx[idx].name
