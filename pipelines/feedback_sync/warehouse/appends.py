"""A table's first load appends; what that owes is kept in the warehouse until it is done.

Into a table the warehouse does not have yet (a first sync, a new child table) there is
nothing to merge with, so the sync has dlt append to it (``SyncRun.write_disposition``):
no copy in the staging dataset, no delete-insert. Two things merge would have done are
then owed, and ``settle`` does them:

- a key the load sent twice (a page that repeated the end of the one before, an item that
  moved while its list was read) keeps one row, the newest load's;
- rows of a load that was never committed (its package aborted after some tables landed:
  no staging copy held them back) are deleted.

Before every load (a run's own, and a package an earlier run left pending), the sync
records what it owes (``owe``: the tables the warehouse has, so any other table was
created by the load's appends) in ``_feedback_sync.appends_owed``, in the warehouse
itself; ``settle`` runs after the load and at the start of every run, and clears the
record in the same transaction as its work. So a run that dies in its load, between the
load and ``settle``, or while it aborts, or that is run again from another working
folder, leaves a record the next run finishes; a run that fails before its load writes
nothing. ``settle`` waits while a package is still pending: its rows are not committed
yet, and will be.

DuckDB and PostgreSQL only: their rows have an id (``rowid``, ``ctid``) that tells two
copies of a key apart. Delta tables and other destinations always merge.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from dlt.common.destination.exceptions import DestinationUndefinedEntity
from dlt.common.schema import Schema
from dlt.destinations.sql_client import SqlClientBase
from dlt.pipeline.pipeline import Pipeline

from feedback_sync.warehouse.base import (
    INTERNAL_SCHEMA,
    connected,
    create_internal_schema,
    dataset_tables,
    internal_table,
)

log = logging.getLogger("feedback_sync")

SCHEMA = INTERNAL_SCHEMA  # beside the models' build record (models.BUILD_SCHEMA)
TABLE = "appends_owed"
OWED = f'"{SCHEMA}"."{TABLE}"'
# the column that names a row on its own, per destination where tables are appended to
ROW_IDS = {"duckdb": "rowid", "postgres": "ctid"}


def appends_new_tables(pipeline: Pipeline) -> bool:
    """Whether a table new to the warehouse is appended to (then settled) at ``pipeline``'s
    destination; elsewhere every table merges."""
    return pipeline.destination.destination_name in ROW_IDS


def warehouse_tables(pipeline: Pipeline, exists: bool | None) -> frozenset[str] | None:
    """The tables the warehouse has (``SyncRun.warehouse_tables``): a table it does not have
    yet is appended to, not merged; None where tables are always merged. ``exists``: the
    target's ``exists()``; a warehouse not made yet is not asked (nor created)."""
    if not appends_new_tables(pipeline):
        return None
    if exists is False:
        return frozenset()
    try:
        with connected(pipeline) as client:
            return frozenset(dataset_tables(client))
    except DestinationUndefinedEntity:  # no dataset yet
        return frozenset()


def _owed(pipeline: Pipeline, client: SqlClientBase[Any]) -> str:
    """The record's table, as ``OWED``, qualified (``base.internal_table``)."""
    return internal_table(pipeline, client, TABLE)


def owe(pipeline: Pipeline, existing: Iterable[str]) -> None:
    """Records, before a load, that every table not in ``existing`` (the tables the
    warehouse has now) may be appended to by it and is owed a ``settle``."""
    with connected(pipeline) as client:
        owed = _owed(pipeline, client)
        create_internal_schema(pipeline, client)
        client.execute_sql(f"create table if not exists {owed} (dataset_name text, existing text)")
        client.execute_sql(
            f"insert into {owed} values (%s, %s)",
            client.dataset_name,
            json.dumps(sorted(existing)),
        )


def settle(pipeline: Pipeline) -> dict[str, int]:
    """Does what appending runs owe (see the module): rows dropped or deleted per table.

    Nothing while a package is pending, or where nothing is owed (one query). A pipeline
    without a schema (its local state just dropped after an aborted load) knows no keys:
    it deletes the rows never committed and leaves the record for the next run.
    """
    if not appends_new_tables(pipeline) or pipeline.has_pending_data:
        return {}
    schema = pipeline.default_schema if pipeline.default_schema_name else None
    row_id = ROW_IDS[pipeline.destination.destination_name]
    with connected(pipeline) as client:
        made = client.execute_sql(
            "select 1 from information_schema.tables where table_schema = %s and table_name = %s",
            SCHEMA,
            TABLE,
        )
        if not made:
            return {}
        owed_table = _owed(pipeline, client)
        records = client.execute_sql(
            f"select existing from {owed_table} where dataset_name = %s", client.dataset_name
        )
        if not records:
            return {}
        loaded = _tables_with_load_ids(client)
        owed: set[str] = set()
        for (existing,) in records:
            owed |= loaded - set(json.loads(existing))
        settled: dict[str, int] = {}
        with client.begin_transaction():
            if owed:
                committed = _committed_loads(client)
                for table in sorted(owed):
                    count = _delete_uncommitted(client, table, committed)
                    if schema is not None:
                        count += _drop_repeats(client, schema, table, row_id)
                    if count:
                        settled[table] = count
            if schema is not None:
                client.execute_sql(
                    f"delete from {owed_table} where dataset_name = %s", client.dataset_name
                )
    return settled


def _tables_with_load_ids(client: SqlClientBase[Any]) -> set[str]:
    """The dataset's tables whose rows carry a load id (the data tables)."""
    rows = client.execute_sql(
        "select table_name from information_schema.columns where table_schema = %s "
        "and column_name = '_dlt_load_id'",
        client.dataset_name,
    )
    tables = {row[0] for row in rows or ()}
    return {t for t in tables if not t.startswith("_dlt")} & set(dataset_tables(client))


def _committed_loads(client: SqlClientBase[Any]) -> str | None:
    """The subquery of committed load ids; None when dlt has not recorded any yet."""
    if "_dlt_loads" not in dataset_tables(client):
        return None
    loads = client.make_qualified_table_name("_dlt_loads")
    return f"select load_id from {loads} where status = 0"


def _delete_uncommitted(client: SqlClientBase[Any], table: str, committed: str | None) -> int:
    """Deletes ``table``'s rows of loads never committed (an aborted package's)."""
    qtable = client.make_qualified_table_name(table)
    where = "true" if committed is None else f"_dlt_load_id not in ({committed})"
    rows = client.execute_sql(f"select count(*) from {qtable} where {where}")
    count = int(rows[0][0]) if rows else 0
    if count:
        client.execute_sql(f"delete from {qtable} where {where}")
        log.warning(
            "%s: deleted %d row(s) of a load that was never committed (its package was "
            "aborted after this table had landed)",
            table,
            count,
        )
    return count


def _drop_repeats(client: SqlClientBase[Any], schema: Schema, table: str, row_id: str) -> int:
    """Keeps one row per primary key in ``table``, the newest load's; rows dropped."""
    columns = schema.tables.get(table, {}).get("columns", {})
    keys = [name for name, column in columns.items() if column.get("primary_key")]
    if not keys:
        return 0
    qtable = client.make_qualified_table_name(table)
    key_list = ", ".join(client.escape_column_name(k) for k in keys)
    rows = client.execute_sql(
        f"select coalesce(sum(n - 1), 0) from (select count(*) as n from {qtable} "
        f"group by {key_list} having count(*) > 1) as repeated"
    )
    count = int(rows[0][0]) if rows else 0
    if count:
        client.execute_sql(
            f"delete from {qtable} where {row_id} in (select {row_id} from "
            f"(select {row_id}, row_number() over (partition by {key_list} "
            f"order by _dlt_load_id desc) as copy from {qtable}) as copies where copy > 1)"
        )
        log.info(
            "%s: %d row(s) repeated a key another row of the load had; one row per key kept",
            table,
            count,
        )
    return count
