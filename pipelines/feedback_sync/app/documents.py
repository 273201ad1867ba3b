"""The machine-readable side of ``status``, ``sync``, ``push`` and ``check`` (``--json``).

One JSON object on stdout per command, with the facts its text gives. Every document
starts with the same envelope:

- ``format``: this layout's version (``FORMAT``); a key is never removed or renamed without
  raising it, keys may be added;
- ``version``: feedback-sync's version; ``command``: the command that wrote it;
- ``ok``: whether the command did all it was asked; ``exit_code``: the code it ends with;
- ``error``: the one line printed on stderr when it failed, else null.

A command refused or failed before it had anything to report writes the envelope alone.
docs/reference/json-output.md lists each command's fields; ``tests/sync/test_json_output.py`` pins
them.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from feedback_sync import __version__

if TYPE_CHECKING:
    from feedback_sync.app.check import CheckResult, Outcome
    from feedback_sync.app.status import AccountStatus
    from feedback_sync.app.sync import SyncResult
    from feedback_sync.models.project import BuildResult
    from feedback_sync.push.run import PushResult
    from feedback_sync.warehouse.target import Committed, Target

FORMAT = 1


def envelope(command: str, exit_code: int, error: str | None = None) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": __version__,
        "command": command,
        "ok": exit_code == 0,
        "exit_code": exit_code,
        "error": error,
    }


def dumps(document: Mapping[str, Any]) -> str:
    """The document as JSON: timestamps as ISO 8601 text, exact decimals as text, a float
    that JSON cannot hold (NaN, infinity) as null."""
    return json.dumps(
        _finite(document), default=_plain, ensure_ascii=False, indent=2, allow_nan=False
    )


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)  # a float could change the digits
    if isinstance(value, set | frozenset | tuple):
        return sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def sync_document(result: SyncResult, exit_code: int) -> dict[str, Any]:
    from feedback_sync.source.screening import REJECTED_TABLE

    document = envelope("sync", exit_code, result.models_error or result.history_error)
    document.update(
        {
            "target": result.target,
            "full": result.full,
            "seconds": round(result.seconds, 3),
            "phases": {name: round(seconds, 3) for name, seconds in result.phases.items()},
            "requests": result.requests,
            "retries": result.retries,
            "requests_by_resource": dict(result.requests_by_resource),
            "delete_mode": result.delete_mode,
            "load_id": result.load_id,
            "recovered_packages": result.recovered_packages,
            "tables": {table: _table_change(result, table) for table in result.tables()},
            "history": {
                table: {"versions_begun": done.opened, "versions_ended": done.closed}
                for table, done in sorted(result.versions.items())
            },
            "rejected_items": result.rows_loaded.get(REJECTED_TABLE, 0),
            "resources_read_completely": list(result.complete),
            "unchanged_rows": dict(result.unchanged),
            "ideas_endpoint": result.ideas_endpoint,
            "skipped_ideas": dict(result.skipped),
            "parquet_files_written": len(result.exported),
            "models": models_document(result.models),
        }
    )
    return document


def models_document(models: BuildResult | None) -> dict[str, Any] | None:
    """What a models build made, for ``--json`` (None: not built)."""
    if models is None:
        return None
    return {
        "built": list(models.built),
        "mart_rows": dict(models.mart_rows),
        "reused_from": models.reused_from,
        "missing_sources": list(models.missing_sources),
        "tests": models.tests_per_mart(),
        "accounts": list(models.accounts),
        "unsynced_accounts": list(models.unsynced),
    }


def _table_change(result: SyncResult, table: str) -> dict[str, int]:
    """One table's figures: ``rows_before + added - removed = rows``; ``loaded`` is
    ``added + updated`` (for a history table, the versions begun)."""
    done = result.change(table)
    figures = {
        "rows_before": done.before,
        "loaded": result.loaded(table),
        "added": done.added,
        "updated": done.updated,
        "removed": done.removed,
        "rows": done.after,
    }
    if result.delete_mode == "soft":
        figures["marked_deleted"] = done.marked
    return figures


def status_document(target: Target, committed: Committed) -> dict[str, Any]:
    document = envelope("status", 0)
    document.update(_status_fields(target, committed))
    return document


def status_accounts_document(statuses: Sequence[AccountStatus]) -> dict[str, Any]:
    """With accounts: per account, in the order configured, what ``status_document``
    holds after its envelope."""
    document = envelope("status", 0)
    document["accounts"] = {s.account: _status_fields(s.target, s.committed) for s in statuses}
    return document


def _status_fields(target: Target, committed: Committed) -> dict[str, Any]:
    from feedback_sync.app.status import state_facts
    from feedback_sync.source.resources import NAMES as RESOURCES

    return {
        "target": target.describe(),
        "pipeline": committed.pipeline_name,
        "committed": committed.resources is not None,
        "last_load": committed.last_load,
        "loads": committed.loads,
        "resources": None
        if committed.resources is None
        else {
            resource: state_facts(resource, committed.resources.get(resource, {}))
            for resource in RESOURCES
        },
        "tables": dict(sorted(committed.counts.items())),
    }


def push_document(result: PushResult, samples: int) -> dict[str, Any]:
    from feedback_sync.push.run import ACTIONS

    document = envelope("push", result.exit_code(), result.error)
    totals = result.totals()
    document.update(
        {
            "applied": result.applied,
            "where": result.where,
            "run_id": result.run_id,
            "seconds": round(result.seconds, 3),
            "reads": result.reads,
            "writes": result.writes,
            "retries": result.retries,
            "planned_writes": result.planned_writes(),
            "totals": {action: totals[action] for action in ACTIONS},
            "targets": [_target_plan(result, plan, samples) for plan in result.plans],
            "skipped": dict(result.skipped),
            "custom_attributes_disabled": result.custom_attributes_disabled,
        }
    )
    return document


def _target_plan(result: PushResult, plan: Any, samples: int) -> dict[str, Any]:
    from feedback_sync.push.kinds.base import show_field
    from feedback_sync.push.run import ACTIONS, PROBLEMS_PER_SAMPLE, changed_steps, problem_steps

    counts = result.counts(plan)
    changes = changed_steps(plan)
    problems = problem_steps(plan)
    return {
        "name": plan.spec.name,
        "mode": plan.spec.mode,
        "counts": {action: counts[action] for action in ACTIONS},
        "refused": plan.refused,
        "notes": list(plan.notes),
        "recovered": plan.recovered,
        "samples": [
            {
                "action": step.action,
                "key": step.key,
                "label": step.label,
                "idx": step.idx,
                "outcome": step.outcome,
                "changes": {
                    show_field(name): {"from": old, "to": new}
                    for name, (old, new) in step.changes.items()
                },
                "request": None
                if step.request is None
                else {
                    "method": step.request.method,
                    "path": "/" + step.request.path,
                    "params": dict(step.request.params or {}),
                    "body": step.request.body,
                },
            }
            for step in changes[:samples]
        ],
        "more_changes": max(0, len(changes) - samples),
        "problems": [
            {
                "what": step.outcome
                if step.outcome in ("rejected", "unknown", "held")
                else step.action,
                "key": step.key,
                "label": step.label,
                "status": step.status,
                "message": step.message or step.reason,
            }
            for step in problems[: samples * PROBLEMS_PER_SAMPLE]
        ],
        "more_problems": max(0, len(problems) - samples * PROBLEMS_PER_SAMPLE),
    }


def check_document(result: CheckResult) -> dict[str, Any]:
    code = result.exit_code()
    failed = result.failed()
    error = f"{len(failed)} of {len(result.outcomes)} checks failed ({', '.join(failed)})"
    document = envelope("check", code, error if failed else None)
    document.update(
        {
            "seconds": round(result.seconds, 3),
            "checks": [_check_fields(o, bool(result.accounts)) for o in result.outcomes],
        }
    )
    return document


def _check_fields(outcome: Outcome, accounts: bool) -> dict[str, Any]:
    """One check; with accounts, also the account it is of (null: it concerns them all)."""
    fields = {
        "name": outcome.name,
        "ok": outcome.ok,
        "detail": outcome.detail,
        "bad_configuration": outcome.bad_config,
    }
    if accounts:
        fields["account"] = outcome.account
    return fields
