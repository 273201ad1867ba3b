"""Planning one target: desired records, validated, diffed with the service and the journal.

For each valid record:

1. the warehouse copy (``kinds.Kind.copy``) answers first. When the copy holds the record,
   every mapped field already matches, and the push has not written the key since the
   copy was loaded (the journal's snapshot), the record is unchanged: no request at all;
2. otherwise the record is about to change, and the copy may be stale: the service is read
   for it (``kinds.Kind.live``) and the diff is made against what it holds now;
3. the mode decides: ``insert`` never updates, ``update`` never creates (a missing object
   is reported as invalid), ``upsert`` does both.

Keys the journal shows this target pushed before, that the desired set no longer has, are
deleted, only when the target opts in (``delete:``). Records with a problem are invalid and
not sent; they never cause a delete.

The safety limits: an empty desired set, or updates and deletes beyond ``max_change_share``
of the keys the target pushed before, refuse the target unless ``force``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from feedback_sync.push.journal import Journal, Known, fields_hash
from feedback_sync.push.kinds.base import Context, Field, Held, Kind, Record, Request
from feedback_sync.push.targets import TargetSpec
from feedback_sync.push.values import same


@dataclass
class Step:
    """One record's planned action, and later its outcome."""

    target: str
    key: str
    label: str
    action: str  # create | update | delete | unchanged | invalid | held
    idx: str | None = None
    changes: dict[Field, tuple[Any, Any]] = field(default_factory=dict)
    request: Request | None = None
    record: Record | None = None
    reason: str | None = None
    # after apply: confirmed | rejected | unknown | held | skipped
    outcome: str | None = None
    status: int | None = None
    message: str | None = None


@dataclass
class TargetPlan:
    spec: TargetSpec
    kind: Kind
    steps: list[Step] = field(default_factory=list)
    managed: int = 0
    refused: str | None = None
    recovered: int = 0
    notes: list[str] = field(default_factory=list)

    def counts(self) -> Counter[str]:
        return Counter(s.action for s in self.steps)

    def writes(self) -> list[Step]:
        order = {"create": 0, "update": 1, "delete": 2}
        return sorted((s for s in self.steps if s.action in order), key=lambda s: order[s.action])


def overwrites(name: Field, nulls: frozenset[str]) -> bool:
    return name[0] in nulls or ".".join(name) in nulls


def diff(record: Record, held: Held | None, nulls: frozenset[str]) -> dict[Field, tuple[Any, Any]]:
    """Mapped fields whose desired value the service does not hold."""
    changes: dict[Field, tuple[Any, Any]] = {}
    for name, value in record.fields.items():
        old = held.fields.get(name) if held else None
        if value is None:
            if overwrites(name, nulls) and old not in (None, [], ""):
                changes[name] = (old, None)
            continue
        if not same(value, old):
            changes[name] = (old, value)
    return changes


@dataclass(frozen=True)
class Limits:
    """The safety limits: a plan whose desired set is empty, or that would update or delete
    more than ``max_change_share`` of the rows it manages (when it manages at least
    ``min_rows``), is refused unless ``force``."""

    max_change_share: float
    min_rows: int = 10
    force: bool = False


def plan_target(
    spec: TargetSpec,
    kind: Kind,
    rows: list[dict[str, Any]],
    ctx: Context,
    journal: Journal,
    *,
    limits: Limits,
) -> TargetPlan:
    """What a target's rows ask of the service, step by step: each valid record is compared
    with the warehouse's copy first and read from the API only where that copy may be
    stale or differs; keys pushed before and no longer wanted are deleted (when the target
    deletes); a plan that would change too much is refused."""
    plan = TargetPlan(spec, kind)
    known: dict[str, Known] = journal.known(spec.name)
    known_idx = {k: v.idx for k, v in known.items() if v.idx and not v.deleted}
    plan.managed = len(known_idx)
    records = kind.records(rows, spec.key, ctx)
    valid: dict[str, Record] = {}
    for record in records:
        record.extra["nulls"] = spec.nulls
        if record.problems:
            plan.steps.append(_invalid(spec, record, "; ".join(record.problems)))
        else:
            valid[record.key] = record
    to_read = _unchanged_by_copy(plan, kind, ctx, valid, known, known_idx)
    live = kind.live(ctx, [(k, valid[k]) for k in to_read], known_idx) if to_read else {}
    owners = {idx: k for k, idx in known_idx.items()}
    for key in to_read:
        plan.steps.append(_step(spec, kind, ctx, valid[key], live.get(key), owners))
    _deletes(plan, {r.key for r in records}, known_idx)
    plan.refused = _refusal(plan, bool(records), known_idx, limits)
    return plan


def _invalid(spec: TargetSpec, record: Record, reason: str) -> Step:
    return Step(spec.name, record.key, record.label, "invalid", record=record, reason=reason)


def _unchanged_by_copy(
    plan: TargetPlan,
    kind: Kind,
    ctx: Context,
    valid: dict[str, Record],
    known: dict[str, Known],
    known_idx: dict[str, str],
) -> list[str]:
    """Plans ``unchanged`` the records the warehouse's copy (or the journal, confirmed after
    the copy was loaded) shows as they are wanted; returns the keys to read from the API."""
    spec = plan.spec
    copy = kind.copy(ctx, known_idx, valid)
    to_read: list[str] = []
    for key, record in valid.items():
        held = copy.get(key)
        journaled = known.get(key)
        copied_at = held.loaded_at or 0.0 if held is not None else 0.0
        if (
            journaled is not None
            and journaled.idx
            and not journaled.deleted
            and journaled.confirmed_at > copied_at
            and journaled.desired_hash == fields_hash(record.fields)
        ):
            # the server confirmed exactly these fields after the copy was loaded
            plan.steps.append(
                Step(spec.name, key, record.label, "unchanged", idx=journaled.idx, record=record)
            )
            continue
        stale = held is None or (journaled is not None and journaled.confirmed_at > copied_at)
        if not stale and held is not None and not diff(record, held, spec.nulls):
            plan.steps.append(
                Step(spec.name, key, record.label, "unchanged", idx=held.idx, record=record)
            )
        else:
            to_read.append(key)
    return to_read


def _step(
    spec: TargetSpec,
    kind: Kind,
    ctx: Context,
    record: Record,
    held: Held | None,
    owners: dict[str, str],
) -> Step:
    """One record's step against what the service holds now (``held``, None: nothing)."""
    key = record.key
    named = record.extra.get("idx")
    if named is not None and (held is None or owners.get(named, key) != key):
        return _invalid(
            spec,
            record,
            f"idx {named} does not exist at the service"
            if held is None
            else f"idx {named} belongs to the key {owners[named]!r} already",
        )
    problems = kind.create_problems(record) if held is None else []
    if held is None and spec.mode == "update":
        return _invalid(
            spec,
            record,
            f"not found at the service (mode update never creates a {kind.resource} row)",
        )
    if problems:
        return _invalid(spec, record, "; ".join(problems))
    if held is None:
        created = {n: (None, v) for n, v in record.fields.items() if v is not None}
        return Step(spec.name, key, record.label, "create", record=record, changes=created)
    changes = diff(record, held, spec.nulls)
    if not changes:
        return Step(spec.name, key, record.label, "unchanged", idx=held.idx, record=record)
    if spec.mode == "insert":
        return Step(
            spec.name,
            key,
            record.label,
            "unchanged",
            idx=held.idx,
            record=record,
            reason="exists; mode insert does not update",
        )
    return Step(
        spec.name,
        key,
        record.label,
        "update",
        idx=held.idx,
        changes=changes,
        request=kind.update(record, held, changes, ctx),
        record=record,
    )


def _deletes(plan: TargetPlan, wanted: set[str], known_idx: dict[str, str]) -> None:
    """Deletes the keys this target pushed before and no longer wants (when it deletes);
    none while a row is invalid, which might be one it should keep."""
    spec = plan.spec
    if spec.delete is None:
        return
    rejected_rows = [s for s in plan.steps if s.action == "invalid"]
    if rejected_rows:
        plan.notes.append(
            f"no deletes this run: {len(rejected_rows)} invalid row(s) might be rows it should keep"
        )
        return
    for key, idx in sorted(known_idx.items()):
        if key not in wanted:
            request = plan.kind.delete(idx, spec.delete)
            plan.steps.append(Step(spec.name, key, key, "delete", idx=idx, request=request))


def _refusal(
    plan: TargetPlan,
    any_records: bool,
    known_idx: dict[str, str],
    limits: Limits,
) -> str | None:
    """Why the plan is not sent (an empty desired set, too large a share changed), unless
    forced."""
    if limits.force:
        return None
    counts = plan.counts()
    changing = counts["update"] + counts["delete"]
    # what it manages: the objects its desired rows match at the service, and the keys it
    # pushed before
    base = len(
        {s.key for s in plan.steps if s.action in ("update", "unchanged", "delete")}
        | set(known_idx)
    )
    if not any_records:
        return "its desired set is empty (a broken model or a missing file?)"
    if base >= limits.min_rows and changing / base > limits.max_change_share:
        return (
            f"it would update or delete {changing} of the {base} rows it manages "
            f"({changing / base:.0%}, more than the limit of {limits.max_change_share:.0%})"
        )
    return None
