"""After a load: child lists replaced whole, and deletes at the source reach the warehouse.

After a load, every row a resource yielded carries that load's ``_dlt_load_id`` (merge
replaces the row, child rows merge on their parent's key and position).

``replace_children``: a parent row sent again carries its whole lists, so its child rows
from earlier loads are what its lists no longer hold (a company removed, a list that
shrank or emptied): they are deleted. Runs after every load.

``reconcile``: for a resource read from its start to its end in that load, a root row with
another load id was not seen, so it no longer exists at the source (for a resource whose
unchanged rows were not loaded again, ideas on a normal run, the source names its gone
keys instead, ``source.changes``):

- ``hard`` (default): delete it and its child rows (by the parent's key), each counted in
  its own table;
- ``soft``: keep it and set ``_deleted_at`` (once; later runs keep the first time).

A row whose item this load rejected (``rejected_rows``, same idx) was seen: it stays. A
resource with an item rejected for having no idx has nothing removed (the item may be any
row not seen); the run warns.

Each runs in one transaction through dlt's SQL client, so it works on any SQL destination
(``sql.SqlTarget``), and each can run again for the same load with the same result (a crash
replays them). On Delta tables the same steps are Delta commits (``delta_tables.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from dlt.common.schema import Schema
from dlt.destinations.sql_client import SqlClientBase
from dlt.pipeline.pipeline import Pipeline

from feedback_sync.source.arrow import child_tables
from feedback_sync.source.resources import PARENT_KEYS
from feedback_sync.source.screening import REJECTED_TABLE
from feedback_sync.warehouse.base import connected, dataset_tables, warn_unknown_rejection
from feedback_sync.warehouse.history import COMPARE_ALL, ENTITIES, forget_compared

log = logging.getLogger("feedback_sync")


def _count(client: SqlClientBase[Any], sql: str, *args: Any) -> int:
    rows = client.execute_sql(f"select count(*) {sql}", *args)
    return int(rows[0][0]) if rows else 0


def _children(schema: Schema, existing: set[str], root: str) -> list[str]:
    """``root``'s child tables that exist at the destination."""
    return [c for c in child_tables(schema.tables, root) if c in existing]


def replace_children(
    pipeline: Pipeline, load_id: str, had: frozenset[str] | None = None
) -> dict[str, int]:
    """Deletes child rows whose parent came again in ``load_id`` without them; counts.

    ``had``: the tables the warehouse had before the load, when known. A child table it did
    not have holds only the load's own rows, so nothing in it is stale and it is not asked.
    """
    removed: dict[str, int] = {}
    if had is not None and not any(_is_child(table) for table in had):
        return removed  # no child table had rows before this load: none can be stale
    # once: dlt reads a saved schema's file again on every ``default_schema``
    schema = pipeline.default_schema
    with connected(pipeline) as client:
        existing = set(dataset_tables(client))
        with client.begin_transaction():
            for root, key in PARENT_KEYS.items():
                if root not in existing:
                    continue
                qroot = client.make_qualified_table_name(root)
                for child in _children(schema, existing, root):
                    if had is not None and child not in had:
                        continue  # made by this load: only its rows
                    qchild = client.make_qualified_table_name(child)
                    stale = (
                        f"from {qchild} where _dlt_load_id <> %s and {key} in "
                        f"(select idx from {qroot} where _dlt_load_id = %s)"
                    )
                    count = _count(client, stale, load_id, load_id)
                    if count:
                        client.execute_sql(f"delete {stale}", load_id, load_id)
                        removed[child] = count
            _forget_compared(pipeline, client, removed)
    return removed


def _forget_compared(
    pipeline: Pipeline, client: SqlClientBase[Any], removed: Iterable[str]
) -> None:
    """Rows removed from tables a history reads whole (``history.COMPARE_ALL``): its next
    comparison reads every row, in the same transaction as the removal."""
    touched = set(removed)
    for name in COMPARE_ALL:
        entity = ENTITIES[name]
        if touched & set(entity.reads):
            forget_compared(pipeline, client, entity.table)


def _is_child(table: str) -> bool:
    root, _, rest = table.partition("__")
    return bool(rest) and root in PARENT_KEYS


def reconcile(
    pipeline: Pipeline,
    load_id: str,
    resources: Iterable[str],
    mode: str,
    had: frozenset[str] | None = None,
    gone: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, int]:
    """Removes (or marks) rows of ``resources`` not seen in ``load_id``; counts per table.

    ``had``: the tables the warehouse had before the load, when known; a resource whose
    table it did not have holds only the load's rows, none of them gone. ``gone``: per
    resource whose unchanged rows were not loaded again (``source.changes``), the keys
    its complete read no longer found: exactly those rows are removed.
    """
    if had is not None:
        resources = [root for root in resources if root in had]
        if not resources:
            return {}
    schema = pipeline.default_schema
    removed: dict[str, int] = {}
    now = datetime.now(UTC)
    named = gone or {}
    with connected(pipeline) as client:
        existing = set(dataset_tables(client))
        with client.begin_transaction():
            for root in sorted(resources):
                if root not in schema.tables or root not in existing:
                    continue
                if REJECTED_TABLE in existing and _count(
                    client,
                    f"from {client.make_qualified_table_name(REJECTED_TABLE)} where resource = %s "
                    "and _dlt_load_id = %s and idx is null",
                    root,
                    load_id,
                ):
                    warn_unknown_rejection(root)
                    continue
                keys = named.get(root)
                if keys is None:
                    filters = [_not_in_load(client, existing, root, load_id)]
                else:
                    filters = [
                        (f"idx in ({', '.join(['%s'] * len(chunk))})", list(chunk))
                        for chunk in _chunks(keys, KEYS_PER_STATEMENT)
                    ]
                here: dict[str, int] = {}
                for where, args in filters:
                    if mode == "soft":
                        where += " and _deleted_at is null"
                    soft_at = now if mode == "soft" else None
                    for table, count in _remove(
                        client, schema, existing, root, where=where, args=args, soft_at=soft_at
                    ).items():
                        here[table] = here.get(table, 0) + count
                if here.get(root):
                    removed.update({table: count for table, count in here.items() if count})
                    _forget_compared(pipeline, client, [root, *_children(schema, existing, root)])
    return removed


# keys named in one statement's ``in (...)`` list (``gone``)
KEYS_PER_STATEMENT = 500


def _chunks(keys: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(keys), size):
        yield keys[start : start + size]


def _not_in_load(
    client: SqlClientBase[Any], existing: set[str], root: str, load_id: str
) -> tuple[str, list[Any]]:
    """The rows of ``root`` not seen in ``load_id``: another load's id, and no item of the
    same idx rejected in this load (it exists at the source: its earlier row stays)."""
    where, args = "_dlt_load_id <> %s", [load_id]
    if REJECTED_TABLE in existing:
        qrejected = client.make_qualified_table_name(REJECTED_TABLE)
        where += (
            f" and idx not in (select idx from {qrejected} where resource = %s "
            "and _dlt_load_id = %s and idx is not null)"
        )
        args += [root, load_id]
    return where, args


def _remove(
    client: SqlClientBase[Any],
    schema: Schema,
    existing: set[str],
    root: str,
    *,
    where: str,
    args: list[Any],
    soft_at: datetime | None,
) -> dict[str, int]:
    """Deletes the rows of ``root`` that ``where`` picks, and their child rows (or, with
    ``soft_at``, marks them deleted at that time: their child rows stay); how many, per
    table."""
    qroot = client.make_qualified_table_name(root)
    count = _count(client, f"from {qroot} where {where}", *args)
    if not count:
        return {}
    if soft_at is not None:
        client.execute_sql(f"update {qroot} set _deleted_at = %s where {where}", soft_at, *args)
        return {root: count}
    removed = {root: count}
    key = PARENT_KEYS.get(root)
    for child in _children(schema, existing, root) if key else ():
        qchild = client.make_qualified_table_name(child)
        rows = f"from {qchild} where {key} in (select idx from {qroot} where {where})"
        removed[child] = _count(client, rows, *args)
        if removed[child]:
            client.execute_sql(f"delete {rows}", *args)
    client.execute_sql(f"delete from {qroot} where {where}", *args)
    return removed
