"""Shaped rows to Arrow tables: the root table and its child tables, typed, in batches.

Yielding Arrow tables lets dlt skip its row-by-row normalizer (the slowest step of a full
sync when rows were dicts) and write Parquet straight from extract. What that normalizer
did is done here, once per batch, column by column:

- a list in a row becomes rows of the child table ``<root>__<field>``: each carries the
  parent's key (``follower_idx``, ``announcement_idx``, ...) and its position in the list
  (``_dlt_list_idx``); together they are the child table's primary key; a list of plain
  values becomes rows with one ``value`` column;
- a dict in a root row becomes ``<field>__<key>`` columns (``author__name``); anything
  nested deeper, and every dict or list in a child row, becomes one JSON column;
- columns declared JSON (``json=``) are JSON text whatever their shape;
- each column's type is fixed by the first value seen in the run (text, bigint, double,
  bool, timestamp); a later value of another type goes to a variant column
  ``<column>__v_<type>``, as dlt's normalizer would do, so nothing is lost or coerced.

A child row carries no dlt row ids: the parent's key and the position are its identity.
Rows of a list that shrank are removed after the load (``reconcile.replace_children``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import dlt
import orjson
import pyarrow as pa
from dlt.common.schema.typing import TTableSchemaColumns

Row = dict[str, Any]

POSITION = "_dlt_list_idx"
# the column a child row names its parent by, per root table
PARENT_KEYS: dict[str, str] = {
    "followers": "follower_idx",
    "announcements": "announcement_idx",
    "comments": "comment_idx",
    "ideas": "idea_idx",
    "integration_links": "integration_link_idx",
    "topics": "topic_idx",
    "statuses": "status_idx",
}
# rows gathered before a batch becomes Arrow tables: big enough that per-batch costs
# vanish, small enough that memory stays flat
BATCH_ROWS = 5_000

_ARROW_TYPES: dict[str, pa.DataType] = {
    "text": pa.string(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


class _ExpectedHintNotice(logging.Filter):
    """Drops dlt's warning that resource hints differ from the Arrow schema: they differ on
    purpose (a JSON column travels as Arrow text; the hint makes it JSON at the
    destination), and the warning on every run would teach people to ignore warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "when merging arrow schema with dlt schema" not in record.getMessage()


logging.getLogger("dlt").addFilter(_ExpectedHintNotice())


def _kind(value: Any) -> str:
    python_type = type(value)
    if issubclass(python_type, bool):
        return "bool"
    if issubclass(python_type, int):
        return "bigint"
    if issubclass(python_type, float):
        return "double"
    if issubclass(python_type, datetime):
        return "timestamp"
    return "text"


def _fits(kind: str, value: Any) -> bool:
    actual = _kind(value)
    return actual == kind or (kind == "double" and actual == "bigint")


def _all_fit(kind: str, values: list[Any]) -> bool:
    """Whether every non-null value fits ``kind``: one check per Python type, not per value."""
    return all(
        _fits(kind, sample) for sample in {type(v): v for v in values if v is not None}.values()
    )


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


class _Table:
    """One table's column types (fixed for the run) and the rows of the current batch."""

    def __init__(self, name: str, hints: TTableSchemaColumns, keys: tuple[str, ...]) -> None:
        self.name = name
        self.keys = keys
        self.kinds: dict[str, str] = {}
        self.json: set[str] = {n for n, c in hints.items() if c.get("data_type") == "json"}
        self.hinted = hints
        self.rows: list[Row] = []

    def arrow(self) -> pa.Table | None:
        rows, self.rows = self.rows, []
        if not rows:
            return None
        names: dict[str, None] = dict.fromkeys(self.keys)
        for row in rows:
            names.update(dict.fromkeys(row))
        columns: dict[str, list[Any]] = {}
        for name in names:
            values = [row.get(name) for row in rows]
            kind = self.kinds.get(name)
            if kind is None:
                first = next((v for v in values if v is not None), None)
                if first is None:
                    if name in self.keys:
                        columns[name] = values  # nulls in a key: dlt names the table
                    continue  # all null and never typed: absent from this batch
                kind = self.kinds[name] = _kind(first)
            fitting = values
            if not _all_fit(kind, values):
                fitting = [v if v is None or _fits(kind, v) else None for v in values]
                for value_index, v in enumerate(values):
                    if v is not None and not _fits(kind, v):
                        variant = f"{name}__v_{_kind(v)}"
                        self.kinds.setdefault(variant, _kind(v))
                        columns.setdefault(variant, [None] * len(rows))[value_index] = v
            columns[name] = fitting
        fields = []
        arrays = []
        for name, values in columns.items():
            arrow_type = _ARROW_TYPES[self.kinds.get(name, "text")]
            fields.append(pa.field(name, arrow_type, nullable=name not in self.keys))
            arrays.append(pa.array(values, type=arrow_type))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    def put(self, row: Row, column: str, value: Any) -> None:
        """Sets ``column`` of an outgoing row: a dict or list as JSON text (and the column
        hinted JSON), anything else as it is."""
        if isinstance(value, dict | list):
            self.json.add(column)
            row[column] = _json(value)
        else:
            row[column] = value

    def column_hints(self) -> TTableSchemaColumns:
        hints: TTableSchemaColumns = {k: dict(v) for k, v in self.hinted.items()}  # type: ignore[misc]
        for name in self.json:
            hints.setdefault(name, {"data_type": "json", "nullable": True})
        return hints


class Tabulator:
    """Turns one resource's shaped rows into Arrow tables for its root and child tables.

    ``add`` buffers rows and yields dlt items (Arrow tables marked with their table's hints)
    whenever ``BATCH_ROWS`` rows are waiting; ``flush`` yields what is left. Rows given to
    ``add`` are read, never changed.
    """

    def __init__(
        self, root: str, columns: TTableSchemaColumns, batch_rows: int = BATCH_ROWS
    ) -> None:
        self.root = root
        self.parent_key = PARENT_KEYS[root]
        self.batch_rows = batch_rows
        self._root = _Table(root, columns, ("idx",))
        self._children: dict[str, _Table] = {}
        self._pending = 0

    def add(self, rows: Iterable[Row]) -> Iterator[Any]:
        for row in rows:
            self._split(row)
            self._pending += 1
        if self._pending >= self.batch_rows:
            yield from self.flush()

    def flush(self) -> Iterator[Any]:
        self._pending = 0
        for table in (self._root, *self._children.values()):
            data = table.arrow()
            if data is not None:
                yield dlt.mark.with_hints(data, self._hints(table), create_table_variant=True)

    def _split(self, row: Row) -> None:
        root = self._root
        out: Row = {}
        for name, value in row.items():
            if name in root.json:
                out[name] = None if value is None else _json(value)
            elif isinstance(value, list):
                self._child(name, row.get("idx"), value)
            elif isinstance(value, dict):
                for key, inner in value.items():
                    root.put(out, f"{name}__{key}", inner)
            else:
                out[name] = value
        root.rows.append(out)

    def _child(self, field: str, parent: Any, items: list[Any]) -> None:
        name = f"{self.root}__{field}"
        table = self._children.get(name)
        if table is None:
            keys = (self.parent_key, POSITION)
            hints: TTableSchemaColumns = {
                self.parent_key: {"data_type": "text", "nullable": False},
                POSITION: {"data_type": "bigint", "nullable": False},
            }
            table = self._children[name] = _Table(name, hints, keys)
        for position, item in enumerate(items):
            out: Row = {self.parent_key: parent, POSITION: position}
            if isinstance(item, dict):
                for key, value in item.items():
                    if key not in (self.parent_key, POSITION):
                        table.put(out, key, value)
            else:
                out["value"] = _json(item) if isinstance(item, dict | list) else item
            table.rows.append(out)

    def _hints(self, table: _Table) -> Any:
        if table is self._root:
            return dlt.mark.make_hints(
                table_name=table.name,
                write_disposition="merge",
                primary_key="idx",
                columns=table.column_hints(),
            )
        return dlt.mark.make_hints(
            table_name=table.name,
            write_disposition="merge",
            primary_key=[self.parent_key, POSITION],
            columns=table.column_hints(),
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
