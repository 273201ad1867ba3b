"""Records to the JSON shapes of ``api-spec.md``, in the timestamp format the switch asks for.

Derived fields are computed here: announcement ``content_html`` and ``excerpt`` (rendered
from the Markdown once and cached on the record), ``is_published`` (against the clock),
comment ``content`` / ``content_html`` / ``content_markdown`` and ``type``, topic
``idea_count``, and the embedded author, follower, category and idea objects.
"""

from __future__ import annotations

import functools
import html
import re
import zlib
from collections.abc import Callable
from typing import Any

from feedback_sync.sandbox.records import (
    Announcement,
    Comment,
    Company,
    Follower,
    Idea,
    Link,
    Status,
    Topic,
)
from feedback_sync.sandbox.store import Store
from feedback_sync.sandbox.timefmt import format_iso, format_plain

Formatter = Callable[[int], str]

_TAGS = re.compile(r"<[^>]+>")
_BLOCK_ENDS = re.compile(
    r"</(?:p|h[1-6]|li|pre|blockquote|ul|ol|table|tr|td|th)>|<br\s*/?>|<hr\s*/?>"
)
_SPACES = re.compile(r"\s+")
_BLOCKS = re.compile(r"\n[ \t]*\n+")


def formatter_for(mode: str, *, is_link: bool, idx: str) -> Formatter:
    """The timestamp format of one row: the contract's, one of the two everywhere, or mixed."""
    if mode == "iso":
        return format_iso
    if mode == "plain":
        return format_plain
    if mode == "mixed":
        return format_iso if zlib.crc32(idx.encode()) & 1 else format_plain
    return format_iso if is_link else format_plain


class Serializer:
    """Turns records into API objects for one store and one timestamp mode.

    ``company_fields`` and ``number_drift`` bend company entries the way other
    implementations of the API do (see ``company_entry``).
    """

    def __init__(
        self,
        store: Store,
        timestamp_mode: str = "contract",
        *,
        company_fields: str = "attributes",
        number_drift: int | None = None,
    ) -> None:
        self.store = store
        self.mode = timestamp_mode
        self.company_fields = company_fields
        self.number_drift = number_drift

    def _fmt(self, idx: str, is_link: bool = False) -> Formatter:
        return formatter_for(self.mode, is_link=is_link, idx=idx)

    def follower(self, follower: Follower, include_attributes: bool) -> dict[str, Any]:
        fmt = self._fmt(follower.idx)
        data: dict[str, Any] = {
            "idx": follower.idx,
            "name": follower.name,
            "email": follower.email,
            "avatar": follower.avatar,
        }
        if include_attributes:
            data["attributes"] = follower.attributes
            companies = self.store.companies
            data["companies"] = [
                company_entry(companies[cid], self.company_fields, self.number_drift)
                for cid in follower.company_ids
            ]
        data["created_at"] = fmt(follower.created)
        data["updated_at"] = fmt(follower.updated)
        return data

    def announcement(self, announcement: Announcement, now_us: int) -> dict[str, Any]:
        fmt = self._fmt(announcement.idx)
        if announcement.rendered is None:
            announcement.rendered = render_markdown(announcement.content)
        content_html, excerpt = announcement.rendered
        store = self.store
        author = store.users[announcement.author_idx]
        published = announcement.published_at
        return {
            "idx": announcement.idx,
            "name": announcement.name,
            "slug": announcement.slug,
            "excerpt": excerpt,
            "content": announcement.content,
            "content_html": content_html,
            "reaction_count": announcement.reactions,
            "is_published": published is not None and published <= now_us,
            "published_at": fmt(published) if published is not None else None,
            "created_at": fmt(announcement.created),
            "updated_at": fmt(announcement.updated),
            "author": {"idx": author.idx, "name": author.name, "avatar": author.avatar},
            "categories": [
                {"idx": c.idx, "name": c.name, "color": c.color}
                for c in (store.categories[idx] for idx in announcement.category_idxs)
            ],
            "ideas": [
                {"idx": i.idx, "name": i.name}
                for i in (store.ideas.by_idx[idx] for idx in announcement.idea_idxs)
            ],
        }

    def comment(self, comment: Comment) -> dict[str, Any]:
        fmt = self._fmt(comment.idx)
        store = self.store
        author = store.followers.by_idx[comment.follower_idx]
        idea = store.ideas.by_idx[comment.idea_idx]
        blocks = [b for b in _BLOCKS.split(comment.message.strip()) if b.strip()]
        return {
            "idx": comment.idx,
            "message": comment.message,
            "content": [{"type": "paragraph", "children": [{"text": b}]} for b in blocks],
            "content_html": "".join(f"<p>{html.escape(b)}</p>" for b in blocks),
            "content_markdown": comment.message,
            "is_private": comment.is_private,
            "type": "note" if comment.is_private else "comment",
            "created_at": fmt(comment.created),
            "updated_at": fmt(comment.updated),
            "follower": {"idx": author.idx, "name": author.name, "avatar": author.avatar},
            "idea_id": idea.id,
            "attachments": [
                {
                    "idx": a.idx,
                    "name": a.name,
                    "url": a.url,
                    "type": a.type,
                    "created_at": fmt(a.created),
                    "updated_at": fmt(a.updated),
                }
                for a in comment.attachments
            ],
        }

    def topic(self, topic: Topic) -> dict[str, Any]:
        fmt = self._fmt(topic.idx)
        return {
            "idx": topic.idx,
            "name": topic.name,
            "idea_count": self.store.topic_idea_count.get(topic.idx, 0),
            "order": topic.order,
            "created_at": fmt(topic.created),
            "updated_at": fmt(topic.updated),
        }

    def status(self, status: Status) -> dict[str, Any]:
        fmt = self._fmt(status.idx)
        return {
            "idx": status.idx,
            "name": status.name,
            "color": status.color,
            "created_at": fmt(status.created),
            "updated_at": fmt(status.updated),
        }

    def link(self, link: Link) -> dict[str, Any]:
        fmt = self._fmt(link.idx, is_link=True)
        return {
            "idx": link.idx,
            "idea_idx": link.idea_idx,
            "type": link.type,
            "link_ref": link.link_ref,
            "meta": link.meta,
            "created_at": fmt(link.created),
            "updated_at": fmt(link.updated),
        }

    def idea(self, idea: Idea) -> dict[str, Any]:
        fmt = self._fmt(idea.idx)
        return {
            "idx": idea.idx,
            "id": idea.id,
            "name": idea.name,
            "status_idx": idea.status_idx,
            "topic_idxs": idea.topic_idxs,
            "comment_count": idea.comment_count,
            "note_count": idea.note_count,
            "created_at": fmt(idea.created),
            "updated_at": fmt(idea.updated),
        }


def company_entry(company: Company, fields: str, drift: int | None) -> dict[str, Any]:
    """A company as a follower's ``companies`` entry.

    ``fields``: ``attributes`` (custom fields under ``attributes``, the sandbox's choice) or
    ``top_level`` (beside ``id`` and ``name``, as the create body sends them; some
    implementations echo them so). ``drift``: a seed, or None; with a seed each number of
    each company (``monthly_spend`` and numeric custom fields) is sent, by a seeded choice
    per company and field, as an integer, a fraction, or text; another seed drifts them
    again, so a field that held integers can hold fractions or words on the next sync.
    """
    data: dict[str, Any] = {"id": company.id, "name": company.name}
    if company.monthly_spend is not None:  # the spec's number: left out, never null
        data["monthly_spend"] = _drifted(company.monthly_spend, drift, company.id, "spend")
    custom = {
        key: _drifted(value, drift, company.id, key) if _is_number(value) else value
        for key, value in company.attributes.items()
    }
    if fields == "top_level":
        data.update(custom)
        data["attributes"] = {}
    else:
        data["attributes"] = custom
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _drifted(value: Any, seed: int | None, company: str, field: str) -> Any:
    if seed is None:
        return value
    choice = zlib.crc32(f"{seed}:{company}:{field}".encode())
    if choice % 3 == 0:
        return round(value)  # an integer
    if choice % 3 == 1:
        whole = float(value) == int(value)
        return float(value) + 0.5 if whole else float(value)  # a fraction
    if (choice >> 8) % 3 == 0:
        return "unlimited"  # a word where a number was
    return str(value)  # the number, as text


@functools.cache
def _markdown() -> Any:
    # imported on the first announcement served, not at start-up: markdown_it costs 50 ms,
    # a quarter of `feedback-sync sandbox`'s time to listening
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False})


def render_markdown(content: str) -> tuple[str, str | None]:
    """``(content_html, excerpt)``: the excerpt is the first 140 characters of plain text."""
    rendered = _markdown().render(content)
    # block ends become spaces, inline tags vanish: "It is <strong>here</strong>." stays whole
    text = _SPACES.sub(" ", html.unescape(_TAGS.sub("", _BLOCK_ENDS.sub(" ", rendered)))).strip()
    return rendered, (text[:140] or None)
