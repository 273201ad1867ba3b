"""The Parquet output: each table's current rows as ``<folder>/<table>.parquet``.

Written from the working DuckDB file after the load and the delete reconcile, so the files
hold exactly what the DuckDB target would hold. Each file is written next to its final name
and renamed over it, so a reader never sees a half-written file, and a crash leaves the
previous version in place.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dlt.pipeline.pipeline import Pipeline

from pipelines.warehouse import dataset_tables


def data_tables(pipeline: Pipeline) -> list[str]:
    """The dataset's tables that hold synced data (dlt's own ``_dlt_*`` tables left out)."""
    with pipeline.sql_client() as client:
        return [name for name in dataset_tables(client) if not name.startswith("_dlt")]


def export_parquet(pipeline: Pipeline, folder: Path, tables: Iterable[str]) -> dict[str, int]:
    """Writes ``tables`` to ``folder``; returns the rows written per table."""
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    with pipeline.sql_client() as client:
        for table in tables:
            final = folder / f"{table}.parquet"
            partial = folder / f".{table}.parquet.partial"
            qualified = client.make_qualified_table_name(table)
            target = str(partial).replace("'", "''")
            client.execute_sql(
                f"copy (select * from {qualified}) to '{target}' (format parquet, compression zstd)"
            )
            os.replace(partial, final)
            rows = client.execute_sql(f"select count(*) from {qualified}")
            written[table] = int(rows[0][0]) if rows else 0
    return written
