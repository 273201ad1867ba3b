"""``feedback-sync status``: what the last committed sync saved, and what the warehouse holds.

Reads the state from the destination (where dlt commits it with each load), so it shows
what the next run will resume from, even on a machine that never ran a sync (a run first
loads what an interrupted run left pending, then resumes from this state).

What is read, and how, is the target's (``Target.committed``): DuckDB and Parquet read
their DuckDB file without dlt (its import costs 1.2 s, six times the rest of the command);
every other destination, and they where that could differ, through dlt.

With accounts configured (``api/accounts.py``), each account's dataset is read in turn
(``read_accounts``) and shown under a line naming the account; one never synced is that
line alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feedback_sync.source.idea_entries import ROWS, unpack_idea
from feedback_sync.source.resources import BY_NAME
from feedback_sync.source.resources import NAMES as RESOURCES
from feedback_sync.warehouse.target import Committed, Target


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
    rows = state.get(ROWS)
    if isinstance(rows, dict) and rows:
        return f"read in full on every run; loads only what changed ({len(rows):,} rows known)"
    return "read in full on every run"


def state_facts(resource: str, state: dict[str, Any]) -> dict[str, Any]:
    """What a resource resumes from, as fields (``--json``): how it is read, the line
    ``describe_state`` prints, and the figures behind that line."""
    declared = BY_NAME[resource]
    facts: dict[str, Any] = {
        "reading": declared.reading,
        "resumes": describe_state(resource, state),
    }
    if declared.reading == "cursor":
        facts["cursor_saved"] = bool(state.get("after"))
    elif declared.reading == "window":
        facts["published_high_water"] = state.get("published_high_water")
    elif declared.reading == "per_idea":
        types = state.get("types")
        if types:
            facts["types_with_cursor"] = {t: bool(c) for t, c in types.items()}
        else:
            ideas = state.get("ideas") or {}
            facts["ideas_tracked"] = len(ideas)
            if declared.idea_cursors:
                facts["ideas_with_cursor"] = sum(
                    1 for entry in ideas.values() if unpack_idea(entry)[0]
                )
    elif isinstance(state.get(ROWS), dict):
        facts["rows_known"] = len(state[ROWS])
    return facts


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


@dataclass(frozen=True)
class AccountStatus:
    """What one account's dataset holds: its target (``Target.for_account``) and what the
    last committed sync there saved."""

    account: str
    target: Target
    committed: Committed


def read_accounts(target: Target, accounts: Sequence[str]) -> list[AccountStatus]:
    """Each of ``accounts``' committed state and rows, in its own dataset of ``target``."""
    statuses = []
    for account in accounts:
        own = target.for_account(account)
        statuses.append(AccountStatus(account, own, own.committed()))
    return statuses


def render_accounts(statuses: Sequence[AccountStatus]) -> str:
    """Each account's status after a line naming it, one after another; an account never
    synced in one line."""
    sections = []
    for status in statuses:
        if status.committed.resources is None:
            sections.append(
                f"account {status.account}: never synced: no sync has been committed in "
                f"{status.target.describe()}; its first run reads everything"
            )
        else:
            sections.append(f"account {status.account}: {render(status.target, status.committed)}")
    return "\n\n".join(sections)
