"""``feedback-sync status``: what the last committed sync saved, and what the warehouse holds.

Reads the state from the destination (where dlt commits it with each load), so it shows
what the next run will resume from, even on a machine that never ran a sync (a run first
loads what an interrupted run left pending, then resumes from this state).

DuckDB and Parquet (whose state and tables live in a DuckDB file) are read with DuckDB
alone: dlt's import costs 1.2 s, six times the rest of the command. The two tables read
are dlt's own, queried the way dlt queries them (``_dlt_pipeline_state`` joined to the
completed ``_dlt_loads``, newest first). Where that could differ from what dlt would read
(dlt's settings name a destination, a typed value in the state), dlt reads it instead;
so does every other destination.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from feedback_sync.source.idea_entries import unpack_idea
from feedback_sync.source.resources import BY_NAME
from feedback_sync.source.resources import NAMES as RESOURCES
from feedback_sync.warehouse.base import completed_loads_sql, newest_state_sql
from feedback_sync.warehouse.target import Target

# dlt's typed JSON marks decimals, datetimes, dates, ... with a first character from this
# range (dlt.common.json, PUA_START 0xf026 unless DLT_JSON_TYPED_PUA_START moves it)
_TYPED_MARKS = frozenset(chr(c) for c in range(0xF026, 0xF026 + 8))


@dataclass
class Committed:
    """What the destination holds: the newest committed state and the tables' rows."""

    pipeline_name: str
    resources: dict[str, Any] | None = None  # None: nothing committed yet
    last_load: Any = None
    loads: int = 0
    counts: dict[str, int] = field(default_factory=dict)


def describe_state(resource: str, state: dict[str, Any]) -> str:
    """One line on what a resource resumes from, by how it is read (``resources.py``)."""
    declared = BY_NAME[resource]
    if declared.reading == "cursor":
        return "resumes after the saved cursor" if state.get("after") else "no cursor yet"
    if declared.reading == "window":
        high = state.get("published_high_water")
        return f"newest published post seen: {high}" if high else "no window yet"
    if declared.reading == "per_idea":
        types = state.get("types")
        if types:
            return ", ".join(
                f"{t}: {'cursor saved' if c else 'from the start'}" for t, c in types.items()
            )
        ideas = state.get("ideas") or {}
        if declared.idea_cursors:
            with_cursor = sum(1 for entry in ideas.values() if unpack_idea(entry)[0])
            return f"{len(ideas):,} ideas tracked, {with_cursor:,} with a saved cursor"
        return f"{len(ideas):,} ideas tracked"
    return "read in full on every run"


def status_report(target: Target) -> str:
    committed = _read_duckdb(target) if target.duckdb_file() is not None else None
    if committed is None:
        committed = _read_with_dlt(target)
    return render(target, committed)


def render(target: Target, committed: Committed) -> str:
    lines = [f"{target.describe()}  (pipeline {committed.pipeline_name})"]
    if committed.resources is None:
        lines.append("no sync has been committed here yet: the next run reads everything")
        return "\n".join(lines)
    lines.append(f"last load: {committed.last_load} ({committed.loads} loads in all)")
    lines.append("")
    width = max(len(r) for r in RESOURCES)
    for resource in RESOURCES:
        saved = committed.resources.get(resource, {})
        lines.append(f"  {resource:<{width}}  {describe_state(resource, saved)}")
    lines.append("")
    counts = committed.counts
    twidth = max([len(t) for t in counts] + [5])
    lines.append(f"  {'table':<{twidth}}  {'rows':>10}")
    for table, count in sorted(counts.items()):
        lines.append(f"  {table:<{twidth}}  {count:>10,}")
    return "\n".join(lines)


def _read_duckdb(target: Target) -> Committed | None:
    """The committed state and counts read with DuckDB alone; None where dlt must read them."""
    import os

    if os.environ.get("DLT_JSON_TYPED_PUA_START"):
        return None
    path = target.duckdb_file()  # dlt's settings decide it only where they mention it
    assert path is not None
    target.check_duckdb_name()
    committed = Committed(pipeline_name=target.pipeline_name)
    if not path.exists():
        return committed

    import duckdb

    with duckdb.connect(str(path), read_only=True) as con:
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_schema = ? "
                "order by table_name",
                [target.dataset],
            ).fetchall()
        ]
        if "_dlt_pipeline_state" not in tables or "_dlt_loads" not in tables:
            return committed
        schema = '"' + target.dataset.replace('"', '""') + '"'
        states, loads_table = f"{schema}._dlt_pipeline_state", f"{schema}._dlt_loads"
        row = con.execute(
            newest_state_sql(states, loads_table, "state", "?"), [target.pipeline_name]
        ).fetchone()
        if row is None:
            return committed
        state = _decode_state(row[0])
        if state is None:
            return None
        committed.resources = state.get("sources", {}).get("feedback", {}).get("resources", {})
        loads = con.execute(completed_loads_sql(loads_table)).fetchone()
        if loads is not None:
            committed.last_load, committed.loads = loads[0], loads[1]
        for table in tables:
            if not table.startswith("_dlt"):
                quoted = '"' + table.replace('"', '""') + '"'
                counted = con.execute(f"select count(*) from {schema}.{quoted}").fetchone()
                committed.counts[table] = int(counted[0]) if counted else 0
    return committed


def _decode_state(stored: str) -> dict[str, Any] | None:
    """dlt's stored state (zlib-compressed JSON in base64, or plain JSON); None when it holds
    a typed value, which only dlt's own decoder reads faithfully."""
    try:
        raw = zlib.decompress(base64.b64decode(stored, validate=True))
    except binascii.Error:
        raw = stored.encode()
    state = json.loads(raw)
    if not isinstance(state, dict) or _has_typed(state):
        return None
    return state


def _has_typed(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value) and value[0] in _TYPED_MARKS
    if isinstance(value, dict):
        return any(_has_typed(k) or _has_typed(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_typed(v) for v in value)
    return False


def _read_with_dlt(target: Target) -> Committed:
    pipeline = target.pipeline()
    pipeline.sync_destination()
    committed = Committed(pipeline_name=pipeline.pipeline_name)
    if not pipeline.default_schema_name:
        return committed
    committed.resources = pipeline.state.get("sources", {}).get("feedback", {}).get("resources", {})
    committed.counts = target.table_counts(pipeline)
    committed.last_load, committed.loads = target.completed_loads(pipeline)
    return committed
