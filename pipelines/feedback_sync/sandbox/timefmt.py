"""Time for the sandbox: microsecond integers inside, the contract's two formats outside.

Every timestamp in the store is an ``int`` of microseconds since the Unix epoch, UTC. That
keeps sort keys cheap and cursors exact. The API shows them in one of two formats
(``api-contract.md``): ``2025-03-04 05:06:07`` for most resources and
``2025-03-04T05:06:07.123456Z`` for integration links.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SECOND = 1_000_000
DAY = 86_400 * SECOND

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# a date-time with an explicit zone: Z or +hh:mm / -hh:mm (seconds and fraction optional)
_DATE_TIME_ZONED = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})$"
)


def to_datetime(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def from_datetime(dt: datetime) -> int:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * SECOND + delta.microseconds


def format_plain(us: int) -> str:
    """``2025-03-04 05:06:07``: whole seconds, no zone (UTC)."""
    dt = to_datetime(us)
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d} {dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}"
    )


def format_iso(us: int) -> str:
    """``2025-03-04T05:06:07.123456Z``: microseconds and a trailing Z."""
    dt = to_datetime(us)
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T"
        f"{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}.{dt.microsecond:06d}Z"
    )


def parse_query_moment(value: str, *, end_of_day: bool = False) -> int:
    """Parses ``published_after`` / ``published_before``: a date, or a date-time with a zone.

    A bare date means midnight UTC; with ``end_of_day`` it means the last microsecond of
    that day, so ``published_before=2025-03-04`` includes posts of the 4th.

    Raises:
        ValueError: the value is neither form.
    """
    value = value.strip()
    if _DATE_ONLY.match(value):
        start = from_datetime(datetime.fromisoformat(value).replace(tzinfo=UTC))
        return start + DAY - 1 if end_of_day else start
    if _DATE_TIME_ZONED.match(value):
        return _in_range(from_datetime(datetime.fromisoformat(value.replace("Z", "+00:00"))))
    raise ValueError("expected an ISO 8601 date (2025-03-04) or a date-time with a zone")


def parse_body_moment(value: str) -> int:
    """Parses a timestamp sent in a request body (ISO 8601; no zone means UTC).

    Raises:
        ValueError: not an ISO 8601 date or date-time, or outside years 1900 to 9998.
    """
    text = value.strip()
    if not text or not text[:4].isdigit():
        raise ValueError("expected an ISO 8601 date-time")
    return _in_range(from_datetime(datetime.fromisoformat(text.replace("Z", "+00:00"))))


_MIN_US = from_datetime(datetime(1900, 1, 1, tzinfo=UTC))
_MAX_US = from_datetime(datetime(9999, 1, 1, tzinfo=UTC))


def _in_range(us: int) -> int:
    """Refuses moments the API could not show back in both formats."""
    if not _MIN_US <= us < _MAX_US:
        raise ValueError("must lie between the years 1900 and 9998")
    return us


def truncate_to_second(us: int) -> int:
    return us - us % SECOND


class Clock:
    """The sandbox's "now": fixed (the default, deterministic) or running with real time.

    A fixed clock moves only when told, and by ``tick_us`` on every write, so each write gets
    a distinct, increasing timestamp and creation order matches ``created_at`` order.
    A running clock follows the wall clock from the moment it was set.
    """

    def __init__(self, now_us: int, *, running: bool = False, tick_us: int = SECOND) -> None:
        self._lock = threading.Lock()
        self._anchor_us = now_us
        self._anchor_mono = time.monotonic()
        self._running = running
        self.tick_us = tick_us
        self._last_stamp = 0

    @property
    def running(self) -> bool:
        return self._running

    def now(self) -> int:
        with self._lock:
            return self._now_locked()

    def _now_locked(self) -> int:
        if self._running:
            return self._anchor_us + int((time.monotonic() - self._anchor_mono) * SECOND)
        return self._anchor_us

    def set(self, now_us: int | None = None, *, running: bool | None = None) -> None:
        with self._lock:
            current = self._now_locked()
            self._anchor_us = current if now_us is None else now_us
            self._anchor_mono = time.monotonic()
            if running is not None:
                self._running = running

    def advance(self, delta_us: int) -> None:
        with self._lock:
            self._anchor_us = self._now_locked() + delta_us
            self._anchor_mono = time.monotonic()

    def stamp(self) -> int:
        """The timestamp of one write: now, then a fixed clock moves on by one tick."""
        with self._lock:
            now = self._now_locked()
            if not self._running:
                self._anchor_us = now + self.tick_us
            # never hand out the same or an earlier stamp twice, even if the clock was set back
            stamp = max(now, self._last_stamp + 1) if self._running else now
            self._last_stamp = stamp
            return stamp
