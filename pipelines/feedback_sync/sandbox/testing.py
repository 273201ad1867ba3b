"""Helpers for tests: an in-process transport faithful to faults, and pytest fixtures.

Use as a pytest plugin (``pytest_plugins = ["feedback_sync.sandbox.testing"]``):

- ``sandbox_app``: a fresh ``tiny`` sandbox app (seed 1, key ``test-key``);
- ``sandbox_client``: an ``httpx.AsyncClient`` bound to it in-process;
- ``live_sandbox``: the same app served on a free loopback port, stopped after the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from feedback_sync.sandbox.app import SandboxApp, create_app
from feedback_sync.sandbox.faults import DroppedConnection
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread

TEST_API_KEY = "test-key"


class SandboxTransport(httpx.AsyncBaseTransport):
    """``httpx.ASGITransport`` that fails like a socket would.

    A dropped connection surfaces as ``httpx.RemoteProtocolError`` and a stalled answer as
    ``httpx.ReadTimeout`` (after the request's read timeout), as they do over the network.
    """

    def __init__(self, app: SandboxApp) -> None:
        self._inner = httpx.ASGITransport(app=app)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = (request.extensions.get("timeout") or {}).get("read")
        try:
            call = self._inner.handle_async_request(request)
            return await (asyncio.wait_for(call, timeout) if timeout else call)
        except DroppedConnection as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from None
        except TimeoutError:
            raise httpx.ReadTimeout("the sandbox's answer stalled", request=request) from None


@pytest.fixture
def sandbox_app() -> SandboxApp:
    return create_app("tiny", 1, api_key=TEST_API_KEY)


@pytest.fixture
async def sandbox_client(sandbox_app: SandboxApp) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=SandboxTransport(sandbox_app),
        base_url="http://sandbox/v1",
        headers={"Authorization": f"Bearer {TEST_API_KEY}"},
    ) as client:
        yield client


@pytest.fixture
def live_sandbox(sandbox_app: SandboxApp) -> Iterator[RunningSandbox]:
    with serve_in_thread(sandbox_app) as running:
        yield running
