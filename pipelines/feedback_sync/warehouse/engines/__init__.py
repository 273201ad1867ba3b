"""Where the SQL models run: one ``Engine`` per kind of database, one module each.

- ``duckdb.py``: a DuckDB connection (the warehouse file, or the models file beside Parquet
  and Delta tables);
- ``postgres.py``: a PostgreSQL connection; the models' SQL, written in DuckDB's dialect,
  is transpiled for it there.

Each engine runs one build in one transaction: a failed model rolls all of it back. The
push and the dashboard read through the same engines (``query``, ``translate``); the SQL
they send untranslated (the push's lookups and journal) is written in what both accept.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any


class Engine(ABC):
    """A connection the models are built on."""

    # what a failed statement raises: a model that fails is reported with its name
    errors: tuple[type[Exception], ...]
    # whether ``hash(row)`` sums a relation's rows (what lets a build be skipped when
    # nothing it reads changed)
    hashes_rows: bool

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Runs ``sql`` (parameters written ``?``); its rows."""

    @abstractmethod
    def query(
        self, sql: str, params: Sequence[Any] = ()
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Runs ``sql``; its column names and rows."""

    @abstractmethod
    def translate(self, sql: str) -> str:
        """``sql``, written in DuckDB's dialect, in this engine's."""

    def column_types(self, schema: str) -> dict[str, dict[str, str]]:
        """Per table of ``schema``, its columns' types (DuckDB's names for them)."""
        return catalog(self, schema)

    @abstractmethod
    def build(self, schemas: Sequence[str]) -> contextlib.AbstractContextManager[None]:
        """One build in one transaction, ``schemas`` made first: a failure rolls it back."""

    @abstractmethod
    def create(self, kind: str, relation: str, sql: str) -> None:
        """Creates (or replaces) the ``kind`` (table, view) ``relation`` as ``sql``."""


def catalog(engine: Engine, schema: str) -> dict[str, dict[str, str]]:
    rows = engine.execute(
        "select table_name, column_name, data_type from information_schema.columns "
        "where table_schema = ? order by table_name, ordinal_position",
        [schema],
    )
    out: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        out.setdefault(table, {})[column] = data_type
    return out


def has_schema(engine: Engine, schema: str) -> bool:
    sql = "select 1 from information_schema.schemata where schema_name = ?"
    return bool(engine.execute(sql, [schema]))


def has_relation(engine: Engine, schema: str, name: str) -> bool:
    """A table or a view ``schema.name`` exists."""
    sql = "select 1 from information_schema.tables where table_schema = ? and table_name = ?"
    return bool(engine.execute(sql, [schema, name]))


def records(engine: Engine, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The rows of ``sql`` as dicts by column name."""
    names, rows = engine.query(sql, params)
    return [dict(zip(names, row, strict=True)) for row in rows]


def columns_of(engine: Engine, relation: str) -> list[str]:
    """The column names of ``relation`` (a table, or a table function such as read_csv)."""
    names, _ = engine.query(engine.translate(f"select * from {relation} as _r limit 0"))
    return names
