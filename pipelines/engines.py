"""Where the SQL models run: DuckDB (and Parquet, through a DuckDB file) or PostgreSQL.

The models of ``sql/`` are written once, in DuckDB's dialect. On PostgreSQL each rendered
statement is transpiled with sqlglot, and the few DuckDB constructs sqlglot has no
PostgreSQL spelling for are rewritten on the parsed tree first (``_for_postgres``):

- ``map_from_entries(list(struct_pack(k := key, v := value) ...))`` (a MAP column) becomes
  ``jsonb_object_agg(key, value)``, and an empty ``map()`` an empty ``jsonb`` object: a
  mart's MAP column is a JSON object on PostgreSQL, with the same keys and values;
- ``try_cast(x as T)`` becomes ``feedback_sync_try_<T>(x::text)``, a function made in the
  ``staging`` schema that returns NULL where the cast fails (PostgreSQL has no try_cast);
- a subquery in ``FROM`` without an alias (``source()`` gives one) gets one;
- ``round(x, n)`` rounds ``x`` as ``numeric`` and gives back a double, as DuckDB does for the
  doubles the models round (PostgreSQL has no ``round(double precision, int)``).

Each engine runs one build in one transaction: a failed model rolls all of it back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import sqlglot
from sqlglot import exp

# what PostgreSQL's information_schema calls a type -> DuckDB's name for it (the models'
# catalog code speaks DuckDB's names)
_PG_TYPES = {
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "jsonb": "JSON",
    "json": "JSON",
    "bigint": "BIGINT",
    "integer": "INTEGER",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
    "timestamp without time zone": "TIMESTAMP",
    "date": "DATE",
    "numeric": "DECIMAL",
}
TRY_CAST_PREFIX = "feedback_sync_try_"


class Engine(Protocol):
    """A connection the models are built on."""

    # what a failed statement raises: a model that fails is reported with its name
    errors: tuple[type[Exception], ...]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def column_types(self, schema: str) -> dict[str, dict[str, str]]: ...

    def build(self, schemas: Sequence[str]) -> contextlib.AbstractContextManager[None]: ...

    def create(self, kind: str, relation: str, sql: str) -> None: ...


def _catalog(engine: Engine, schema: str) -> dict[str, dict[str, str]]:
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


class DuckDbEngine:
    """A DuckDB connection (the warehouse file, or the models file beside Parquet)."""

    def __init__(self, con: Any) -> None:
        import duckdb

        self.con = con
        self.errors: tuple[type[Exception], ...] = (duckdb.Error,)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.con.execute(sql, list(params)).fetchall()
        return rows

    def column_types(self, schema: str) -> dict[str, dict[str, str]]:
        return _catalog(self, schema)

    @contextlib.contextmanager
    def build(self, schemas: Sequence[str]) -> Iterator[None]:
        import duckdb

        self.con.execute("begin transaction")
        try:
            for schema in schemas:
                self.con.execute(f'create schema if not exists "{schema}"')
            yield
            self.con.execute("commit")
        except BaseException:
            # a rollback that fails too must not hide why the build failed
            with contextlib.suppress(duckdb.Error):
                self.con.execute("rollback")
            raise

    def create(self, kind: str, relation: str, sql: str) -> None:
        self.con.execute(f"create or replace {kind} {relation} as\n{sql}")


class PostgresEngine:
    """A psycopg2 connection (dlt's, from the pipeline's credentials), autocommitting."""

    def __init__(self, con: Any) -> None:
        import psycopg2

        self.con = con
        self.errors: tuple[type[Exception], ...] = (
            psycopg2.Error,
            sqlglot.errors.SqlglotError,
            ValueError,
        )
        self.functions_schema = "staging"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.con.cursor() as cursor:
            cursor.execute(sql.replace("?", "%s") if params else sql, list(params) or None)
            if cursor.description is None:
                return []
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows

    def column_types(self, schema: str) -> dict[str, dict[str, str]]:
        return {
            table: {column: _PG_TYPES.get(kind, kind.upper()) for column, kind in columns.items()}
            for table, columns in _catalog(self, schema).items()
        }

    @contextlib.contextmanager
    def build(self, schemas: Sequence[str]) -> Iterator[None]:
        """One transaction; the model schemas are made anew (PostgreSQL's ``create or
        replace view`` cannot change a view's columns, and it has no such verb for tables).
        Objects of others that depend on the models are dropped with them (``cascade``)."""
        self.execute("begin")
        try:
            for schema in schemas:
                self.execute(f'drop schema if exists "{schema}" cascade')
                self.execute(f'create schema "{schema}"')
            # try_cast's stand-ins live in the first schema (staging), made anew with it
            self.functions_schema = schemas[0]
            self._try_cast_functions(self.functions_schema)
            yield
            self.execute("commit")
        except BaseException:
            with contextlib.suppress(Exception):
                self.execute("rollback")
            raise

    def create(self, kind: str, relation: str, sql: str) -> None:
        self.execute(f"create {kind} {relation} as\n{to_postgres(sql, self.functions_schema)}")

    def _try_cast_functions(self, schema: str) -> None:
        for sql_type in ("bigint", "double precision", "boolean", "timestamptz", "json", "text"):
            name = f'"{schema}"."{try_cast_function(sql_type)}"'
            self.execute(
                f"create function {name}(value text) returns {sql_type} language plpgsql "
                f"immutable as $$ begin return value::{sql_type}; "
                "exception when others then return null; end $$"
            )


def try_cast_function(sql_type: str) -> str:
    """The name of the function that stands for ``try_cast(x as sql_type)`` on PostgreSQL."""
    return TRY_CAST_PREFIX + sql_type.lower().replace(" ", "_")


def to_postgres(sql: str, functions_schema: str) -> str:
    """``sql`` (DuckDB's dialect) in PostgreSQL's, by sqlglot and the rewrites above."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    tree = tree.transform(lambda node: _for_postgres(node, functions_schema))
    # PostgreSQL (before 16) wants an alias on every subquery in FROM; DuckDB does not
    for n, subquery in enumerate(tree.find_all(exp.Subquery)):
        if not subquery.alias and isinstance(subquery.parent, exp.From | exp.Join):
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"_subquery_{n}")))
    return tree.sql(dialect="postgres")


def _for_postgres(node: exp.Expression, functions_schema: str) -> exp.Expression:
    if isinstance(node, exp.MapFromEntries):
        return _object_agg(node)
    empty_map = isinstance(node, exp.Cast) and isinstance(node.this, exp.Map)
    if empty_map and not any(node.this.args.values()):
        return exp.cast(exp.Literal.string("{}"), exp.DataType.build("jsonb"))
    if isinstance(node, exp.TryCast):
        sql_type = node.to.sql(dialect="postgres").lower()
        if sql_type == "varchar":
            sql_type = "text"
        function = exp.func(
            try_cast_function(sql_type), exp.cast(node.this, exp.DataType.build("text"))
        )
        return exp.Dot(this=exp.to_identifier(functions_schema, quoted=True), expression=function)
    if isinstance(node, exp.Round) and node.args.get("decimals") is not None:
        as_numeric = exp.cast(node.this, exp.DataType.build("numeric"))
        rounded = exp.Round(this=as_numeric, decimals=node.args["decimals"])
        return exp.cast(rounded, exp.DataType.build("double precision", dialect="postgres"))
    return node


def _object_agg(node: exp.MapFromEntries) -> exp.Expression:
    """``map_from_entries(list(struct_pack(k := a, v := b) [order by ...]) [filter (...)])``
    -> ``jsonb_object_agg(a, b) [filter (...)]``."""
    inner = node.this
    condition = None
    if isinstance(inner, exp.Filter):
        inner, condition = inner.this, inner.expression
    if isinstance(inner, exp.ArrayAgg):
        entry = inner.this.this if isinstance(inner.this, exp.Order) else inner.this
        if isinstance(entry, exp.Struct) and len(entry.expressions) == 2:
            key, value = (
                e.expression if isinstance(e, exp.PropertyEQ) else e for e in entry.expressions
            )
            agg = exp.Anonymous(this="jsonb_object_agg", expressions=[key, value])
            return exp.Filter(this=agg, expression=condition) if condition is not None else agg
    raise ValueError(f"no PostgreSQL spelling for {node.sql(dialect='duckdb')}")
