"""The SQL the history step (``history.py``) speaks on one warehouse: quoting, types, and
what differs between warehouses. ``HistorySql`` holds what they share; each destination
that keeps history names its own subclass as its ``Target.history_sql`` (``duckdb.py``,
``postgres.py``). Imports nothing heavy: a target's module names its class at import."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

Columns = dict[str, str]  # column -> its SQL type, as the warehouse names it


class HistorySql(ABC):
    """One warehouse's SQL, over dlt's sql client ``client`` of the loaded dataset."""

    # the warehouse's names of the types the history tables add
    text_type: str
    json_type: str
    timestamp_type: str
    boolean_type: str

    def __init__(self, client: Any) -> None:
        self.client = client

    def table(self, name: str) -> str:
        return str(self.client.make_qualified_table_name(name))

    def col(self, name: str) -> str:
        return str(self.client.escape_column_name(name))

    def columns(self, table: str) -> Columns:
        rows = self.client.execute_sql(
            "select column_name, data_type from information_schema.columns "
            "where table_schema = %s and table_name = %s order by ordinal_position",
            self.client.dataset_name,
            table,
        )
        return {str(name): str(kind) for name, kind in rows or ()}

    def is_json(self, kind: str) -> bool:
        return kind.lower() in ("json", "jsonb")

    def differs(self, name: str, kind: str) -> str:
        """``h.<name>`` and ``c.<name>`` differ."""
        column = self.col(name)
        return f"h.{column} is distinct from c.{column}"

    @abstractmethod
    def json_list(self, value: str, order: str) -> str:
        """An aggregate: the group's ``value``s as a JSON array, in ``order``."""

    def empty_json_list(self) -> str:
        return f"cast('[]' as {self.json_type})"

    def typed_null(self, kind: str) -> str:
        return f"cast(null as {kind})"

    def stage(self, query: str) -> str:
        """A query of ``query``'s rows for the statements that compare them: the query
        itself, unless the warehouse computes them once first (``unstage`` undoes that)."""
        return query

    def unstage(self) -> None:
        """Drops what ``stage`` made (here, nothing)."""
        return None
