"""What one run of the source shares across its resources."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.source.arrow import Disposition
from feedback_sync.source.types import ColumnTypes


@dataclass
class SyncRun:
    """Settings, the one HTTP client, and what the resources learned while running.

    ``complete`` names the resources read from their start to their end in this run: only
    their tables may have deletes reconciled (rows not seen are gone at the source; for a
    resource in ``gone``, exactly the rows it names).
    ``types`` decides every column's type once for the whole run (``types.ColumnTypes``).
    ``warehouse_tables`` are the tables the warehouse already has: a table not among them
    is appended to instead of merged (``appends.settle`` does what merge would have);
    None where the warehouse cannot tell, and every table merges.
    """

    settings: FeedbackSettings
    full: bool = False
    transport: httpx.BaseTransport | None = None
    client: FeedbackClient = field(init=False)
    complete: set[str] = field(default_factory=set)
    ideas_endpoint: bool | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    types: ColumnTypes = field(default_factory=ColumnTypes)
    warehouse_tables: frozenset[str] | None = None
    # the ideas to load (idx -> their row's fingerprint); None: every idea loads
    # (``changes``)
    changed_ideas: dict[str, str] | None = None
    # per resource the source compared, the keys its complete read no longer found: their
    # rows are removed by key (the resource's unchanged rows were not loaded again either)
    gone: dict[str, list[str]] = field(default_factory=dict)
    # per resource, rows read and not loaded again because nothing in them changed
    unchanged: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _claimed: set[str] = field(default_factory=set, repr=False)
    _once_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _memos: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.client = FeedbackClient(self.settings, transport=self.transport, helper=True)

    def write_disposition(self, table: str) -> Disposition:
        """``append`` for a table the warehouse does not have yet, else ``merge``."""
        known = self.warehouse_tables
        return "append" if known is not None and table not in known else "merge"

    def mark_complete(self, resource: str) -> None:
        with self._lock:
            self.complete.add(resource)

    def count_skipped(self, resource: str) -> None:
        with self._lock:
            self.skipped[resource] = self.skipped.get(resource, 0) + 1

    def count_unchanged(self, resource: str, rows: int) -> None:
        with self._lock:
            self.unchanged[resource] = self.unchanged.get(resource, 0) + rows

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
