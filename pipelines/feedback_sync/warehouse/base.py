"""What every destination module shares: the SQL that reads dlt's own tables, the dataset's
tables, and the warning a delete pass gives when it cannot tell what is gone."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlt.destinations.sql_client import SqlClientBase
    from dlt.pipeline.pipeline import Pipeline

log = logging.getLogger("feedback_sync")


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
    with pipeline.sql_client() as client:
        return [name for name in dataset_tables(client) if not name.startswith("_dlt")]
