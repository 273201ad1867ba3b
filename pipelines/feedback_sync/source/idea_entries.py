"""Each idea's entry in the saved state of comments and integration links.

Kept apart from the source (no dlt, no httpx): ``feedback-sync status`` reads them too.
The fingerprints of the ideas' own rows (``fingerprint``) are the ``ideas`` resource's.
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Any

import orjson

# the state key of a resource's rows' fingerprints (``changes``: ideas, announcements)
ROWS = "rows"
# hashed with every fingerprint: a release that changes how a row lands (its shaping, its
# columns) changes this, and every row loads once again
FINGERPRINT_VERSION = b"feedback-rows-1"


def idea_signature(idea: dict[str, Any]) -> str | None:
    """A short fingerprint of what tells that an idea's comments changed, or None.

    Built from ``comment_count``, ``note_count`` and ``updated_at`` (a new comment or note
    moves all three); None when the service sends none of them, so the idea is always polled.
    """
    parts = [idea.get(name) for name in ("comment_count", "note_count", "updated_at")]
    if all(part is None for part in parts):
        return None
    return format(zlib.crc32("|".join(map(str, parts)).encode()), "08x")


def pack_idea(cursor: str | None, signature: str | None, total: int | None) -> str:
    """One idea's entry in the per-idea state, as one string: ``signature|total|cursor``.

    One string per idea, not a list: dlt copies the state several times per run (decoded
    from the local file and from the destination, deep-copied, hashed, serialized), and a
    string is shared by deep copies where a list is not, so the state's memory stays small
    with tens of thousands of ideas. The cursor goes last: it may hold any character.
    """
    return f"{signature or ''}|{'' if total is None else total}|{cursor or ''}"


def unpack_idea(entry: Any) -> tuple[str | None, str | None, int | None]:
    """``(cursor, signature, total)`` of a per-idea entry; None for what it does not hold.

    Reads the packed string and the ``[cursor, signature, total]`` list earlier versions
    saved; anything else (a damaged entry) reads as unknown, so the idea is polled again.
    """
    if isinstance(entry, str):
        parts = entry.split("|", 2)
        if len(parts) == 3:
            signature, total, cursor = parts
            if total.isdecimal() or not total:
                return cursor or None, signature or None, int(total) if total else None
        return None, None, None
    if isinstance(entry, list) and 2 <= len(entry) <= 3:
        old_cursor, old_signature = entry[0], entry[1]
        old_total = entry[2] if len(entry) == 3 else None
        return (
            old_cursor if isinstance(old_cursor, str) and old_cursor else None,
            old_signature if isinstance(old_signature, str) else None,
            old_total if isinstance(old_total, int) and not isinstance(old_total, bool) else None,
        )
    return None, None, None


def fingerprint(row: dict[str, Any]) -> str:
    """A digest of everything an idea's row holds (as shaped to land), 11 characters.

    Kept per idea in the ``ideas`` resource's state (``changes``): an idea whose
    fingerprint did not move since the load that holds it is not loaded again. 64 bits of
    BLAKE2b: two different rows of one idea share a fingerprint once in about 10^19
    changes. The row's keys are read in the order the service sent them: a server that
    reorders them costs a reload, never a missed change.
    """
    try:
        data = orjson.dumps(row)
    except TypeError:  # an integer beyond 64 bits, which orjson refuses: repr is exact
        data = repr(row).encode()
    digest = hashlib.blake2b(data, digest_size=8, person=FINGERPRINT_VERSION).digest()
    return base64.urlsafe_b64encode(digest).decode()[:11]
