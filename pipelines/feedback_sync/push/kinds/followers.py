"""Followers and their companies: matched by email, created, updated field by field."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from feedback_sync.errors import BadValue
from feedback_sync.push import values
from feedback_sync.push.kinds.base import (
    Context,
    Field,
    Held,
    Kind,
    Parents,
    Record,
    Request,
    check_value,
)


class Followers(Kind):
    """Followers and their companies: matched by email (any case), created, and updated
    field by field; companies and attributes are merged, never replaced."""

    name = "followers"
    resource = "followers"
    provides_parents = True
    sends_custom_attributes = True
    custom_fields = "attributes and companies"
    delete_options = ("delete", "reassign")
    order = 20

    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        groups, out = _by_email(rows, key)
        companies: dict[str, dict[str, Any]] = {}
        company_owner: dict[str, list[Record]] = {}
        for email_key, group in groups.items():
            record = Record(email_key, email_key)
            record.extra["email"] = values.email(group[0][key])
            out.append(record)
            _name(record, group)
            _attributes(record, group)
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
                _company(record, cid, r)
                _agree(record, cid, companies.setdefault(cid, {}), company_owner)
        return out

    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        followers = ctx.model("followers")
        if followers is None:
            return {}
        loaded = ctx.load_times("followers")
        by_idx: dict[str, tuple[str, Held]] = {}
        for row in ctx.query(f"select follower_idx, follower_name, email from {followers} as f"):
            if not isinstance(row["email"], str):
                continue
            held = Held(
                row["follower_idx"],
                {("name",): row["follower_name"]},
                loaded.get(row["follower_idx"], 0.0),
            )
            by_idx[row["follower_idx"]] = (row["email"].lower(), held)
        attributes = ctx.model("follower_attributes")
        if attributes is not None:
            for row in ctx.query(
                "select follower_idx, attribute_key, attribute_value, value_type "
                f"from {attributes} as a"
            ):
                entry = by_idx.get(row["follower_idx"])
                if entry:
                    entry[1].fields[("attributes", row["attribute_key"])] = _typed(
                        row["attribute_value"], row["value_type"]
                    )
        companies = ctx.model("follower_companies")
        if companies is not None:
            for row in ctx.query(
                "select follower_idx, company_id, company_name, monthly_spend, "
                f"monthly_spend_as_sent, company_attributes from {companies} as c"
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

    def parents(self, ctx: Context, applied: bool) -> Parents:
        return FollowerResolver(ctx, applied)

    def carries_custom(self, request: Request) -> bool:
        return bool({"attributes", "companies"} & set(request.body or {}))

    def strip_custom(self, request: Request) -> tuple[Request | None, bool]:
        body = dict(request.body or {})
        had = self.carries_custom(request)
        body.pop("attributes", None)
        body.pop("companies", None)
        if request.path.startswith("followers/") and not body:
            return None, had  # an update that only changed custom fields: nothing left
        return Request(request.method, request.path, body, request.params), had


def _by_email(
    rows: list[dict[str, Any]], key: str
) -> tuple[dict[str, list[dict[str, Any]]], list[Record]]:
    """Rows grouped by their email (any case); rows without a valid one become invalid
    records."""
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
    return groups, out


def _name(record: Record, group: list[dict[str, Any]]) -> None:
    """The follower's name: the rows of one email must agree on it."""
    names = [r["name"] for r in group if r.get("name") is not None]
    seen = {json.dumps(name, default=str) for name in names}
    if len(seen) > 1:
        record.problems.append(f"rows disagree on name: {', '.join(sorted(seen))}")
    check_value(record, ("name",), values.text, names[0] if names else None)


def _attributes(record: Record, group: list[dict[str, Any]]) -> None:
    """The follower's custom attributes, merged from its rows (which must agree)."""
    attributes: dict[str, Any] = {}
    for r in group:
        for k, v in _json_object(r.get("attributes"), record).items():
            if k in attributes and attributes[k] != v:
                record.problems.append(f"rows disagree on attribute {k!r}")
            attributes[k] = v
    for k, v in attributes.items():
        check_value(record, ("attributes", k), values.json_scalar, v, f"attribute {k!r}")


def _company(record: Record, cid: str, row: dict[str, Any]) -> None:
    """One company of the follower, from one row: its name, spend, plan and own fields."""
    if row.get("company_name") is None:
        record.problems.append(
            f"company {cid}: company_name is required with company_id (the API needs both)"
        )
    check_value(record, ("companies", cid, "name"), values.text, row.get("company_name"))
    check_value(
        record, ("companies", cid, "monthly_spend"), values.number, row.get("monthly_spend")
    )
    check_value(record, ("companies", cid, "plan"), values.text, row.get("plan"))
    for k, v in _json_object(row.get("company_fields"), record).items():
        if k in ("id", "name", "monthly_spend", "attributes"):
            record.problems.append(f"company field company__{k} clashes with the API's own field")
            continue
        check_value(
            record, ("companies", cid, k), values.json_scalar, v, f"company {cid} field {k!r}"
        )


def _agree(
    record: Record,
    cid: str,
    theirs: dict[str, Any],
    company_owner: dict[str, list[Record]],
) -> None:
    """The service keeps one value per company field: a follower whose company fields differ
    from another's (``theirs``: the values seen first) is invalid, and so is that other."""
    mine = {f[2]: v for f, v in record.fields.items() if f[0] == "companies" and f[1] == cid}
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


class FollowerResolver(Parents):
    """Email -> follower idx: this run's followers target first, then the copy, then a search."""

    def __init__(self, ctx: Context, applied: bool) -> None:
        super().__init__()
        self._ctx = ctx
        self._applied = applied
        self._copy: dict[str, str] | None = None

    def landed(self, key: str, idx: str) -> None:
        super().landed(key.lower(), idx)

    def __call__(self, key: str) -> str | None:
        email, key = key, key.lower()
        with self.lock:
            if key in self.found:
                return self.found[key]
            if key in self.planned and not self._applied:
                return f"<idx of the follower created for {email}>"
            if self._copy is None:
                self._copy = {}
                followers = self._ctx.model("followers")
                if followers is not None:
                    for idx, address in self._ctx.con.execute(
                        f"select follower_idx, email from {followers} as f"
                    ):
                        if isinstance(address, str):
                            self._copy[address.lower()] = idx
            if key in self._copy:
                return self._copy[key]
        held = Followers().live(self._ctx, [(key, None)], {}).get(key)
        if held is not None:
            with self.lock:
                self.found[key] = held.idx
            return held.idx
        return None
