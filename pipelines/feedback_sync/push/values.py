"""Exact values for payloads, and the one comparison the diff uses.

Curated rows come from CSV files (every value text), Parquet files and tables (typed). A
value bound for the API is turned into a JSON value without loss, or the row is invalid:

- numbers: an integer, a decimal or a float, or text in JSON's number grammar ("2500.50").
  A fraction is sent as a double only when that double is exactly the decimal number
  (2500.50 is; 0.1 is written as the double nearest it, which is what every JSON parser
  reads for "0.1", so a decimal with at most 15 significant digits is accepted); a decimal
  with more digits than a double carries is refused, never rounded;
- text: as written; booleans: true/false (text "true"/"false" from CSV too);
- moments: ISO 8601 dates or date-times; a date-time without a zone is read as UTC (the
  API's own format), and sent as ``YYYY-MM-DDTHH:MM:SSZ``.

``same`` compares a desired value with what the service holds: numbers by value (2500,
2500.0 and a service's echo "2500" are the same; "unlimited" is no number), lists of idxs
as sets, moments as instants, anything else exactly.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from feedback_sync.errors import BadValue

_JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_EMAIL = re.compile(r"[^@\s]+@(?:[^@\s.]+\.)+[^@\s.]+")


def number(value: Any) -> int | float:
    """A JSON number equal to ``value``; raises BadValue when there is none."""
    if isinstance(value, bool) or value is None:
        raise BadValue(f"must be a number, got {_show(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadValue(f"must be a finite number, got {value!r}")
        return value
    if isinstance(value, str):
        text = value.strip()
        if not _JSON_NUMBER.fullmatch(text):
            raise BadValue(f"must be a number, got the text {value!r}")
        value = Decimal(text)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise BadValue(f"must be a finite number, got {value!r}")
        if value == value.to_integral_value():
            return int(value)
        as_float = float(value)
        digits = len(value.normalize().as_tuple().digits)
        if digits > 15 and Decimal(repr(as_float)) != value:
            raise BadValue(
                f"{value} has more significant digits than the service's numbers (doubles) "
                "keep; round it in the curated data"
            )
        return as_float
    raise BadValue(f"must be a number, got {_show(value)}")


def text(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise BadValue(f"must be text, got {_show(value)}")


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BadValue(f"must be true or false, got {_show(value)}")


def email(value: Any) -> str:
    address = text(value).strip()
    if not _EMAIL.fullmatch(address):
        raise BadValue(f"is not a valid email address: {value!r}")
    return address


def moment(value: Any) -> datetime:
    """An instant in UTC from a date, a date-time or ISO 8601 text."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        raw = value.strip()
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise BadValue(f"must be an ISO 8601 date or date-time, got {value!r}") from None
        return moment(parsed)
    raise BadValue(f"must be a date or date-time, got {_show(value)}")


def whole_seconds(instant: datetime) -> datetime:
    """The service keeps moments to the second: a fraction would be dropped, so it is refused."""
    if instant.microsecond:
        raise BadValue(
            f"{instant.isoformat()} has a fraction of a second; the service keeps whole seconds"
        )
    return instant


def iso(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def idx_list(value: Any) -> list[str]:
    """A list of idxs: a list column, JSON text (``["ide_1"]``) or comma-separated text."""
    if value is None:
        return []
    if isinstance(value, str):
        raw = value.strip()
        if raw.startswith("["):
            try:
                value = json.loads(raw)
            except ValueError:
                raise BadValue(f"is not a valid JSON list: {value!r}") from None
        else:
            value = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise BadValue(f"must be a list of idxs, got {_show(value)}")
    out: list[str] = []
    for item in value:
        if item.strip() and item.strip() not in out:
            out.append(item.strip())
    return out


def json_scalar(value: Any) -> Any:
    """A custom attribute's value as JSON: text, a number (exact), a boolean, or null."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | float | Decimal):
        return number(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise BadValue(f"must be text, a number, a boolean or null, got {_show(value)}")


def same(desired: Any, held: Any) -> bool:
    """Whether the service's ``held`` value already is ``desired``."""
    if _is_number(desired):
        if isinstance(held, str) and _JSON_NUMBER.fullmatch(held.strip()):
            # a service that echoes numbers as text ("714.43") holds the number all the
            # same: writing it again would change nothing, on every run
            held = Decimal(held.strip())
        return _is_number(held) and Decimal(str(desired)) == Decimal(str(held))
    if isinstance(desired, datetime):
        try:
            return held is not None and moment(held) == desired
        except BadValue:
            return False
    if isinstance(desired, list):
        return isinstance(held, list) and sorted(map(str, desired)) == sorted(map(str, held))
    return type(desired) is type(held) and bool(desired == held)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def shown(value: Any) -> str:
    """A value as the preview prints it (JSON spelling; moments as ISO)."""
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, Decimal):
        return str(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:
        return repr(value)


def _show(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:80]
