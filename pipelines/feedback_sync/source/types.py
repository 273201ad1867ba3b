"""Each column's type: declared by the spec, kept from earlier runs, or fixed by a first value.

A column's *kind* is one of ``text``, ``bigint``, ``double``, ``bool``, ``timestamp``,
``json`` (an object or a list) and ``decimal`` (an integer beyond 64 bits, exactly). It is
decided once per run and table, in this order:

1. **stored**: a column the pipeline's schema already holds keeps its type, whatever this
   run's values look like (a warehouse cannot change a column's type under its readers);
2. **declared**: a field ``api-spec.md`` types (``DECLARED``) gets that type: number ->
   double, integer -> bigint, boolean, timestamp, string, object or array -> json;
3. **first value**: any other column (a custom company field, a field the API adds) takes
   the kind of the first non-null value this run meets.

``ColumnTypes`` holds these decisions for one run and is shared by every table builder of
that run (resources and per-idea transformer calls run in parallel threads), so one table
never gets two types for one column. A value that does not fit its column lands, exactly as
sent, in the variant column ``<column>__v_<kind>``, the way dlt's own normalizer names them:
a fraction in a bigint column goes to ``__v_double``, text in a number column to
``__v_text``, a list where a scalar was to ``__v_json``. An integer fits a double column
when the double holds it exactly.

JSON values travel as their JSON text: Arrow has no JSON type that dlt reads as ``json``,
and a ``json`` hint over an Arrow string column is a mismatch dlt warns about and leaves to
the destination. So a json column is a ``text`` column in dlt's schema, marked with the
column hint ``x-feedback-kind: json`` (kept in the stored schema), which is how later runs
know it holds JSON. A column an earlier version stored as ``json`` reads as json too; its
hint becomes text, which dlt takes without touching the table (DuckDB's JSON type is text).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa
from dlt.common.schema.typing import TColumnSchema

from feedback_sync.source.resources import TABLES

KINDS = ("text", "bigint", "double", "bool", "timestamp", "json", "decimal")
KIND_HINT = "x-feedback-kind"
VARIANT = "__v_"

ARROW_TYPES: dict[str, pa.DataType] = {
    "text": pa.string(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "json": pa.string(),
    "decimal": pa.decimal128(38, 0),
}
_DLT_TYPES = {kind: kind for kind in KINDS} | {"json": "text"}
_INT64 = (-(2**63), 2**63 - 1)
_DECIMAL_LIMIT = 10**38  # decimal(38, 0) holds integers below this, exactly

# What api-spec.md (and api-contract.md, for ideas) types, per landed table: the
# resources' declarations (resources.py, as they are now), and the sync's own table of
# rejected items. A plain dict the registry keeps current: it is read for every item.
DECLARED: dict[str, dict[str, str]] = TABLES


def kind_of(value: Any) -> str:
    """The kind a (non-null) value would give a new column."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        # beyond 64 bits no integer column holds it; a 38-digit decimal does, exactly;
        # beyond 38 digits only its digits do (text)
        if _INT64[0] <= value <= _INT64[1]:
            return "bigint"
        return "decimal" if abs(value) < _DECIMAL_LIMIT else "text"
    if isinstance(value, float):
        return "double"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, dict | list):
        return "json"
    return "text"


def fits(kind: str, value: Any) -> bool:
    """Whether ``value`` lands in a ``kind`` column unchanged (null fits every column)."""
    if value is None:
        return True
    actual = kind_of(value)
    if actual == kind:
        return True
    if kind == "double" and isinstance(value, int) and not isinstance(value, bool):
        try:
            return int(float(value)) == value  # the double holds it exactly
        except OverflowError:
            return False
    return False


def variant_name(column: str, value: Any) -> str:
    """Where a value that does not fit ``column`` lands."""
    return f"{column}{VARIANT}{kind_of(value)}"


def arrow_value(kind: str, value: Any) -> Any:
    """A fitting value as Arrow takes it: JSON as its text, an integer too long for any
    number column as its digits, an integer in a double column as that (exact) double,
    anything else as it is."""
    if kind == "json" and value is not None:
        try:
            return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except orjson.JSONEncodeError:  # an integer beyond 64 bits inside: exact, slower
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, int) and not isinstance(value, bool):
        if kind == "text":
            return str(value)
        if kind == "double":
            # fits() checked the double holds it exactly; Arrow refuses any int beyond 2**53
            return float(value)
    return value


def column_hint(kind: str, *, nullable: bool = True) -> TColumnSchema:
    """dlt's column hint for a kind; it agrees with ``ARROW_TYPES`` (nothing to coerce)."""
    hint: dict[str, Any] = {"data_type": _DLT_TYPES[kind], "nullable": nullable}
    if kind == "timestamp":
        hint["timezone"] = True
    if kind == "json":
        hint[KIND_HINT] = "json"
    if kind == "decimal":
        hint["precision"], hint["scale"] = 38, 0
    return hint  # type: ignore[return-value]


def stored_kind(column: Mapping[str, Any]) -> str | None:
    """The kind of a column in a stored dlt schema; None for an incomplete column.

    A type this source never writes (decimal, date, ...) is kept as its own kind: no value
    fits it, so values go to variant columns instead of being cast.
    """
    data_type = column.get("data_type")
    if data_type is None:
        return None
    if column.get(KIND_HINT) == "json" or data_type == "json":
        return "json"
    return str(data_type)


StoredTables = Mapping[str, Mapping[str, Any]]


def _source_schema_tables() -> StoredTables:
    """The tables of the schema dlt is extracting into (the pipeline's, as stored)."""
    import dlt

    tables = dlt.current.source_schema().tables
    return dict(list(tables.items()))


class ColumnTypes:
    """The kinds of one run's columns, decided once per table and column, thread-safe.

    Args:
        stored: the stored schema's tables (``{table: {"columns": {...}}}``), or a callable
            that returns them when first needed; by default the schema of the dlt source
            being extracted, read from inside a resource.
    """

    def __init__(self, stored: StoredTables | Callable[[], StoredTables] | None = None) -> None:
        self._stored_source = stored if stored is not None else _source_schema_tables
        self._kinds: dict[str, dict[str, str]] | None = None
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, str]]:
        source = self._stored_source
        tables = source() if callable(source) else source
        kinds: dict[str, dict[str, str]] = {}
        for name, table in tables.items():
            columns = dict(list((table.get("columns") or {}).items()))
            known = {c: k for c, spec in columns.items() if (k := stored_kind(spec)) is not None}
            kinds[name] = known
        return kinds

    def kind(self, table: str, column: str, values: Iterable[Any] = ()) -> str | None:
        """The column's kind: stored, else declared, else the first non-null of ``values``.

        None while the column is neither stored nor declared and no value has come yet.
        """
        with self._lock:
            if self._kinds is None:
                self._kinds = self._load()
            known = self._kinds.setdefault(table, {})
            kind = known.get(column)
            if kind is None:
                kind = DECLARED.get(table, {}).get(column)
                if kind is None and VARIANT in column:
                    kind = column.rsplit(VARIANT, 1)[1]
                if kind is None:
                    first = next((v for v in values if v is not None), None)
                    if first is None:
                        return None
                    kind = kind_of(first)
                known[column] = kind
            return kind

    def declared(self, table: str) -> dict[str, str]:
        """The declared columns of ``table`` (empty for a table the spec does not know)."""
        return DECLARED.get(table, {})
