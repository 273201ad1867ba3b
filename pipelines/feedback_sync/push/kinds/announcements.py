"""Announcements: created, updated whole, found again by their marker."""

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
    Record,
    Request,
    check_value,
    duplicate_problems,
    group_by_key,
    marked_key,
    unwrap,
    walk_items,
    with_marker,
)


class Announcements(Kind):
    """Announcements: created, updated whole (the API replaces a post), found again by the
    marker line the push writes into them."""

    name = "announcements"
    resource = "announcements"
    order = 40
    FIELDS = ("name", "content", "published_at", "author_idx", "idea_idxs", "category_idxs")

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = group_by_key(rows, key, str)
        for release, group in groups.items():
            record = Record(
                release, release, problems=duplicate_problems(f"{key} {release}", group)
            )
            row = group[0]
            for column in ("name", "content"):
                if not isinstance(row.get(column), str) or not row[column].strip():
                    record.problems.append(f"{column} is required")
            check_value(record, ("name",), values.text, row.get("name"))
            if isinstance(row.get("content"), str) and row["content"].strip():
                record.fields[("content",)] = with_marker(row["content"], ctx.target, release)
            record.fields[("published_at",)] = None
            check_value(
                record,
                ("published_at",),
                lambda v: values.whole_seconds(values.moment(v)),
                row.get("published_at"),
            )
            check_value(record, ("author_idx",), values.text, row.get("author_idx"))
            # authors and categories have no list endpoint (the copy knows only those some
            # post uses), so the service's 400 judges them; ideas are checked here
            for column, known, what in (("idea_idxs", ctx.known_ideas, "idea"),):
                try:
                    items = values.idx_list(row.get(column))
                except BadValue as exc:
                    record.problems.append(f"{column} {exc}")
                    continue
                unknown = [i for i in items if known and i not in known]
                if unknown:
                    record.problems.append(
                        f"unknown {what} idx(s) {', '.join(unknown)} (not in the warehouse copy)"
                    )
                if row.get(column) is not None:
                    record.fields[(column,)] = items
            out.append(record)
        return out

    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        announcements = ctx.model("announcements")
        if announcements is None:
            return {}
        loaded = ctx.load_times("announcements")
        by_idx = {idx: key for key, idx in known.items()}
        rows = ctx.query(
            "select announcement_idx, title, content_markdown, published_at, author_idx "
            f"from {announcements} as a "
            "where content_markdown like '%feedback-sync:' || ? || ':%' "
            "or announcement_idx in (select unnest(?::varchar[]))",
            [ctx.target, list(by_idx)],
        )
        out: dict[str, Held] = {}
        for row in rows:
            key = by_idx.get(row["announcement_idx"]) or marked_key(
                row["content_markdown"], ctx.target
            )
            if key is None:
                continue
            idx = row["announcement_idx"]
            fields: dict[Field, Any] = {
                ("name",): row["title"],
                ("content",): row["content_markdown"],
                ("published_at",): row["published_at"],
                ("author_idx",): row["author_idx"],
                ("idea_idxs",): [],
                ("category_idxs",): [],
            }
            out[key] = Held(idx, fields, loaded.get(idx, 0.0))
        if out and ctx.model("announcement_ideas") is not None:
            owners = {h.idx: h for h in out.values()}
            for table, column, name in (
                ("announcement_ideas", "idea_idx", "idea_idxs"),
                ("announcement_categories", "category_idx", "category_idxs"),
            ):
                items = ctx.model(table)
                if items is None:
                    continue
                for row in ctx.query(
                    f"select announcement_idx, {column} as item from {items} as i order by position"
                ):
                    held = owners.get(row["announcement_idx"])
                    if held is not None:
                        held.fields[(name,)].append(row["item"])
        return out

    def live(
        self, ctx: Context, keys: list[tuple[str, Record | None]], known: dict[str, str]
    ) -> dict[str, Held]:
        out: dict[str, Held] = {}
        unknown = {key for key, _ in keys if key not in known}
        if unknown:  # not in the journal: one pass over the posts finds them by marker
            for item in walk_items(ctx.client, "announcements", "announcements"):
                found = marked_key(item.get("content"), ctx.target)
                if found in unknown and found not in out:
                    out[found] = Held(str(item["idx"]), announcement_fields(item), raw=item)
        for key, _record in keys:
            idx = known.get(key)
            if idx is None:
                continue
            try:
                body = ctx.client.get_json(
                    f"announcements/{quote(idx, safe='')}", {}, resource="announcements"
                )
            except NotFound:
                continue
            item = unwrap(body)
            out[key] = Held(idx, announcement_fields(item), raw=item)
        return out

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        for item in walk_items(ctx.client, "announcements", "announcements"):
            if marked_key(item.get("content"), ctx.target) == key:
                return str(item["idx"])
        return None

    def _body(self, record: Record, held: Held | None) -> dict[str, Any]:
        """The whole shape (an update replaces it): desired fields, else what is held (a
        NULL clears a field only when the target lists it under ``nulls``)."""
        nulls = record.extra.get("nulls", frozenset())
        body: dict[str, Any] = {}
        for name in self.FIELDS:
            value = record.fields.get((name,))
            if value is None and name not in nulls and held is not None:
                value = held.fields.get((name,))
            if name == "published_at":
                body[name] = None if value is None else values.iso(values.moment(value))
            elif value is not None:
                body[name] = value
        return body

    def create_problems(self, record: Record) -> list[str]:
        return [] if record.fields.get(("author_idx",)) else ["author_idx is required to create"]

    def create(self, record: Record, ctx: Context) -> Request:
        return Request("POST", "announcements", self._body(record, None))

    def update(
        self, record: Record, held: Held, changes: dict[Field, tuple[Any, Any]], ctx: Context
    ) -> Request:
        return Request(
            "POST", f"announcements/{quote(held.idx, safe='')}", self._body(record, held)
        )


def announcement_fields(item: dict[str, Any]) -> dict[Field, Any]:
    author: dict[str, Any] = item["author"] if isinstance(item.get("author"), dict) else {}
    return {
        ("name",): item.get("name"),
        ("content",): item.get("content"),
        ("published_at",): item.get("published_at"),
        ("author_idx",): author.get("idx"),
        ("idea_idxs",): [i.get("idx") for i in item.get("ideas") or [] if isinstance(i, dict)],
        ("category_idxs",): [
            c.get("idx") for c in item.get("categories") or [] if isinstance(c, dict)
        ],
    }
