"""Small helpers shared by the sandbox tests."""

from __future__ import annotations

from typing import Any

import httpx
from feedback_sync.sandbox.app import SandboxApp


async def walk(
    client: httpx.AsyncClient, path: str, params: dict[str, Any] | None = None, limit: int = 7
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Follows ``pagination.after`` to the end; returns the rows and every pagination object."""
    rows: list[dict[str, Any]] = []
    paginations: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(10_000):
        query = {**(params or {}), "limit": limit}
        if after:
            query["after"] = after
        response = await client.get(path, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        rows += body["data"]
        paginations.append(body["pagination"])
        if not body["data"]:
            return rows, paginations
        after = body["pagination"]["after"]
        if after is None:
            return rows, paginations
    raise AssertionError(f"{path} did not end")


async def walk_links(
    client: httpx.AsyncClient, params: dict[str, Any], limit: int = 4
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        query = {**params, "limit": limit}
        if after:
            query["after"] = after
        response = await client.get("/integration-links", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["meta"] == []
        assert body["pagination"]["count"] == len(body["data"])
        rows += body["data"]
        if not body["pagination"]["hasNextPage"]:
            return rows
        after = body["pagination"]["endCursor"]


def idxs(rows: list[dict[str, Any]]) -> list[str]:
    return [row["idx"] for row in rows]


def store_order(app: SandboxApp, table: str) -> list[str]:
    return [key[1] for key in getattr(app.state.store, table).order]


def set_switches(app: SandboxApp, **changes: Any) -> None:
    app.state.configure(changes)
