"""The layer in front of ``/v1``: request log, added latency, faults, auth, rate limit.

A pure ASGI middleware (no per-request framework overhead). Order for a ``/v1`` request:
log it, wait the configured latency, draw a fault, check the key, take a rate-limit token,
then route. Control routes (``/_sandbox``) and ``/openapi.json`` are only logged.

Faults: ``429`` (with ``Retry-After``), ``429_bare`` (without), ``500`` and ``503`` (JSON),
``502`` (an HTML page, as a proxy would send), ``stall`` (wait ``stall_seconds``, then
answer), ``drop`` (the request is served, then the connection closes after the status line:
the client cannot know whether a write happened), ``truncate`` (the request is served; the
body is cut short with a matching ``Content-Length``, so the HTTP exchange completes but the
JSON does not parse).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feedback_sync.sandbox.errors import error_response
from feedback_sync.sandbox.faults import DroppedConnection

if TYPE_CHECKING:
    from feedback_sync.sandbox.state import SandboxState

_BAD_GATEWAY = (
    b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>"
)


def _presented_key(scope: Scope) -> str | None:
    """The API key the request carries: Authorization header first, then ``api_key``."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            text: str = value.decode("latin-1").strip()
            scheme, _, credentials = text.partition(" ")
            credentials = credentials.strip()
            if scheme.lower() == "bearer":
                return credentials
            if scheme.lower() == "basic":
                try:
                    decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
                except (binascii.Error, UnicodeDecodeError):
                    return None
                user, sep, password = decoded.partition(":")
                return user if sep and not password else None
            break  # another scheme: fall back to the query string
    query = scope.get("query_string", b"")
    if b"api_key" in query:
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            if name == "api_key":
                return str(value)
    return None


async def _buffered(receive: Receive) -> tuple[Receive, bytes] | None:
    """``receive`` with the request body read ahead, and the body; None if the client left
    first."""
    messages: list[Message] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        messages.append(message)
        if not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in messages)

    async def replay() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return replay, body


class Guard:
    def __init__(self, app: ASGIApp, state: SandboxState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = self.state
        path: str = scope["path"]
        method: str = scope["method"]
        entry = state.log.start(method, path, scope.get("query_string", b"").decode("latin-1"))
        extra_headers: list[tuple[bytes, bytes]] = []

        async def send_logged(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry.status = message["status"]
                if extra_headers:
                    message = {**message, "headers": [*message.get("headers", []), *extra_headers]}
            await send(message)

        if not (path.startswith("/v1/") or path == "/v1"):
            await self.app(scope, receive, send_logged)
            return

        settings = state.settings
        # the request is read whole before anything else, as a server behind a proxy gets
        # it: a client that goes away while the request is served (latency, a stall) does
        # not stop a write it already sent, it only loses the answer
        buffered = await _buffered(receive)
        if buffered is None:
            return  # the client left before its request was complete: nothing happens
        receive, body = buffered
        if body:
            entry.body_sha256 = hashlib.sha256(body).hexdigest()
        if settings.latency_ms:
            await asyncio.sleep(settings.latency_ms / 1000)
        fault = state.injector.draw(settings.faults, method, path)
        entry.fault = fault
        key = _presented_key(scope)
        rate = settings.rate_limit_per_second
        if rate is not None:
            client = scope.get("client") or ("local", 0)
            allowed, remaining, retry_after = state.limiter.take(key or f"anon:{client[0]}", rate)
            extra_headers += [
                (b"x-ratelimit-limit", f"{rate:g}".encode()),
                (b"x-ratelimit-remaining", str(remaining).encode()),
            ]
        else:
            allowed, retry_after = True, 0

        if fault in ("429", "429_bare", "500", "502", "503"):
            await self._fault_answer(fault, scope, receive, send_logged)
            return
        if fault == "stall":
            await asyncio.sleep(settings.faults.stall_seconds)
        if key is None or not hmac.compare_digest(key.encode(), settings.api_key.encode()):
            message = "missing API key" if key is None else "invalid API key"
            await error_response(401, message)(scope, receive, send_logged)
            return
        if not allowed:
            await error_response(
                429,
                f"rate limit of {rate:g} requests per second exceeded",
                headers={"Retry-After": str(retry_after)},
            )(scope, receive, send_logged)
            return
        if fault in ("drop", "truncate"):
            await self._cut_answer(fault, scope, receive, send_logged)
            return
        await self.app(scope, receive, send_logged)

    async def _fault_answer(self, fault: str, scope: Scope, receive: Receive, send: Send) -> None:
        retry_after = str(self.state.settings.faults.retry_after_seconds)
        if fault == "429":
            response = error_response(
                429, "rate limited (injected fault)", headers={"Retry-After": retry_after}
            )
        elif fault == "429_bare":  # as some gateways send it: no hint how long to wait
            response = error_response(429, "rate limited (injected fault)")
        elif fault == "500":
            response = error_response(500, "Internal server error")
        elif fault == "503":
            response = error_response(
                503, "service unavailable (injected fault)", headers={"Retry-After": retry_after}
            )
        else:
            response = Response(_BAD_GATEWAY, status_code=502, media_type="text/html")
        await response(scope, receive, send)

    async def _cut_answer(self, fault: str, scope: Scope, receive: Receive, send: Send) -> None:
        messages: list[Message] = []

        async def capture(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, capture)
        start = messages[0]
        body = b"".join(m.get("body", b"") for m in messages[1:])
        if fault == "drop":
            await send(start)
            raise DroppedConnection("sandbox fault: connection dropped after the status line")
        body = body[: self.state.injector.cut_point(len(body))]
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class QuietDrops(logging.Filter):
    """Keeps the server's error log free of the tracebacks of deliberate drops.

    A ``DroppedConnection`` is the fault the sandbox was told to inject (its ``drop``
    switches), not a failure of the server: its traceback would only bury real errors, and
    the request stays in the sandbox's request log. Every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc: Any = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection)
