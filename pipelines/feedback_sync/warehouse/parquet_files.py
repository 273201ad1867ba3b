"""The Parquet output: each table's current rows as ``<folder>/<table>.parquet``.

Written from the working DuckDB file after the load and the delete reconcile, so the files
hold exactly what the DuckDB target would hold. Each file is written next to its final name
and renamed over it, so a reader never sees a half-written file, and a crash leaves the
previous version in place.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dlt.pipeline.pipeline import Pipeline

from feedback_sync.warehouse.base import connected

# rows per Parquet row group: DuckDB buffers a row group per thread while writing, and
# 122,880 rows (its default) of comments outgrow the sync's 256MB memory limit at 500k rows
ROW_GROUP_ROWS = 20_000


def write_parquet(execute: Callable[[str], Any], relation: str, final: Path) -> None:
    """``select * from relation`` as the Parquet file ``final``, written aside and renamed."""
    partial = final.with_name(f".{final.name}.partial")
    target = str(partial).replace("'", "''")
    execute(
        f"copy (select * from {relation}) to '{target}' "
        f"(format parquet, compression zstd, row_group_size {ROW_GROUP_ROWS})"
    )
    os.replace(partial, final)


def export_parquet(pipeline: Pipeline, folder: Path, tables: Iterable[str]) -> dict[str, int]:
    """Writes ``tables`` to ``folder``; returns the rows written per table."""
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    with connected(pipeline) as client:
        for table in tables:
            qualified = client.make_qualified_table_name(table)
            write_parquet(client.execute_sql, qualified, folder / f"{table}.parquet")
            rows = client.execute_sql(f"select count(*) from {qualified}")
            written[table] = int(rows[0][0]) if rows else 0
    return written
