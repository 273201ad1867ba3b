"""The API's three paging schemes as small strategy objects, and the one loop that walks them.

A ``Paginator`` belongs to one request chain (one list, or one idea's comments). It gives
the first request's parameters, checks each answer's shape, and turns an answer into the
next request's parameters or None. ``resume`` is the cursor to save so a later run asks only
for newer items: the last non-null cursor seen, which survives the contract's variants
(``after`` null on the last page, the request's own cursor repeated).

``walk`` is the only paging loop: it advances many chains at once (the per-idea fan-out)
with a bounded number of requests in flight, and yields pages as they arrive.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from feedback_sync.api.client import FeedbackClient
from feedback_sync.errors import ApiError, NotFound

log = logging.getLogger("feedback_sync")

Params = dict[str, str | int]
Filters = Mapping[str, str | int]


class Paginator(ABC):
    """Paging state of one request chain."""

    def __init__(
        self, page_size: int, resume: str | None = None, before: int | None = None
    ) -> None:
        """``before``: how many items the list held up to ``resume`` (its ``total`` when
        the cursor was saved), if known; it lets a resumed walk end without an empty page."""
        self.page_size = page_size
        self.resume = resume or None
        self.resumed = self.resume is not None
        self.before = before if self.resumed else None
        self.pages = 0
        self.items_seen = 0
        self.last_total: int | None = None
        # whether this chain's place in its list is known (``walk``: progress figures)
        self.placed = False

    def restart(self) -> Params:
        """Forget the saved cursor (the service rejected it) and start from the beginning."""
        self.resume = None
        self.resumed = False
        self.before = None
        self.pages = 0
        self.items_seen = 0
        self.placed = False
        return self.start()

    @abstractmethod
    def start(self) -> Params:
        """Parameters of the chain's first request."""

    @abstractmethod
    def advance(self, body: dict[str, Any]) -> Params | None:
        """Records an answer; the next request's parameters, or None when the chain is done."""

    def check(self, body: dict[str, Any]) -> str | None:
        """What is wrong with an answer's shape, or None."""
        data = body.get("data")
        if not isinstance(data, list):
            return "'data' is not a list"
        # an item that is not an object is the item's problem, not the page's: it lands
        # whole in rejected_rows (screening.py) and the walk goes on
        if not isinstance(body.get("pagination"), dict):
            return "'pagination' is missing"
        return None

    @staticmethod
    def items(body: dict[str, Any]) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = body["data"]
        return data

    def _count(self, body: dict[str, Any]) -> int:
        n = len(body["data"])
        self.pages += 1
        self.items_seen += n
        return n


class CursorPaginator(Paginator):
    """``limit`` / ``after`` with ``pagination = {total, before, after}``."""

    def __init__(
        self, page_size: int, resume: str | None = None, before: int | None = None
    ) -> None:
        super().__init__(page_size, resume, before)
        self._asked: set[str] = set()

    def start(self) -> Params:
        params: Params = {"limit": self.page_size}
        if self.resume:
            params["after"] = self.resume
            self._asked = {self.resume}
        else:
            self._asked = set()
        return params

    def advance(self, body: dict[str, Any]) -> Params | None:
        n = self._count(body)
        cursor, more = self._next(body["pagination"], n)
        if not isinstance(cursor, str) or not cursor:
            return None  # an empty page, or the variant with no cursor on the last page
        self.resume = cursor
        if n == 0 or not more or cursor in self._asked:
            return None  # the end, or a repeated cursor: stop, don't loop
        self._asked.add(cursor)
        return {"limit": self.page_size, "after": cursor}

    def _next(self, pagination: dict[str, Any], n: int) -> tuple[Any, bool]:
        """The cursor past this page, and whether a next page may hold items."""
        total = pagination.get("total")
        if isinstance(total, int):
            self.last_total = total
        # a short page that brings the count to the total is the end: skip the empty page
        # that would confirm it (a full page never ends a walk, so rows deleted while
        # paging cannot make it stop early)
        if n >= self.page_size or not isinstance(total, int):
            done = False
        else:
            # resumed with a known count: the items before the cursor plus the new ones must
            # make the total exactly (rows deleted since then cost the empty page instead)
            done = self.items_seen >= total or (
                self.before is not None and self.before + self.items_seen == total
            )
        return pagination.get("after"), not done


class LinkCursorPaginator(CursorPaginator):
    """Integration links: ``pagination = {hasNextPage, endCursor, ...}``."""

    def check(self, body: dict[str, Any]) -> str | None:
        problem = super().check(body)
        if problem is None and not isinstance(body["pagination"].get("hasNextPage"), bool):
            return "'pagination.hasNextPage' is not a boolean"
        return problem

    def _next(self, pagination: dict[str, Any], n: int) -> tuple[Any, bool]:
        return pagination.get("endCursor"), bool(pagination["hasNextPage"])


class PageNumberPaginator(Paginator):
    """Topics: ``offset`` is a 1-based page number; never resumed (the list is small).

    Goes on while pages come back full, unless the server says there is no next page
    (``after`` given as null with every item in) or hands back a page it already sent.
    """

    def start(self) -> Params:
        self._page = 1
        self._firsts: set[str] = set()
        return {"limit": self.page_size}

    def advance(self, body: dict[str, Any]) -> Params | None:
        n = self._count(body)
        if n == 0 or n < self.page_size:
            return None
        pagination = body["pagination"]
        total = pagination.get("total")
        done = not isinstance(total, int) or self.items_seen >= total
        if "after" in pagination and pagination["after"] is None and done:
            return None
        head = body["data"][0]
        first = str(head.get("idx") if isinstance(head, dict) else head)
        if first in self._firsts:
            return None  # the server ignores the page number: stop, don't loop
        self._firsts.add(first)
        self._page += 1
        return {"limit": self.page_size, "offset": self._page}


# a declaration's ``paging`` -> the paginator of that scheme (``source/resources.py``)
PAGINATORS: dict[str, type[Paginator]] = {
    "cursor": CursorPaginator,
    "link_cursor": LinkCursorPaginator,
    "page_number": PageNumberPaginator,
}


@dataclass
class Chain:
    """One list to walk: a path, its fixed filters, and its paginator."""

    resource: str
    path: str
    paginator: Paginator
    filters: Filters = field(default_factory=dict)
    # the idea idx (fan-out) or the integration type a chain belongs to
    key: str | None = None
    # a 404 ends this chain with a warning instead of failing the run (an idea that vanished)
    skip_missing: bool = False


@dataclass
class Page:
    chain: Chain
    items: list[dict[str, Any]]
    # the chain is finished: ``chain.paginator.resume`` is final
    last: bool
    # the chain's subject was not found (404) and was skipped
    missing: bool = False


def _count_place(client: FeedbackClient, chain: Chain, body: dict[str, Any], items: int) -> None:
    """How far through its list a chain is, for the progress figures: known for a list
    read from its start, or resumed where the count before the cursor was saved, whose
    first answer says how many items the list holds (``pagination.total``)."""
    paginator = chain.paginator
    if paginator.pages == 1:
        total = body["pagination"].get("total")
        before = 0 if not paginator.resumed else paginator.before
        if isinstance(total, int) and not isinstance(total, bool) and before is not None:
            client.stats.count_list(chain.resource, total, before)
            paginator.placed = True
    if paginator.placed:
        client.stats.count_done(chain.resource, items)


def walk(
    client: FeedbackClient, chains: Iterable[Chain], concurrency: int, *, urgent: bool = False
) -> Iterator[Page]:
    """Walks every chain to its end, ``concurrency`` requests at a time; yields pages as done.

    Chains are drawn from ``chains`` lazily, so a long fan-out never sits in memory: at
    most ``concurrency`` pages are in flight besides the one being consumed. ``urgent``
    (lists read page after page) puts the requests ahead of the fan-out's in the client.
    """
    pending = iter(chains)
    pool = client.threads(urgent)
    inflight: dict[Future[dict[str, Any]], tuple[Chain, Params]] = {}

    def submit(chain: Chain, params: Params) -> None:
        future = pool.submit(
            client.get_json,
            chain.path,
            {**chain.filters, **params},
            resource=chain.resource,
            check=chain.paginator.check,
            urgent=urgent,
        )
        inflight[future] = (chain, params)

    def refill() -> None:
        while len(inflight) < concurrency:
            chain = next(pending, None)
            if chain is None:
                return
            submit(chain, chain.paginator.start())

    try:
        refill()
        while inflight:
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for future in done:
                chain, _ = inflight.pop(future)
                paginator = chain.paginator
                try:
                    body = future.result()
                except NotFound as exc:
                    if not chain.skip_missing:
                        raise
                    log.warning("%s: skipped %s: %s", chain.resource, chain.key, exc.detail)
                    yield Page(chain, [], last=True, missing=True)
                    continue
                except ApiError as exc:
                    if exc.status == 400 and paginator.resumed and paginator.pages == 0:
                        log.warning(
                            "%s: the service rejected the saved cursor%s (%s); "
                            "reading from the start instead",
                            chain.resource,
                            f" of {chain.key}" if chain.key else "",
                            exc.detail,
                        )
                        submit(chain, paginator.restart())
                        continue
                    raise
                following = paginator.advance(body)
                if following is not None:
                    submit(chain, following)
                items = paginator.items(body)
                client.stats.count_rows(chain.resource, len(items))
                _count_place(client, chain, body, len(items))
                yield Page(chain, items, last=following is None)
            refill()
    finally:
        for future in inflight:
            future.cancel()  # requests already sent finish on the client's threads
