"""The control interface, outside ``/v1``: for tests and demos only, never part of the API.

- ``GET  /_sandbox/health``: counts per resource, scale, seed.
- ``GET|POST /_sandbox/settings``: read or change the switches (partial JSON update).
- ``GET|POST /_sandbox/clock``: read, set (``now``), move (``advance_seconds``) or start
  and stop (``running``) the clock.
- ``POST /_sandbox/mutate``: a seeded batch of creates, updates and deletes.
- ``POST /_sandbox/ideas/{idx}/status``: moves an idea to another status (``{"status_idx":
  "sts_..."}``), as the service's own UI does (the API has no idea writes); the idea's
  ``updated_at`` moves to the clock's now.
- ``GET  /_sandbox/dump``: the whole store as JSON: the ground truth syncs are compared with,
  with ``status_moves`` and ``spend_changes``, the record of every idea put into a status
  and every company spend changed since seeding (what the history marts are checked
  against).
- ``GET|DELETE /_sandbox/requests``: the log of requests served (``?since=SEQ``).
- ``POST /_sandbox/reset``: rebuild the store at a scale and seed; clears the log.

It needs no API key and must never be reachable beyond loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from feedback_sync.sandbox import validate
from feedback_sync.sandbox.errors import bad_request, json_response
from feedback_sync.sandbox.mutate import PlanError, apply_plan, plan_from_request
from feedback_sync.sandbox.scales import SCALES
from feedback_sync.sandbox.settings import SettingsError
from feedback_sync.sandbox.timefmt import SECOND, format_iso, parse_body_moment

if TYPE_CHECKING:
    from feedback_sync.sandbox.state import SandboxState


class Control:
    def __init__(self, state: SandboxState) -> None:
        self.state = state

    def routes(self) -> list[Route]:
        def route(path: str, handler: Any, methods: list[str]) -> Route:
            return Route(f"/_sandbox{path}", handler, methods=methods)

        return [
            route("/health", self.health, ["GET"]),
            route("/settings", self.settings, ["GET", "POST"]),
            route("/clock", self.clock, ["GET", "POST"]),
            route("/mutate", self.mutate, ["POST"]),
            route("/ideas/{idx}/status", self.move_idea, ["POST"]),
            route("/dump", self.dump, ["GET"]),
            route("/requests", self.requests, ["GET", "DELETE"]),
            route("/reset", self.reset, ["POST"]),
        ]

    async def health(self, request: Request) -> Response:
        state = self.state
        with state.store.lock:
            return json_response(
                {"ok": True, "scale": state.scale, "seed": state.seed, "counts": state.counts()}
            )

    async def settings(self, request: Request) -> Response:
        if request.method == "POST":
            body = validate.json_body(await request.body())
            try:
                self.state.configure(body)
            except SettingsError as exc:
                raise bad_request(str(exc)) from None
        return json_response(self.state.settings.public())

    async def clock(self, request: Request) -> Response:
        clock = self.state.store.clock
        if request.method == "POST":
            body = validate.json_body(await request.body())
            unknown = set(body) - {"now", "advance_seconds", "running"}
            if unknown:
                raise bad_request(f"unknown clock fields {sorted(unknown)}")
            running = body.get("running")
            if running is not None and not isinstance(running, bool):
                raise bad_request("running must be true or false")
            now = body.get("now")
            try:
                now_us = parse_body_moment(now) if isinstance(now, str) else None
            except ValueError as exc:
                raise bad_request(f"now: {exc}, got {now!r}") from None
            if now is not None and now_us is None:
                raise bad_request("now must be an ISO 8601 string")
            clock.set(now_us, running=running)
            advance = body.get("advance_seconds")
            if advance is not None:
                if isinstance(advance, bool) or not isinstance(advance, int | float):
                    raise bad_request("advance_seconds must be a number")
                clock.advance(int(advance * SECOND))
        return json_response({"now": format_iso(clock.now()), "running": clock.running})

    async def mutate(self, request: Request) -> Response:
        body = validate.json_body(await request.body())
        seed = body.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise bad_request("seed must be an integer")
        store = self.state.store
        with store.lock:
            try:
                plan = plan_from_request(body, store)
            except PlanError as exc:
                raise bad_request(str(exc)) from None
            changes = apply_plan(store, plan, seed)
        return json_response(
            {
                resource: {"created": c.created, "updated": c.updated, "deleted": c.deleted}
                for resource, c in changes.items()
            }
        )

    async def move_idea(self, request: Request) -> Response:
        body = validate.json_body(await request.body())
        unknown = set(body) - {"status_idx"}
        if unknown:
            raise bad_request(f'unknown fields {sorted(unknown)}; send {{"status_idx": ...}}')
        status_idx = body.get("status_idx")
        if not isinstance(status_idx, str) or not status_idx:
            raise bad_request("status_idx must be a status's idx (sts_...)")
        store = self.state.store
        idx = request.path_params["idx"]
        with store.lock:
            store.statuses.get("status", status_idx)  # NotFound: 404 naming it
            idea = store.update_idea(idx, status_idx=status_idx)  # an unknown idea: 404
            answer = {"idx": idea.idx, "status_idx": idea.status_idx}
            return json_response(answer | {"updated_at": format_iso(idea.updated)})

    async def dump(self, request: Request) -> Response:
        return StreamingResponse(self._dump_chunks(), media_type="application/json")

    async def _dump_chunks(self) -> AsyncIterator[bytes]:
        """Streams the dump a resource at a time; take it while no writes are in flight."""
        state = self.state
        store = state.store
        now = store.clock.now()
        dumper = state.dumper(now)
        yield b'{"now":' + orjson.dumps(format_iso(now))
        for name, table in store.tables().items():
            yield b',"' + name.encode() + b'":['
            first = True
            batch: list[bytes] = []
            for record in table:
                batch.append(orjson.dumps(dumper(name, record)))
                if len(batch) >= 2000:
                    yield (b"" if first else b",") + b",".join(batch)
                    first, batch = False, []
            if batch:
                yield (b"" if first else b",") + b",".join(batch)
            yield b"]"
        extras = {
            "categories": [vars_of(c) for c in store.categories.values()],
            "users": [vars_of(u) for u in store.users.values()],
            "companies": [vars_of(c) for c in store.companies.values()],
            "status_moves": [vars_of(m) for m in store.status_moves],
            "spend_changes": [vars_of(c) for c in store.spend_changes],
        }
        for name, rows in extras.items():
            yield b',"' + name.encode() + b'":' + orjson.dumps(rows)
        yield b"}"

    async def requests(self, request: Request) -> Response:
        log = self.state.log
        if request.method == "DELETE":
            log.clear()
            return json_response({"cleared": True, "last_seq": log.last_seq})
        raw = request.query_params.get("since", "0")
        if not raw.isdigit():
            raise bad_request(f"since must be a sequence number, got {raw!r}")
        entries = [e.as_dict() for e in log.since(int(raw))]
        return json_response({"requests": entries, "last_seq": log.last_seq})

    async def reset(self, request: Request) -> Response:
        body = validate.json_body(await request.body(), optional=True)
        scale = body.get("scale", self.state.scale)
        seed = body.get("seed", self.state.seed)
        if scale not in SCALES:
            raise bad_request(f"scale must be one of {list(SCALES)}, got {scale!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise bad_request("seed must be an integer")
        self.state.rebuild(scale, seed)
        return json_response(
            {"ok": True, "scale": scale, "seed": seed, "counts": self.state.counts()}
        )


def vars_of(record: Any) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}
