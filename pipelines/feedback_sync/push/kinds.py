"""One class per API resource the push writes: how rows become records, how the service's
copy is read (warehouse, then the API), and which requests create, update and delete.

A record's fields are flat, keyed by tuples (``("companies", "acct-1", "plan")``), so the
diff compares only what the target maps, field by field; ``None`` means "not mapped for
this row" (a NULL never overwrites unless the target lists the field under ``nulls``).

Notes and announcements carry a marker the push writes into them, a Markdown comment that
renders to nothing: ``[//]: # (feedback-sync:<target>:<key>)``. It is how a create whose
answer was lost (a crash, a timeout) is found again instead of being sent twice.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote, unquote

from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.paging import Chain, CursorPaginator, PageNumberPaginator, walk
from feedback_sync.errors import BadValue, NotFound
from feedback_sync.push import values
from feedback_sync.warehouse.engines import Engine, has_relation, records

Field = tuple[str, ...]
_MARKER = re.compile(r"\[//\]: # \(feedback-sync:([a-z0-9_]+):([^)\s]+)\)")
PAGE = 100


def marker(target: str, key: str) -> str:
    return f"[//]: # (feedback-sync:{target}:{quote(key, safe='')})"


def with_marker(text: str, target: str, key: str) -> str:
    return f"{text.rstrip()}\n\n{marker(target, key)}"


def marked_key(text: Any, target: str) -> str | None:
    """The key of ``target``'s marker in ``text``, if there is one."""
    if not isinstance(text, str):
        return None
    for found in _MARKER.finditer(text):
        if found.group(1) == target:
            return unquote(found.group(2))
    return None


def show_field(name: Field) -> str:
    if name[0] == "companies" and len(name) == 3:
        return f"companies[{name[1]}].{name[2]}"
    return ".".join(name)


@dataclass
class Record:
    """One desired object: its key, its mapped fields, and what is wrong with it."""

    key: str
    label: str
    fields: dict[Field, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class Held:
    """What the service holds for a key: from the warehouse copy or read live."""

    idx: str
    fields: dict[Field, Any]
    loaded_at: float | None = None  # the copy's load time; None when read from the API
    raw: dict[str, Any] | None = None


@dataclass
class Request:
    method: str
    path: str
    body: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    """What kinds read besides their rows."""

    con: Engine  # the warehouse (DuckDB or PostgreSQL)
    dataset: str
    client: FeedbackClient
    target: str
    # an email -> the follower's idx, from this run's followers target first
    follower_idx: Callable[[str], str | None] = lambda email: None
    known_ideas: set[str] = field(default_factory=set)
    # idxs other keys of this target hold (the journal), which a lookup must not claim
    taken_idxs: set[str] = field(default_factory=set)

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of ``sql``, written in what DuckDB and PostgreSQL both accept."""
        return records(self.con, sql, params or [])

    def has(self, schema: str, table: str) -> bool:
        return has_relation(self.con, schema, table)

    def load_times(self, table: str) -> dict[str, float]:
        """idx -> when the forward sync loaded that row (dlt's load id is a unix time)."""
        if not self.has(self.dataset, table):
            return {}
        rows = self.con.execute(f'select idx, _dlt_load_id from "{self.dataset}"."{table}"')
        out: dict[str, float] = {}
        for idx, load_id in rows:
            try:
                out[str(idx)] = float(load_id)
            except (TypeError, ValueError):
                continue
        return out


def _walk(
    client: FeedbackClient,
    resource: str,
    path: str,
    filters: dict[str, str | int] | None = None,
    numbered: bool = False,
) -> Iterable[dict[str, Any]]:
    paginator = PageNumberPaginator(PAGE) if numbered else CursorPaginator(PAGE)
    chain = Chain(resource, path, paginator, filters or {})
    for page in walk(client, [chain], 1, urgent=True):
        yield from page.items


def _unwrap(body: dict[str, Any]) -> dict[str, Any]:
    """Topics and statuses answer unwrapped; other resources as ``{data: ...}``."""
    data = body.get("data")
    return data if isinstance(data, dict) else body


class Kind(ABC):
    """The behaviour of one API resource."""

    name: ClassVar[str]
    resource: ClassVar[str]
    delete_options: ClassVar[tuple[str, ...]] = ("yes",)
    order: ClassVar[int]  # parents first

    @abstractmethod
    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        """Validated records from the target's rows (problems recorded, not raised)."""

    @abstractmethod
    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        """The warehouse copy by key (``known``: key -> idx from the journal)."""

    @abstractmethod
    def live(
        self, ctx: Context, keys: list[tuple[str, Record | None]], known: dict[str, str]
    ) -> dict[str, Held]:
        """What the service holds now for ``keys``, read from the API (absent: none)."""

    @abstractmethod
    def create(self, record: Record, ctx: Context) -> Request: ...

    @abstractmethod
    def update(
        self, record: Record, held: Held, changes: dict[Field, tuple[Any, Any]], ctx: Context
    ) -> Request: ...

    def delete(self, idx: str, option: str) -> Request:
        return Request("DELETE", f"{self.resource}/{quote(idx, safe='')}")

    def created_idx(self, body: dict[str, Any]) -> str | None:
        idx = _unwrap(body).get("idx")
        return idx if isinstance(idx, str) and idx else None

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        """After a create whose outcome is unknown (``payload``: what was sent): the idx of
        the object if it exists after all."""
        held = self.live(ctx, [(key, None)], {}).get(key)
        return held.idx if held else None

    def parent(self, record: Record) -> str | None:
        """The follower email this record needs to exist first, if any."""
        return None

    def create_problems(self, record: Record) -> list[str]:
        """Why a record that does not exist yet cannot be created (fields the API requires
        on create only)."""
        return []

    def strip_custom(self, request: Request) -> tuple[Request | None, bool]:
        """The request without custom attributes (learned 403), and whether it had any."""
        return request, False


def _single(
    rows: list[dict[str, Any]], key: str, label: Callable[[Any], str]
) -> tuple[dict[str, list[dict[str, Any]]], list[Record]]:
    """Rows grouped by key; rows without a key become invalid records."""
    groups: dict[str, list[dict[str, Any]]] = {}
    bad: list[Record] = []
    for n, row in enumerate(rows, 1):
        value = row.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            bad.append(Record(f"(row {n})", f"row {n}", problems=[f"{key} is required"]))
            continue
        groups.setdefault(str(value).strip(), []).append(row)
    return groups, bad


def _duplicates(key: str, group: list[dict[str, Any]]) -> list[str]:
    return [f"duplicate key: {len(group)} rows have {key}"] if len(group) > 1 else []


def _check(
    record: Record, name: Field, convert: Callable[[Any], Any], value: Any, what: str | None = None
) -> None:
    if value is None:
        return
    try:
        record.fields[name] = convert(value)
    except BadValue as exc:
        record.problems.append(f"{what or show_field(name)} {exc}")


# followers ------------------------------------------------------------------------------


class Followers(Kind):
    name = "followers"
    resource = "followers"
    delete_options = ("delete", "reassign")
    order = 20

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups: dict[str, list[dict[str, Any]]] = {}
        out: list[Record] = []
        for n, row in enumerate(rows, 1):
            raw = row.get(key)
            try:
                address = values.email(raw)
            except BadValue as exc:
                shown = raw if raw is not None else "(none)"
                out.append(
                    Record(
                        f"(row {n})",
                        str(shown),
                        problems=[f"email {exc}" if raw is not None else "email is required"],
                    )
                )
                continue
            groups.setdefault(address.lower(), []).append(row)
        companies: dict[str, dict[str, Any]] = {}
        company_owner: dict[str, list[Record]] = {}
        for email_key, group in groups.items():
            record = Record(email_key, email_key)
            record.extra["email"] = values.email(group[0][key])
            out.append(record)
            for column, field_name in (("name", ("name",)),):
                seen = {
                    json.dumps(r.get(column), default=str)
                    for r in group
                    if r.get(column) is not None
                }
                if len(seen) > 1:
                    record.problems.append(f"rows disagree on {column}: {', '.join(sorted(seen))}")
                first = next((r.get(column) for r in group if r.get(column) is not None), None)
                _check(record, field_name, values.text, first)
            attributes: dict[str, Any] = {}
            for r in group:
                for k, v in _json_object(r.get("attributes"), record).items():
                    if k in attributes and attributes[k] != v:
                        record.problems.append(f"rows disagree on attribute {k!r}")
                    attributes[k] = v
            for k, v in attributes.items():
                _check(record, ("attributes", k), values.json_scalar, v, f"attribute {k!r}")
            seen_ids: set[str] = set()
            for r in group:
                cid = r.get("company_id")
                if cid is None:
                    continue
                cid = str(cid).strip()
                if cid in seen_ids:
                    record.problems.append(f"duplicate key: more than one row for company {cid}")
                    continue
                seen_ids.add(cid)
                if r.get("company_name") is None:
                    record.problems.append(
                        f"company {cid}: company_name is required with company_id "
                        "(the API needs both)"
                    )
                _check(record, ("companies", cid, "name"), values.text, r.get("company_name"))
                _check(
                    record,
                    ("companies", cid, "monthly_spend"),
                    values.number,
                    r.get("monthly_spend"),
                )
                _check(record, ("companies", cid, "plan"), values.text, r.get("plan"))
                for k, v in _json_object(r.get("company_fields"), record).items():
                    if k in ("id", "name", "monthly_spend", "attributes"):
                        record.problems.append(
                            f"company field company__{k} clashes with the API's own field"
                        )
                        continue
                    _check(
                        record,
                        ("companies", cid, k),
                        values.json_scalar,
                        v,
                        f"company {cid} field {k!r}",
                    )
                mine = {
                    f[2]: v for f, v in record.fields.items() if f[0] == "companies" and f[1] == cid
                }
                theirs = companies.setdefault(cid, {})
                for f, v in mine.items():
                    if f in theirs and not values.same(v, theirs[f]):
                        conflict = (
                            f"company {cid}: rows disagree on {f} ({values.shown(theirs[f])} "
                            f"vs {values.shown(v)}); the service keeps one value per company"
                        )
                        record.problems.append(conflict)
                        for other in company_owner.get(cid, []):
                            if conflict not in other.problems:
                                other.problems.append(conflict)
                    theirs.setdefault(f, v)
                company_owner.setdefault(cid, []).append(record)
        return out

    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        if not ctx.has("staging", "followers"):
            return {}
        loaded = ctx.load_times("followers")
        by_idx: dict[str, tuple[str, Held]] = {}
        for row in ctx.query("select follower_idx, follower_name, email from staging.followers"):
            if not isinstance(row["email"], str):
                continue
            held = Held(
                row["follower_idx"],
                {("name",): row["follower_name"]},
                loaded.get(row["follower_idx"], 0.0),
            )
            by_idx[row["follower_idx"]] = (row["email"].lower(), held)
        if ctx.has("staging", "follower_attributes"):
            for row in ctx.query(
                "select follower_idx, attribute_key, attribute_value, value_type "
                "from staging.follower_attributes"
            ):
                entry = by_idx.get(row["follower_idx"])
                if entry:
                    entry[1].fields[("attributes", row["attribute_key"])] = _typed(
                        row["attribute_value"], row["value_type"]
                    )
        if ctx.has("staging", "follower_companies"):
            for row in ctx.query(
                "select follower_idx, company_id, company_name, monthly_spend, "
                "monthly_spend_as_sent, company_attributes from staging.follower_companies"
            ):
                entry = by_idx.get(row["follower_idx"])
                if not entry:
                    continue
                cid, fields = str(row["company_id"]), entry[1].fields
                fields[("companies", cid, "name")] = row["company_name"]
                spend = (
                    row["monthly_spend_as_sent"]
                    if row["monthly_spend_as_sent"] is not None
                    else row["monthly_spend"]
                )
                if spend is not None:
                    fields[("companies", cid, "monthly_spend")] = spend
                attrs = (
                    json.loads(row["company_attributes"])
                    if isinstance(row["company_attributes"], str)
                    else row["company_attributes"]
                )
                for k, v in (attrs or {}).items():
                    fields[("companies", cid, k)] = v
        return {email: held for email, held in by_idx.values()}

    def live(
        self, ctx: Context, keys: list[tuple[str, Record | None]], known: dict[str, str]
    ) -> dict[str, Held]:
        out: dict[str, Held] = {}
        for key, record in keys:
            # searched as written (the spec does not promise a case-insensitive search),
            # matched without case (the contract's emails are unique in any case)
            written = record.extra.get("email", key) if record is not None else key
            body = ctx.client.get_json(
                "followers/search",
                {"email": written, "include_attributes": "true"},
                resource="followers",
            )
            for item in body.get("data") or []:
                if isinstance(item, dict) and str(item.get("email", "")).lower() == key:
                    out[key] = Held(str(item["idx"]), follower_fields(item), raw=item)
                    break
        return out

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        written = (payload or {}).get("email") or key
        probe = Record(key, key, extra={"email": written})
        held = self.live(ctx, [(key, probe)], {}).get(key)
        return held.idx if held else None

    def create_problems(self, record: Record) -> list[str]:
        return [] if record.fields.get(("name",)) else ["name is required to create a follower"]

    def create(self, record: Record, ctx: Context) -> Request:
        body: dict[str, Any] = {
            "name": record.fields.get(("name",)),
            "email": record.extra["email"],
        }
        attributes = {
            f[1]: v for f, v in record.fields.items() if f[0] == "attributes" and v is not None
        }
        if attributes:
            body["attributes"] = attributes
        companies = _companies(record.fields, {f for f in record.fields if f[0] == "companies"}, {})
        if companies:
            body["companies"] = companies
        return Request("POST", "followers", body)

    def update(
        self, record: Record, held: Held, changes: dict[Field, tuple[Any, Any]], ctx: Context
    ) -> Request:
        body: dict[str, Any] = {}
        if ("name",) in changes:
            body["name"] = changes[("name",)][1]
        attributes = {f[1]: new for f, (_, new) in changes.items() if f[0] == "attributes"}
        if attributes:
            body["attributes"] = attributes
        companies = _companies(
            record.fields, {f for f in changes if f[0] == "companies"}, held.fields
        )
        if companies:
            body["companies"] = companies
        return Request("POST", f"followers/{quote(held.idx, safe='')}", body)

    def delete(self, idx: str, option: str) -> Request:
        return Request("DELETE", f"followers/{quote(idx, safe='')}", params={"content": option})

    def strip_custom(self, request: Request) -> tuple[Request | None, bool]:
        body = dict(request.body or {})
        had = "attributes" in body or "companies" in body
        body.pop("attributes", None)
        body.pop("companies", None)
        if request.path.startswith("followers/") and not body:
            return None, had  # an update that only changed custom fields: nothing left
        return Request(request.method, request.path, body, request.params), had


def _companies(
    desired: dict[Field, Any], changed: set[Field], held: dict[Field, Any]
) -> list[dict[str, Any]]:
    """Company entries for the changed company fields: id, name, then the changed fields."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(changed):
        cid, name = f[1], f[2]
        value = desired.get(f)
        if value is None:
            continue
        entry = out.setdefault(
            cid,
            {
                "id": cid,
                "name": desired.get(("companies", cid, "name"))
                or held.get(("companies", cid, "name")),
            },
        )
        entry[name] = value
    return list(out.values())


def follower_fields(item: dict[str, Any]) -> dict[Field, Any]:
    """A follower as the API sent it, in flat fields. Custom company fields are read from
    ``attributes`` and from beside ``id`` (implementations differ)."""
    fields: dict[Field, Any] = {("name",): item.get("name")}
    for k, v in (item.get("attributes") or {}).items():
        fields[("attributes", k)] = v
    for company in item.get("companies") or []:
        if not isinstance(company, dict) or company.get("id") is None:
            continue
        cid = str(company["id"])
        for k, v in company.items():
            if k not in ("id", "attributes"):
                fields[("companies", cid, k)] = v
        for k, v in (company.get("attributes") or {}).items():
            fields.setdefault(("companies", cid, k), v)
    return fields


def _typed(value: Any, value_type: Any) -> Any:
    """A follower attribute from the copy (text and its JSON type) as its JSON value."""
    if value is None or value_type == "null":
        return None
    if value_type == "number":
        return json.loads(value)
    if value_type == "boolean":
        return value == "true"
    if value_type in ("object", "array"):
        return json.loads(value)
    return value


def _json_object(value: Any, record: Record) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            record.problems.append(f"not a JSON object: {value[:60]!r}")
            return {}
    if not isinstance(value, dict):
        record.problems.append(f"not a JSON object: {value!r}")
        return {}
    return {k: v for k, v in value.items() if v is not None}


# idea notes ------------------------------------------------------------------------------


class IdeaNotes(Kind):
    name = "idea_notes"
    resource = "comments"
    order = 30

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = _single(rows, key, str)
        for idea, group in groups.items():
            record = Record(idea, idea, problems=_duplicates(f"{key} {idea}", group))
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

    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        if not ctx.has("staging", "comments"):
            return {}
        loaded = ctx.load_times("comments")
        out: dict[str, Held] = {}
        by_idx = {idx: key for key, idx in known.items()}
        rows = ctx.query(
            "select comment_idx, idea_idx, message from staging.comments "
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
                for item in _walk(
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
        author = ctx.follower_idx(record.extra["author_email"])
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


# announcements ---------------------------------------------------------------------------


class Announcements(Kind):
    name = "announcements"
    resource = "announcements"
    order = 40
    FIELDS = ("name", "content", "published_at", "author_idx", "idea_idxs", "category_idxs")

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = _single(rows, key, str)
        for release, group in groups.items():
            record = Record(release, release, problems=_duplicates(f"{key} {release}", group))
            row = group[0]
            for column in ("name", "content"):
                if not isinstance(row.get(column), str) or not row[column].strip():
                    record.problems.append(f"{column} is required")
            _check(record, ("name",), values.text, row.get("name"))
            if isinstance(row.get("content"), str) and row["content"].strip():
                record.fields[("content",)] = with_marker(row["content"], ctx.target, release)
            record.fields[("published_at",)] = None
            _check(
                record,
                ("published_at",),
                lambda v: values.whole_seconds(values.moment(v)),
                row.get("published_at"),
            )
            _check(record, ("author_idx",), values.text, row.get("author_idx"))
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
        if not ctx.has("staging", "announcements"):
            return {}
        loaded = ctx.load_times("announcements")
        by_idx = {idx: key for key, idx in known.items()}
        rows = ctx.query(
            "select announcement_idx, title, content_markdown, published_at, author_idx "
            "from staging.announcements where content_markdown like '%feedback-sync:' || ? || ':%' "
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
        if out and ctx.has("staging", "announcement_ideas"):
            owners = {h.idx: h for h in out.values()}
            for table, column, name in (
                ("announcement_ideas", "idea_idx", "idea_idxs"),
                ("announcement_categories", "category_idx", "category_idxs"),
            ):
                if not ctx.has("staging", table):
                    continue
                for row in ctx.query(
                    f"select announcement_idx, {column} as item from staging.{table} "
                    "order by position"
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
            for item in _walk(ctx.client, "announcements", "announcements"):
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
            item = _unwrap(body)
            out[key] = Held(idx, announcement_fields(item), raw=item)
        return out

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        for item in _walk(ctx.client, "announcements", "announcements"):
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


# topics and statuses ---------------------------------------------------------------------


class Taxonomy(Kind):
    """Topics and statuses: named by a curated key, created and renamed by it. A key the
    journal does not know yet adopts the row's ``idx`` if given, else the one object with
    the desired name, before anything is created."""

    staging: ClassVar[str]
    staging_idx: ClassVar[str]
    staging_name: ClassVar[str]
    numbered: ClassVar[bool] = False

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = _single(rows, key, str)
        names: dict[str, list[Record]] = {}
        for value, group in groups.items():
            record = Record(value, value, problems=_duplicates(f"{key} {value}", group))
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
        if not ctx.has("staging", self.staging):
            return {}
        loaded = ctx.load_times(self.resource)
        rows = ctx.query(
            f"select {self.staging_idx} as idx, {self.staging_name} as name "
            f"from staging.{self.staging}"
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
            for i in _walk(ctx.client, self.resource, self.resource, numbered=self.numbered)
        ]
        records = {k: r for k, r in keys if r is not None}
        return self._objects(items, [k for k, _ in keys], known, records)

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        """The object with the name the create sent, that no other key holds."""
        name = (payload or {}).get("name")
        if not isinstance(name, str):
            return None
        taken = set(ctx.taken_idxs)
        for item in _walk(ctx.client, self.resource, self.resource, numbered=self.numbered):
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


KINDS: dict[str, Kind] = {
    k.name: k for k in (Topics(), Statuses(), Followers(), IdeaNotes(), Announcements())
}
