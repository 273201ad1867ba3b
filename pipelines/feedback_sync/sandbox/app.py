"""Assembles the sandbox: one ASGI app holding a store, its switches, and its log.

``create_app()`` returns an ASGI callable usable three ways: in-process through
``httpx.ASGITransport`` (or ``feedback_sync.sandbox.testing.SandboxTransport``), on loopback under
uvicorn (``feedback-sync sandbox``), and from the pytest fixture in
``feedback_sync.sandbox.testing``.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from feedback_sync.sandbox.api import V1
from feedback_sync.sandbox.control import Control
from feedback_sync.sandbox.errors import HANDLED, answer_error, error_response
from feedback_sync.sandbox.guard import Guard
from feedback_sync.sandbox.openapi import openapi_document
from feedback_sync.sandbox.seed import REFERENCE_NOW, build_store
from feedback_sync.sandbox.settings import Settings
from feedback_sync.sandbox.state import SandboxState
from feedback_sync.sandbox.timefmt import Clock

GZIP_MINIMUM_BYTES = 500


class SandboxApp:
    """The ASGI app; ``.state`` is the sandbox behind it."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state
        v1 = V1(state)
        control = Control(state)
        spec = orjson.dumps(openapi_document())

        async def openapi(request: Request) -> Response:
            return Response(spec, media_type="application/json")

        async def http_error(request: Request, exc: Exception) -> Response:
            assert isinstance(exc, HTTPException)
            message = "not found" if exc.status_code == 404 else str(exc.detail).lower()
            return error_response(
                exc.status_code,
                f"{message}: {request.method} {request.url.path}",
                headers=dict(exc.headers) if exc.headers else None,
            )

        async def server_error(request: Request, exc: Exception) -> Response:
            return error_response(500, "Internal server error")

        routed = Starlette(
            routes=[*v1.routes(), *control.routes(), Route("/openapi.json", openapi)],
            exception_handlers={
                HTTPException: http_error,
                **dict.fromkeys(HANDLED, answer_error),
                Exception: server_error,
            },
        )
        # a slash redirect would echo the query string, ?api_key= included: 404 instead
        routed.router.redirect_slashes = False
        self._routed = routed
        self._app = Guard(routed, state)
        # the ``gzip`` switch: real services compress JSON for a client that asks
        self._gzipped = GZipMiddleware(self._app, minimum_size=GZIP_MINIMUM_BYTES)

    @contextlib.contextmanager
    def route_added(
        self,
        path: str,
        endpoint: Callable[[Request], Awaitable[Response]],
        method: str = "GET",
    ) -> Iterator[None]:
        """Serves ``endpoint`` at ``/v1<path>`` for the block, behind the same key check,
        rate limit and faults as every route: a test's resource the API does not have."""
        route = Route(f"/v1{path}", endpoint, methods=[method])
        self._routed.router.routes.insert(0, route)
        try:
            yield
        finally:
            self._routed.router.routes.remove(route)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._gzipped if self.state.settings.gzip else self._app
        await app(scope, receive, send)


def create_app(
    scale: str = "tiny",
    seed: int = 1,
    *,
    api_key: str | None = None,
    settings: dict[str, Any] | None = None,
) -> SandboxApp:
    """A sandbox with the seeded company at ``scale``.

    Args:
        api_key: the key clients must present; a random one when omitted.
        settings: switches to apply at start, as ``POST /_sandbox/settings`` takes them.
    """
    store = build_store(scale, seed, Clock(REFERENCE_NOW))
    state = SandboxState(store, Settings(api_key or secrets.token_urlsafe(24)), scale, seed)
    if settings:
        state.configure(settings)
    return SandboxApp(state)
