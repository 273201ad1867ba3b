"""The run's two keyed artifacts (their history is kept per key across runs).

- ``...-rows``: a table of rows per table (before, loaded, added, updated, removed, now:
  ``before + added - removed = now``), requests per resource, retries, and seconds per step;
- ``...-report``: markdown with the summary, the checks, and what this run skipped.

- ``...-baseline``: rows per table after the last run whose sync and checks passed, written
  while that run still holds the writer slot; the row-count check compares against it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from feedback_sync.app.sync import SyncResult
from feedback_sync.models.checks import Check
from feedback_sync.source.resources import NAMES as RESOURCES

COLUMNS = (
    "kind",
    "name",
    "before",
    "loaded",
    "added",
    "updated",
    "removed",
    "now",
    "requests",
    "retries",
    "seconds",
)


def _row(kind: str, name: str, **values: Any) -> dict[str, Any]:
    return {column: values.get(column) for column in COLUMNS} | {"kind": kind, "name": name}


def failed_rows(mode: str) -> list[dict[str, Any]]:
    """The rows table of a run that stopped before it loaded anything."""
    return [_row("run", f"{mode} (failed, nothing loaded)")]


def rows_table(result: SyncResult) -> list[dict[str, Any]]:
    """One row per table, per resource requested, per step, and one for the run."""
    row = _row
    rows = []
    for table in result.tables():
        done = result.change(table)
        rows.append(
            row(
                "table",
                table,
                before=done.before,
                loaded=result.loaded(table),
                added=done.added,
                updated=done.updated,
                removed=done.removed,
                now=done.after,
            )
        )
    rows += [
        row("resource", name, requests=count)
        for name, count in sorted(result.requests_by_resource.items())
    ]
    rows += [row("step", step, seconds=round(s, 3)) for step, s in result.phases.items()]
    rows.append(
        row(
            "run",
            "full" if result.full else "incremental",
            loaded=sum(result.rows_loaded.values()),
            removed=sum(result.rows_removed.values()),
            now=sum(result.table_rows.values()),
            requests=result.requests,
            retries=result.retries,
            seconds=round(result.seconds, 3),
        )
    )
    return rows


def counts_from_rows(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """``{table: rows now}`` from a ``rows_table`` (as read back from an artifact)."""
    return {
        str(r["name"]): int(r["now"])
        for r in rows
        if r.get("kind") == "table" and isinstance(r.get("now"), int)
    }


def skipped_lines(
    result: SyncResult, selected: Sequence[str] | None, models: str | None
) -> list[str]:
    """What this run did not do, that a user might expect it to have done."""
    lines: list[str] = []
    chosen = list(selected) if selected else list(RESOURCES)
    not_chosen = [r for r in RESOURCES if r not in chosen]
    if not_chosen:
        lines.append(f"resources not selected: {', '.join(not_chosen)}")
    unreconciled = [r for r in chosen if r not in result.complete]
    if unreconciled:
        lines.append(
            "deletes not reconciled for "
            + ", ".join(unreconciled)
            + (
                ": a normal run reads only what changed; the full run (nightly) removes "
                "what was deleted at the source"
                if not result.full
                else ": not read completely"
            )
        )
    for resource, count in sorted(result.skipped.items()):
        lines.append(f"{resource}: {count} idea(s) that no longer exist (404) were skipped")
    if result.ideas_endpoint is False:
        lines.append("/ideas is not served: ideas were discovered from other resources")
    if models is not None:
        lines.append(f"the SQL models were not built: {models}")
    return lines


def report_markdown(
    result: SyncResult,
    checks: Sequence[Check] | None,
    skipped: Sequence[str],
    concurrency_limit: str,
) -> str:
    parts = [
        f"# feedback-sync: {'full' if result.full else 'incremental'} run",
        "",
        f"Warehouse: {result.target}; writer limit `{concurrency_limit}`; "
        f"load id `{result.load_id or 'none'}`.",
        "",
        "```",
        result.summary(),
        "```",
        "",
        "## Checks",
        "",
    ]
    if checks is None:
        parts.append("Checks were switched off for this run (`checks=false`).")
    elif not checks:
        parts.append("No table to check.")
    else:
        parts += ["| check | table | figure | status |", "|---|---|---|---|"]
        parts += [
            f"| {c.check} | {c.table} | {c.figure.replace('|', '/')} | {c.status} |" for c in checks
        ]
    parts += ["", "## Skipped by this run", ""]
    parts += [f"- {line}" for line in skipped] or ["Nothing: every resource was read in full."]
    return "\n".join(parts) + "\n"


def previous_counts(key: str) -> dict[str, int] | None:
    """Rows per table after the last successful run: the newest ``key`` artifact (the
    baseline, which a run writes while it still holds the writer slot, and only when its
    sync and checks passed)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    if not found:
        return None
    data = found[0].data
    rows = json.loads(data) if isinstance(data, str) else data
    return counts_from_rows(rows) if isinstance(rows, list) else None
