"""API objects to the rows that land: timestamps parsed, awkward shapes made regular.

The rows keep their lists (companies, categories, attachments, ...): ``arrow.Tabulator``
turns each list into a child table keyed by the parent's idx. These functions reshape what
would otherwise become arbitrary columns:

- follower ``attributes`` -> ``followers__attributes`` rows of ``key``, ``value``
  (text: strings as they are, anything else as JSON) and ``value_type``;
- announcement ``reaction_count`` (keyed by emoji) -> ``announcements__reactions`` rows of
  ``reaction``, ``count``;
- idea ``topic_idxs`` -> ``ideas__topics`` rows of ``topic_idx``.

Any of those three sent with another shape (attributes as a list, say) lands as sent in a
variant column of the parent row (``attributes__v_json``), as does a list or object field
of the spec that arrives with another shape (``arrow.Tabulator``): never dropped.

Timestamps arrive as ``2025-03-04 05:06:07`` (UTC, no zone) or ISO 8601 with a zone;
either becomes an aware UTC ``datetime``, whichever a resource uses. A value in a timestamp
field that is not a timestamp (a number, a word) is left as it came: it lands in a variant
column (``created_at__v_text``), never dropped and never guessed at.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import pendulum

from feedback_sync.errors import DataError
from feedback_sync.source.types import variant_name

Row = dict[str, Any]


def parse_timestamp(value: Any, where: str) -> datetime | None:
    """Either timestamp format (or null) to an aware UTC datetime."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataError(f"{where}: expected a timestamp string, got {value!r}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        try:
            parsed = pendulum.parse(value, strict=False)
        except (ValueError, pendulum.parsing.exceptions.ParserError):
            raise DataError(f"{where}: not a timestamp: {value!r}") from None
        if not isinstance(parsed, datetime):
            raise DataError(f"{where}: not a date-time: {value!r}") from None
        moment = parsed
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def _stamp(row: Row, fields: tuple[str, ...]) -> None:
    for name in fields:
        value = row.get(name)
        if value is not None:
            # a value that is not a timestamp is kept as sent: its variant column holds it
            with contextlib.suppress(DataError):
                row[name] = parse_timestamp(value, name)


_TIMES = ("created_at", "updated_at")


def follower(row: Row) -> Row:
    _stamp(row, _TIMES)
    attributes = row.pop("attributes", None)
    if isinstance(attributes, dict):
        row["attributes"] = [
            {"key": str(key), **_attribute_value(value)} for key, value in attributes.items()
        ]
    elif attributes is not None:
        _misshapen(row, "attributes", attributes)
    return row


def _misshapen(row: Row, field: str, value: Any) -> None:
    """A nested field with another shape than the spec's lands as sent, in a variant."""
    row[variant_name(field, value)] = value


def _attribute_value(value: Any) -> Row:
    if isinstance(value, str):
        return {"value": value, "value_type": "string"}
    if value is None:
        return {"value": None, "value_type": "null"}
    if isinstance(value, bool):
        kind = "boolean"
    elif isinstance(value, int | float):
        kind = "number"
    elif isinstance(value, list):
        kind = "array"
    else:
        kind = "object"
    return {"value": orjson.dumps(value).decode(), "value_type": kind}


def announcement(row: Row) -> Row:
    _stamp(row, (*_TIMES, "published_at"))
    reactions = row.pop("reaction_count", None)
    if isinstance(reactions, dict):
        row["reactions"] = [
            {"reaction": emoji, "count": count} for emoji, count in reactions.items()
        ]
    elif reactions is not None:
        _misshapen(row, "reaction_count", reactions)
    return row


def comment(row: Row, idea_idx: str) -> Row:
    _stamp(row, _TIMES)
    row["idea_idx"] = idea_idx
    attachments = row.get("attachments")
    if isinstance(attachments, list):
        for item in attachments:
            if isinstance(item, dict):
                _stamp(item, _TIMES)
    return row


def plain(resource: str) -> Callable[[Row], Row]:
    """Topics, statuses, integration links: timestamps only."""

    def shape(row: Row) -> Row:
        _stamp(row, _TIMES)
        return row

    return shape


def idea(row: Row) -> Row:
    _stamp(row, _TIMES)
    topic_idxs = row.pop("topic_idxs", None)
    if isinstance(topic_idxs, list):
        row["topics"] = [{"topic_idx": t} for t in topic_idxs]
    elif topic_idxs is not None:
        _misshapen(row, "topic_idxs", topic_idxs)
    return row


# a row shaped as it lands, given the idea it was listed under (a per-idea list) or None
Shaper = Callable[[Row, "str | None"], Row]


def shaper(resource: str) -> Shaper:
    """How ``resource``'s rows are shaped: its own function here, else timestamps only."""
    own: dict[str, Shaper] = {
        "followers": lambda row, idea_idx: follower(row),
        "announcements": lambda row, idea_idx: announcement(row),
        "comments": lambda row, idea_idx: comment(row, idea_idx or ""),
        "ideas": lambda row, idea_idx: idea(row),
    }
    if resource in own:
        return own[resource]
    plain_shape = plain(resource)
    return lambda row, idea_idx: plain_shape(row)
