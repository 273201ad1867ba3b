"""What one sandbox instance holds: its store, switches, request log, fault injector and
rate limiter. The API, the control routes and the guard all work on it; tests reach in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from feedback_sync.sandbox.faults import FaultInjector, RateLimiter, RequestLog
from feedback_sync.sandbox.queries import AnnouncementViews
from feedback_sync.sandbox.seed import REFERENCE_NOW, build_store
from feedback_sync.sandbox.serialize import Serializer
from feedback_sync.sandbox.settings import Settings
from feedback_sync.sandbox.store import Store
from feedback_sync.sandbox.timefmt import Clock


@dataclass
class SandboxState:
    """Everything one sandbox instance holds; control routes and tests reach in here."""

    store: Store
    settings: Settings
    scale: str
    seed: int
    log: RequestLog = field(default_factory=RequestLog)
    injector: FaultInjector = field(default_factory=FaultInjector)
    limiter: RateLimiter = field(default_factory=RateLimiter)
    announcement_views: AnnouncementViews = field(init=False)

    def __post_init__(self) -> None:
        self.announcement_views = AnnouncementViews(self.store)

    def configure(self, changes: dict[str, Any]) -> None:
        """Changes switches; a new fault or rate-limit setting restarts its random stream
        or buckets, so the same settings always give the same run.

        Raises:
            SettingsError: an unknown switch or a bad value (nothing is changed then).
        """
        self.settings.update(changes)
        if "faults" in changes:
            self.injector.reset()
        if "rate_limit_per_second" in changes:
            self.limiter.reset()

    def rebuild(self, scale: str, seed: int) -> None:
        """Replaces the store with a freshly seeded one (switches stay as they are)."""
        store = build_store(scale, seed, Clock(REFERENCE_NOW))
        self.store, self.announcement_views = store, AnnouncementViews(store)
        self.scale, self.seed = scale, seed
        self.log.clear()

    def counts(self) -> dict[str, int]:
        counts = {name: len(table) for name, table in self.store.tables().items()}
        return counts | {"companies": len(self.store.companies)}

    def dumper(self, now_us: int) -> Callable[[str, Any], dict[str, Any]]:
        """Ground-truth rows: API shapes, ISO timestamps, plus the keys lists hide."""
        settings = self.settings
        ser = Serializer(
            self.store,
            "iso",
            company_fields=settings.company_fields,
            number_drift=settings.number_drift,
        )

        def dump(resource: str, record: Any) -> dict[str, Any]:
            if resource == "followers":
                return ser.follower(record, include_attributes=True)
            if resource == "announcements":
                return ser.announcement(record, now_us)
            if resource == "comments":
                row = ser.comment(record)
                row["idea_idx"] = record.idea_idx
                return row
            if resource == "topics":
                return ser.topic(record)
            if resource == "statuses":
                return ser.status(record)
            if resource == "integration_links":
                return ser.link(record)
            return ser.idea(record)

        return dump
