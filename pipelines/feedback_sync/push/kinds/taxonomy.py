"""Topics and statuses: named things matched by name, created and renamed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar
from urllib.parse import quote

from feedback_sync.push.kinds.base import (
    Context,
    Field,
    Held,
    Kind,
    Record,
    Request,
    duplicate_problems,
    group_by_key,
    walk_items,
)


class Taxonomy(Kind):
    """Topics and statuses: named by a curated key, created and renamed by it. A key the
    journal does not know yet adopts the row's ``idx`` if given, else the one object with
    the desired name, before anything is created."""

    staging: ClassVar[str]
    staging_idx: ClassVar[str]
    staging_name: ClassVar[str]
    numbered: ClassVar[bool] = False

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = group_by_key(rows, key, str)
        names: dict[str, list[Record]] = {}
        for value, group in groups.items():
            record = Record(value, value, problems=duplicate_problems(f"{key} {value}", group))
            row = group[0]
            if not isinstance(row.get("name"), str) or not row["name"].strip():
                record.problems.append("name is required")
            else:
                record.fields[("name",)] = row["name"]
                names.setdefault(row["name"], []).append(record)
            if row.get("idx") is not None:
                record.extra["idx"] = str(row["idx"])
            out.append(record)
        for name, holders in names.items():
            if len(holders) > 1:
                for record in holders:
                    record.problems.append(f"{len(holders)} keys want the name {name!r}")
        return out

    def _objects(
        self,
        items: Iterable[tuple[str, Any, float | None, dict[str, Any] | None]],
        keys: list[str],
        known: dict[str, str],
        records: dict[str, Record],
    ) -> dict[str, Held]:
        by_idx: dict[str, Held] = {}
        by_name: dict[str, list[Held]] = {}
        for item_idx, name, loaded, raw in items:
            held = Held(item_idx, {("name",): name}, loaded, raw)
            by_idx[item_idx] = held
            by_name.setdefault(name, []).append(held)
        taken = {known[k] for k in known}
        out: dict[str, Held] = {}
        for key in keys:
            record = records.get(key)
            idx = known.get(key) or (record.extra.get("idx") if record else None)
            if idx is not None:
                if idx in by_idx:
                    out[key] = by_idx[idx]
                continue
            name = record.fields.get(("name",)) if record else None
            candidates = [h for h in by_name.get(name, []) if h.idx not in taken] if name else []
            if len(candidates) == 1:
                out[key] = candidates[0]
        return out

    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        relation = ctx.model(self.staging)
        if relation is None:
            return {}
        loaded = ctx.load_times(self.resource)
        rows = ctx.query(
            f"select {self.staging_idx} as idx, {self.staging_name} as name from {relation} as t"
        )
        return self._objects(
            ((r["idx"], r["name"], loaded.get(r["idx"], 0.0), None) for r in rows),
            list(records),
            known,
            records,
        )

    def live(
        self, ctx: Context, keys: list[tuple[str, Record | None]], known: dict[str, str]
    ) -> dict[str, Held]:
        items = [
            (str(i["idx"]), i.get("name"), None, i)
            for i in walk_items(ctx.client, self.resource, self.resource, numbered=self.numbered)
        ]
        records = {k: r for k, r in keys if r is not None}
        return self._objects(items, [k for k, _ in keys], known, records)

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        """The object with the name the create sent, that no other key holds."""
        name = (payload or {}).get("name")
        if not isinstance(name, str):
            return None
        taken = set(ctx.taken_idxs)
        for item in walk_items(ctx.client, self.resource, self.resource, numbered=self.numbered):
            if item.get("name") == name and str(item.get("idx")) not in taken:
                return str(item["idx"])
        return None

    def create(self, record: Record, ctx: Context) -> Request:
        return Request("POST", self.resource, {"name": record.fields[("name",)]})

    def update(
        self, record: Record, held: Held, changes: dict[Field, tuple[Any, Any]], ctx: Context
    ) -> Request:
        return Request(
            "POST",
            f"{self.resource}/{quote(held.idx, safe='')}",
            {"name": record.fields[("name",)]},
        )


class Topics(Taxonomy):
    name = "topics"
    resource = "topics"
    order = 10
    staging, staging_idx, staging_name = "topics", "topic_idx", "topic_name"
    numbered = True


class Statuses(Taxonomy):
    name = "statuses"
    resource = "statuses"
    order = 11
    staging, staging_idx, staging_name = "statuses", "status_idx", "status_name"
