"""The records the sandbox stores: one slotted class per resource, no behaviour.

Timestamps are microsecond integers (see ``timefmt``). Derived fields the API shows
(slugs aside) are computed when a record is served, not stored, so the store stays small
at ``large`` scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonScalar = str | int | float | bool | None


@dataclass(slots=True)
class Company:
    """A company, shared by every follower associated with it (merged by ``id``)."""

    id: str
    name: str
    monthly_spend: float | None
    attributes: dict[str, JsonScalar] = field(default_factory=dict)


@dataclass(slots=True)
class Follower:
    idx: str
    name: str
    email: str
    avatar: str
    attributes: dict[str, JsonScalar]
    company_ids: list[str]
    created: int
    updated: int


@dataclass(slots=True)
class User:
    """A team member: announcement authors are users, not followers."""

    idx: str
    name: str
    avatar: str


@dataclass(slots=True)
class Category:
    idx: str
    name: str
    color: str


@dataclass(slots=True)
class Announcement:
    idx: str
    name: str
    slug: str
    content: str
    published_at: int | None
    author_idx: str
    category_idxs: list[str]
    idea_idxs: list[str]
    reactions: dict[str, int]
    created: int
    updated: int
    # (content_html, excerpt), rendered lazily from ``content``; reset when it changes
    rendered: tuple[str, str | None] | None = None


@dataclass(slots=True)
class Attachment:
    idx: str
    name: str
    url: str
    type: str
    created: int
    updated: int


@dataclass(slots=True)
class Comment:
    idx: str
    message: str
    is_private: bool
    follower_idx: str
    idea_idx: str
    attachments: list[Attachment]
    created: int
    updated: int


@dataclass(slots=True)
class Idea:
    idx: str
    id: int
    name: str
    status_idx: str | None
    topic_idxs: list[str]
    comment_count: int
    note_count: int
    created: int
    updated: int


@dataclass(slots=True)
class StatusMove:
    """An idea put into a status: created in it (``from_status_idx`` None) or moved to it,
    as the service's own UI does; the sandbox's record, which the history marts are checked
    against (``/_sandbox/dump``)."""

    idea_idx: str
    from_status_idx: str | None
    to_status_idx: str | None
    at: int


@dataclass(slots=True)
class SpendChange:
    """A company's ``monthly_spend`` changed, through a follower's create or update (the
    follower whose ``updated_at`` it moved)."""

    company_id: str
    follower_idx: str
    from_spend: float | None
    to_spend: float | None
    at: int


@dataclass(slots=True)
class Topic:
    idx: str
    name: str
    order: int
    created: int
    updated: int


@dataclass(slots=True)
class Status:
    idx: str
    name: str
    color: str
    created: int
    updated: int


@dataclass(slots=True)
class Link:
    idx: str
    idea_idx: str
    type: str
    link_ref: str
    meta: dict[str, Any]
    created: int
    updated: int
