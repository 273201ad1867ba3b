"""``feedback-sync push``: plan every target, print the preview, and with ``apply`` send.

Order of a run:

1. open the warehouse (DuckDB, the models file beside Parquet, or PostgreSQL), check the
   models were built, find each target's curated inputs (a target whose inputs are missing
   is skipped with that reason, or is an error when it was asked for by name);
2. per target, parents first (topics, statuses, followers, idea notes, announcements):
   close what a crashed run left (intents without outcome are looked up), read the desired
   rows, plan (``plan.py``);
3. preview: print counts, samples and payloads; nothing is sent;
4. apply: targets refused by a safety limit are skipped; each write is journaled as an
   intent, sent, and its outcome journaled. The first write of a target goes alone (a 403
   for custom attributes is learned from it, once), the rest ``max_concurrency`` at a time.

Exit codes (``PushResult.exit_code``): 0 when everything planned landed, 1 when rows were
invalid, rejected or held, a target was refused, or the run failed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.settings import FeedbackSettings, load_settings
from feedback_sync.errors import ApiError, ConfigError, ModelError, NotFound, OutcomeUnknown
from feedback_sync.models.project import load_project, sql_dir
from feedback_sync.progress import Figures, Progress
from feedback_sync.push import curated as curated_inputs
from feedback_sync.push.journal import Journal, fields_hash
from feedback_sync.push.kinds import KINDS
from feedback_sync.push.kinds.base import Context, Request, show_field
from feedback_sync.push.kinds.followers import FollowerResolver
from feedback_sync.push.plan import Limits, Step, TargetPlan, plan_target
from feedback_sync.push.settings import PushSettings, load_push_settings
from feedback_sync.push.targets import TargetSpec, load_targets, render
from feedback_sync.push.values import shown
from feedback_sync.redaction import SCRUBBER
from feedback_sync.warehouse import runlock
from feedback_sync.warehouse.engines import Engine, has_schema, records
from feedback_sync.warehouse.target import Target

log = logging.getLogger("feedback_sync")
NOTHING_LEFT = "custom attributes are disabled at the service; nothing else to send"
ACTIONS = ("create", "update", "delete", "unchanged", "invalid", "rejected", "held")
WRITE_ACTIONS = frozenset({"create", "update", "delete"})


@dataclass
class PushResult:
    applied: bool
    where: str
    plans: list[TargetPlan] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    run_id: str = ""
    seconds: float = 0.0
    reads: int = 0
    writes: int = 0
    retries: int = 0
    custom_attributes_disabled: str | None = None
    error: str | None = None

    def counts(self, plan: TargetPlan) -> Counter[str]:
        """Planned actions, or after apply what happened: rejected and held rows move out
        of their action's count."""
        out: Counter[str] = Counter()
        for step in plan.steps:
            if step.outcome in ("rejected", "unknown"):
                out["rejected"] += 1
            elif step.outcome == "held" or step.action == "held":
                out["held"] += 1
            elif step.outcome == "skipped":
                continue
            else:
                out[step.action] += 1
        return out

    def totals(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for plan in self.plans:
            total.update(self.counts(plan))
        return total

    def planned_writes(self) -> int:
        """The writes the plans would send (those of a refused target not counted)."""
        return sum(len(p.writes()) for p in self.plans if not p.refused)

    def exit_code(self) -> int:
        totals = self.totals()
        failed = totals["invalid"] or totals["rejected"] or totals["held"]
        refused = any(p.refused for p in self.plans)
        return 1 if (self.error or failed or refused) else 0

    def table(self) -> str:
        width = max([len(p.spec.name) for p in self.plans] + [6])
        head = f"  {'target':<{width}}  {'mode':<6}" + "".join(
            f"  {a + 's' if a not in ('unchanged', 'invalid', 'rejected', 'held') else a:>9}"
            for a in ACTIONS
        )
        lines = [head]
        for plan in self.plans:
            counts = self.counts(plan)
            line = f"  {plan.spec.name:<{width}}  {plan.spec.mode:<6}" + "".join(
                f"  {counts[a]:>9,}" for a in ACTIONS
            )
            if plan.refused:
                line += "  REFUSED"
            lines.append(line)
        return "\n".join(lines)

    def report(self, samples: int = 5) -> str:
        lines: list[str] = []
        if self.applied:
            lines.append(
                f"push applied in {self.seconds:.1f}s to {self.where}: {self.writes:,} write "
                f"request(s), {self.reads:,} read(s), {self.retries:,} retried; run {self.run_id}"
            )
        else:
            lines.append(
                f"push preview (dry run, nothing sent) for {self.where}: {self.reads:,} read(s) "
                f"in {self.seconds:.1f}s; run {self.run_id}"
            )
        if self.plans:
            lines.append(self.table())
        for name, reason in self.skipped.items():
            lines.append(f"  {name}: skipped: {reason}")
        for plan in self.plans:
            if plan.refused:
                lines.append(
                    f"  {plan.spec.name}: REFUSED: {plan.refused}; pass --force to send it anyway"
                )
            for note in plan.notes:
                lines.append(f"  {plan.spec.name}: {note}")
            if plan.recovered:
                lines.append(
                    f"  {plan.spec.name}: {plan.recovered} write(s) of an interrupted run "
                    "checked at the service first"
                )
        if self.custom_attributes_disabled:
            lines.append(
                "  custom attributes are disabled at the service: "
                f"{self.custom_attributes_disabled}"
            )
        for plan in self.plans:
            lines.extend(_samples(plan, samples, self.applied))
        if self.error:
            lines.append(f"push FAILED: {self.error}")
        elif not self.applied:
            lines.append(
                f"{self.planned_writes():,} write(s) planned. Run with --apply to send them."
            )
        return "\n".join(lines)


def _figures(result: PushResult, client: FeedbackClient) -> Figures:
    """The push's figures so far (read from the progress display's thread): per target, the
    writes planned, or once applying, the rows sent."""
    rows: dict[str, int] = {}
    for plan in list(result.plans):
        # counted, not ``plan.writes()``: that sorts every step, four times a second
        writes = [step for step in plan.steps if step.action in WRITE_ACTIONS]
        if result.applied:
            rows[plan.spec.name] = sum(1 for step in writes if step.outcome is not None)
        else:
            rows[plan.spec.name] = len(writes)
    return Figures(requests=client.stats.requests, retries=client.stats.retries, rows_by=rows)


PROBLEMS_PER_SAMPLE = 4  # rows shown that were not sent, per changed row shown


def changed_steps(plan: TargetPlan) -> list[Step]:
    """The writes of a plan, less those that were rejected or held."""
    return [s for s in plan.writes() if s.outcome not in ("rejected", "unknown", "held")]


def problem_steps(plan: TargetPlan) -> list[Step]:
    """The rows of a plan that were not (or will not be) sent: invalid, held, rejected."""
    return [
        s
        for s in plan.steps
        if s.action in ("invalid", "held") or s.outcome in ("rejected", "unknown", "held")
    ]


def _samples(plan: TargetPlan, samples: int, applied: bool) -> list[str]:
    lines: list[str] = []
    problems = problem_steps(plan)
    changes = changed_steps(plan)
    if not problems and not changes:
        return lines
    lines.append(f"{plan.spec.name}:")
    for step in changes[:samples]:
        where = f" ({step.idx})" if step.idx else ""
        lines.append(f"  {step.action} {step.label}{where}")
        for name, (old, new) in list(step.changes.items())[:12]:
            lines.append(f"    {show_field(name)}: {shown(old)} -> {shown(new)}")
        if step.request is not None:
            query = (
                "?" + "&".join(f"{k}={v}" for k, v in step.request.params.items())
                if step.request.params
                else ""
            )
            body = " " + shown(step.request.body) if step.request.body is not None else ""
            lines.append(f"    {step.request.method} /{step.request.path}{query}{body}"[:600])
    if len(changes) > samples:
        lines.append(f"  ... and {len(changes) - samples:,} more")
    shown_problems = samples * PROBLEMS_PER_SAMPLE
    for step in problems[:shown_problems]:
        what = step.outcome if step.outcome in ("rejected", "unknown", "held") else step.action
        status = f" (HTTP {step.status})" if step.status else ""
        lines.append(f"  {what} {step.label}{status}: {step.message or step.reason}")
    if len(problems) > shown_problems:
        lines.append(f"  ... and {len(problems) - shown_problems:,} more (see push._push_rows)")
    return lines


def run_push(
    target: Target,
    *,
    targets: list[str] | None = None,
    apply: bool = False,
    force: bool = False,
    settings: FeedbackSettings | None = None,
    push_settings: PushSettings | None = None,
    sql_folder: str | Path | None = None,
    push_dir: Path | None = None,
    transport: httpx.BaseTransport | None = None,
    out: IO[str] | None = None,
    lock_wait: float = 0.0,
    progress: str = "auto",
    progress_every: float = 5.0,
) -> PushResult:
    """Plans (and with ``apply`` sends) the push targets.

    Progress goes to ``out`` (stderr by default) as ``progress`` chooses (``progress.py``,
    as a sync's); the report is the caller's to print (``PushResult.report``).

    Holds ``target``'s run lock throughout (``warehouse.runlock``), as a sync does: the
    journal and the diff never meet a sync's half-done load.

    The targets are ``<sql folder>/push/*.sql`` (``models.project.sql_dir``: ``sql_folder``,
    else the configured or shipped one; ``push_dir`` names another folder of targets), and
    ``ref()`` reads the models of that SQL folder.

    Raises:
        ConfigError: bad input or configuration (exit code 2): an unknown target, a target
            asked for whose curated input is missing, an unreadable file, a model that fails.
        WarehouseBusy: another run holds the warehouse (nothing was done).
    """
    root = sql_dir(sql_folder)
    push_dir = root / "push" if push_dir is None else push_dir
    if not push_dir.is_dir():
        raise ConfigError(f"{push_dir}: no such folder (the push targets, <sql folder>/push/)")
    rows = "rows sent" if apply else "writes planned"
    shown = Progress("push", out, mode=progress, every=progress_every, rows=rows)
    with runlock.hold(target, "push --apply" if apply else "push (preview)", lock_wait), shown:
        return _run_push(
            target, targets, apply, force, settings, push_settings, root, push_dir, transport, shown
        )


def _run_push(
    target: Target,
    targets: list[str] | None,
    apply: bool,
    force: bool,
    settings: FeedbackSettings | None,
    push_settings: PushSettings | None,
    root: Path,
    push_dir: Path,
    transport: httpx.BaseTransport | None,
    out: Progress,
) -> PushResult:
    started = time.perf_counter()
    push_settings = push_settings or load_push_settings()
    specs = load_targets(push_dir)
    declared = curated_inputs.load_declarations(push_dir / "curated.toml")
    if targets:
        unknown = [t for t in targets if t not in specs]
        if unknown:
            raise ConfigError(
                f"unknown push target(s) {', '.join(unknown)}; the targets are {', '.join(specs)}"
            )
    chosen = [specs[t] for t in (targets or specs)]
    chosen.sort(key=lambda s: (KINDS[s.kind].order, s.name))
    settings = settings or load_settings()
    result = PushResult(applied=apply, where=f"{target.describe()} -> {settings.base_url}")
    with contextlib.ExitStack() as opened:
        try:
            engine, where = opened.enter_context(target.open_models())
        except ModelError as exc:
            raise ConfigError(str(exc)) from None
        client = FeedbackClient(settings, transport=transport)
        out.watch(lambda: _figures(result, client))
        try:
            if not has_schema(engine, "staging"):
                raise ConfigError(
                    f"{where} has no staging models: run `feedback-sync models` (or a sync) first"
                )
            journal = Journal(engine)
            result.run_id = journal.start(apply, force, [s.name for s in chosen])
            try:
                _run(
                    result,
                    root,
                    chosen,
                    declared,
                    engine,
                    target,
                    client,
                    journal,
                    push_settings,
                    explicit=bool(targets),
                    apply=apply,
                    force=force,
                    out=out,
                )
            except BaseException as exc:
                result.error = (
                    SCRUBBER.scrub(str(exc)) if isinstance(exc, Exception) else type(exc).__name__
                )
                journal.finish("failed", result.totals(), result.error)
                raise
            status = (
                "preview" if not apply else ("ok" if result.exit_code() == 0 else "rows_failed")
            )
            journal.finish(status, result.totals(), None)
        finally:
            result.seconds = time.perf_counter() - started
            writes = sum(n for r, n in client.stats.by_resource.items() if r.startswith("write:"))
            result.writes = writes
            result.reads = client.stats.requests - writes
            result.retries = client.stats.retries
            client.close()
    return result


def _run(
    result: PushResult,
    root: Path,
    chosen: list[TargetSpec],
    declared: dict[str, curated_inputs.CuratedTable],
    con: Engine,
    target: Target,
    client: FeedbackClient,
    journal: Journal,
    push_settings: PushSettings,
    *,
    explicit: bool,
    apply: bool,
    force: bool,
    out: Progress,
) -> None:
    """Each chosen target in turn: its inputs, its plan, and (``apply``) its writes."""
    project = load_project(root)
    refs = {m.name: m.relation for m in project.models}
    variables: dict[str, Any] = {"note_author_email": push_settings.note_author_email}
    base = Context(con, target.dataset, client, "")
    base.known_ideas = _set(base, "select idea_idx as idx from staging.ideas")
    resolver = FollowerResolver(base, apply)
    folder = push_settings.curated_dir if target.reads_curated_files else None
    for spec in chosen:
        sources, reason = _inputs(spec, declared, con, folder, variables, refs)
        if reason is not None:
            if explicit:
                raise ConfigError(f"push target {spec.name}: {reason}")
            result.skipped[spec.name] = reason
            continue
        ctx = Context(con, target.dataset, client, spec.name, resolver, base.known_ideas)
        out.stage(f"planning {spec.name}")
        out.say(f"push: planning {spec.name} ...")
        plan = _plan(spec, sources, refs, variables, ctx, journal, resolver, push_settings, force)
        result.plans.append(plan)
        if apply:
            _send(plan, ctx, journal, resolver, result, client, out)


def _inputs(
    spec: TargetSpec,
    declared: dict[str, curated_inputs.CuratedTable],
    con: Engine,
    folder: Path | None,
    variables: dict[str, Any],
    refs: dict[str, str],
) -> tuple[dict[str, str], str | None]:
    """The SQL of each curated input the target reads, or why the target is skipped (an
    input or a setting it needs is missing).

    Raises:
        ConfigError: the target names an input or a model that does not exist.
    """
    sources: dict[str, str] = {}
    reason = None
    for name in sorted(spec.curated):
        if name not in declared:
            raise ConfigError(f"{spec.path}: curated('{name}') is not declared in curated.toml")
        source = curated_inputs.find(con, declared[name], folder)
        if source is None:
            where = f"{folder}/{name}.csv or .parquet, or " if folder else ""
            reason = f"no curated input {name} ({where}a table curated.{name})"
            break
        sources[name] = curated_inputs.select_sql(source)
    missing_vars = [v for v in sorted(spec.variables) if variables.get(v) is None]
    if reason is None and missing_vars:
        wanted = ", ".join("push." + v for v in missing_vars)
        reason = f"set {wanted} (PUSH__{missing_vars[0].upper()})"
    unknown_refs = [r for r in spec.refs if r not in refs]
    if unknown_refs:
        raise ConfigError(f"{spec.path}: ref('{unknown_refs[0]}') names no model of sql/")
    return sources, reason


def _plan(
    spec: TargetSpec,
    sources: dict[str, str],
    refs: dict[str, str],
    variables: dict[str, Any],
    ctx: Context,
    journal: Journal,
    resolver: FollowerResolver,
    push_settings: PushSettings,
    force: bool,
) -> TargetPlan:
    """The target's rows read, diffed with the service and the journal, and each step's
    request made; steps whose parent (a follower) will not exist are held back."""
    con = ctx.con
    kind = KINDS[spec.kind]
    ctx.taken_idxs = {k.idx for k in journal.known(spec.name).values() if k.idx}
    recovered = _recover(journal, spec, kind, ctx)
    sql = render(spec, sources, refs, variables)
    try:
        names, tuples = con.query(con.translate(sql))
    except con.errors as exc:
        raise ConfigError(f"push target {spec.name} ({spec.path.name}) failed: {exc}") from None
    if spec.key not in names:
        raise ConfigError(f"push target {spec.name}: its SQL has no key column {spec.key!r}")
    rows = [dict(zip(names, row, strict=True)) for row in tuples]
    limits = Limits(
        max_change_share=push_settings.max_change_share,
        min_rows=push_settings.max_change_min_rows,
        force=force,
    )
    plan = plan_target(spec, kind, rows, ctx, journal, limits=limits)
    plan.recovered = recovered
    if kind.provides_parents:
        resolver.planned.update(s.key for s in plan.steps if s.action == "create")
    for step in plan.steps:
        if step.action == "create" and step.record is not None:
            step.request = kind.create(step.record, ctx)
        parent = (
            kind.parent(step.record)
            if step.record is not None and step.action in ("create",)
            else None
        )
        if parent is not None and parent in resolver.failed:
            step.action = "held"
            step.reason = f"held back: its author {parent} did not land ({resolver.failed[parent]})"
        elif parent is not None and resolver(parent) is None:
            step.action = "held"
            step.reason = f"its author {parent} is not a follower (add them to curated.accounts)"
    return plan


def _send(
    plan: TargetPlan,
    ctx: Context,
    journal: Journal,
    resolver: FollowerResolver,
    result: PushResult,
    client: FeedbackClient,
    out: Progress,
) -> None:
    """Applies a plan: records adopted, writes sent (unless refused), and the steps that
    were not sent (invalid, held) journaled with why."""
    spec = plan.spec
    _adopt(plan, journal)
    if not plan.refused and plan.writes():
        out.stage(f"sending {spec.name}")
        out.say(f"push: sending {spec.name}: {len(plan.writes()):,} write(s) ...")
        _apply(plan, ctx, journal, resolver, result, client)
    for step in plan.steps:
        if step.action in ("invalid", "held") and step.outcome is None:
            journal.row(journal.next_seq(), step, step.action, message=step.reason)


def _adopt(plan: TargetPlan, journal: Journal) -> None:
    """Unchanged records the snapshot does not know as they are (matched by email, name,
    marker or idx; or right already): remembered with their idx and fields."""
    known = journal.known(plan.spec.name)
    for step in plan.steps:
        if step.action != "unchanged" or step.idx is None or step.record is None:
            continue
        mine = known.get(step.key)
        desired = fields_hash(step.record.fields)
        if mine is None or mine.idx != step.idx or mine.desired_hash != desired or mine.deleted:
            journal.adopt(plan.spec.name, step.key, step.idx, step.record.fields)


def _set(ctx: Context, sql: str) -> set[str]:
    try:
        return {str(r["idx"]) for r in records(ctx.con, sql) if r["idx"] is not None}
    except ctx.con.errors:
        return set()


def _recover(journal: Journal, spec: TargetSpec, kind: Any, ctx: Context) -> int:
    """Closes the intents an interrupted run left for this target."""
    pending = journal.pending(spec.name)
    for item in pending:
        if item.action != "create":
            journal.resolve(
                item, "superseded", item.idx, "interrupted; this run re-reads the service"
            )
            continue
        idx = kind.lookup(ctx, item.key, item.payload)
        if idx is not None:
            journal.resolve(item, "recovered", idx, "the interrupted create had landed")
            journal.adopt(spec.name, item.key, idx, None, recent=True)
        else:
            journal.resolve(item, "absent", None, "the interrupted create had not landed")
    return len(pending)


def _apply(
    plan: TargetPlan,
    ctx: Context,
    journal: Journal,
    resolver: FollowerResolver,
    result: PushResult,
    client: FeedbackClient,
) -> None:
    steps = plan.writes()
    if not steps:
        return
    state = {"custom_disabled": False}
    lock = threading.Lock()

    def one(step: Step) -> None:
        _execute(step, plan, ctx, journal, resolver, result, state, lock)

    # the first write goes alone, one that carries custom fields if there is one: a 403
    # for custom attributes is learned from it, once
    first = next((s for s in steps if set(_body(s)) & {"attributes", "companies"}), steps[0])
    one(first)
    with ThreadPoolExecutor(
        max_workers=client.settings.max_concurrency, thread_name_prefix="feedback-push"
    ) as pool:
        list(pool.map(one, [s for s in steps if s is not first]))


def _body(step: Step) -> dict[str, Any]:
    return step.request.body or {} if step.request is not None else {}


def _execute(
    step: Step,
    plan: TargetPlan,
    ctx: Context,
    journal: Journal,
    resolver: FollowerResolver,
    result: PushResult,
    state: dict[str, bool],
    lock: threading.Lock,
) -> None:
    """Sends one step's write and journals what came of it: confirmed, rejected, held,
    unknown (looked for first, on a later run), or sent again while ``_again`` allows."""
    kind, name = plan.kind, plan.spec.name
    if _held_by_parent(step, plan, ctx, journal, resolver):
        return
    request = step.request
    assert request is not None
    stripped = False
    if state["custom_disabled"]:
        request, stripped = kind.strip_custom(request)
        if request is None:
            _rejected(step, name, journal, resolver, 403, NOTHING_LEFT)
            return
    attempts = 0
    while True:
        attempts += 1
        seq = journal.next_seq()
        journal.row(seq, step, "intent", idx=step.idx, payload=request.body)
        try:
            body = ctx.client.send_json(
                request.method,
                request.path,
                request.body,
                params=request.params,
                resource=f"write:{kind.resource}",
                # never sent again blindly: an update that timed out may still land, and
                # sending it again would apply it twice. What to do is decided below
                idempotent=False,
            )
        except OutcomeUnknown as exc:
            if step.action != "create":
                settled = _settle_unknown_change(step, name, seq, exc, request, journal, resolver)
                if not settled and _again(step, exc, attempts, ctx.client, resolver):
                    continue
                return
            if _unknown_create(step, plan, ctx, seq, exc, request, journal, resolver, attempts):
                continue
            return
        except NotFound as exc:
            if step.action == "delete":
                _confirmed(step, name, seq, step.idx, request, journal, resolver, "already gone")
                return
            _rejected(step, name, journal, resolver, exc.status, exc.detail, seq)
            return
        except ApiError as exc:
            if exc.status == 403 and kind.sends_custom_attributes and not stripped:
                with lock:
                    if not state["custom_disabled"]:
                        state["custom_disabled"] = True
                        result.custom_attributes_disabled = (
                            f"learned from {step.label}: {exc.detail}"
                        )
                journal.row(seq, step, "rejected", status=403, message=exc.detail)
                request, stripped = kind.strip_custom(request)
                if request is None:
                    _rejected(step, name, journal, resolver, 403, NOTHING_LEFT)
                    return
                continue
            _rejected(step, name, journal, resolver, exc.status, exc.detail, seq)
            return
        idx = kind.created_idx(body) if step.action == "create" else step.idx
        note = (
            "sent without attributes and companies (custom attributes are disabled)"
            if stripped
            else None
        )
        _confirmed(step, name, seq, idx, request, journal, resolver, note, whole=not stripped)
        if stripped:
            step.outcome, step.status, step.message = (
                "rejected",
                403,
                "landed without attributes and companies: "
                "custom attributes are disabled at the service",
            )
        return


def _held_by_parent(
    step: Step, plan: TargetPlan, ctx: Context, journal: Journal, resolver: FollowerResolver
) -> bool:
    """Whether a create is held back because its parent (a follower) failed to land; a
    create whose parent landed gets its request made anew (it names the parent's idx)."""
    kind = plan.kind
    parent = (
        kind.parent(step.record) if step.record is not None and step.action == "create" else None
    )
    if parent is None:
        return False
    failure = resolver.failed.get(parent)
    if failure is not None:
        step.outcome, step.message = (
            "held",
            f"held back: its author {parent} did not land ({failure})",
        )
        journal.row(journal.next_seq(), step, "held", message=step.message)
        return True
    if step.record is not None:
        step.request = kind.create(step.record, ctx)
    return False


def _unknown_create(
    step: Step,
    plan: TargetPlan,
    ctx: Context,
    seq: int,
    exc: OutcomeUnknown,
    request: Request,
    journal: Journal,
    resolver: FollowerResolver,
    attempts: int,
) -> bool:
    """A create whose outcome is unknown: looked for at the service, and confirmed if it
    landed; with no answer at all it stays unknown for the next run to look for; when the
    service answered and it is absent, True if it may be sent again."""
    kind, name = plan.kind, plan.spec.name
    try:
        found = kind.lookup(ctx, step.key, request.body)
    except ApiError as lookup_failed:
        found = None
        exc = OutcomeUnknown(
            exc.resource,
            exc.method,
            exc.url,
            exc.status,
            f"{exc.detail}; the lookup failed too: {lookup_failed.detail}",
        )
    if found is not None:
        landed = "landed (found after an unknown outcome)"
        _confirmed(step, name, seq, found, request, journal, resolver, landed)
        return False
    if exc.status is None:
        # no answer at all (a timeout, a dropped connection): the service may still be
        # making it. Not sent again now; the next run looks for it first
        note = "not found yet, the next run looks for it again"
        _unanswered(step, name, seq, exc, note, journal, resolver)
        return False
    journal.row(seq, step, "absent", status=exc.status, message=exc.detail)
    return _again(step, exc, attempts, ctx.client, resolver)


def _again(
    step: Step,
    exc: OutcomeUnknown,
    attempts: int,
    client: FeedbackClient,
    resolver: FollowerResolver,
) -> bool:
    """After a write that did not land: True once it has waited to send it again; False
    when the attempts are used up (the step is then reported as unknown)."""
    if attempts <= client.settings.max_retries:
        client.wait_before_retry(attempts)
        return True
    step.outcome, step.status, step.message = "unknown", exc.status, exc.detail
    _failed(step, resolver)
    return False


def _settle_unknown_change(
    step: Step,
    name: str,
    seq: int,
    exc: OutcomeUnknown,
    request: Request,
    journal: Journal,
    resolver: FollowerResolver,
) -> bool:
    """An update or delete whose outcome is unknown: settled (True), or to be sent again.

    A 2xx whose body was unreadable landed. No answer at all (a timeout, a dropped
    connection) may still land: it is not sent again in this run, and the next run reads the
    record and sends only what is still missing. An error answer (5xx) is sent again.
    """
    if exc.status is not None and 200 <= exc.status < 300:
        note = f"landed (the service answered {exc.status}; its answer was unreadable)"
        _confirmed(step, name, seq, step.idx, request, journal, resolver, note)
        return True
    if exc.status is None:
        note = "not sent again now, the next run reads it and decides"
        _unanswered(step, name, seq, exc, note, journal, resolver)
        return True
    journal.row(seq, step, "unknown", status=exc.status, message=exc.detail)
    return False


def _unanswered(
    step: Step,
    name: str,
    seq: int,
    exc: OutcomeUnknown,
    note: str,
    journal: Journal,
    resolver: FollowerResolver,
) -> None:
    """A write that got no answer at all: its outcome is unknown, journaled as such."""
    step.outcome, step.status = "unknown", None
    step.message = f"{exc.detail}; {note}"
    journal.row(seq, step, "unknown", message=step.message)
    _failed(step, resolver)


def _confirmed(
    step: Step,
    name: str,
    seq: int,
    idx: str | None,
    request: Request,
    journal: Journal,
    resolver: FollowerResolver,
    note: str | None,
    *,
    whole: bool = True,
) -> None:
    """The server confirmed the write: its outcome and the snapshot move together.
    ``whole``: all the record's fields landed (not so when custom fields were dropped)."""
    step.outcome, step.idx, step.message = "confirmed", idx or step.idx, note
    desired = step.record.fields if step.record is not None and whole else None
    journal.confirm(seq, step, idx=step.idx, payload=request.body, desired=desired, message=note)
    if step.record is not None and "email" in step.record.extra and step.idx:
        resolver.landed(step.key, step.idx)


def _rejected(
    step: Step,
    name: str,
    journal: Journal,
    resolver: FollowerResolver,
    status: int | None,
    message: str,
    seq: int | None = None,
) -> None:
    step.outcome, step.status, step.message = "rejected", status, message
    journal.row(
        seq if seq is not None else journal.next_seq(),
        step,
        "rejected",
        idx=step.idx,
        status=status,
        message=message,
    )
    _failed(step, resolver)


def _failed(step: Step, resolver: FollowerResolver) -> None:
    if step.record is not None and "email" in step.record.extra:
        resolver.failed[step.key] = step.message or "failed"
