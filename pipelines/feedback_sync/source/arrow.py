"""Shaped rows to Arrow tables: the root table and its child tables, typed, in batches.

Yielding Arrow tables lets dlt skip its row-by-row normalizer (the slowest step of a full
sync when rows were dicts) and write Parquet straight from extract. What that normalizer
did is done here, once per batch, column by column:

- a list in a row becomes rows of the child table ``<root>__<field>``: each carries the
  parent's key (``follower_idx``, ``announcement_idx``, ...) and its position in the list
  (``_dlt_list_idx``); together they are the child table's primary key; a list of plain
  values becomes rows with one ``value`` column;
- a dict in a root row becomes ``<field>__<key>`` columns (``author__name``); anything
  nested deeper, and every dict or list in a child row, becomes a JSON column;
- a field the spec declares (``types.DECLARED``) stays one column whatever arrives in it;
- each column's type comes from ``types.ColumnTypes`` (stored, else declared, else the
  first value), shared by every table builder of the run; a value of another type goes to
  a variant column ``<column>__v_<type>``, exactly as sent, so nothing is lost or coerced;
- the Arrow schema and the column hints each batch carries say the same thing, so neither
  dlt nor the destination has anything left to coerce.

A child row carries no dlt row ids: the parent's key and the position are its identity.
Rows of a list that shrank are removed after the load (``reconcile.replace_children``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from itertools import repeat
from types import NoneType
from typing import Any, Literal

import dlt
import pyarrow as pa
from dlt.common.schema.typing import TTableSchemaColumns

from feedback_sync.errors import DataError
from feedback_sync.source.resources import LIST_INDEX, PARENT_KEYS
from feedback_sync.source.screening import (
    COLUMN_NAMES,
    REJECTED_KEY,
    REJECTED_TABLE,
    column_name,
    nested_fields,
    problem,
    rejected_row,
)
from feedback_sync.source.types import (
    ARROW_TYPES,
    VARIANT,
    ColumnTypes,
    arrow_value,
    column_hint,
    fits,
    kind_of,
    variant_name,
)

Row = dict[str, Any]
# how a batch lands: merged on its key, or appended to a table new to the warehouse
Disposition = Literal["append", "merge"]
log = logging.getLogger("feedback_sync")

POSITION = LIST_INDEX
# rows gathered before a batch becomes Arrow tables: big enough that per-batch costs
# vanish, small enough that memory stays flat
BATCH_ROWS = 5_000
# rejected items logged one by one per table builder; the rest as one count at the end
REJECTIONS_LOGGED = 5


class _Table:
    """One table's rows of the current batch, typed through the run's ``ColumnTypes``."""

    def __init__(
        self, name: str, types: ColumnTypes, hints: TTableSchemaColumns, keys: tuple[str, ...]
    ) -> None:
        self.name = name
        self.keys = keys
        self.types = types
        self.hinted = hints
        self.declared = types.declared(name)
        self.rows: list[Row] = []

    def arrow(self) -> tuple[pa.Table, TTableSchemaColumns] | None:
        """The batch as an Arrow table and the column hints that describe it exactly."""
        rows, self.rows = self.rows, []
        if not rows:
            return None
        names: dict[str, None] = dict.fromkeys(self.keys)
        names.update(dict.fromkeys(self.declared))
        for row in rows:
            names.update(dict.fromkeys(row))
        # each column's kind and its values, or its Arrow array when it is built already
        columns: dict[str, tuple[str, list[Any] | pa.Array]] = {}
        built_at_once = self._text_and_bool(rows, names)
        for name in names:
            done = built_at_once.get(name)
            if done is not None:
                columns[name] = done
                continue
            values = list(map(dict.get, rows, repeat(name)))
            kind = self.types.kind(self.name, name, values)
            seen = set(map(type, values))
            if name in self.keys:
                self._check_key(name, kind, values, seen)
            if kind is None:
                continue  # never typed and all null: absent from this batch
            built = None if VARIANT in name else _plain_array(kind, values, seen)
            if built is not None:
                # every value is of the kind's own Python type: Arrow takes them as they are
                columns[name] = (kind, built)
                continue
            fitting = values
            if not _all_fit(kind, values):
                fitting = [v if fits(kind, v) else None for v in values]
                for position, value in enumerate(values):
                    if not fits(kind, value):
                        self._variant(columns, name, value, position, len(rows))
            columns[name] = (kind, fitting)
        fields, arrays, hints = [], [], {}
        for name, (kind, values) in columns.items():
            nullable = name not in self.keys
            arrow_type = ARROW_TYPES[kind]
            fields.append(pa.field(name, arrow_type, nullable=nullable))
            if isinstance(values, pa.Array):
                arrays.append(values)
            else:
                # JSON becomes its text; an integer in a double column its (exact) double,
                # in a text column (one too long for any number) its digits; the rest goes
                # as it is
                if kind == "json" or (
                    kind in ("double", "text") and any(type(v) is int for v in values)
                ):
                    values = [arrow_value(kind, v) for v in values]
                arrays.append(pa.array(values, type=arrow_type))
            hints[name] = column_hint(kind, nullable=nullable)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields)), hints

    def _text_and_bool(
        self, rows: list[Row], names: dict[str, None]
    ) -> dict[str, tuple[str, pa.Array]]:
        """The columns whose kind is ``text`` or ``bool`` already (stored or declared), built
        in one pass over the rows (Arrow's converter reads each row's values for them all)
        instead of one pass per column: most of a batch's columns (followers' tables build in
        a quarter less time). Arrow takes only text (``str``, or ``bytes``, which no JSON
        answer holds) into a string column and only a ``bool`` into a boolean one, so a
        value of any other type fails the pass, and every column is then built
        on its own (variants and all). A key column with a null is left to that path too,
        which stops the run naming the row."""
        kinds = {name: self.types.kind(self.name, name) for name in names if VARIANT not in name}
        chosen = [(name, kind) for name, kind in kinds.items() if kind in ("text", "bool")]
        if not chosen:
            return {}
        struct = pa.struct([pa.field(name, ARROW_TYPES[kind]) for name, kind in chosen])
        try:
            built = pa.array(rows, type=struct)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return {}
        out: dict[str, tuple[str, pa.Array]] = {}
        for position, (name, kind) in enumerate(chosen):
            array = built.field(position)
            if name in self.keys and array.null_count:
                continue
            out[name] = (kind, array)
        return out

    def _variant(
        self,
        columns: dict[str, tuple[str, list[Any] | pa.Array]],
        name: str,
        value: Any,
        position: int,
        size: int,
    ) -> None:
        variant = variant_name(name, value)
        kind = self.types.kind(self.name, variant, [value])
        if kind is None or not fits(kind, value):
            raise DataError(
                f"{self.name}.{variant}: the stored column's type ({kind}) does not hold "
                f"the {kind_of(value)} value sent for {name}"
            )
        columns.setdefault(variant, (kind, [None] * size))[1][position] = value

    def _check_key(self, name: str, kind: str | None, values: list[Any], seen: set[type]) -> None:
        """Keys identify rows: a missing or non-text one stops the run, naming the table."""
        own = _PYTHON_TYPES.get(kind or "text")
        if seen == {own} and (
            kind != "bigint" or _INT64_MIN <= min(values) <= max(values) <= _INT64_MAX
        ):
            return  # every value present and of the key's own type
        for position, value in enumerate(values):
            if value is None or not fits(kind or "", value):
                raise DataError(
                    f"{self.name}: row {position + 1} of a batch has {name} = {value!r}; "
                    f"{name} is a required {kind or 'text'} key"
                )

    def hints(self) -> TTableSchemaColumns:
        return {k: dict(v) for k, v in self.hinted.items()}  # type: ignore[misc]


# the Python type whose values a column of the kind takes unchanged (an int only where it
# fits 64 bits: Arrow refuses a bigger one, and the column's values go the long way)
_PYTHON_TYPES: dict[str, type] = {
    "text": str,
    "bigint": int,
    "double": float,
    "bool": bool,
    "timestamp": datetime,
}


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _plain_array(kind: str, values: list[Any], seen: set[type]) -> pa.Array | None:
    """``values`` as an Arrow array when each is null or of the kind's own Python type
    (``_PYTHON_TYPES``); None when any needs a look of its own (a variant, a JSON text,
    an integer in a double column, one beyond 64 bits)."""
    own = _PYTHON_TYPES.get(kind)
    if own is None or not seen <= {own, NoneType}:
        return None
    try:
        return pa.array(values, type=ARROW_TYPES[kind])
    except (OverflowError, pa.ArrowInvalid):  # an integer beyond 64 bits
        return None


def _all_fit(kind: str, values: list[Any]) -> bool:
    """Whether every value fits ``kind``: one check per Python type, not per value (an
    integer's fit in a double or bigint column depends on its size, so integers are checked
    one by one)."""
    samples = {type(v): v for v in values if v is not None}
    if int in samples and kind in ("double", "bigint"):
        return all(fits(kind, v) for v in values)
    return all(fits(kind, sample) for sample in samples.values())


class Tabulator:
    """Turns one resource's shaped rows into Arrow tables for its root and child tables.

    ``add`` buffers rows and yields dlt items (Arrow tables marked with their table's hints)
    whenever ``BATCH_ROWS`` rows are waiting; ``flush`` yields what is left. Rows given to
    ``add`` are read, never changed. ``columns`` are extra hints for the root table (say
    ``_deleted_at``, which the sync fills in later); ``types`` is the run's shared
    ``ColumnTypes``; ``disposition`` gives each table's write disposition (``merge``
    unless told, ``SyncRun.write_disposition``).
    """

    def __init__(
        self,
        root: str,
        columns: TTableSchemaColumns,
        types: ColumnTypes,
        batch_rows: int = BATCH_ROWS,
        disposition: Callable[[str], Disposition] | None = None,
    ) -> None:
        self.root = root
        self.disposition: Callable[[str], Disposition] = disposition or (lambda table: "merge")
        self.parent_key = PARENT_KEYS[root]
        self.batch_rows = batch_rows
        self.types = types
        self._root = _Table(root, types, columns, ("idx",))
        self._children: dict[str, _Table] = {}
        self._rejected = _Table(REJECTED_TABLE, types, {}, ("resource", "record_sha256"))
        self._lists, self._objects = nested_fields(root)
        self._pending = 0
        self.rejected = 0
        self._reported = 0  # rejections logged so far (one by one, or as a count)

    def accept(self, item: Any) -> bool:
        """Whether ``item`` (as the API sent it, before shaping) can land as a row; when
        not, it goes to ``rejected_rows`` whole, with the reason (``screening``)."""
        reason = problem(self.root, item)
        if reason is None:
            return True
        self._rejected.rows.append(rejected_row(self.root, item, reason))
        self.rejected += 1
        self._pending += 1
        if self.rejected <= REJECTIONS_LOGGED:
            self._reported = self.rejected
            log.warning(
                "%s: an item was rejected (%s); it is kept whole in %s",
                self.root,
                reason,
                REJECTED_TABLE,
            )
        return False

    def add(self, rows: Iterable[Row]) -> Iterator[Any]:
        for row in rows:
            self._split(row)
            self._pending += 1
        if self._pending >= self.batch_rows:
            yield from self.flush()

    def flush(self) -> Iterator[Any]:
        if self.rejected > self._reported:
            log.warning(
                "%s: %d more items were rejected; every one is in %s",
                self.root,
                self.rejected - self._reported,
                REJECTED_TABLE,
            )
            self._reported = self.rejected
        self._pending = 0
        for table in (self._root, *self._children.values(), self._rejected):
            built = table.arrow()
            if built is not None:
                data, hints = built
                yield dlt.mark.with_hints(
                    data, self._hints(table, {**table.hints(), **hints}), create_table_variant=True
                )

    def _split(self, row: Row) -> None:
        """A root row's columns; its lists go to child tables and its objects are flattened
        one level, unless the spec declares the field a column (then drift goes to a
        variant column, not to a new table)."""
        root = self._root
        known = COLUMN_NAMES
        out: Row = {}
        for field, value in row.items():
            name = known.get(field) or column_name(field)
            if value is None or name in root.declared or VARIANT in name:
                out[name] = value
            elif name in self._lists:
                # the spec's list: child rows; any other shape lands as sent, in a variant
                if isinstance(value, list):
                    self._child(name, row.get("idx"), value)
                else:
                    out[variant_name(name, value)] = value
            elif name in self._objects:
                # the spec's object: flattened; any other shape lands as sent, in a variant
                if isinstance(value, dict):
                    for key, inner in value.items():
                        out[column_name(f"{field}__{key}")] = inner
                else:
                    out[variant_name(name, value)] = value
            elif isinstance(value, list):
                self._child(name, row.get("idx"), value)  # a list the spec does not name
            elif isinstance(value, dict):
                for key, inner in value.items():
                    out[column_name(f"{field}__{key}")] = inner
            else:
                out[name] = value
        root.rows.append(out)

    def _child(self, field: str, parent: Any, items: list[Any]) -> None:
        name = f"{self.root}__{field}"
        table = self._children.get(name)
        if table is None:
            keys = (self.parent_key, POSITION)
            table = self._children[name] = _Table(name, self.types, {}, keys)
        known = COLUMN_NAMES
        for position, item in enumerate(items):
            out: Row = {self.parent_key: parent, POSITION: position}
            if isinstance(item, dict):
                for key, value in item.items():
                    column = known.get(key) or column_name(key)
                    if column not in (self.parent_key, POSITION):
                        out[column] = value
            else:
                out["value"] = item
            table.rows.append(out)

    def _hints(self, table: _Table, columns: TTableSchemaColumns) -> Any:
        if table is self._rejected:
            # one row per distinct item; a later run that meets it again moves its load id
            return dlt.mark.make_hints(
                table_name=table.name,
                write_disposition=self.disposition(table.name),
                primary_key=list(REJECTED_KEY),
                columns=columns,
            )
        if table is self._root:
            return dlt.mark.make_hints(
                table_name=table.name,
                write_disposition=self.disposition(table.name),
                primary_key="idx",
                columns=columns,
            )
        return dlt.mark.make_hints(
            table_name=table.name,
            write_disposition=self.disposition(table.name),
            primary_key=[self.parent_key, POSITION],
            columns=columns,
            references=[
                {
                    "referenced_table": self.root,
                    "columns": [self.parent_key],
                    "referenced_columns": ["idx"],
                }
            ],
        )


def child_tables(schema_tables: dict[str, Any], root: str) -> list[str]:
    """The child tables of ``root`` in a dlt schema (``<root>__<field>``, same resource)."""
    return sorted(
        name
        for name, table in schema_tables.items()
        if name.startswith(f"{root}__") and table.get("resource") == root
    )
