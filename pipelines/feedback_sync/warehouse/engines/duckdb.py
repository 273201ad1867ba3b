"""The DuckDB engine the models run on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from feedback_sync.warehouse.engines import Engine


class DuckDbEngine(Engine):
    """A DuckDB connection (the warehouse file, or the models file beside Parquet)."""

    def __init__(self, con: Any) -> None:
        import duckdb

        self.con = con
        self.errors: tuple[type[Exception], ...] = (duckdb.Error,)
        self.hashes_rows = True

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self.con.execute(sql, list(params)).fetchall()
        return rows

    def query(
        self, sql: str, params: Sequence[Any] = ()
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        cursor = self.con.execute(sql, list(params))
        names = [d[0] for d in cursor.description or ()]
        return names, cursor.fetchall()

    def translate(self, sql: str) -> str:
        return sql

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
