"""What goes wrong on purpose: seeded fault draws, a per-key rate limiter, the request log.

Faults are drawn from a ``random.Random`` seeded by the settings, so a run with the same
seed and the same request order meets the same faults. Scripted faults (``the next N
requests to this path``) come first, for tests that need one exact failure.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from feedback_sync.sandbox.settings import FaultSettings


class DroppedConnection(ConnectionResetError):
    """Raised inside the app to make the server drop the connection mid-answer."""


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seed: int | None = None
        self._rng = random.Random(0)

    def reset(self) -> None:
        with self._lock:
            self._seed = None

    def draw(self, faults: FaultSettings, method: str, path: str) -> str | None:
        """The fault for this request, or None."""
        with self._lock:
            for scripted in faults.script:
                if path.startswith(scripted.path_prefix) and scripted.method in (None, method):
                    scripted.count -= 1
                    if scripted.count <= 0:
                        faults.script.remove(scripted)
                    return scripted.kind
            if faults.rate <= 0:
                return None
            if self._seed != faults.seed:
                self._seed = faults.seed
                self._rng = random.Random(faults.seed)
            if self._rng.random() < faults.rate:
                return self._rng.choice(faults.kinds)
            return None

    def cut_point(self, length: int) -> int:
        """Where a truncated body ends: somewhere strictly inside it."""
        with self._lock:
            return self._rng.randint(1, max(1, length - 1)) if length > 1 else 0


class RateLimiter:
    """A token bucket per API key: ``rate`` requests per second, bursts of one second."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key: str, rate: float) -> tuple[bool, int, int]:
        """``(allowed, remaining, retry_after_seconds)`` for one request."""
        now = time.monotonic()
        capacity = max(1.0, rate)
        with self._lock:
            tokens, last = self._buckets.get(key, (capacity, now))
            tokens = min(capacity, tokens + (now - last) * rate)
            if tokens >= 1.0:
                tokens -= 1.0
                self._buckets[key] = (tokens, now)
                return True, int(tokens), 0
            self._buckets[key] = (tokens, now)
            wait = (1.0 - tokens) / rate
            return False, 0, max(1, math.ceil(wait))

    def reset(self) -> None:
        with self._lock:
            self._buckets.clear()


@dataclass(slots=True)
class LoggedRequest:
    seq: int
    at: float
    method: str
    path: str
    query: str
    status: int | None = None
    fault: str | None = None
    body_sha256: str | None = None  # of a request that had a body: tells resent writes apart

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "method": self.method,
            "path": self.path,
            "query": self.query,
            "params": _params(self.query),
            "status": self.status,
            "fault": self.fault,
            "body_sha256": self.body_sha256,
        }


def _params(query: str) -> dict[str, list[str]]:
    params: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(name, []).append(value)
    return params


def redact_query(query: str) -> str:
    """The query string with any ``api_key`` value replaced, so keys never reach the log."""
    if "api_key" not in query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, "***" if k == "api_key" else v) for k, v in pairs])


class RequestLog:
    """The last ``capacity`` requests served, numbered from 1; older ones fall off."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._lock = threading.Lock()
        self._entries: deque[LoggedRequest] = deque(maxlen=capacity)
        self._seq = 0

    def start(self, method: str, path: str, query: str) -> LoggedRequest:
        with self._lock:
            self._seq += 1
            entry = LoggedRequest(self._seq, time.time(), method, path, redact_query(query))
            self._entries.append(entry)
            return entry

    def since(self, seq: int) -> list[LoggedRequest]:
        with self._lock:
            return [e for e in self._entries if e.seq > seq]

    @property
    def last_seq(self) -> int:
        return self._seq

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
