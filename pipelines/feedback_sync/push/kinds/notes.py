"""Private notes on ideas (``IdeaNotes``): created once, found again by their marker."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from feedback_sync.errors import BadValue, NotFound
from feedback_sync.push import values
from feedback_sync.push.kinds.base import (
    Context,
    Field,
    Held,
    Kind,
    Parents,
    Record,
    Request,
    duplicate_problems,
    group_by_key,
    marked_key,
    walk_items,
    with_marker,
)


class IdeaNotes(Kind):
    """Private notes on ideas: one per idea, created once, then updated in place; found
    again by the marker line the push writes into them."""

    name = "idea_notes"
    resource = "comments"
    order = 30

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = group_by_key(rows, key, str)
        for idea, group in groups.items():
            record = Record(idea, idea, problems=duplicate_problems(f"{key} {idea}", group))
            row = group[0]
            if ctx.known_ideas and idea not in ctx.known_ideas:
                record.problems.append(f"unknown idea idx {idea!r} (not in the warehouse copy)")
            message = row.get("message")
            if not isinstance(message, str) or not message.strip():
                record.problems.append("message is required")
            else:
                record.fields[("message",)] = with_marker(message, ctx.target, idea)
            try:
                record.extra["author_email"] = values.email(row.get("author_email"))
            except BadValue as exc:
                record.problems.append(
                    f"author_email {exc}"
                    if row.get("author_email")
                    else "author_email is required (set push.note_author_email)"
                )
            out.append(record)
        return out

    def parent(self, record: Record) -> str | None:
        author = record.extra.get("author_email")
        return author.lower() if isinstance(author, str) else None

    def held(self, record: Record, parents: Parents, *, planning: bool = False) -> str | None:
        author = self.parent(record)
        if author is None:
            return None
        if author in parents.failed:
            return f"held back: its author {author} did not land ({parents.failed[author]})"
        if planning and parents(author) is None:
            return f"its author {author} is not a follower (add them to curated.accounts)"
        return None

    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        comments = ctx.model("comments")
        if comments is None:
            return {}
        loaded = ctx.load_times("comments")
        out: dict[str, Held] = {}
        by_idx = {idx: key for key, idx in known.items()}
        rows = ctx.query(
            f"select comment_idx, idea_idx, message from {comments} as c "
            "where is_private and (message like '%feedback-sync:' || ? || ':%' "
            "or comment_idx in (select unnest(?::varchar[])))",
            [ctx.target, list(by_idx)],
        )
        for row in rows:
            key = by_idx.get(row["comment_idx"]) or marked_key(row["message"], ctx.target)
            if key is not None and key == row["idea_idx"]:
                out[key] = Held(
                    row["comment_idx"],
                    {("message",): row["message"]},
                    loaded.get(row["comment_idx"], 0.0),
                )
        return out

    def live(
        self, ctx: Context, keys: list[tuple[str, Record | None]], known: dict[str, str]
    ) -> dict[str, Held]:
        out: dict[str, Held] = {}
        for key, _record in keys:
            try:
                for item in walk_items(
                    ctx.client, "comments", "comments", {"idea_idx": key, "included_types": "notes"}
                ):
                    mine = (
                        item.get("idx") == known.get(key)
                        or marked_key(item.get("message"), ctx.target) == key
                    )
                    if mine:
                        out[key] = Held(
                            str(item["idx"]), {("message",): item.get("message")}, raw=item
                        )
                        break
            except NotFound:
                continue  # the idea is gone: the create will say so
        return out

    def create(self, record: Record, ctx: Context) -> Request:
        author = ctx.parent_idx(record.extra["author_email"])
        body = {
            "author_idx": author,
            "message": record.fields[("message",)],
            "idea_idx": record.key,
            "is_private": True,
        }
        return Request("POST", "comments", body)

    def update(
        self, record: Record, held: Held, changes: dict[Field, tuple[Any, Any]], ctx: Context
    ) -> Request:
        return Request(
            "POST", f"comments/{quote(held.idx, safe='')}", {"message": record.fields[("message",)]}
        )
