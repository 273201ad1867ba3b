"""Checks on query strings and JSON bodies; each failure is a 400 naming the field.

The spec fixes few rules; the contract says out-of-range or non-integer ``limit``,
garbled cursors, missing required fields, wrong types and invalid JSON are 400.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from starlette.datastructures import QueryParams

from feedback_sync.sandbox.errors import bad_request
from feedback_sync.sandbox.timefmt import parse_body_moment, parse_query_moment

_INTEGER = re.compile(r"[0-9]+")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
TRUE = ("true", "1")
FALSE = ("false", "0")


def limit(params: QueryParams) -> int:
    raw = params.get("limit")
    if raw is None:
        return 20
    if not _INTEGER.fullmatch(raw) or not 1 <= int(raw) <= 100:
        raise bad_request(f"limit must be an integer from 1 to 100, got {raw!r}")
    return int(raw)


def page_number(params: QueryParams) -> int:
    raw = params.get("offset")
    if raw is None or raw == "":
        return 1
    if not _INTEGER.fullmatch(raw) or int(raw) < 1:
        raise bad_request(f"offset must be a page number >= 1, got {raw!r}")
    return int(raw)


def flag(params: QueryParams, name: str) -> bool | None:
    """A boolean query parameter; absent or empty means "not given"."""
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    lowered = raw.lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise bad_request(f"{name} must be true or false, got {raw!r}")


def moment(params: QueryParams, name: str, *, end_of_day: bool = False) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return parse_query_moment(raw, end_of_day=end_of_day)
    except ValueError as exc:
        raise bad_request(f"{name}: {exc}, got {raw!r}") from None


def included_types(params: QueryParams) -> frozenset[str]:
    raw = params.get("included_types")
    if raw is None or raw.strip() == "":
        return frozenset({"comments"})
    parts = [p.strip() for p in re.split(r"[|,]", raw)]
    if not all(p in ("comments", "notes") for p in parts):
        raise bad_request(
            f"included_types must list 'comments' and/or 'notes' joined by '|' or ',', got {raw!r}"
        )
    return frozenset(parts)


def json_body(raw: bytes, *, optional: bool = False) -> dict[str, Any]:
    if not raw.strip():
        if optional:
            return {}
        raise bad_request("request body must be a JSON object")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request(f"request body must be a JSON object, got {type(body).__name__}")
    return body


def required_str(body: dict[str, Any], name: str) -> str:
    if name not in body or body[name] is None:
        raise bad_request(f"{name} is required")
    value = body[name]
    if not isinstance(value, str):
        raise bad_request(f"{name} must be a string, got {_type(value)}")
    if not value.strip():
        raise bad_request(f"{name} must not be empty")
    return value


def optional_str(body: dict[str, Any], name: str) -> str | None:
    """An optional string; absent or null both mean "not given"."""
    if body.get(name) is None:
        return None
    value = body[name]
    if not isinstance(value, str):
        raise bad_request(f"{name} must be a string, got {_type(value)}")
    if not value.strip():
        raise bad_request(f"{name} must not be empty")
    return value


def optional_bool(body: dict[str, Any], name: str) -> bool | None:
    if name not in body or body[name] is None:
        return None
    value = body[name]
    if not isinstance(value, bool):
        raise bad_request(f"{name} must be a boolean, got {_type(value)}")
    return value


def str_list(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request(f"{name} must be an array of strings")
    return value


def email(body: dict[str, Any], *, required: bool) -> str | None:
    value = required_str(body, "email") if required else optional_str(body, "email")
    if value is not None and not _EMAIL.fullmatch(value):
        raise bad_request(f"email is not a valid email address: {value!r}")
    return value


def published_at(body: dict[str, Any]) -> int | None:
    value = body.get("published_at")
    if value is None:
        return None
    if not isinstance(value, str):
        raise bad_request(f"published_at must be an ISO 8601 string or null, got {_type(value)}")
    try:
        return parse_body_moment(value)
    except ValueError as exc:
        raise bad_request(f"published_at: {exc}, got {value!r}") from None


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def attributes(
    body: dict[str, Any], name: str = "attributes", *, where: str | None = None
) -> dict[str, Any] | None:
    """An object of scalar values; ``where`` names it in messages (default: ``name``)."""
    if name not in body:
        return None
    value = body[name]
    label = where or name
    if not isinstance(value, dict):
        raise bad_request(f"{label} must be an object of key-value pairs, got {_type(value)}")
    for key, item in value.items():
        if not _scalar(item):
            raise bad_request(f"{label}.{key} must be a string, number, boolean or null")
    return value


def companies(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    if "companies" not in body:
        return None
    value = body["companies"]
    if not isinstance(value, list):
        raise bad_request(f"companies must be an array, got {_type(value)}")
    for i, entry in enumerate(value):
        where = f"companies[{i}]"
        if not isinstance(entry, dict):
            raise bad_request(f"{where} must be an object, got {_type(entry)}")
        for field in ("id", "name"):
            if not isinstance(entry.get(field), str) or not entry[field].strip():
                raise bad_request(f"{where}.{field} is required and must be a non-empty string")
        spend = entry.get("monthly_spend")
        if spend is not None and (isinstance(spend, bool) or not isinstance(spend, int | float)):
            raise bad_request(f"{where}.monthly_spend must be a number, got {_type(spend)}")
        if "attributes" in entry:
            attributes(entry, "attributes", where=f"{where}.attributes")
        for key, item in entry.items():
            if key != "attributes" and not _scalar(item):
                raise bad_request(f"{where}.{key} must be a string, number, boolean or null")
    return value


def _type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value), type(value).__name__)
