"""Records to the JSON shapes of ``api-spec.md``, in the timestamp format the switch asks for.

Derived fields are computed here: announcement ``content_html`` and ``excerpt`` (rendered
from the Markdown once and cached on the record), ``is_published`` (against the clock),
comment ``content`` / ``content_html`` / ``content_markdown`` and ``type``, topic
``idea_count``, and the embedded author, follower, category and idea objects.
"""

from __future__ import annotations

import html
import re
import zlib
from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt

from sandbox.records import Announcement, Comment, Company, Follower, Idea, Link, Status, Topic
from sandbox.store import Store
from sandbox.timefmt import format_iso, format_plain

Formatter = Callable[[int], str]

_markdown = MarkdownIt("commonmark", {"html": False})
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
    """Turns records into API objects for one store and one timestamp mode."""

    def __init__(self, store: Store, timestamp_mode: str = "contract") -> None:
        self.store = store
        self.mode = timestamp_mode

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
            data["companies"] = [_company(companies[cid]) for cid in follower.company_ids]
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


def _company(company: Company) -> dict[str, Any]:
    data: dict[str, Any] = {"id": company.id, "name": company.name}
    if company.monthly_spend is not None:  # the spec's number: left out, never null
        data["monthly_spend"] = company.monthly_spend
    data["attributes"] = company.attributes
    return data


def render_markdown(content: str) -> tuple[str, str | None]:
    """``(content_html, excerpt)``: the excerpt is the first 140 characters of plain text."""
    rendered = _markdown.render(content)
    # block ends become spaces, inline tags vanish: "It is <strong>here</strong>." stays whole
    text = _SPACES.sub(" ", html.unescape(_TAGS.sub("", _BLOCK_ENDS.sub(" ", rendered)))).strip()
    return rendered, (text[:140] or None)
