"""Paginators and ``walk`` against small fake lists served through ``httpx.MockTransport``.

The fake lists follow ``shared/api-contract.md`` and, when asked, its variants: ``after``
null on the last page, the last page repeating the request's own cursor, no ``total``.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import httpx
import orjson
import pytest
from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.paging import (
    Chain,
    CursorPaginator,
    LinkCursorPaginator,
    Page,
    PageNumberPaginator,
    walk,
)
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.errors import ApiError, NotFound, RetriesExhausted

BASE = "https://api.test/v1"
KEY = "sekret-key-123"


class BadCursor(Exception):
    pass


class CursorList:
    """A cursor list (``limit`` / ``after``); cursors are ``<prefix><items before it>``.

    ``last``: "contract" (``after`` past the last item, even on the last page), "null"
    (``after`` null on the last page), or "repeat" (the last page repeats the request's
    own cursor).
    """

    def __init__(
        self,
        items: list[dict[str, Any]],
        *,
        last: str = "contract",
        total: bool = True,
        prefix: str = "c",
        reject: Iterable[str] = (),
    ) -> None:
        self.items = items
        self.last = last
        self.total = total
        self.prefix = prefix
        self.reject = set(reject)
        self.afters: list[str | None] = []  # every ``after`` this list answered

    def cursor(self, position: int) -> str:
        return f"{self.prefix}{position}"

    def position(self, cursor: str | None) -> int:
        if cursor is None:
            return 0
        number = cursor.removeprefix(self.prefix)
        if cursor in self.reject or not number.isdigit() or int(number) > len(self.items):
            raise BadCursor(cursor)
        return int(number)

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        limit = int(params.get("limit", 20))
        asked = params.get("after")
        start = self.position(asked)
        end = min(start + limit, len(self.items))
        data = self.items[start:end]
        is_last = end >= len(self.items)
        after: str | None
        if self.last == "repeat" and is_last:
            after = asked
        elif not data or (self.last == "null" and is_last):
            after = None
        else:
            after = self.cursor(end)
        self.afters.append(after)
        pagination: dict[str, Any] = {
            "before": self.cursor(start) if start else None,
            "after": after,
        }
        if self.total:
            pagination["total"] = len(self.items)
        return {"data": data, "pagination": pagination}


class LinkList(CursorList):
    """Integration links: ``hasNextPage`` / ``endCursor``."""

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        limit = int(params.get("limit", 20))
        start = self.position(params.get("after"))
        end = min(start + limit, len(self.items))
        data = self.items[start:end]
        end_cursor = self.cursor(end) if data else None
        self.afters.append(end_cursor)
        return {
            "data": data,
            "pagination": {
                "total": len(self.items),
                "count": len(data),
                "hasNextPage": end < len(self.items),
                "startCursor": self.cursor(start) if data else None,
                "endCursor": end_cursor,
            },
            "meta": [],
        }


class TopicList(CursorList):
    """Topics: ``offset`` is a 1-based page number; ``after`` is ``"<page+1>"`` or null."""

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        limit = int(params.get("limit", 20))
        page = int(params.get("offset", 1))
        start = (page - 1) * limit
        data = self.items[start : start + limit]
        more = start + limit < len(self.items)
        pagination: dict[str, Any] = {
            "before": str(page - 1) if page > 1 else None,
            "after": str(page + 1) if more else None,
        }
        if self.total:
            pagination["total"] = len(self.items)
        return {"data": data, "pagination": pagination}


def error(status: int, message: str, code: str) -> httpx.Response:
    return httpx.Response(
        status, content=orjson.dumps({"error": True, "message": message, "code": code})
    )


class FakeServer:
    """Routes ``path`` (and ``idea_idx``) to fake lists; counts requests and concurrency."""

    def __init__(
        self, *, delay: float = 0.0, first_delay: float | None = None, max_requests: int = 1000
    ) -> None:
        self.lists: dict[tuple[str, str | None], CursorList] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        # answers played before the lists answer (to inject faults), in order
        self.faults: list[httpx.Response] = []
        self.delay = delay
        # the first request's answer takes this long instead (None: ``delay``)
        self.first_delay = first_delay
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0

    def add(self, path: str, fake: CursorList, idea: str | None = None) -> CursorList:
        self.lists[(path, idea)] = fake
        return fake

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/v1/")
        params = dict(request.url.params)
        with self._lock:
            self.requests.append((path, params))
            if len(self.requests) > self.max_requests:
                raise AssertionError(f"more than {self.max_requests} requests: a loop?")
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            fault = self.faults.pop(0) if self.faults else None
            first = len(self.requests) == 1
        try:
            delay = self.first_delay if first and self.first_delay is not None else self.delay
            if delay:
                time.sleep(delay)
            if fault is not None:
                return fault
            fake = self.lists.get((path, params.get("idea_idx")))
            if fake is None:
                return error(404, "idea not found", "not_found")
            try:
                body = fake.answer(params)
            except BadCursor as exc:
                return error(400, f"after: unknown cursor {exc}", "invalid_request")
            return httpx.Response(200, content=orjson.dumps(body))
        finally:
            with self._lock:
                self.in_flight -= 1

    def asked(self, path: str) -> list[dict[str, str]]:
        return [params for p, params in self.requests if p == path]


def make_items(prefix: str, n: int) -> list[dict[str, Any]]:
    return [{"idx": f"{prefix}_{i:03d}", "n": i} for i in range(1, n + 1)]


def idxs(items: Iterable[dict[str, Any]]) -> list[str]:
    return [item["idx"] for item in items]


def make_client(server: FakeServer, **overrides: Any) -> tuple[FeedbackClient, list[float]]:
    raw: dict[str, Any] = {"base_url": BASE, "api_key": KEY, "max_retries": 3}
    raw.update(overrides)
    sleeps: list[float] = []
    client = FeedbackClient(
        FeedbackSettings.validate(**raw),
        transport=httpx.MockTransport(server.handle),
        sleep=sleeps.append,
        rng=random.Random(3),
    )
    return client, sleeps


def run(server: FakeServer, chains: Iterable[Chain], concurrency: int = 2, **kw: Any) -> list[Page]:
    client, _ = make_client(server, **kw)
    with client:
        return list(walk(client, chains, concurrency))


def cursor_chain(size: int = 5, resume: str | None = None, path: str = "ideas") -> Chain:
    return Chain(resource=path, path=path, paginator=CursorPaginator(size, resume))


# --- CursorPaginator against the contract -------------------------------------------------


def test_cursor_walk_from_scratch_uses_the_total_shortcut() -> None:
    server = FakeServer()
    items = make_items("ide", 23)
    server.add("ideas", CursorList(items))
    chain = cursor_chain()
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert [len(page.items) for page in pages] == [5, 5, 5, 5, 3]
    assert [page.last for page in pages] == [False, False, False, False, True]
    assert all(page.chain is chain and not page.missing for page in pages)
    assert len(server.requests) == math.ceil(23 / 5) == 5
    assert server.asked("ideas") == [
        {"limit": "5"},
        {"limit": "5", "after": "c5"},
        {"limit": "5", "after": "c10"},
        {"limit": "5", "after": "c15"},
        {"limit": "5", "after": "c20"},
    ]
    assert chain.paginator.resume == "c23"
    assert chain.paginator.pages == 5
    assert chain.paginator.items_seen == 23


def test_a_resumed_cursor_walk_asks_until_an_empty_page() -> None:
    server = FakeServer()
    items = make_items("ide", 23)
    server.add("ideas", CursorList(items))
    chain = cursor_chain(resume="c10")
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items[10:])
    assert [len(page.items) for page in pages] == [5, 5, 3, 0]
    assert [page.last for page in pages] == [False, False, False, True]
    assert [params.get("after") for params in server.asked("ideas")] == [
        "c10",
        "c15",
        "c20",
        "c23",
    ]
    assert chain.paginator.resume == "c23"


def test_a_resumed_walk_stops_on_a_short_page_that_reaches_the_total() -> None:
    """A saved cursor before the first item: the short last page brings the count to the
    total, which ends the walk without asking for an empty page."""
    server = FakeServer(max_requests=20)
    items = make_items("ide", 23)
    server.add("ideas", CursorList(items))
    chain = cursor_chain(resume="c0")
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert [len(page.items) for page in pages] == [5, 5, 5, 5, 3]
    assert [params.get("after") for params in server.asked("ideas")] == [
        "c0",
        "c5",
        "c10",
        "c15",
        "c20",
    ]
    assert chain.paginator.resume == "c23"


@pytest.mark.parametrize(
    ("before", "cursors"),
    [
        # 10 items before the cursor + 13 new = the total: the short page ends the walk
        (10, ["c10", "c15", "c20"]),
        # rows deleted before the cursor since it was saved: 12 + 13 != 23, so the walk
        # confirms its end with an empty page instead of trusting the short one
        (12, ["c10", "c15", "c20", "c23"]),
    ],
)
def test_a_resumed_walk_ends_on_a_short_page_only_when_the_count_adds_up(
    before: int, cursors: list[str]
) -> None:
    server = FakeServer(max_requests=20)
    items = make_items("ide", 23)
    server.add("ideas", CursorList(items))
    chain = Chain("ideas", "ideas", CursorPaginator(5, "c10", before=before))
    pages = run(server, [chain])
    assert idxs(item for page in pages for item in page.items) == idxs(items[10:])
    assert [params.get("after") for params in server.asked("ideas")] == cursors
    assert chain.paginator.resume == "c23" and chain.paginator.last_total == 23


class ShrinkingList(CursorList):
    """Deletes items already served while the walk is on: ``total`` drops under it."""

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        body = super().answer(params)
        if params.get("after") == "c5":
            self.shrunk = True
        if getattr(self, "shrunk", False):
            # eight items already served are deleted; later cursors keep their places
            body["pagination"]["total"] -= 8
        return body


def test_rows_deleted_while_paging_do_not_end_the_walk_early() -> None:
    """A full page never ends a walk, so a shrinking total cannot cut the list short (a
    --full run would then delete the rows it never read)."""
    server = FakeServer(max_requests=20)
    items = make_items("ide", 20)
    server.add("ideas", ShrinkingList(items))
    chain = cursor_chain()
    pages = run(server, [chain])
    assert idxs(item for page in pages for item in page.items) == idxs(items)


def test_a_resumed_walk_with_nothing_new_keeps_its_cursor() -> None:
    server = FakeServer()
    server.add("ideas", CursorList(make_items("ide", 23)))
    chain = cursor_chain(resume="c23")
    pages = run(server, [chain])
    assert len(pages) == 1
    assert pages[0].items == []
    assert pages[0].last is True
    assert len(server.requests) == 1
    assert chain.paginator.resume == "c23"


def test_an_empty_list_is_one_empty_last_page() -> None:
    server = FakeServer()
    server.add("ideas", CursorList([]))
    chain = cursor_chain()
    pages = run(server, [chain])
    assert [(page.items, page.last) for page in pages] == [([], True)]
    assert len(server.requests) == 1
    assert chain.paginator.resume is None


# --- contract variants --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("last", "total", "requests", "resume"),
    [
        ("null", True, 5, "c20"),
        ("repeat", True, 5, "c20"),
        ("contract", False, 6, "c23"),
        ("null", False, 5, "c20"),
        ("repeat", False, 5, "c20"),
    ],
)
def test_cursor_variants_on_23_items(last: str, total: bool, requests: int, resume: str) -> None:
    server = FakeServer(max_requests=20)
    items = make_items("ide", 23)
    fake = server.add("ideas", CursorList(items, last=last, total=total))
    chain = cursor_chain()
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert [page.last for page in pages].count(True) == 1
    assert pages[-1].last is True
    assert len(server.requests) == requests
    assert chain.paginator.resume == resume
    assert chain.paginator.resume == [a for a in fake.afters if a is not None][-1]


@pytest.mark.parametrize("last", ["contract", "null", "repeat"])
@pytest.mark.parametrize("total", [True, False])
@pytest.mark.parametrize(
    ("n", "resume"),
    [
        (0, None),
        (1, None),
        (4, None),
        (5, None),
        (10, None),
        (23, None),
        (5, "c5"),
        (10, "c5"),
        (23, "c5"),
    ],
)
def test_cursor_variants_yield_every_item_once_and_stop(
    last: str, total: bool, n: int, resume: str | None
) -> None:
    server = FakeServer(max_requests=20)
    items = make_items("ide", n)
    fake = server.add("ideas", CursorList(items, last=last, total=total))
    chain = cursor_chain(resume=resume)
    pages = run(server, [chain])

    expected = items[5:] if resume else items
    seen = idxs(item for page in pages for item in page.items)
    assert seen == idxs(expected)
    assert [page.last for page in pages] == [False] * (len(pages) - 1) + [True]
    # never more than one request past the end of the list
    assert len(server.requests) <= math.ceil(len(expected) / 5) + 1
    answered = [a for a in fake.afters if a is not None]
    assert chain.paginator.resume == (answered[-1] if answered else resume)


def test_a_server_that_always_repeats_the_cursor_does_not_loop() -> None:
    class Stuck(CursorList):
        def answer(self, params: dict[str, str]) -> dict[str, Any]:
            return {"data": self.items[:5], "pagination": {"after": "c5", "before": None}}

    server = FakeServer(max_requests=10)
    server.add("ideas", Stuck(make_items("ide", 23)))
    chain = cursor_chain()
    pages = run(server, [chain])
    assert len(server.requests) == 2
    assert [page.last for page in pages] == [False, True]
    assert chain.paginator.resume == "c5"


# --- link cursors and page numbers --------------------------------------------------------


def link_chain(size: int = 4, resume: str | None = None) -> Chain:
    return Chain(
        resource="integration_links",
        path="integration-links",
        paginator=LinkCursorPaginator(size, resume),
        filters={"type": "jira"},
        key="jira",
    )


def test_link_cursor_walk() -> None:
    server = FakeServer(max_requests=20)
    items = make_items("lnk", 11)
    server.add("integration-links", LinkList(items, prefix="l"))
    chain = link_chain()
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert [len(page.items) for page in pages] == [4, 4, 3]
    assert [page.last for page in pages] == [False, False, True]
    assert server.asked("integration-links") == [
        {"type": "jira", "limit": "4"},
        {"type": "jira", "limit": "4", "after": "l4"},
        {"type": "jira", "limit": "4", "after": "l8"},
    ]
    assert chain.paginator.resume == "l11"


def test_link_cursor_resumed_and_empty() -> None:
    server = FakeServer(max_requests=20)
    items = make_items("lnk", 11)
    server.add("integration-links", LinkList(items, prefix="l"))
    chain = link_chain(resume="l8")
    pages = run(server, [chain])
    assert idxs(item for page in pages for item in page.items) == idxs(items[8:])
    assert len(server.requests) == 1
    assert chain.paginator.resume == "l11"

    server = FakeServer(max_requests=20)
    server.add("integration-links", LinkList([], prefix="l"))
    chain = link_chain()
    pages = run(server, [chain])
    assert [(page.items, page.last) for page in pages] == [([], True)]
    assert chain.paginator.resume is None


def test_link_cursor_body_without_has_next_page_is_retried() -> None:
    server = FakeServer()
    items = make_items("lnk", 3)
    server.add("integration-links", LinkList(items, prefix="l"))
    bad = {"data": [], "pagination": {"endCursor": None}, "meta": []}
    server.faults.append(httpx.Response(200, content=orjson.dumps(bad)))
    client, sleeps = make_client(server)
    with client:
        pages = list(walk(client, [link_chain()], 2))
        assert client.stats.retries == 1
    assert idxs(pages[0].items) == idxs(items)
    assert len(sleeps) == 1


@pytest.mark.parametrize(("n", "total", "requests"), [(12, True, 3), (12, False, 3), (10, True, 2)])
def test_page_number_walk(n: int, total: bool, requests: int) -> None:
    server = FakeServer(max_requests=20)
    items = make_items("top", n)
    server.add("topics", TopicList(items, total=total))
    chain = Chain(resource="topics", path="topics", paginator=PageNumberPaginator(5))
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert [page.last for page in pages] == [False] * (requests - 1) + [True]
    expected = [{"limit": "5"}] + [{"limit": "5", "offset": str(p)} for p in range(2, requests + 1)]
    assert server.asked("topics") == expected


def test_page_number_walk_on_no_topics() -> None:
    server = FakeServer()
    server.add("topics", TopicList([]))
    chain = Chain(resource="topics", path="topics", paginator=PageNumberPaginator(5))
    pages = run(server, [chain])
    assert [(page.items, page.last) for page in pages] == [([], True)]
    assert len(server.requests) == 1


# --- the fan-out --------------------------------------------------------------------------


def comment_chain(idea: str, size: int = 5, **kw: Any) -> Chain:
    return Chain(
        resource="comments",
        path="comments",
        paginator=CursorPaginator(size, kw.pop("resume", None)),
        filters={"idea_idx": idea},
        key=idea,
        **kw,
    )


def test_many_chains_are_walked_with_bounded_concurrency() -> None:
    rng = random.Random(42)
    server = FakeServer(delay=0.002, max_requests=500)
    expected: dict[str, list[str]] = {}
    for i in range(30):
        idea = f"ide_{i:02d}"
        comments = make_items(f"cmt_{i:02d}", rng.randint(0, 12))
        server.add("comments", CursorList(comments), idea=idea)
        expected[idea] = idxs(comments)
    assert any(not v for v in expected.values())  # the seed gives ideas with no comments

    drawn: list[str] = []

    def chains() -> Iterable[Chain]:
        for idea in expected:
            drawn.append(idea)
            yield comment_chain(idea)

    client, _ = make_client(server, max_concurrency=16)
    got: dict[str, list[str]] = defaultdict(list)
    lasts: Counter[str] = Counter()
    with client:
        for page in walk(client, chains(), 4):
            idea = page.chain.key
            assert idea is not None
            assert lasts[idea] == 0, f"a page of {idea} after its last page"
            got[idea] += idxs(page.items)
            if page.last:
                lasts[idea] += 1
        assert client.stats.rows_by_resource["comments"] == sum(map(len, expected.values()))
    assert dict(got) == {idea: items for idea, items in expected.items()}
    assert lasts == Counter(dict.fromkeys(expected, 1))
    assert drawn == list(expected)
    assert 2 <= server.max_in_flight <= 4
    # a list that fills its last page exactly needs one empty page to confirm its end
    assert len(server.requests) == sum(
        max(1, math.ceil(len(v) / 5)) + (1 if v and len(v) % 5 == 0 else 0)
        for v in expected.values()
    )


def test_walk_draws_chains_lazily() -> None:
    server = FakeServer()
    for i in range(10):
        server.add("comments", CursorList(make_items(f"cmt_{i}", 2)), idea=f"ide_{i}")
    drawn: list[int] = []

    def chains() -> Iterable[Chain]:
        for i in range(10):
            drawn.append(i)
            yield comment_chain(f"ide_{i}")

    client, _ = make_client(server)
    with client:
        pages = walk(client, chains(), 3)
        first = next(pages)
        assert first.last is True
        assert len(drawn) == 3
        rest = list(pages)
    assert len(rest) == 9
    assert len(drawn) == 10


def test_walks_of_one_client_share_its_threads_and_close_ends_them() -> None:
    """A per-idea resource walks once per page of ideas: the walks reuse the client's
    request threads instead of each starting its own, and closing the client ends them."""
    server = FakeServer(delay=0.002)
    for i in range(12):
        server.add("comments", CursorList(make_items(f"cmt_{i}", 7)), idea=f"ide_{i}")
    seen: list[threading.Thread] = []  # kept alive: a new thread is a new object
    handle = server.handle

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(threading.current_thread())
        return handle(request)

    server.handle = recording  # type: ignore[method-assign]
    client, _ = make_client(server)
    with client:
        for batch in range(4):  # four walks, as for four pages of ideas
            chains = [comment_chain(f"ide_{i}") for i in range(batch * 3, batch * 3 + 3)]
            pages = list(walk(client, chains, 3))
            assert sum(len(page.items) for page in pages) == 3 * 7
        threads = {id(thread): thread for thread in seen}
        assert len(seen) == 4 * 3 * 2  # two pages of five per idea
        assert len(threads) <= 3, "each walk started threads of its own"
    for thread in threads.values():
        thread.join(timeout=5)
        assert not thread.is_alive(), "the client's threads outlived close()"


def test_an_urgent_walk_is_not_queued_behind_the_fan_outs_requests() -> None:
    """More fan-out requests waiting than the client has threads for them: a list read
    page by page (urgent) still goes next, not after the queued fan-out."""
    from feedback_sync.api.client import THREADS_PER_SLOT

    # slow enough that a busy machine starts a thread; the first answer slower still, so the
    # urgent request is queued while the first fan-out request holds the slot even when a
    # loaded machine (CI's workers on two cores) is slow to start the walk: at 0.05 s it
    # came after three fan-out requests there
    server = FakeServer(delay=0.05, first_delay=0.5)
    waiting = THREADS_PER_SLOT + 12  # one slot (max_concurrency=1): 12 more than threads
    for i in range(waiting):
        server.add("comments", CursorList(make_items(f"cmt_{i}", 3)), idea=f"ide_{i}")
    server.add("ideas", CursorList(make_items("ide_x", 3)))
    client, _ = make_client(server, max_concurrency=1)
    with client:
        fan_out = [
            client.threads().submit(
                client.get_json, "comments", {"idea_idx": f"ide_{i}", "limit": 5}, resource="c"
            )
            for i in range(waiting)
        ]
        page = next(walk(client, [cursor_chain(size=5)], 1, urgent=True))
        assert idxs(page.items) == ["ide_x_001", "ide_x_002", "ide_x_003"]
        order = [path for path, _ in server.requests]
        # the fan-out requests sent before the urgent one could take the slot: the one in
        # flight, and those that reached the slot's queue before the urgent one existed
        assert order.index("ideas") <= 2, order
        for future in fan_out:
            future.result()
    assert len(server.requests) == waiting + 1


def test_skip_missing_turns_a_404_into_a_missing_page() -> None:
    server = FakeServer()
    server.add("comments", CursorList(make_items("cmt_a", 7)), idea="ide_a")
    server.add("comments", CursorList(make_items("cmt_c", 3)), idea="ide_c")
    chains = [comment_chain(idea, skip_missing=True) for idea in ("ide_a", "ide_b", "ide_c")]
    pages = run(server, chains, concurrency=1)

    missing = [page for page in pages if page.missing]
    assert len(missing) == 1
    assert missing[0].chain.key == "ide_b"
    assert missing[0].items == []
    assert missing[0].last is True
    by_idea: dict[str | None, list[str]] = defaultdict(list)
    for page in pages:
        by_idea[page.chain.key] += idxs(page.items)
    assert by_idea == {
        "ide_a": idxs(make_items("cmt_a", 7)),
        "ide_b": [],
        "ide_c": idxs(make_items("cmt_c", 3)),
    }
    assert len(server.asked("comments")) == 4  # 2 + 1 (the 404) + 1


def test_without_skip_missing_a_404_propagates() -> None:
    server = FakeServer()
    server.add("comments", CursorList(make_items("cmt_a", 3)), idea="ide_a")
    chains = [comment_chain("ide_a"), comment_chain("ide_b")]
    with pytest.raises(NotFound) as info:
        run(server, chains, concurrency=1)
    assert info.value.status == 404
    assert info.value.resource == "comments"
    assert "idea_idx=ide_b" in info.value.url
    assert "idea not found (not_found)" in str(info.value)


# --- a saved cursor the service rejects ---------------------------------------------------


def test_a_rejected_saved_cursor_restarts_from_the_beginning() -> None:
    server = FakeServer()
    items = make_items("ide", 12)
    server.add("ideas", CursorList(items, reject={"c_gone"}))
    chain = cursor_chain(resume="c_gone")
    pages = run(server, [chain])

    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert [page.last for page in pages] == [False, False, True]
    assert server.asked("ideas") == [
        {"limit": "5", "after": "c_gone"},
        {"limit": "5"},
        {"limit": "5", "after": "c5"},
        {"limit": "5", "after": "c10"},
    ]
    assert chain.paginator.resume == "c12"
    assert chain.paginator.resumed is False


def test_a_rejected_saved_cursor_restarts_one_chain_of_many() -> None:
    server = FakeServer()
    server.add("comments", CursorList(make_items("cmt_a", 6), reject={"c_old"}), idea="ide_a")
    server.add("comments", CursorList(make_items("cmt_b", 6)), idea="ide_b")
    chains = [comment_chain("ide_a", resume="c_old"), comment_chain("ide_b", resume="c2")]
    pages = run(server, chains, concurrency=2)
    by_idea: dict[str | None, list[str]] = defaultdict(list)
    for page in pages:
        by_idea[page.chain.key] += idxs(page.items)
    assert by_idea == {
        "ide_a": idxs(make_items("cmt_a", 6)),
        "ide_b": idxs(make_items("cmt_b", 6)[2:]),
    }
    assert chains[0].paginator.resume == "c6"
    assert chains[1].paginator.resume == "c6"


def test_a_400_on_a_fresh_chain_raises() -> None:
    server = FakeServer()
    server.faults.append(error(400, "limit: must be from 1 to 100", "invalid_request"))
    server.add("ideas", CursorList(make_items("ide", 3)))
    with pytest.raises(ApiError) as info:
        run(server, [cursor_chain()])
    assert type(info.value) is ApiError
    assert info.value.status == 400
    assert "limit: must be from 1 to 100 (invalid_request)" in str(info.value)
    assert len(server.requests) == 1


def test_a_400_after_a_resumed_chain_made_progress_raises() -> None:
    server = FakeServer()
    server.add("ideas", CursorList(make_items("ide", 23), reject={"c15"}))
    with pytest.raises(ApiError) as info:
        run(server, [cursor_chain(resume="c10")])
    assert info.value.status == 400
    assert [params.get("after") for params in server.asked("ideas")] == ["c10", "c15"]


# --- wrong shapes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"rows": [], "pagination": {}},
        {"data": {"idx": "ide_001"}, "pagination": {}},
        {"data": []},
    ],
    # a list holding something other than objects is a page: its items are rejected one
    # by one into rejected_rows (tests/sync/test_bad_data.py)
    ids=["no-data", "data-object", "no-pagination"],
)
def test_a_wrong_shape_is_retried_through_the_client(bad: dict[str, Any]) -> None:
    server = FakeServer()
    items = make_items("ide", 7)
    server.add("ideas", CursorList(items))
    server.faults.append(httpx.Response(200, content=orjson.dumps(bad)))
    client, sleeps = make_client(server)
    with client:
        pages = list(walk(client, [cursor_chain()], 2))
        assert client.stats.retries == 1
        assert client.stats.requests == 3
    assert idxs(item for page in pages for item in page.items) == idxs(items)
    assert len(sleeps) == 1
    assert server.asked("ideas")[0] == server.asked("ideas")[1] == {"limit": "5"}


def test_a_shape_that_stays_wrong_exhausts_retries() -> None:
    server = FakeServer()
    server.add("ideas", CursorList(make_items("ide", 7)))
    bad = httpx.Response(200, content=orjson.dumps({"rows": []}))
    server.faults.extend([bad, bad, bad])
    with pytest.raises(RetriesExhausted) as info:
        run(server, [cursor_chain()], max_retries=2)
    assert "'data' is not a list" in str(info.value)
    assert info.value.resource == "ideas"
    assert len(server.requests) == 3


def _placed(server: FakeServer, chain: Chain) -> tuple[int, int, list[int]]:
    """The list's total and the items behind the walk, as the progress reads them, and
    the items behind it after each page."""
    client, _ = make_client(server)
    after = []
    with client:
        for _ in walk(client, [chain], concurrency=1):
            after.append(client.stats.done_by_resource["ideas"])
        stats = client.stats
    return stats.total_by_resource["ideas"], stats.done_by_resource["ideas"], after


def test_a_walk_from_the_start_counts_its_place_in_the_list() -> None:
    server = FakeServer()
    server.add("ideas", CursorList(make_items("ide", 23)))
    assert _placed(server, cursor_chain()) == (23, 23, [5, 10, 15, 20, 23])


def test_a_resumed_walk_counts_the_items_before_its_cursor() -> None:
    server = FakeServer()
    server.add("ideas", CursorList(make_items("ide", 23)))
    chain = Chain(resource="ideas", path="ideas", paginator=CursorPaginator(5, "c10", before=10))
    assert _placed(server, chain) == (23, 23, [15, 20, 23])


def test_a_resumed_walk_without_the_count_before_has_no_place() -> None:
    server = FakeServer()
    server.add("ideas", CursorList(make_items("ide", 23)))
    assert _placed(server, cursor_chain(resume="c10"))[:2] == (0, 0)
