"""Which API items can land as rows, and the column names their keys become.

One place decides. An item the warehouse cannot hold as sent is not dropped and does not
stop the run: it lands whole, as its JSON text, in the table ``rejected_rows`` with the
reason (``arrow.Tabulator``), and the run goes on. An item is rejected when:

- it is not a JSON object;
- it has no ``idx``, or its ``idx`` is not text (rows are merged on it);
- two of its keys become one column after dlt's name normalization (``Renewal Date`` and
  ``renewal_date`` both become ``renewal_date``), among the keys that become columns: the
  item's own, those of an object flattened into ``<field>__<key>`` columns, and those of
  a list's objects (child rows). Keys inside values stored as JSON cannot collide.

Column names are dlt's (``snake_case``, ``normalize_path``), computed here once per key so
that the run's type decisions (``types.ColumnTypes``) and the stored schema use one name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import orjson
from dlt.common.normalizers.naming.snake_case import NamingConvention

from feedback_sync.source.resources import BY_NAME, KEYS_AS_ROWS
from feedback_sync.source.types import DECLARED, VARIANT

REJECTED_TABLE = "rejected_rows"
# one row per distinct item: a later run that meets it again moves its load id
REJECTED_KEY = ("resource", "record_sha256")
_NAMING = NamingConvention()
# every key's column name so far (``column_name`` fills it; cleared in place, never
# replaced): hot loops read it first and call ``column_name`` only for a key not in it
COLUMN_NAMES: dict[str, str] = {}
_NAMES = COLUMN_NAMES
# objects the shaping turns into rows: their keys become values, not columns


def column_name(key: str) -> str:
    """The column ``key`` becomes (dlt's snake_case; ``a__b`` keeps its two parts)."""
    name = _NAMES.get(key)
    if name is None:
        name = _NAMES[key] = _NAMING.normalize_path(key) if key else "_"
        if len(_NAMES) > 100_000:  # keys are a schema's worth, unless something is very odd
            _NAMES.clear()
    return name


def nested_fields(root: str) -> tuple[set[str], set[str]]:
    """The spec's lists (child tables) and objects (flattened) of a root table, by the
    names they have once shaped (``attributes`` and ``reactions`` are lists of rows)."""
    lists = {t.split("__", 1)[1] for t in DECLARED if t.startswith(f"{root}__")}
    objects = {c.split("__", 1)[0] for c in DECLARED.get(root, {}) if "__" in c}
    return lists, objects


def spec_fields(root: str) -> set[str]:
    """Every nested field of the spec for ``root``, by its name as sent and once shaped:
    a variant of one of them (``companies__v_json``) is a misshapen spec field, not a
    custom one."""
    lists, objects = nested_fields(root)
    resource = BY_NAME.get(root)
    sent = set(resource.shaped_from.values()) if resource is not None else set()
    return lists | objects | sent


def problem(resource: str, item: Any) -> str | None:
    """Why ``item`` cannot land as a row of ``resource``, or None when it can."""
    if not isinstance(item, dict):
        return f"the item is not an object but {_what(item)}"
    idx = item.get("idx")
    if "idx" not in item:
        return "it has no idx"
    if not isinstance(idx, str) or not idx:
        return f"its idx is not text but {_what(idx)}"
    return _collision(resource, item)


def _collision(resource: str, item: dict[str, Any]) -> str | None:
    declared = DECLARED.get(resource, {})
    clash = _clash(item, "")
    if clash:
        return clash
    for key, value in item.items():
        if key in declared or (resource, key) in KEYS_AS_ROWS or VARIANT in key:
            continue
        if isinstance(value, dict):
            clash = _clash(value, f"{key}.")
        elif isinstance(value, list):
            clash = next(
                (
                    found
                    for position, entry in enumerate(value)
                    if isinstance(entry, dict) and (found := _clash(entry, f"{key}[{position}]."))
                ),
                None,
            )
        if clash:
            return clash
    return None


# whether a set of keys (in the order sent) collides: objects of one API share a few shapes,
# so this is one lookup per object instead of a normalization per key
_COLLIDES: dict[tuple[str, ...], bool] = {}


def _clash(keys: Iterable[str], where: str) -> str | None:
    shape = tuple(keys)
    collides = _COLLIDES.get(shape)
    if collides is None:
        collides = len({column_name(str(key)) for key in shape}) < len(shape)
        if len(_COLLIDES) > 100_000:
            _COLLIDES.clear()
        _COLLIDES[shape] = collides
    if not collides:
        return None
    seen: dict[str, str] = {}
    for key in shape:
        name = column_name(str(key))
        if name in seen:
            return (
                f"keys {where}{seen[name]!r} and {where}{key!r} both become column {name!r} "
                "(dlt's name normalization); one column cannot hold both"
            )
        seen[name] = str(key)
    return None


def _what(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def rejected_row(resource: str, item: Any, reason: str) -> dict[str, Any]:
    """The ``rejected_rows`` row of an item: the item whole, as JSON text, and why."""
    try:
        record = orjson.dumps(item, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: exact, slower
        record = json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str)
    idx = item.get("idx") if isinstance(item, dict) else None
    return {
        "resource": resource,
        "record_sha256": hashlib.sha256(record.encode()).hexdigest(),
        # the item's key where it has a usable one (text, not empty): null says it has none,
        # and then it may be any row, so the run removes nothing of its resource
        "idx": idx if isinstance(idx, str) and idx else None,
        "reason": reason,
        "record": record,
    }
