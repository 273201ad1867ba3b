"""Auth methods, rate limits, latency and every injected fault, in-process and on loopback."""

from __future__ import annotations

import base64
import json
import time

import httpx
import pytest
from feedback_sync.sandbox.app import SandboxApp
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.sandbox.testing import TEST_API_KEY, SandboxTransport

from tests.sandbox.helpers import set_switches


def client(app: SandboxApp, **kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=SandboxTransport(app),
        base_url="http://sandbox/v1",
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    "how",
    [
        {"headers": {"Authorization": f"Bearer {TEST_API_KEY}"}},
        {"headers": {"Authorization": f"bearer {TEST_API_KEY}"}},
        {"params": {"api_key": TEST_API_KEY}},
        {
            "headers": {
                "Authorization": "Basic " + base64.b64encode(f"{TEST_API_KEY}:".encode()).decode()
            }
        },
    ],
)
async def test_each_auth_method_works(
    sandbox_app: SandboxApp, how: dict[str, dict[str, str]]
) -> None:
    async with client(sandbox_app) as c:
        response = await c.get("/statuses", **how)  # type: ignore[arg-type]
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ({}, "missing API key"),
        ({"headers": {"Authorization": "Bearer wrong"}}, "invalid API key"),
        ({"params": {"api_key": "wrong"}}, "invalid API key"),
        (
            {"headers": {"Authorization": "Basic " + base64.b64encode(b"test-key:pw").decode()}},
            "API key",
        ),
        ({"headers": {"Authorization": "Basic !!!"}}, "API key"),
        ({"headers": {"Authorization": f"Token {TEST_API_KEY}"}}, "API key"),
        ({"headers": {"X-Api-Key": TEST_API_KEY}}, "missing API key"),
    ],
)
async def test_anything_else_is_401(
    sandbox_app: SandboxApp, how: dict[str, dict[str, str]], message: str
) -> None:
    async with client(sandbox_app) as c:
        response = await c.get("/followers", **how)  # type: ignore[arg-type]
    assert response.status_code == 401
    body = response.json()
    assert body["code"] == "unauthenticated" and body["error"] is True
    assert message in body["message"]
    assert TEST_API_KEY not in response.text


async def test_the_key_never_reaches_the_request_log(sandbox_app: SandboxApp) -> None:
    async with client(sandbox_app) as c:
        await c.get("/statuses", params={"api_key": TEST_API_KEY, "limit": 2})
        await c.get("/statuses", params={"api_key": "a-wrong-guess"})
    async with httpx.AsyncClient(
        transport=SandboxTransport(sandbox_app), base_url="http://sandbox"
    ) as control:
        log = (await control.get("/_sandbox/requests")).text
    assert TEST_API_KEY not in log and "a-wrong-guess" not in log
    assert "***" in log


async def test_rate_limit_answers_429_with_retry_after_and_headers(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    set_switches(sandbox_app, rate_limit_per_second=3)
    statuses = []
    for _ in range(6):
        response = await sandbox_client.get("/statuses", params={"limit": 1})
        statuses.append(response.status_code)
        assert response.headers["X-RateLimit-Limit"] == "3"
        assert int(response.headers["X-RateLimit-Remaining"]) >= 0
    assert statuses[:3] == [200, 200, 200]
    assert 429 in statuses[3:]
    limited = response if response.status_code == 429 else None
    assert limited is not None
    assert limited.json()["code"] == "rate_limited"
    assert int(limited.headers["Retry-After"]) >= 1
    set_switches(sandbox_app, rate_limit_per_second=None)
    response = await sandbox_client.get("/statuses")
    assert response.status_code == 200 and "X-RateLimit-Limit" not in response.headers


async def test_added_latency_delays_each_answer(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    set_switches(sandbox_app, latency_ms=150)
    started = time.perf_counter()
    await sandbox_client.get("/statuses")
    await sandbox_client.get("/statuses")
    assert time.perf_counter() - started >= 0.3  # a lower bound only: it cannot flake


def script(app: SandboxApp, kind: str, count: int = 1, **extra: str) -> None:
    set_switches(app, faults={"script": [{"kind": kind, "count": count, **extra}]})


@pytest.mark.parametrize(
    ("kind", "status"), [("429", 429), ("429_bare", 429), ("500", 500), ("503", 503)]
)
async def test_scripted_json_faults(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient, kind: str, status: int
) -> None:
    script(sandbox_app, kind, count=2, path_prefix="/v1/followers")
    other = await sandbox_client.get("/statuses")
    assert other.status_code == 200  # the script names another path
    for _ in range(2):
        response = await sandbox_client.get("/followers")
        assert response.status_code == status
        assert response.json()["error"] is True
        if kind in ("429", "503"):
            assert response.headers["Retry-After"] == "1"
        else:
            assert "Retry-After" not in response.headers
    assert (await sandbox_client.get("/followers")).status_code == 200


async def test_502_is_an_html_page(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    script(sandbox_app, "502")
    response = await sandbox_client.get("/followers")
    assert response.status_code == 502
    assert response.headers["content-type"].startswith("text/html")
    with pytest.raises(json.JSONDecodeError):
        response.json()


async def test_truncated_body_is_complete_http_but_broken_json(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    script(sandbox_app, "truncate")
    response = await sandbox_client.get("/followers", params={"limit": 20})
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    with pytest.raises(json.JSONDecodeError):
        response.json()


async def test_dropped_connection_in_process_looks_like_a_socket_error(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    script(sandbox_app, "drop", method="POST")
    with pytest.raises(httpx.RemoteProtocolError):
        await sandbox_client.post("/topics", json={"name": "Lost answer"})
    # the write happened even though the answer was lost: clients must be idempotent
    assert any(t.name == "Lost answer" for t in sandbox_app.state.store.topics)


async def test_the_log_tells_a_resent_write_from_another(
    sandbox_app: SandboxApp, sandbox_client: httpx.AsyncClient
) -> None:
    for name in ("Resent", "Resent", "Other"):
        await sandbox_client.post("/topics", json={"name": name})
    await sandbox_client.get("/topics")
    log = sandbox_app.state.log.since(0)
    shas = [e.body_sha256 for e in log if e.path.startswith("/v1/")]
    assert shas[0] == shas[1] != shas[2] and shas[3] is None
    assert len(shas[0] or "") == 64


async def test_stall_times_out_the_client(sandbox_app: SandboxApp) -> None:
    set_switches(sandbox_app, faults={"stall_seconds": 5})
    script(sandbox_app, "stall")
    async with client(
        sandbox_app, headers={"Authorization": f"Bearer {TEST_API_KEY}"}, timeout=0.2
    ) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.get("/statuses")
        assert (await c.get("/statuses")).status_code == 200


@pytest.mark.slow
def test_faults_over_a_real_socket(live_sandbox: RunningSandbox) -> None:
    app = live_sandbox.app
    set_switches(app, faults={"stall_seconds": 3})
    headers = {"Authorization": f"Bearer {live_sandbox.api_key}"}
    with httpx.Client(base_url=live_sandbox.base_url, headers=headers, timeout=0.5) as c:
        script(app, "drop")
        with pytest.raises(httpx.RemoteProtocolError):
            c.get("/followers")
        script(app, "stall")
        with pytest.raises(httpx.ReadTimeout):
            c.get("/followers")
        script(app, "truncate")
        response = c.get("/followers")
        assert response.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            response.json()
        assert c.get("/followers").status_code == 200


async def test_seeded_fault_rate_is_reproducible(sandbox_app: SandboxApp) -> None:
    async def run() -> list[str | None]:
        set_switches(
            sandbox_app,
            faults={"rate": 0.3, "seed": 42, "kinds": ["429", "500", "502", "503", "truncate"]},
        )
        seen: list[str | None] = []
        async with client(sandbox_app, headers={"Authorization": f"Bearer {TEST_API_KEY}"}) as c:
            start = sandbox_app.state.log.last_seq
            for _ in range(60):
                await c.get("/statuses")
            seen = [e.fault for e in sandbox_app.state.log.since(start)]
        return seen

    first, second = await run(), await run()
    assert first == second
    faults = [f for f in first if f]
    assert 8 <= len(faults) <= 30
    assert len(set(faults)) >= 3
