"""The Delta target's bookkeeping, in the table format itself (``deltalake``).

dlt's filesystem destination merges each load into its Delta table (``upsert`` on the
primary key: delta-rs rewrites only the files holding matched rows). What the SQL
destinations do with statements after a load (``warehouse/reconcile.py``) is done here
with Delta commits, so the sync never holds a whole table:

- ``replace_children``: child rows whose parent came again in this load without them are
  deleted (a merge of the parents' keys, ``when matched and the load id differs: delete``);
- ``reconcile``: root rows a complete read did not see are deleted with their child rows, or
  in soft mode get ``_deleted_at`` (an update through a merge);
- ``table_counts``: rows per table, from the snapshot's files.

Each table's change is its own Delta commit. A crash between two leaves the run's journal
(``warehouse/journal.py``) owing the rest; the next run applies it again, with the same result.

A load holds a key twice when the API repeats an item within a run (a page that repeats the
end of the page before, as a list moves under its reader). A SQL merge takes one of them;
delta-rs keeps both when it creates a table, and refuses a merge where two source rows
match one target row ("MERGE matched a target row with multiple source rows"), which would
fail every run while the API repeats. ``install`` makes each Delta load job read its
files with every primary key once (the copy read last, from the later page): the key
columns are read first, and only a load that repeats a key is read whole to drop the
repeats; any other is streamed as dlt streams it.

The models read the tables' current snapshots: ``snapshot_views`` makes, in the models'
DuckDB file, one view per table over the Parquet files of its current version (the file
list comes from the Delta log, so only committed data is read); for tables in object
storage, a copy read through delta-rs with dlt's credentials, refreshed when the table's
version changes. A table whose protocol needs more than files to be read (deletion
vectors, column mapping) is refused by name.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from dlt.pipeline.pipeline import Pipeline

from feedback_sync.errors import DeltaError
from feedback_sync.internals import load_job_schema_name, load_job_table
from feedback_sync.source.arrow import child_tables
from feedback_sync.source.resources import PARENT_KEYS, SOURCE_NAME
from feedback_sync.source.screening import REJECTED_TABLE
from feedback_sync.warehouse.base import warn_unknown_rejection

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger("feedback_sync")
# reader features a plain read of the snapshot's Parquet files would get wrong
_UNREADABLE_FEATURES = {"deletionVectors", "columnMapping"}


# the dlt release whose DeltaLoadFilesystemJob.run and get_local_dataset_reader this wraps
CHECKED_DLT = "1.31.0"
# the primary key of the table the Delta load job running in this thread loads (None for a
# job that loads another source's data)
_job = threading.local()


def install() -> None:
    """Makes each Delta load job of this product's data see each primary key once
    (idempotent).

    dlt has no setting or hook for this: its Delta job reads a load's files through
    ``get_local_dataset_reader``, imported when the job runs, so this wraps that function
    and the job's ``run`` (which says which table's keys apply, per thread). Only jobs that
    load the ``feedback`` source's schema are changed; any other pipeline's Delta loads in
    the same process read their files as dlt does. Checked against dlt ``CHECKED_DLT``;
    ``tests/sync/test_dlt_patches.py`` fails when either function changes. Which table's
    keys: the job's private members, read in ``feedback_sync.internals``.
    """
    import dlt.common.libs.pyarrow as dlt_arrow
    from dlt.destinations.impl.filesystem.filesystem import DeltaLoadFilesystemJob

    run = DeltaLoadFilesystemJob.run
    if not hasattr(run, "__wrapped__"):

        def keyed_run(self: Any) -> None:
            _job.keys = _keys_to_keep_once(self)
            try:
                run(self)
            finally:
                _job.keys = None

        keyed_run.__wrapped__ = run  # type: ignore[attr-defined]
        DeltaLoadFilesystemJob.run = keyed_run  # type: ignore[method-assign]
    reader = dlt_arrow.get_local_dataset_reader
    if not hasattr(reader, "__wrapped__"):

        def once_per_key_reader(file_paths: Sequence[str]) -> pa.RecordBatchReader:
            keys = getattr(_job, "keys", None)
            once = _once_per_key(file_paths, keys) if keys else None
            if once is None:
                return reader(file_paths)
            return pa.RecordBatchReader.from_batches(once.schema, once.to_batches())

        once_per_key_reader.__wrapped__ = reader  # type: ignore[attr-defined]
        dlt_arrow.get_local_dataset_reader = once_per_key_reader


def _keys_to_keep_once(job: Any) -> list[str] | None:
    """The primary key a Delta load job of the ``feedback`` source loads each of once; None
    for a job of another source (its files are read as dlt reads them)."""
    from dlt.common.schema.utils import get_columns_names_with_prop

    if load_job_schema_name(job) != SOURCE_NAME:
        return None
    return get_columns_names_with_prop(load_job_table(job), "primary_key")


def _once_per_key(file_paths: Sequence[str], keys: list[str]) -> pa.Table | None:
    """The load's rows with each key once (the copy read last), or None when no key
    repeats (the files are then streamed as they are)."""
    dataset = ds.dataset(list(file_paths))
    key_rows = dataset.to_table(columns=keys)
    if key_rows.group_by(keys, use_threads=False).aggregate([]).num_rows == key_rows.num_rows:
        return None
    rows = dataset.to_table()
    numbered = rows.select(keys).append_column("_row", pa.array(range(rows.num_rows), pa.int64()))
    last = numbered.group_by(keys, use_threads=False).aggregate([("_row", "max")])
    kept = last.column("_row_max").combine_chunks()
    log.info(
        "a Delta load of %d rows held %d repeated keys; the last copy of each is loaded",
        rows.num_rows,
        rows.num_rows - len(kept),
    )
    return rows.take(kept.take(pc.sort_indices(kept)))


def tables(pipeline: Pipeline) -> dict[str, DeltaTable]:
    """The data tables that exist as Delta tables, by name (dlt's own tables left out)."""
    from dlt.common.libs.deltalake import get_delta_tables

    names = [
        name
        for name, table in pipeline.default_schema.tables.items()
        if not name.startswith("_dlt") and table.get("table_format") == "delta"
    ]
    if not names:
        return {}
    try:
        found = get_delta_tables(pipeline)
    except Exception as exc:  # nothing loaded yet: no dataset
        log.debug("no Delta tables yet: %s", exc)
        return {}
    return {name: table for name, table in found.items() if name in names}


def _text(column: str) -> ds.Expression:
    """A text column as ``string`` (delta-rs writes ``string_view`` after a merge, which
    pyarrow compares with nothing else)."""
    return ds.field(column).cast(pa.string())


def _load_id_literal(load_id: str) -> str:
    return "'" + load_id.replace("'", "''") + "'"


def _keys(table: DeltaTable, column: str, condition: ds.Expression | None) -> pa.Array:
    """The distinct values of ``column`` in rows matching ``condition`` (not NULL)."""
    dataset = table.to_pyarrow_dataset()
    read = dataset.to_table(columns=[column], filter=condition)
    values = pc.unique(read.column(column).combine_chunks().cast(pa.string()))
    return pc.drop_null(values)


def _delete_where_in(
    table: DeltaTable, column: str, keys: pa.Array, extra: str | None = None
) -> int:
    """Deletes the rows whose ``column`` is one of ``keys`` (and ``extra``, a predicate on
    ``target``); one commit. Returns how many."""
    if not len(keys):
        return 0
    source = pa.table({"_key": keys})
    merge = table.merge(
        source=source,
        predicate=f'target."{column}" = source._key',
        source_alias="source",
        target_alias="target",
    )
    metrics = merge.when_matched_delete(predicate=extra).execute()
    return int(metrics.get("num_target_rows_deleted", 0))


def replace_children(pipeline: Pipeline, load_id: str) -> dict[str, int]:
    """Deletes child rows whose parent came again in ``load_id`` without them; counts."""
    found = tables(pipeline)
    removed: dict[str, int] = {}
    for root, key in PARENT_KEYS.items():
        if root not in found:
            continue
        children = [c for c in child_tables(pipeline.default_schema.tables, root) if c in found]
        if not children:
            continue
        parents = _keys(found[root], "idx", _text("_dlt_load_id") == load_id)
        if not len(parents):
            continue
        for child in children:
            count = _delete_where_in(
                found[child], key, parents, f"target._dlt_load_id <> {_load_id_literal(load_id)}"
            )
            if count:
                removed[child] = count
    return removed


def reconcile(
    pipeline: Pipeline, load_id: str, resources: Iterable[str], mode: str
) -> dict[str, int]:
    """Removes (or marks) rows of ``resources`` not seen in ``load_id``; counts per table."""
    found = tables(pipeline)
    removed: dict[str, int] = {}
    rejected = found.get(REJECTED_TABLE)
    for root in sorted(resources):
        if root not in found:
            continue
        seen_rejected: pa.Array = pa.array([], pa.string())
        if rejected is not None:
            mine = (_text("resource") == root) & (_text("_dlt_load_id") == load_id)
            without_idx = rejected.to_pyarrow_dataset().count_rows(
                filter=mine & ds.field("idx").is_null()
            )
            if without_idx:
                warn_unknown_rejection(root)
                continue
            seen_rejected = _keys(rejected, "idx", mine)
        gone_filter = _text("_dlt_load_id") != load_id
        columns = found[root].to_pyarrow_dataset().schema.names
        soft = mode == "soft"
        if soft and "_deleted_at" in columns:
            gone_filter = gone_filter & ds.field("_deleted_at").is_null()
        gone = _keys(found[root], "idx", gone_filter)
        if len(seen_rejected):
            gone = pc.filter(gone, pc.invert(pc.is_in(gone, value_set=seen_rejected)))
        if not len(gone):
            continue
        removed[root] = len(gone)
        if soft:
            _mark_deleted(found[root], gone)
            continue
        key = PARENT_KEYS.get(root)
        for child in child_tables(pipeline.default_schema.tables, root) if key else ():
            if child in found:
                count = _delete_where_in(found[child], key or "", gone)
                if count:  # a gone row's child rows go with it, and are counted
                    removed[child] = removed.get(child, 0) + count
        _delete_where_in(found[root], "idx", gone)
    return removed


def _mark_deleted(table: DeltaTable, keys: pa.Array) -> None:
    """Sets ``_deleted_at`` (now) on the rows whose idx is one of ``keys``; one commit."""
    now = pa.array([datetime.now(UTC)] * len(keys), pa.timestamp("us", tz="UTC"))
    source = pa.table({"_key": keys, "_deleted_at": now})
    table.merge(
        source=source,
        predicate="target.idx = source._key",
        source_alias="source",
        target_alias="target",
    ).when_matched_update(
        updates={"_deleted_at": "source._deleted_at"},
        predicate="target._deleted_at IS NULL",
    ).execute()


def completed_loads(pipeline: Pipeline) -> tuple[datetime | None, int]:
    """When the newest completed load was stored, and how many loads completed.

    Read from the destination's ``_dlt_loads`` files (dlt writes one per completed load),
    not through dlt's SQL client: over a bucket that needs DuckDB's ``httpfs`` extension
    and a DuckDB secret, which fails here (dlt 1.31 calls ``fetchone`` on a DuckDB 2
    relation). One listing and one small read.
    """
    client: Any
    with pipeline.destination_client() as client:
        files = _load_files(client, pipeline)
        if not files:
            return None, 0
        newest = max(files, key=lambda path: _load_id_of(str(path)))
        stored = json.loads(client.fs_client.read_text(newest, encoding="utf-8"))
    return datetime.fromisoformat(stored["inserted_at"]), len(files)


def load_completed(pipeline: Pipeline, load_id: str) -> bool:
    """Whether dlt recorded ``load_id`` as completed here (its ``_dlt_loads`` file exists)."""
    client: Any
    with pipeline.destination_client() as client:
        return any(
            _load_id_of(str(path)) == float(load_id) for path in _load_files(client, pipeline)
        )


def _load_files(client: Any, pipeline: Pipeline) -> list[str]:
    """The ``_dlt_loads`` files of the pipeline's schema (none before the first load)."""
    from dlt.common.destination.exceptions import DestinationUndefinedEntity

    try:
        files: list[str] = client.list_table_files(pipeline.default_schema.loads_table_name)
    except DestinationUndefinedEntity:
        return []
    prefix = pipeline.default_schema.name + "__"
    return [f for f in files if str(f).rsplit("/", 1)[-1].startswith(prefix)]


def _load_id_of(path: str) -> float:
    """The load id in a ``_dlt_loads`` file name ``<schema>__<load id>.jsonl``, as a number
    (load ids are Unix times)."""
    name = path.rsplit("/", 1)[-1].removesuffix(".jsonl")
    try:
        return float(name.rsplit("__", 1)[-1])
    except ValueError:
        return 0.0


def key_figures(table: DeltaTable, key: str) -> tuple[int, int, int]:
    """Rows, rows with a null ``key``, and rows beyond the first per key (the key column
    only is read)."""
    column = table.to_pyarrow_dataset().to_table(columns=[key]).column(key)
    total, nulls = len(column), column.null_count
    distinct = len(pc.drop_null(pc.unique(column.combine_chunks())))
    return total, nulls, total - nulls - distinct


def newest(table: DeltaTable, columns: Sequence[str]) -> dict[str, Any]:
    """The newest value of each of ``columns`` the table has (those columns only read)."""
    dataset = table.to_pyarrow_dataset()
    present = [c for c in columns if c in dataset.schema.names]
    if not present:
        return {}
    read = dataset.to_table(columns=present)
    return {c: pc.max(read.column(c)).as_py() for c in present}


def table_counts(pipeline: Pipeline) -> dict[str, int]:
    """Rows per data table (empty when nothing was loaded yet)."""
    return {
        name: table.to_pyarrow_dataset().count_rows()
        for name, table in sorted(tables(pipeline).items())
    }


def snapshot_views(con: Any, pipeline: Pipeline, dataset: str) -> list[str]:
    """Makes ``<dataset>.<table>`` in the DuckDB connection ``con`` read each Delta table's
    current snapshot; returns the tables.

    Tables in a local folder become views over their current Parquet files (nothing is
    copied). Tables in object storage (``s3://``, ``gs://``, ``az://``...) are read through
    delta-rs, with the credentials dlt gave it, and copied into ``con`` as tables: DuckDB
    would need its own extension and secret for the bucket. A copy is refreshed only when
    its table's version (or location) changed since the copy was made
    (``_delta_snapshot.versions`` in the same file), so a run that changed one table copies
    one table.

    Raises:
        DeltaError: a table's protocol needs more than its files to be read.
    """
    con.execute(f'create schema if not exists "{dataset}"')
    con.execute(f"create schema if not exists {_SNAPSHOT_SCHEMA}")
    con.execute(
        f"create table if not exists {_SNAPSHOT_SCHEMA}.versions "
        "(dataset varchar, name varchar, table_uri varchar, version bigint, "
        "primary key (dataset, name))"
    )
    made = []
    for name, table in sorted(tables(pipeline).items()):
        protocol = table.protocol()
        features = set(protocol.reader_features or ()) & _UNREADABLE_FEATURES
        if features:
            raise DeltaError(
                f"the Delta table {name} uses {', '.join(sorted(features))}, which the models "
                "cannot read from its files; rewrite it without (or read it with Spark)"
            )
        if _is_local(table.table_uri):
            _view_over_files(con, dataset, name, table)
            con.execute(
                f"delete from {_SNAPSHOT_SCHEMA}.versions where dataset = ? and name = ?",
                [dataset, name],
            )
        else:
            _copy_if_changed(con, dataset, name, table)
        made.append(name)
    return made


_SNAPSHOT_SCHEMA = "_delta_snapshot"


def _is_local(table_uri: str) -> bool:
    scheme = urlparse(table_uri).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter


def _kind(con: Any, dataset: str, name: str) -> str | None:
    """``VIEW``, ``BASE TABLE``, or None when ``dataset.name`` does not exist."""
    found = con.execute(
        "select table_type from information_schema.tables "
        "where table_schema = ? and table_name = ?",
        [dataset, name],
    ).fetchall()
    return str(found[0][0]) if found else None


def _make_room(con: Any, dataset: str, name: str, kind: str) -> None:
    """Drops ``dataset.name`` when it exists as the other kind (a view where a table is
    wanted, or the reverse: ``create or replace`` refuses to change the kind)."""
    existing = _kind(con, dataset, name)
    if existing is not None and existing != kind:
        con.execute(f'drop {"view" if existing == "VIEW" else "table"} "{dataset}"."{name}"')


def _view_over_files(con: Any, dataset: str, name: str, table: DeltaTable) -> None:
    relation = f'"{dataset}"."{name}"'
    files = table.file_uris()
    if files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        _make_room(con, dataset, name, "VIEW")
        con.execute(
            f"create or replace view {relation} as "
            f"select * from read_parquet([{listed}], union_by_name = true)"
        )
    else:
        empty = table.to_pyarrow_dataset().schema.empty_table()  # noqa: F841 (DuckDB reads it)
        _make_room(con, dataset, name, "BASE TABLE")
        con.execute(f"create or replace table {relation} as select * from empty")


def _copy_if_changed(con: Any, dataset: str, name: str, table: DeltaTable) -> None:
    """Copies the table's snapshot into ``dataset.name`` unless the copy is of this version."""
    relation = f'"{dataset}"."{name}"'
    uri, version = table.table_uri, table.version()
    copied = con.execute(
        f"select table_uri, version from {_SNAPSHOT_SCHEMA}.versions "
        "where dataset = ? and name = ?",
        [dataset, name],
    ).fetchall()
    if copied == [(uri, version)] and _kind(con, dataset, name) == "BASE TABLE":
        return
    log.info("copying Delta table %s (version %d) into the models file", name, version)
    _make_room(con, dataset, name, "BASE TABLE")
    snapshot = table.to_pyarrow_dataset()  # streamed by DuckDB, batch by batch
    con.register("_delta_snapshot_source", snapshot)
    try:
        con.execute(f"create or replace table {relation} as select * from _delta_snapshot_source")
    finally:
        con.unregister("_delta_snapshot_source")
    con.execute(
        f"insert or replace into {_SNAPSHOT_SCHEMA}.versions values (?, ?, ?, ?)",
        [dataset, name, uri, version],
    )
