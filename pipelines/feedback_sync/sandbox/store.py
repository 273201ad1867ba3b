"""The sandbox's in-memory store: records, the indexes every list reads, and all writes.

Each cursor list reads a ``SortedList`` of ``(created_us, idx)`` keys, so a page costs
O(log n + limit) whatever the store's size, and a cursor (which encodes a key, not a
position) stays valid when items before it are deleted. Filtered lists have their own
indexes: comments per idea and per idea and type, links per idea, per type and per both,
topics by position. Writes keep every index, counter and ``updated_at`` in step, with the
side effects ``api-contract.md`` names (idea counts, topic ``idea_count``, reassigning a
deleted follower's comments to one anonymous follower).

The store is not thread-safe by itself: the app serialises access with ``Store.lock``.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sortedcontainers import SortedList

from feedback_sync.sandbox.records import (
    Announcement,
    Attachment,
    Category,
    Comment,
    Company,
    Follower,
    Idea,
    JsonScalar,
    Link,
    SpendChange,
    Status,
    StatusMove,
    Topic,
    User,
)
from feedback_sync.sandbox.timefmt import Clock, truncate_to_second

Key = tuple[int, str]
R = TypeVar("R")

STATUS_PALETTE = (
    "#6b7280",
    "#3b82f6",
    "#f59e0b",
    "#8b5cf6",
    "#10b981",
    "#ef4444",
    "#ec4899",
    "#14b8a6",
)


class StoreError(Exception):
    """A write the store refuses; the API turns it into an error answer."""


class NotFound(StoreError):
    def __init__(self, resource: str, idx: str) -> None:
        super().__init__(f"{resource} {idx!r} not found")
        self.resource = resource
        self.idx = idx


class Invalid(StoreError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def make_idx(prefix: str, n: int) -> str:
    """An opaque-looking, unique idx that grows with the counter ``n``.

    Lists order by ``(created_at, idx)``; with whole-second timestamps, items created in the
    same second tie on ``created_at``, and an idx that grows with creation keeps them in
    creation order, so a saved cursor still sees every later item.
    """
    return f"{prefix}_{n * 7919 + 0x5DEECE66D:010x}"


def slugify(name: str) -> str:
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")
    return slug or "post"


class Table(Generic[R]):
    """Records of one resource by idx, and their keys in creation order."""

    def __init__(self, key: Callable[[R], Key]) -> None:
        self._key = key
        self.by_idx: dict[str, R] = {}
        self.order: SortedList = SortedList()

    def load_sorted(self, records: list[R]) -> None:
        """Bulk load (seeding): far faster than ``add`` one by one."""
        for record in records:
            self.by_idx[record.idx] = record  # type: ignore[attr-defined]
        self.order = SortedList(self._key(r) for r in records)

    def add(self, record: R) -> None:
        self.by_idx[record.idx] = record  # type: ignore[attr-defined]
        self.order.add(self._key(record))

    def remove(self, record: R) -> None:
        del self.by_idx[record.idx]  # type: ignore[attr-defined]
        self.order.remove(self._key(record))

    def get(self, resource: str, idx: str) -> R:
        try:
            return self.by_idx[idx]
        except KeyError:
            raise NotFound(resource, idx) from None

    def __len__(self) -> int:
        return len(self.by_idx)

    def __iter__(self) -> Iterator[R]:
        by_idx = self.by_idx
        return (by_idx[key[1]] for key in self.order)


def _created_key(record: Any) -> Key:
    return (record.created, record.idx)


class MultiIndex:
    """Sorted keys grouped by a value (comments per idea, links per type, ...)."""

    def __init__(self) -> None:
        self.groups: dict[Any, SortedList] = {}

    def add(self, group: Any, key: Key) -> None:
        keys = self.groups.get(group)
        if keys is None:
            keys = self.groups[group] = SortedList()
        keys.add(key)

    def remove(self, group: Any, key: Key) -> None:
        keys = self.groups[group]
        keys.remove(key)
        if not keys:
            del self.groups[group]

    def get(self, group: Any) -> SortedList:
        return self.groups.get(group) or _EMPTY

    def load(self, pairs: Iterable[tuple[Any, Key]]) -> None:
        """Bulk load (seeding) from ``(group, key)`` pairs in key order."""
        grouped: dict[Any, list[Key]] = {}
        for group, key in pairs:
            grouped.setdefault(group, []).append(key)
        self.groups = {group: SortedList(keys) for group, keys in grouped.items()}


_EMPTY: SortedList = SortedList()


@dataclass(slots=True)
class FollowerInput:
    name: str | None = None
    email: str | None = None
    attributes: dict[str, JsonScalar] | None = None
    companies: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class AnnouncementInput:
    name: str
    author_idx: str
    content: str
    published_at: int | None
    idea_idxs: list[str]
    category_idxs: list[str]


class Store:
    """Everything the sandbox serves, with one lock for the app to hold around each call."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.lock = threading.RLock()
        self.followers: Table[Follower] = Table(_created_key)
        self.announcements: Table[Announcement] = Table(_created_key)
        self.comments: Table[Comment] = Table(_created_key)
        self.ideas: Table[Idea] = Table(_created_key)
        self.statuses: Table[Status] = Table(_created_key)
        self.links: Table[Link] = Table(_created_key)
        self.topics: Table[Topic] = Table(lambda t: (t.order, t.idx))
        self.users: dict[str, User] = {}
        self.categories: dict[str, Category] = {}
        self.companies: dict[str, Company] = {}
        self.email_index: dict[str, str] = {}
        self.slugs: set[str] = set()
        # comments: per idea (both kinds) and per (idea, "comment" | "note")
        self.comments_by_idea = MultiIndex()
        self.comments_by_idea_kind = MultiIndex()
        self.comments_by_follower: dict[str, set[str]] = {}
        # links: per idea, per type, per (idea, type)
        self.links_by_idea = MultiIndex()
        self.links_by_type = MultiIndex()
        self.links_by_idea_type = MultiIndex()
        self.topic_idea_count: dict[str, int] = {}
        # published_at of every non-draft announcement, to tell cheaply when "now" has
        # crossed a scheduled post (the announcement-filter cache keys on it)
        self.published_times: SortedList = SortedList()
        self.counters: dict[str, int] = {}
        # bumped on every announcement write: filtered-list caches key on it
        self.announcement_generation = 0
        self.anonymous_follower_idx: str | None = None
        # what the history marts are checked against: every idea put into a status, every
        # company spend changed, since the store was seeded (seeding records none)
        self.status_moves: list[StatusMove] = []
        self.spend_changes: list[SpendChange] = []

    def tables(self) -> dict[str, Table[Any]]:
        """Every listed resource, by the name the control interface and the dump use."""
        return {
            "followers": self.followers,
            "announcements": self.announcements,
            "comments": self.comments,
            "topics": self.topics,
            "statuses": self.statuses,
            "integration_links": self.links,
            "ideas": self.ideas,
        }

    # bulk loads (seeding): the same indexes and side effects as the writes below, in O(n)

    def load_followers(self, followers: list[Follower]) -> None:
        """Loads followers sorted by creation; their companies must already be loaded."""
        self.followers.load_sorted(followers)
        self.email_index.update((f.email.lower(), f.idx) for f in followers)
        self.counters["flw"] = len(followers)

    def load_announcements(self, announcements: list[Announcement]) -> None:
        self.announcements.load_sorted(announcements)
        self.published_times = SortedList(
            a.published_at for a in announcements if a.published_at is not None
        )
        self.counters["ann"] = len(announcements)
        self.announcement_generation += 1

    def load_comments(self, comments: list[Comment], attachments: int) -> None:
        """Loads comments sorted by creation; bumps their ideas as ``create_comment`` does."""
        self.comments.load_sorted(comments)
        self.comments_by_idea.load((c.idea_idx, (c.created, c.idx)) for c in comments)
        self.comments_by_idea_kind.load(
            ((c.idea_idx, "note" if c.is_private else "comment"), (c.created, c.idx))
            for c in comments
        )
        for comment in comments:
            self.comments_by_follower.setdefault(comment.follower_idx, set()).add(comment.idx)
            idea = self.ideas.by_idx[comment.idea_idx]
            if comment.is_private:
                idea.note_count += 1
            else:
                idea.comment_count += 1
            idea.updated = max(idea.updated, comment.created)
        self.counters["cmt"] = len(comments)
        self.counters["att"] = attachments

    def load_links(self, links: list[Link]) -> None:
        self.links.load_sorted(links)
        self.links_by_idea.load((link.idea_idx, (link.created, link.idx)) for link in links)
        self.links_by_type.load((link.type, (link.created, link.idx)) for link in links)
        self.links_by_idea_type.load(
            ((link.idea_idx, link.type), (link.created, link.idx)) for link in links
        )
        self.counters["lnk"] = len(links)

    def next_idx(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return make_idx(prefix, n)

    def _stamp(self) -> int:
        return truncate_to_second(self.clock.stamp())

    # followers

    def _apply_companies(
        self, follower: Follower, companies: list[dict[str, Any]], at: int
    ) -> None:
        """Merges company entries into the shared companies and the follower's associations;
        a spend that changes is recorded at ``at`` (the follower's new ``updated_at``)."""
        for entry in companies:
            company_id = str(entry["id"])
            extras = {
                k: v
                for k, v in entry.items()
                if k not in ("id", "name", "monthly_spend", "attributes")
            }
            extras.update(entry.get("attributes") or {})
            company = self.companies.get(company_id)
            if company is None:
                company = Company(company_id, str(entry["name"]), None)
                self.companies[company_id] = company
            company.name = str(entry["name"])
            spend = entry.get("monthly_spend")
            if spend is not None and spend != company.monthly_spend:
                self.spend_changes.append(
                    SpendChange(company_id, follower.idx, company.monthly_spend, spend, at)
                )
                company.monthly_spend = spend
            company.attributes.update(extras)
            if company_id not in follower.company_ids:
                follower.company_ids.append(company_id)

    def create_follower(self, data: FollowerInput) -> Follower:
        assert data.name is not None and data.email is not None
        email_key = data.email.lower()
        if email_key in self.email_index:
            raise Invalid("email", f"a follower with email {data.email!r} already exists")
        now = self._stamp()
        idx = self.next_idx("flw")
        follower = Follower(
            idx=idx,
            name=data.name,
            email=data.email,
            avatar=f"https://avatars.example.com/{idx}.png",
            attributes=dict(data.attributes or {}),
            company_ids=[],
            created=now,
            updated=now,
        )
        if data.companies:
            self._apply_companies(follower, data.companies, now)
        self.followers.add(follower)
        self.email_index[email_key] = idx
        return follower

    def update_follower(self, idx: str, data: FollowerInput) -> Follower:
        follower = self.followers.get("follower", idx)
        if data.email is not None:
            new_key, old_key = data.email.lower(), follower.email.lower()
            owner = self.email_index.get(new_key)
            if owner is not None and owner != idx:
                raise Invalid("email", f"a follower with email {data.email!r} already exists")
            del self.email_index[old_key]
            self.email_index[new_key] = idx
            follower.email = data.email
        if data.name is not None:
            follower.name = data.name
        if data.attributes is not None:
            follower.attributes.update(data.attributes)
        now = self._stamp()
        if data.companies is not None:
            self._apply_companies(follower, data.companies, now)
        follower.updated = now
        return follower

    def _anonymous_follower(self) -> Follower:
        existing = self.followers.by_idx.get(self.anonymous_follower_idx or "")
        if existing is not None:
            return existing
        email = "anonymous@users.invalid"
        n = 1
        while email in self.email_index:
            n += 1
            email = f"anonymous{n}@users.invalid"
        anonymous = self.create_follower(FollowerInput(name="Anonymous", email=email))
        self.anonymous_follower_idx = anonymous.idx
        return anonymous

    def delete_follower(self, idx: str, content: str) -> None:
        follower = self.followers.get("follower", idx)
        comment_idxs = sorted(self.comments_by_follower.get(idx, ()))
        if content == "reassign" and comment_idxs:
            if idx == self.anonymous_follower_idx:
                raise Invalid("content", "the anonymous follower's content cannot be reassigned")
            target = self._anonymous_follower()
            for comment_idx in comment_idxs:
                comment = self.comments.by_idx[comment_idx]
                comment.follower_idx = target.idx
                comment.updated = self._stamp()
                self.comments_by_follower.setdefault(target.idx, set()).add(comment_idx)
            self.comments_by_follower.pop(idx, None)
        else:
            for comment_idx in comment_idxs:
                self.delete_comment(comment_idx)
        self.followers.remove(follower)
        del self.email_index[follower.email.lower()]
        self.comments_by_follower.pop(idx, None)

    # announcements

    def _check_announcement_refs(self, data: AnnouncementInput) -> None:
        if data.author_idx not in self.users:
            raise Invalid("author_idx", f"unknown author {data.author_idx!r}")
        for idea_idx in data.idea_idxs:
            if idea_idx not in self.ideas.by_idx:
                raise Invalid("idea_idxs", f"unknown idea {idea_idx!r}")
        for category_idx in data.category_idxs:
            if category_idx not in self.categories:
                raise Invalid("category_idxs", f"unknown category {category_idx!r}")

    def unique_slug(self, name: str) -> str:
        """``name`` as a slug, with ``-2``, ``-3``... when taken; reserves it."""
        base = slugify(name)
        slug, n = base, 1
        while slug in self.slugs:
            n += 1
            slug = f"{base}-{n}"
        self.slugs.add(slug)
        return slug

    def _set_published(self, announcement: Announcement, published_at: int | None) -> None:
        if announcement.published_at is not None:
            self.published_times.remove(announcement.published_at)
        announcement.published_at = published_at
        if published_at is not None:
            self.published_times.add(published_at)

    def create_announcement(self, data: AnnouncementInput) -> Announcement:
        self._check_announcement_refs(data)
        now = self._stamp()
        announcement = Announcement(
            idx=self.next_idx("ann"),
            name=data.name,
            slug=self.unique_slug(data.name),
            content=data.content,
            published_at=None,
            author_idx=data.author_idx,
            category_idxs=_unique(data.category_idxs),
            idea_idxs=_unique(data.idea_idxs),
            reactions={},
            created=now,
            updated=now,
        )
        self._set_published(announcement, data.published_at)
        self.announcements.add(announcement)
        self.announcement_generation += 1
        return announcement

    def update_announcement(self, idx: str, data: AnnouncementInput) -> Announcement:
        announcement = self.announcements.get("announcement", idx)
        self._check_announcement_refs(data)
        if data.name != announcement.name:
            self.slugs.discard(announcement.slug)
            announcement.slug = self.unique_slug(data.name)
            announcement.name = data.name
        if data.content != announcement.content:
            announcement.content = data.content
            announcement.rendered = None
        announcement.author_idx = data.author_idx
        announcement.category_idxs = _unique(data.category_idxs)
        announcement.idea_idxs = _unique(data.idea_idxs)
        self._set_published(announcement, data.published_at)
        announcement.updated = self._stamp()
        self.announcement_generation += 1
        return announcement

    def delete_announcement(self, idx: str) -> None:
        announcement = self.announcements.get("announcement", idx)
        self._set_published(announcement, None)
        self.slugs.discard(announcement.slug)
        self.announcements.remove(announcement)
        self.announcement_generation += 1

    def react(self, idx: str, emoji: str, delta: int = 1) -> Announcement:
        """Adds reactions (no API operation: used by seeded mutations)."""
        announcement = self.announcements.get("announcement", idx)
        count = announcement.reactions.get(emoji, 0) + delta
        if count > 0:
            announcement.reactions[emoji] = count
        else:
            announcement.reactions.pop(emoji, None)
        announcement.updated = self._stamp()
        self.announcement_generation += 1
        return announcement

    # comments

    def _index_comment(self, comment: Comment) -> None:
        key = (comment.created, comment.idx)
        self.comments.add(comment)
        self.comments_by_idea.add(comment.idea_idx, key)
        kind = "note" if comment.is_private else "comment"
        self.comments_by_idea_kind.add((comment.idea_idx, kind), key)
        self.comments_by_follower.setdefault(comment.follower_idx, set()).add(comment.idx)

    def _bump_idea_counts(self, idea_idx: str, is_private: bool, delta: int, at: int) -> None:
        """A comment written or deleted changes its idea: counts, and ``updated_at`` with it."""
        idea = self.ideas.by_idx[idea_idx]
        if is_private:
            idea.note_count += delta
        else:
            idea.comment_count += delta
        idea.updated = at

    def create_comment(
        self,
        *,
        author_idx: str,
        idea_idx: str,
        message: str,
        is_private: bool,
        attachments: Iterable[tuple[str, str, str]] = (),
    ) -> Comment:
        if author_idx not in self.followers.by_idx:
            raise Invalid("author_idx", f"unknown follower {author_idx!r}")
        if idea_idx not in self.ideas.by_idx:
            raise Invalid("idea_idx", f"unknown idea {idea_idx!r}")
        now = self._stamp()
        comment = Comment(
            idx=self.next_idx("cmt"),
            message=message,
            is_private=is_private,
            follower_idx=author_idx,
            idea_idx=idea_idx,
            attachments=[
                Attachment(self.next_idx("att"), name, url, media_type, now, now)
                for name, url, media_type in attachments
            ],
            created=now,
            updated=now,
        )
        self._index_comment(comment)
        self._bump_idea_counts(idea_idx, is_private, +1, now)
        return comment

    def update_comment(self, idx: str, message: str) -> Comment:
        comment = self.comments.get("comment", idx)
        comment.message = message
        comment.updated = self._stamp()
        return comment

    def delete_comment(self, idx: str) -> None:
        comment = self.comments.get("comment", idx)
        key = (comment.created, comment.idx)
        self.comments.remove(comment)
        self.comments_by_idea.remove(comment.idea_idx, key)
        kind = "note" if comment.is_private else "comment"
        self.comments_by_idea_kind.remove((comment.idea_idx, kind), key)
        owned = self.comments_by_follower.get(comment.follower_idx)
        if owned is not None:
            owned.discard(idx)
        self._bump_idea_counts(comment.idea_idx, comment.is_private, -1, self._stamp())

    # topics

    def create_topic(self, name: str | None) -> Topic:
        now = self._stamp()
        last = self.topics.order[-1][0] if len(self.topics) else 0
        topic = Topic(self.next_idx("top"), name or "New topic", last + 1, now, now)
        self.topics.add(topic)
        self.topic_idea_count[topic.idx] = 0
        return topic

    def update_topic(self, idx: str, name: str | None) -> Topic:
        topic = self.topics.get("topic", idx)
        if name is not None:
            topic.name = name
        topic.updated = self._stamp()
        return topic

    def delete_topic(self, idx: str) -> None:
        topic = self.topics.get("topic", idx)
        if self.topic_idea_count.get(idx):
            for idea in self.ideas.by_idx.values():
                if idx in idea.topic_idxs:
                    idea.topic_idxs.remove(idx)
                    idea.updated = self._stamp()
        self.topics.remove(topic)
        self.topic_idea_count.pop(idx, None)

    # statuses

    def create_status(self, name: str) -> Status:
        now = self._stamp()
        color = STATUS_PALETTE[self.counters.get("sts", 0) % len(STATUS_PALETTE)]
        status = Status(self.next_idx("sts"), name, color, now, now)
        self.statuses.add(status)
        return status

    def update_status(self, idx: str, name: str | None) -> Status:
        status = self.statuses.get("status", idx)
        if name is not None:
            status.name = name
        status.updated = self._stamp()
        return status

    def delete_status(self, idx: str) -> None:
        status = self.statuses.get("status", idx)
        in_use = sum(1 for idea in self.ideas.by_idx.values() if idea.status_idx == idx)
        if in_use:
            raise Invalid("statusIdx", f"status {idx!r} is in use by {in_use} idea(s)")
        self.statuses.remove(status)

    # ideas and links (no write operations in the API: seeded mutations use these)

    def create_idea(self, name: str, status_idx: str | None, topic_idxs: list[str]) -> Idea:
        now = self._stamp()
        n = self.counters.get("ide", 0) + 1
        idea = Idea(
            idx=self.next_idx("ide"),
            id=1000 + n,
            name=name,
            status_idx=status_idx,
            topic_idxs=[],
            comment_count=0,
            note_count=0,
            created=now,
            updated=now,
        )
        self.ideas.add(idea)
        self.set_idea_topics(idea, topic_idxs)
        self.status_moves.append(StatusMove(idea.idx, None, status_idx, now))
        return idea

    def set_idea_topics(self, idea: Idea, topic_idxs: list[str]) -> None:
        for topic_idx in idea.topic_idxs:
            self.topic_idea_count[topic_idx] -= 1
        idea.topic_idxs = _unique(topic_idxs)
        for topic_idx in idea.topic_idxs:
            self.topic_idea_count[topic_idx] = self.topic_idea_count.get(topic_idx, 0) + 1

    def update_idea(
        self, idx: str, *, name: str | None = None, status_idx: str | None = None
    ) -> Idea:
        idea = self.ideas.get("idea", idx)
        if name is not None:
            idea.name = name
        idea.updated = self._stamp()
        if status_idx is not None and status_idx != idea.status_idx:
            self.status_moves.append(StatusMove(idx, idea.status_idx, status_idx, idea.updated))
            idea.status_idx = status_idx
        return idea

    def delete_idea(self, idx: str) -> None:
        """Deletes an idea with its comments and links, and unlinks it from announcements."""
        idea = self.ideas.get("idea", idx)
        for key in list(self.comments_by_idea.get(idx)):
            self.delete_comment(key[1])
        for key in list(self.links_by_idea.get(idx)):
            self.delete_link(key[1])
        for announcement in self.announcements.by_idx.values():
            if idx in announcement.idea_idxs:
                announcement.idea_idxs.remove(idx)
                announcement.updated = self._stamp()
                self.announcement_generation += 1
        self.set_idea_topics(idea, [])
        self.ideas.remove(idea)

    def _index_link(self, link: Link) -> None:
        key = (link.created, link.idx)
        self.links.add(link)
        self.links_by_idea.add(link.idea_idx, key)
        self.links_by_type.add(link.type, key)
        self.links_by_idea_type.add((link.idea_idx, link.type), key)

    def create_link(self, idea_idx: str, link_type: str, link_ref: str, url: str) -> Link:
        if idea_idx not in self.ideas.by_idx:
            raise Invalid("idea_idx", f"unknown idea {idea_idx!r}")
        now = self.clock.stamp()
        link = Link(
            idx=self.next_idx("lnk"),
            idea_idx=idea_idx,
            type=link_type,
            link_ref=link_ref,
            meta={"url": url},
            created=now,
            updated=now,
        )
        self._index_link(link)
        return link

    def update_link(self, idx: str, meta: dict[str, Any]) -> Link:
        link = self.links.get("integration link", idx)
        link.meta.update(meta)
        link.updated = self.clock.stamp()
        return link

    def delete_link(self, idx: str) -> None:
        link = self.links.get("integration link", idx)
        key = (link.created, link.idx)
        self.links.remove(link)
        self.links_by_idea.remove(link.idea_idx, key)
        self.links_by_type.remove(link.type, key)
        self.links_by_idea_type.remove((link.idea_idx, link.type), key)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
