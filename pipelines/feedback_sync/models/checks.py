"""Data checks on what a sync landed: keys, row counts, freshness, marts.

Each check gives one ``Check``: its name, the table, the figure it measured and whether it
passed (``None``: reported only, with no threshold set). The figures come from the target
(``Target.key_figures``, ``Target.newest``: dlt's SQL client on SQL destinations, delta-rs
on Delta tables, key and time columns only); the Prefect flow attaches them to the tables'
assets and fails the run when one fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from dlt.pipeline.pipeline import Pipeline

from feedback_sync.models.project import BuildResult
from feedback_sync.source.resources import NAMES as RESOURCES
from feedback_sync.warehouse.target import Target

KEY = "idx"
TIME_COLUMNS = ("created_at", "updated_at")


@dataclass(frozen=True)
class Check:
    """One check's outcome on one table (or mart)."""

    check: str
    table: str
    figure: str
    passed: bool | None  # None: measured and reported, no threshold to pass or fail

    @property
    def status(self) -> str:
        return {True: "passed", False: "FAILED", None: "info"}[self.passed]

    def line(self) -> str:
        return f"{self.check} on {self.table}: {self.figure} ({self.status})"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


def key_checks(target: Target, pipeline: Pipeline) -> list[Check]:
    """Root tables' ``idx``: never null, never twice."""
    checks: list[Check] = []
    for table, (total, nulls, duplicates) in target.key_figures(pipeline, RESOURCES, KEY).items():
        checks.append(
            Check(
                "keys unique and not null",
                table,
                f"{nulls:,} null and {duplicates:,} duplicate {KEY} among {total:,} rows",
                nulls == 0 and duplicates == 0,
            )
        )
    return checks


def row_count_checks(
    now: Mapping[str, int], previous: Mapping[str, int] | None, max_drop: float
) -> list[Check]:
    """Rows per table against the previous successful run; a drop beyond ``max_drop`` (a
    share, 0.25 = a quarter of the rows) fails. With no previous run, counts are reported."""
    checks: list[Check] = []
    for table in sorted(set(now) | set(previous or {})):
        rows = now.get(table, 0)  # a table that vanished has no rows
        before = None if previous is None else previous.get(table)
        if before is None:
            checks.append(Check("row count", table, f"{rows:,} rows (no earlier count)", None))
            continue
        drop = (before - rows) / before if before else 0.0
        change = f"{rows:,} rows, {before:,} after the previous successful run"
        if drop > 0:
            change += f" (-{drop:.1%}, limit -{max_drop:.0%})"
        checks.append(Check("row count", table, change, drop <= max_drop))
    return checks


def freshness_checks(
    target: Target,
    pipeline: Pipeline,
    max_age_hours: Mapping[str, float] | None = None,
    now: datetime | None = None,
) -> list[Check]:
    """The newest ``created_at``/``updated_at`` per resource. A resource given a maximum age
    in ``max_age_hours`` fails when its newest change is older than that."""
    limits = dict(max_age_hours or {})
    now = now or datetime.now(UTC)
    checks: list[Check] = []
    for table, newest in target.newest(pipeline, RESOURCES, TIME_COLUMNS).items():
        parts = [f"newest {c} {_iso(v)}" for c, v in newest.items()]
        stamps = [s for s in (_aware(v) for v in newest.values()) if s is not None]
        latest = max(stamps) if stamps else None
        limit = limits.get(table)
        passed: bool | None = None
        if limit is not None:
            age = None if latest is None else (now - latest).total_seconds() / 3600
            passed = age is not None and age <= limit
            parts.append(f"{'no rows' if age is None else f'{age:,.1f}h old'} (limit {limit:g}h)")
        checks.append(Check("freshness", table, ", ".join(parts), passed))
    return checks


def mart_checks(models: BuildResult | None, error: str | None) -> list[Check]:
    """Every mart built (with its rows) and its data tests passed, or the model or the data
    tests that failed (the build's error names them)."""
    if error is not None:
        return [Check("marts build", "marts", error, False)]
    if models is None:
        return []
    tests = models.tests_per_mart()
    checks = [
        Check("marts build", f"marts.{mart}", f"built, {rows:,} rows", True)
        for mart, rows in models.mart_rows.items()
    ]
    for mart, outcome in tests.items():
        failed = outcome["failed"]
        figure = f"{outcome['passed']:,} passed" + (
            f", failed: {'; '.join(failed)}" if failed else ""
        )
        checks.append(Check("data tests", f"marts.{mart}", figure, not failed))
    return checks


def failed(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.passed is False]


def _aware(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _iso(value: Any) -> str:
    stamp = _aware(value)
    return stamp.isoformat() if stamp is not None else "none"
