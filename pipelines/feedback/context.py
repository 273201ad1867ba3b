"""What one run of the source shares across its resources."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from pipelines.feedback.client import FeedbackClient
from pipelines.feedback.settings import FeedbackSettings
from pipelines.feedback.types import ColumnTypes


@dataclass
class SyncRun:
    """Settings, the one HTTP client, and what the resources learned while running.

    ``complete`` names the resources read from their start to their end in this run: only
    their tables may have deletes reconciled (rows not seen are gone at the source).
    ``types`` decides every column's type once for the whole run (``types.ColumnTypes``).
    """

    settings: FeedbackSettings
    full: bool = False
    transport: httpx.BaseTransport | None = None
    client: FeedbackClient = field(init=False)
    complete: set[str] = field(default_factory=set)
    ideas_endpoint: bool | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    types: ColumnTypes = field(default_factory=ColumnTypes)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _claimed: set[str] = field(default_factory=set, repr=False)
    _once_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _memos: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.client = FeedbackClient(self.settings, transport=self.transport)

    def mark_complete(self, resource: str) -> None:
        with self._lock:
            self.complete.add(resource)

    def count_skipped(self, resource: str) -> None:
        with self._lock:
            self.skipped[resource] = self.skipped.get(resource, 0) + 1

    def claim(self, name: str) -> bool:
        """True for the first caller that claims ``name`` in this run, False for the rest."""
        with self._once_lock:
            if name in self._claimed:
                return False
            self._claimed.add(name)
            return True

    def memo(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` the first time ``name`` is asked for in this run; that value after.

        For what parallel transformer calls must agree on, read before any of them writes.
        """
        with self._once_lock:
            if name not in self._memos:
                self._memos[name] = compute()
            return self._memos[name]

    def merge_into_list(self, state: dict[str, Any], key: str, values: set[str]) -> None:
        """Adds ``values`` to the sorted list ``state[key]`` (parallel transformer calls)."""
        with self._lock:
            state[key] = sorted(set(state.get(key) or ()) | values)

    def once(self, name: str, step: Callable[[], None]) -> None:
        """Runs ``step`` the first time ``name`` is asked for; later callers wait until it ran.

        For one-time steps of transformer calls that dlt runs in parallel.
        """
        with self._once_lock:
            if name not in self._claimed:
                step()
                self._claimed.add(name)


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
