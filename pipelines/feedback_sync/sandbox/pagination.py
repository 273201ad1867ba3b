"""The three paging schemes of the API, over the store's sorted key indexes.

- cursor lists (followers, announcements, comments, statuses, ideas):
  ``pagination = {total, before, after}``;
- topics: 1-based page numbers in ``offset``;
- integration links: ``{total, count, hasNextPage, startCursor, endCursor}``.

Cursors encode the sort key of an item (``created_us``, ``idx``) and the list they belong
to, base64url without padding. They are opaque to clients; the sandbox rejects a cursor it
did not make, or one made for another list, with 400.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from itertools import islice
from typing import Any

from sortedcontainers import SortedList

Key = tuple[int, str]


class CursorError(ValueError):
    """A cursor the sandbox did not issue for this list."""


def encode_cursor(scope: str, key: Key) -> str:
    raw = f"{scope}:{key[0]}:{key[1]}".encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(scope: str, cursor: str) -> Key:
    """Raises:
    CursorError: not a cursor of ``scope``.
    """
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")
        got_scope, created, idx = raw.split(":", 2)
        if got_scope != scope or not idx:
            raise CursorError(f"cursor {cursor!r} does not belong to this list")
        return (int(created), idx)
    except (UnicodeError, ValueError, binascii.Error) as exc:
        if isinstance(exc, CursorError):
            raise
        raise CursorError(f"cursor {cursor!r} is not a valid cursor") from None


@dataclass(slots=True)
class Page:
    keys: list[Key]
    has_more: bool


def take_page(
    keys: SortedList, after: Key | None, limit: int, *, newest_first: bool = False
) -> Page:
    """The ``limit`` keys just past ``after`` in list order, and whether more follow."""
    if newest_first:
        if after is None:
            it = reversed(keys)
        else:
            it = keys.irange(maximum=after, inclusive=(True, False), reverse=True)
    else:
        it = iter(keys) if after is None else keys.irange(minimum=after, inclusive=(False, True))
    got = list(islice(it, limit + 1))
    return Page(got[:limit], len(got) > limit)


def previous_keys(
    keys: SortedList, after: Key | None, count: int, *, newest_first: bool = False
) -> list[Key]:
    """The last ``count`` keys of the page that ended at ``after``, in list order: what a
    list that moved under its reader (an offset list, a replica behind) sends again."""
    if after is None or count <= 0:
        return []
    if newest_first:
        it = keys.irange(minimum=after, inclusive=(True, True))
    else:
        it = keys.irange(maximum=after, inclusive=(True, True), reverse=True)
    got = list(islice(it, count))
    return got[::-1]


def cursor_pagination(
    scope: str, page: Page, total: int, request_after: str | None, last_page_after: str
) -> dict[str, Any]:
    """``{total, before, after}`` as the contract says, or as a variant switch bends it.

    ``after`` points past the page's last item (so a client can resume later), null on an
    empty page. Variants: ``null`` makes it null on the last page; ``repeat`` hands back the
    request's own cursor on the last page (a client must notice and stop).
    """
    after = encode_cursor(scope, page.keys[-1]) if page.keys else None
    if not page.has_more:
        if last_page_after == "null":
            after = None
        elif last_page_after == "repeat" and request_after is not None:
            after = request_after
    before = encode_cursor(scope, page.keys[0]) if page.keys and request_after else None
    return {"total": total, "before": before, "after": after}


def link_pagination(scope: str, page: Page, total: int) -> dict[str, Any]:
    return {
        "total": total,
        "count": len(page.keys),
        "hasNextPage": page.has_more,
        "startCursor": encode_cursor(scope, page.keys[0]) if page.keys else None,
        "endCursor": encode_cursor(scope, page.keys[-1]) if page.keys else None,
    }


def offset_page(keys: SortedList, page_number: int, limit: int) -> tuple[list[Key], dict[str, Any]]:
    """Topics: page ``page_number`` (1-based) of ``limit`` items, and its pagination object."""
    start = (page_number - 1) * limit
    chunk = list(keys[start : start + limit]) if start < len(keys) else []
    total = len(keys)
    pagination = {
        "total": total,
        "before": str(page_number - 1) if page_number > 1 else None,
        "after": str(page_number + 1) if start + limit < total else None,
    }
    return chunk, pagination
