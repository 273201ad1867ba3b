"""Assembles the sandbox: one ASGI app holding a store, its switches, and its log.

``create_app()`` returns an ASGI callable usable three ways: in-process through
``httpx.ASGITransport`` (or ``sandbox.testing.SandboxTransport``), on loopback under
uvicorn (``feedback-sync sandbox``), and from the pytest fixture in ``sandbox.testing``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from sandbox.api import V1
from sandbox.control import Control
from sandbox.errors import HANDLED, answer_error, error_response
from sandbox.faults import FaultInjector, RateLimiter, RequestLog
from sandbox.guard import Guard
from sandbox.openapi import openapi_document
from sandbox.queries import AnnouncementViews
from sandbox.seed import REFERENCE_NOW, build_store
from sandbox.serialize import Serializer
from sandbox.settings import Settings
from sandbox.store import Store
from sandbox.timefmt import Clock


@dataclass
class SandboxState:
    """Everything one sandbox instance holds; control routes and tests reach in here."""

    store: Store
    settings: Settings
    scale: str
    seed: int
    log: RequestLog = field(default_factory=RequestLog)
    injector: FaultInjector = field(default_factory=FaultInjector)
    limiter: RateLimiter = field(default_factory=RateLimiter)
    announcement_views: AnnouncementViews = field(init=False)

    def __post_init__(self) -> None:
        self.announcement_views = AnnouncementViews(self.store)

    def configure(self, changes: dict[str, Any]) -> None:
        """Changes switches; a new fault or rate-limit setting restarts its random stream
        or buckets, so the same settings always give the same run.

        Raises:
            SettingsError: an unknown switch or a bad value (nothing is changed then).
        """
        self.settings.update(changes)
        if "faults" in changes:
            self.injector.reset()
        if "rate_limit_per_second" in changes:
            self.limiter.reset()

    def rebuild(self, scale: str, seed: int) -> None:
        """Replaces the store with a freshly seeded one (switches stay as they are)."""
        store = build_store(scale, seed, Clock(REFERENCE_NOW))
        self.store, self.announcement_views = store, AnnouncementViews(store)
        self.scale, self.seed = scale, seed
        self.log.clear()

    def counts(self) -> dict[str, int]:
        counts = {name: len(table) for name, table in self.store.tables().items()}
        return counts | {"companies": len(self.store.companies)}

    def dumper(self, now_us: int) -> Callable[[str, Any], dict[str, Any]]:
        """Ground-truth rows: API shapes, ISO timestamps, plus the keys lists hide."""
        settings = self.settings
        ser = Serializer(
            self.store,
            "iso",
            company_fields=settings.company_fields,
            number_drift=settings.number_drift,
        )

        def dump(resource: str, record: Any) -> dict[str, Any]:
            if resource == "followers":
                return ser.follower(record, include_attributes=True)
            if resource == "announcements":
                return ser.announcement(record, now_us)
            if resource == "comments":
                row = ser.comment(record)
                row["idea_idx"] = record.idea_idx
                return row
            if resource == "topics":
                return ser.topic(record)
            if resource == "statuses":
                return ser.status(record)
            if resource == "integration_links":
                return ser.link(record)
            return ser.idea(record)

        return dump


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
        self._app = Guard(routed, state)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


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
