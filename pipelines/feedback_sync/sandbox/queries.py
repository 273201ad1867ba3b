"""Which sorted keys a filtered list reads.

Most filters map onto an index the store keeps. Announcement filters (published state,
categories, a published_at window) combine freely, so their matching keys are collected
once per distinct filter and cached until an announcement is written or "now" crosses a
scheduled post: a sync paging through one filter pays one pass, then O(log n) per page.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

from sortedcontainers import SortedList

from feedback_sync.sandbox.store import Store


@dataclass(frozen=True, slots=True)
class AnnouncementFilter:
    is_published: bool | None = None
    category_idxs: frozenset[str] | None = None
    published_after: int | None = None
    published_before: int | None = None

    @property
    def empty(self) -> bool:
        return (
            self.is_published is None
            and self.category_idxs is None
            and self.published_after is None
            and self.published_before is None
        )


class AnnouncementViews:
    """An LRU of materialised announcement filters."""

    def __init__(self, store: Store, size: int = 32) -> None:
        self.store = store
        self.size = size
        self._cache: OrderedDict[tuple[object, ...], SortedList] = OrderedDict()

    def keys(self, flt: AnnouncementFilter, now_us: int) -> SortedList:
        store = self.store
        if flt.empty:
            return store.announcements.order
        # "now" matters only through which scheduled posts have gone live
        epoch = bisect_right(store.published_times, now_us) if flt.is_published is not None else 0
        cache_key = (flt, store.announcement_generation, epoch)
        hit = self._cache.get(cache_key)
        if hit is not None:
            self._cache.move_to_end(cache_key)
            return hit
        matched = SortedList(
            key
            for key in store.announcements.order
            if _matches(store.announcements.by_idx[key[1]], flt, now_us)
        )
        self._cache[cache_key] = matched
        if len(self._cache) > self.size:
            self._cache.popitem(last=False)
        return matched


def _matches(announcement: object, flt: AnnouncementFilter, now_us: int) -> bool:
    published = announcement.published_at  # type: ignore[attr-defined]
    if flt.is_published is not None:
        is_published = published is not None and published <= now_us
        if is_published != flt.is_published:
            return False
    if flt.category_idxs is not None and not flt.category_idxs.intersection(
        announcement.category_idxs  # type: ignore[attr-defined]
    ):
        return False
    if flt.published_after is not None and (published is None or published < flt.published_after):
        return False
    return not (
        flt.published_before is not None and (published is None or published > flt.published_before)
    )
