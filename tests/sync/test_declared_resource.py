"""A resource is one declaration: a toy resource declared through ``resources.Resource``
alone, and served by a route the test adds to the sandbox, is synced like the others (its
rows land exactly as sent, a normal run reads past its cursor), and status and the
tables reference include it."""

from __future__ import annotations

from typing import Any

from feedback_sync.source.resources import TIMES, Resource, registered
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.sync.harness import Harness

WIDGETS = Resource(
    name="widgets",
    path="widgets",
    paging="cursor",
    parent_key="widget_idx",
    columns={"idx": "text", "name": "text", "weight": "double", **TIMES},
    reading="cursor",
    row="a widget (a test's own resource)",
)


def _widget(n: int) -> dict[str, Any]:
    return {
        "idx": f"w{n:03d}",
        "name": f"widget {n}",
        "weight": n * 1.25,
        "created_at": f"2026-01-{n % 28 + 1:02d}T10:00:00Z",
        "updated_at": f"2026-02-{n % 28 + 1:02d}T11:30:00Z",
    }


class _Widgets:
    """``GET /v1/widgets``: a cursor list in the API's shape (``limit``, ``after``,
    ``pagination = {total, before, after}``), the cursor an item's position."""

    def __init__(self, count: int) -> None:
        self.items = [_widget(n) for n in range(count)]
        self.asked: list[dict[str, str]] = []

    async def list_widgets(self, request: Request) -> Response:
        params = dict(request.query_params)
        self.asked.append(params)
        limit = int(params.get("limit", "100"))
        start = int(params["after"]) + 1 if params.get("after") else 0
        page = self.items[start : start + limit]
        after = str(start + len(page) - 1) if page else None
        pagination = {"total": len(self.items), "before": None, "after": after}
        return JSONResponse({"data": page, "pagination": pagination})


def test_a_resource_declared_alone_is_synced_incrementally(harness: Harness) -> None:
    served = _Widgets(17)
    with registered(WIDGETS), harness.server.app.route_added("/widgets", served.list_widgets):
        first = harness.sync(models=False)
        assert first.rows_loaded.get("widgets") == 17
        assert "widgets" in first.complete  # read from its start
        _assert_landed(harness, served.items)
        assert {p.get("limit") for p in served.asked} == {"7"}  # the harness's page size

        served.items += [_widget(n) for n in range(17, 20)]
        served.asked.clear()
        second = harness.sync(models=False)
        assert second.rows_loaded.get("widgets") == 3  # only past the saved cursor
        assert served.asked[0].get("after") == "16"
        assert "widgets" not in second.complete  # resumed: deletes are not looked for
        _assert_landed(harness, served.items)


def _assert_landed(harness: Harness, items: list[dict[str, Any]]) -> None:
    """The widgets table holds exactly the served items, each value as sent."""
    for con in harness.connect():
        rows = con.execute(
            "select idx, name, weight, strftime(created_at at time zone 'UTC', "
            "'%Y-%m-%dT%H:%M:%SZ'), strftime(updated_at at time zone 'UTC', "
            "'%Y-%m-%dT%H:%M:%SZ') from feedback.widgets order by idx"
        ).fetchall()
    sent = [
        (w["idx"], w["name"], w["weight"], w["created_at"], w["updated_at"])
        for w in sorted(items, key=lambda w: w["idx"])
    ]
    assert rows == sent


def test_status_and_the_tables_reference_read_the_declaration() -> None:
    from feedback_sync.app.status import describe_state

    from docsgen import tables

    with registered(WIDGETS):
        assert describe_state("widgets", {"after": "16"}) == "resumes after the saved cursor"
        page = "\n".join(tables.loaded())
        assert "widgets" in page and "a widget (a test's own resource)" in page
    assert "a widget (a test's own resource)" not in "\n".join(tables.loaded())
