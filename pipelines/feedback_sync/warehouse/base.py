"""What every destination module shares: the SQL that reads dlt's own tables, the dataset's
tables, and the warning a delete pass gives when it cannot tell what is gone."""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlt.destinations.sql_client import SqlClientBase
    from dlt.pipeline.pipeline import Pipeline

log = logging.getLogger("feedback_sync")


class _Shared:
    """One pipeline's SQL client, kept for its next use, with how deep it is in use."""

    def __init__(self, key: tuple[Any, ...], client: SqlClientBase[Any]) -> None:
        self.key = key
        self.client = client
        self.depth = 0


# per pipeline object: the client its steps share (gone with the pipeline); the lock keeps
# threads with pipelines of their own (Prefect's task runners) from changing it at once
_SHARED: weakref.WeakKeyDictionary[Any, _Shared] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


@contextlib.contextmanager
def connected(pipeline: Pipeline) -> Iterator[SqlClientBase[Any]]:
    """dlt's SQL client of ``pipeline``'s dataset, connected for the block.

    What ``with pipeline.sql_client() as client`` does, without making the client again
    each time: dlt resolves the destination's whole configuration and reloads the schema
    file for every new client (15-20 ms each, a dozen times in a sync with nothing to do).
    The client is made again when the pipeline's schema, dataset or destination changes
    (a first extract names the schema; a dropped pipeline has none). A block inside
    another on the same pipeline uses the connection already open; the outermost block
    closes it. One pipeline is for one thread at a time, as a sync's steps are.
    """
    destination = pipeline.destination
    key = (
        pipeline.default_schema_name,
        pipeline.dataset_name,
        destination.destination_name if destination is not None else None,
    )
    with _SHARED_LOCK:
        shared = _SHARED.get(pipeline)
    if shared is None or (shared.key != key and shared.depth == 0):
        shared = _Shared(key, pipeline.sql_client())
        with _SHARED_LOCK:
            _SHARED[pipeline] = shared
    client = shared.client
    # as dlt's own ``with``: a connection owned from outside is already open
    owns = client.owns_connection
    if shared.depth == 0 and owns:
        client.open_connection()
    shared.depth += 1
    try:
        yield client
    finally:
        shared.depth -= 1
        if shared.depth == 0 and owns:
            client.close_connection()


# the schema of the sync's own records in the warehouse, beside the dataset (the first loads
# owed, ``appends``; the loads history compared, ``history``; the models' build record)
INTERNAL_SCHEMA = "_feedback_sync"


def internal_table(pipeline: Pipeline, client: SqlClientBase[Any], table: str) -> str:
    """``table`` of ``INTERNAL_SCHEMA``, qualified for a statement. On DuckDB with the
    file's catalog in front: DuckDB names the catalog after the file, and in
    ``_feedback_sync.duckdb`` the two-part name is ambiguous between that catalog and the
    schema (DuckDB's Binder Error)."""
    return f'{_internal_schema(pipeline, client)}."{table}"'


def create_internal_schema(pipeline: Pipeline, client: SqlClientBase[Any]) -> None:
    """Makes ``INTERNAL_SCHEMA`` where it is not yet (qualified as ``internal_table``: in
    ``_feedback_sync.duckdb``, DuckDB finds the bare name ambiguous once the schema exists)."""
    client.execute_sql(f"create schema if not exists {_internal_schema(pipeline, client)}")


def _internal_schema(pipeline: Pipeline, client: SqlClientBase[Any]) -> str:
    name = f'"{INTERNAL_SCHEMA}"'
    if pipeline.destination.destination_name != "duckdb":
        return name
    rows = client.execute_sql("select current_database()")
    catalog = str(rows[0][0]).replace('"', '""') if rows else ""
    return f'"{catalog}".{name}' if catalog else name


def warn_unknown_rejection(root: str) -> None:
    """Nothing of ``root`` is removed this run: an item without an idx was rejected."""
    from feedback_sync.source.screening import REJECTED_TABLE  # dlt and pyarrow: not for status

    log.warning(
        "%s: no rows removed this run: an item without an idx was rejected "
        "(%s), and it may be any of the rows not seen",
        root,
        REJECTED_TABLE,
    )


def newest_state_sql(states: str, loads: str, column: str, param: str) -> str:
    """``column`` of the newest state dlt committed for one pipeline (the pipeline's name
    is the one parameter, written ``param``), as dlt's own ``get_stored_state`` finds it:
    state rows joined to completed loads, the newest load first. ``states`` and ``loads``
    are the qualified ``_dlt_pipeline_state`` and ``_dlt_loads``."""
    return (
        f"select s.{column} from {states} as s join {loads} as l on l.load_id = s._dlt_load_id "
        f"where s.pipeline_name = {param} and l.status = 0 order by l.load_id desc limit 1"
    )


def completed_loads_sql(loads: str) -> str:
    """When the newest completed load was stored, and how many completed."""
    return f"select max(inserted_at), count(*) from {loads} where status = 0"


def dataset_tables(client: SqlClientBase[Any]) -> list[str]:
    """Tables that exist in the client's dataset, sorted (the schema may name tables that
    were never created, when no row ever reached them)."""
    rows = client.execute_sql(
        "select table_name from information_schema.tables where table_schema = %s "
        "order by table_name",
        client.dataset_name,
    )
    return [row[0] for row in rows or ()]


def data_tables(pipeline: Pipeline) -> list[str]:
    """The dataset's tables that hold synced data (dlt's own ``_dlt_*`` tables left out)."""
    with connected(pipeline) as client:
        return [name for name in dataset_tables(client) if not name.startswith("_dlt")]
