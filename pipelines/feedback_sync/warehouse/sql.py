"""What every SQL destination does the same way, through dlt's SQL client: the deletes
after a load (``reconcile.py``), counts, dlt's committed loads and state, and the figures
the data checks read. DuckDB, Parquet (through its working DuckDB file), PostgreSQL and
any other SQL destination dlt has build on it."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from feedback_sync.warehouse.base import (
    completed_loads_sql,
    connected,
    data_tables,
    newest_state_sql,
)
from feedback_sync.warehouse.target import Target

if TYPE_CHECKING:
    from dlt.pipeline.pipeline import Pipeline

log = logging.getLogger("feedback_sync")


class SqlTarget(Target):
    """A destination dlt reaches through its SQL client."""

    def check_writable(self) -> str:
        """Connected through dlt's SQL client; what more a destination can ask of its
        server is ``privileges`` (write access is not probed where it says nothing)."""
        with self.pipeline().sql_client() as client:
            client.execute_sql("select 1")
            said = self.privileges(client)
        return f"{self.location()}: connected; {said}"

    def privileges(self, client: Any) -> str:
        return f"whether this login may create tables is not checked on {self.destination}"

    def replace_children(
        self, pipeline: Pipeline, load_id: str, had: frozenset[str] | None = None
    ) -> dict[str, int]:
        from feedback_sync.warehouse import reconcile as deletes

        return deletes.replace_children(pipeline, load_id, had)

    def reconcile(
        self,
        pipeline: Pipeline,
        load_id: str,
        resources: Iterable[str],
        mode: str,
        had: frozenset[str] | None = None,
        gone: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, int]:
        from feedback_sync.warehouse import reconcile as deletes

        return deletes.reconcile(pipeline, load_id, resources, mode, had, gone)

    def table_counts(self, pipeline: Pipeline) -> dict[str, int]:
        counts: dict[str, int] = {}
        try:
            tables = data_tables(pipeline)
        except Exception:
            tables = [
                name
                for name in pipeline.default_schema.data_table_names()
                if not name.startswith("_")
            ]
        if not tables:
            return counts
        with connected(pipeline) as client:
            # one statement for all: each round trip through dlt's client costs more than
            # a count
            rows = client.execute_sql(
                " union all ".join(
                    f"select %s, count(*) from {client.make_qualified_table_name(table)}"
                    for table in tables
                ),
                *tables,
            )
        for name, count in rows or ():
            counts[str(name)] = int(count)
        return counts

    def load_completed(self, pipeline: Pipeline, load_id: str) -> bool:
        from dlt.common.destination.exceptions import DestinationUndefinedEntity

        try:
            with connected(pipeline) as client:
                rows = client.execute_sql(
                    f"select count(*) from {client.make_qualified_table_name('_dlt_loads')} "
                    "where load_id = %s and status = 0",
                    load_id,
                )
        except DestinationUndefinedEntity:  # no dataset yet
            return False
        return bool(rows and rows[0][0])

    def completed_loads(self, pipeline: Pipeline) -> tuple[datetime | None, int]:
        with connected(pipeline) as client:
            loads = client.execute_sql(
                completed_loads_sql(client.make_qualified_table_name("_dlt_loads"))
            )
        return (loads[0][0], loads[0][1]) if loads else (None, 0)

    def state_is_current(self, pipeline: Pipeline) -> bool:
        """The same version hash as the newest state committed here, with the schemas
        (then dlt's ``sync_destination``, 0.15 s of set-up, would restore the same state).
        Anything else (no local state, another machine's newer load) lets dlt restore."""
        if not pipeline.default_schema_name:
            return False
        if pipeline.default_schema_name not in pipeline.schema_names:
            return False
        local = pipeline.state.get("_version_hash")
        return bool(local) and self.committed_version_hash(pipeline) == local

    def committed_version_hash(self, pipeline: Pipeline) -> str | None:
        if self.exists() is False:
            return None  # dlt's client would make the file to look in it
        try:
            with connected(pipeline) as client:
                states = client.make_qualified_table_name("_dlt_pipeline_state")
                loads = client.make_qualified_table_name("_dlt_loads")
                rows = client.execute_sql(
                    newest_state_sql(states, loads, "version_hash", "%s"), pipeline.pipeline_name
                )
        except Exception:  # no dataset yet, or tables dlt has not made: dlt decides
            return None
        return str(rows[0][0]) if rows and rows[0][0] else None

    def prune_state_history(self, pipeline: Pipeline, keep: int = 10) -> None:
        """dlt stores the whole state with every load and never deletes old versions; with
        per-idea cursors that is about 1 MB a run at 20,000 ideas."""
        try:
            with connected(pipeline) as client:
                table = client.make_qualified_table_name("_dlt_pipeline_state")
                client.execute_sql(
                    f"delete from {table} where pipeline_name = %s and version < "
                    f"(select max(version) from {table} where pipeline_name = %s) - %s",
                    pipeline.pipeline_name,
                    pipeline.pipeline_name,
                    keep - 1,
                )
        except Exception as exc:  # housekeeping must not fail a good run
            log.warning("could not prune old state versions: %s", exc)

    def key_figures(self, pipeline: Pipeline, tables: Sequence[str], key: str) -> dict[str, Any]:
        figures: dict[str, Any] = {}
        present = set(data_tables(pipeline))
        with connected(pipeline) as client:
            for table in tables:
                if table not in present:
                    continue
                qualified = client.make_qualified_table_name(table)
                rows = client.execute_sql(
                    f"select count(*), count(*) - count({key}), "
                    f"count({key}) - count(distinct {key}) from {qualified}"
                )
                total, nulls, duplicates = (int(v) for v in rows[0]) if rows else (0, 0, 0)
                figures[table] = (total, nulls, duplicates)
        return figures

    def newest(
        self, pipeline: Pipeline, tables: Sequence[str], columns: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        newest: dict[str, dict[str, Any]] = {}
        present = set(data_tables(pipeline))
        with connected(pipeline) as client:
            for table in tables:
                if table not in present:
                    continue
                present_columns = _columns(client, table)
                times = [c for c in columns if c in present_columns]
                if not times:
                    continue
                qualified = client.make_qualified_table_name(table)
                rows = client.execute_sql(
                    f"select {', '.join(f'max({c})' for c in times)} from {qualified}"
                )
                newest[table] = dict(zip(times, rows[0] if rows else (), strict=False))
        return newest


def _columns(client: Any, table: str) -> set[str]:
    rows = client.execute_sql(
        "select column_name from information_schema.columns "
        "where table_schema = %s and table_name = %s",
        client.dataset_name,
        table,
    )
    return {row[0] for row in rows or ()}
