"""Deletes at the source reach the warehouse: rows a complete read did not see are gone.

After a load, every row a resource yielded carries that load's ``_dlt_load_id`` (merge
replaces the row). For a resource read from its start to its end in that load, a root row
with another load id was not seen, so it no longer exists at the source:

- ``hard`` (default): delete it and its child rows (``_dlt_root_id``);
- ``soft``: keep it and set ``_deleted_at`` (once; later runs keep the first time).

Runs in one transaction through dlt's SQL client, so it works on any SQL destination.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from dlt.common.schema.utils import get_nested_tables
from dlt.pipeline.pipeline import Pipeline

from pipelines.warehouse import dataset_tables


def reconcile(
    pipeline: Pipeline, load_id: str, resources: Iterable[str], mode: str
) -> dict[str, int]:
    """Removes (or marks) rows of ``resources`` not seen in ``load_id``; counts per table."""
    schema = pipeline.default_schema
    removed: dict[str, int] = {}
    now = datetime.now(UTC)
    with pipeline.sql_client() as client:
        existing = set(dataset_tables(client))
        with client.begin_transaction():
            for root in sorted(resources):
                if root not in schema.tables or root not in existing:
                    continue
                qroot = client.make_qualified_table_name(root)
                gone_filter = "_dlt_load_id <> %s"
                if mode == "soft":
                    gone_filter += " and _deleted_at is null"
                rows = client.execute_sql(
                    f"select count(*) from {qroot} where {gone_filter}", load_id
                )
                count = int(rows[0][0]) if rows else 0
                if not count:
                    continue
                removed[root] = count
                if mode == "soft":
                    client.execute_sql(
                        f"update {qroot} set _deleted_at = %s where {gone_filter}", now, load_id
                    )
                    continue
                for child in get_nested_tables(schema.tables, root)[1:]:
                    name = child["name"]
                    if name not in existing:
                        continue
                    qchild = client.make_qualified_table_name(name)
                    client.execute_sql(
                        f"delete from {qchild} where _dlt_root_id in "
                        f"(select _dlt_id from {qroot} where {gone_filter})",
                        load_id,
                    )
                client.execute_sql(f"delete from {qroot} where {gone_filter}", load_id)
    return removed
