"""``feedback-sync status``: what the last committed sync saved, and what the warehouse holds.

Reads the state from the destination (where dlt commits it with each load), so it shows
what the next run will resume from, even on a machine that never ran a sync.
"""

from __future__ import annotations

from typing import Any

from dlt.pipeline.pipeline import Pipeline

from pipelines.feedback.context import unpack_idea
from pipelines.feedback.settings import RESOURCES
from pipelines.sync import table_counts
from pipelines.warehouse import Target


def describe_state(resource: str, state: dict[str, Any]) -> str:
    """One line on what a resource resumes from."""
    if resource == "followers":
        return "resumes after the saved cursor" if state.get("after") else "no cursor yet"
    if resource == "announcements":
        high = state.get("published_high_water")
        return f"newest published post seen: {high}" if high else "no window yet"
    if resource in ("comments", "integration_links"):
        types = state.get("types")
        if types:
            return ", ".join(
                f"{t}: {'cursor saved' if c else 'from the start'}" for t, c in types.items()
            )
        ideas = state.get("ideas") or {}
        if resource == "comments":
            with_cursor = sum(1 for entry in ideas.values() if unpack_idea(entry)[0])
            return f"{len(ideas):,} ideas tracked, {with_cursor:,} with a saved cursor"
        return f"{len(ideas):,} ideas tracked"
    return "read in full on every run"


def _completed_loads(target: Target, pipeline: Pipeline) -> tuple[Any, int]:
    """When the newest completed load was stored, and how many completed."""
    if target.is_delta:
        from pipelines import delta

        return delta.completed_loads(pipeline)
    with pipeline.sql_client() as client:
        loads = client.execute_sql(
            f"select max(inserted_at), count(*) from "
            f"{client.make_qualified_table_name('_dlt_loads')} where status = 0"
        )
    return (loads[0][0], loads[0][1]) if loads else (None, 0)


def status_report(target: Target) -> str:
    pipeline = target.pipeline()
    pipeline.sync_destination()
    lines = [f"{target.describe()}  (pipeline {pipeline.pipeline_name})"]
    if not pipeline.default_schema_name:
        lines.append("no sync has been committed here yet: the next run reads everything")
        return "\n".join(lines)
    sources = pipeline.state.get("sources", {})
    resources = sources.get("feedback", {}).get("resources", {})
    counts = table_counts(pipeline)
    last, n_loads = _completed_loads(target, pipeline)
    lines.append(f"last load: {last} ({n_loads} loads in all)")
    lines.append("")
    width = max(len(r) for r in RESOURCES)
    for resource in RESOURCES:
        lines.append(
            f"  {resource:<{width}}  {describe_state(resource, resources.get(resource, {}))}"
        )
    lines.append("")
    twidth = max([len(t) for t in counts] + [5])
    lines.append(f"  {'table':<{twidth}}  {'rows':>10}")
    for table, count in sorted(counts.items()):
        lines.append(f"  {table:<{twidth}}  {count:>10,}")
    return "\n".join(lines)
