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
   intent, sent, and its outcome journaled (``send.py``). The first write of a target goes
   alone (a 403 for custom attributes is learned from it, once), the rest
   ``max_concurrency`` at a time.

The runner asks each target's kind (``kinds/``) what only that kind needs: which records
wait for a parent (a note for its author) and why one is held back, which objects are the
parents and how they are found, which requests carry custom attributes.

With accounts configured a run is for one account (``PushOptions.scope``, ``scope.py``):
that account's dataset and run locks (``Target.for_account``), its settings (address, key,
limits), its curated rows, its rows of the models over every account, and its own journal
(both where the models are: the warehouse the accounts share). ``check_push``
checks what such a run would refuse before anything is sent, so that a caller running
several accounts (``app/push_accounts.py``) sends nothing to any of them when one
account's input is wrong.

Exit codes (``PushResult.exit_code``): 0 when everything planned landed, 1 when rows were
invalid, rejected or held, a target was refused, or the run failed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from feedback_sync.api.accounts import load_account_settings
from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.settings import FeedbackSettings, load_settings
from feedback_sync.errors import ConfigError, ModelError
from feedback_sync.models.project import load_project, sql_dir
from feedback_sync.progress import Figures, Progress
from feedback_sync.push import curated as curated_inputs
from feedback_sync.push.journal import Journal, fields_hash
from feedback_sync.push.kinds import KINDS
from feedback_sync.push.kinds.base import Context, Kind, Parents, show_field
from feedback_sync.push.plan import Limits, Step, TargetPlan, plan_target
from feedback_sync.push.scope import Scope
from feedback_sync.push.send import Sender
from feedback_sync.push.settings import PushSettings, load_push_settings
from feedback_sync.push.targets import TargetSpec, load_targets, render
from feedback_sync.push.values import shown
from feedback_sync.redaction import SCRUBBER
from feedback_sync.warehouse import runlock
from feedback_sync.warehouse.engines import Engine, records
from feedback_sync.warehouse.target import Target

log = logging.getLogger("feedback_sync")
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


@dataclass(frozen=True)
class PushOptions:
    """What one push run does: the targets it plans (None: every one), whether it sends
    (``apply``) or only previews, whether a refused target is sent anyway (``force``), the
    SQL folder whose models ``ref()`` reads (``models.project.sql_dir``: None is the
    configured or shipped one) and the folder of targets (None: its ``push/``), how long it
    waits for the warehouse's run lock, how it shows its progress (``progress.py``), and
    the account it pushes (``scope``: none where no accounts are configured)."""

    targets: list[str] | None = None
    apply: bool = False
    force: bool = False
    sql_folder: str | Path | None = None
    push_dir: Path | None = None
    lock_wait: float = 0.0
    progress: str = "auto"
    progress_every: float = 5.0
    scope: Scope = field(default_factory=Scope)


def run_push(
    target: Target,
    options: PushOptions | None = None,
    *,
    settings: FeedbackSettings | None = None,
    push_settings: PushSettings | None = None,
    transport: httpx.BaseTransport | None = None,
    out: IO[str] | None = None,
) -> PushResult:
    """Plans (and with ``options.apply`` sends) the push targets.

    Progress goes to ``out`` (stderr by default) as ``options.progress`` chooses
    (``progress.py``, as a sync's); the report is the caller's to print
    (``PushResult.report``).

    Holds ``target``'s run lock throughout (``warehouse.runlock``), as a sync does: the
    journal and the diff never meet a sync's half-done load. For an account
    (``options.scope``), ``target`` is the warehouse the accounts share: the run holds the
    account's run locks (``Target.for_account``: its sync's) and the warehouse's (a models
    build's), reads the models over every account there, and ``settings`` default to the
    account's.

    The targets are ``<sql folder>/push/*.sql`` (``models.project.sql_dir``:
    ``options.sql_folder``, else the configured or shipped one; ``options.push_dir`` names
    another folder of targets), and ``ref()`` reads the models of that SQL folder.

    Raises:
        ConfigError: bad input or configuration (exit code 2): an unknown target, a target
            asked for whose curated input is missing, an unreadable file, a model that fails.
        WarehouseBusy: another run holds the warehouse (nothing was done).
    """
    options = options or PushOptions()
    setup = _setup(target, options, out)
    doing = "push --apply" if options.apply else "push (preview)"
    with _held(setup, doing), setup.shown:
        return _run_push(setup, settings=settings, push_settings=push_settings, transport=transport)


def check_push(
    target: Target, options: PushOptions, *, push_settings: PushSettings | None = None
) -> None:
    """What ``run_push`` with these options would refuse before it sends anything, checked
    without sending, reading the service or journaling: the targets asked for, the models
    (``Scope.check_models``), and every curated input the targets read (its columns, and
    its column ``account``: ``curated.check_accounts``).

    Raises:
        ConfigError: as ``run_push`` would (exit code 2).
        WarehouseBusy: another run holds the (account's) warehouse.
    """
    setup = _setup(target, options, None, quiet=True)
    push_settings = push_settings or load_push_settings()
    chosen, declared = _chosen(setup)
    with _held(setup, "push (checking)"), _open_models(setup.models) as (engine, where):
        options.scope.check_models(engine, where, setup.target.dataset)
        _resolved(setup, push_settings, engine, chosen, declared)


def _setup(
    target: Target, options: PushOptions, out: IO[str] | None, quiet: bool = False
) -> _Setup:
    """The run's folders, its progress display and its (account's) target; nothing opened.

    Raises:
        ConfigError: the folder of targets does not exist.
    """
    root = sql_dir(options.sql_folder)
    push_dir = root / "push" if options.push_dir is None else options.push_dir
    if not push_dir.is_dir():
        raise ConfigError(f"{push_dir}: no such folder (the push targets, <sql folder>/push/)")
    rows = "rows sent" if options.apply else "writes planned"
    mode = "off" if quiet else options.progress
    shown = Progress("push", out, mode=mode, every=options.progress_every, rows=rows)
    account = options.scope.account
    mine = target if account is None else target.for_account(account)
    return _Setup(
        target=mine, models=target, options=options, root=root, push_dir=push_dir, shown=shown
    )


@contextlib.contextmanager
def _held(setup: _Setup, doing: str) -> Iterator[None]:
    """The run locks of the run's (account's) dataset, then the warehouse's whole, whose
    models it reads and whose journal it writes: a sync of the account never loads, nor a
    models build rebuilds, under a push (the order a sync of one account takes them in
    when it builds the models over every account)."""
    wait = setup.options.lock_wait
    if setup.models is setup.target:
        with runlock.hold(setup.target, doing, wait):
            yield
        return
    with runlock.hold_run(setup.target, doing, wait), runlock.hold(setup.models, doing, wait):
        yield


@contextlib.contextmanager
def _open_models(target: Target) -> Iterator[tuple[Engine, str]]:
    """The engine the push reads and journals in (the models'); a target that keeps none,
    or has none yet, is a ConfigError."""
    with contextlib.ExitStack() as opened:
        try:
            engine, where = opened.enter_context(target.open_models())
        except ModelError as exc:
            raise ConfigError(str(exc)) from None
        yield engine, where


@dataclass(frozen=True)
class _Setup:
    """What ``run_push`` settled before it took the run lock."""

    target: Target  # the run's: the account's, with accounts
    models: Target  # where the models are (over every account, with accounts) and the journal
    options: PushOptions
    root: Path  # the SQL folder, whose models ``ref()`` reads
    push_dir: Path  # the targets
    shown: Progress


def _run_push(
    setup: _Setup,
    *,
    settings: FeedbackSettings | None,
    push_settings: PushSettings | None,
    transport: httpx.BaseTransport | None,
) -> PushResult:
    started = time.perf_counter()
    push_settings = push_settings or load_push_settings()
    chosen, declared = _chosen(setup)
    target, options = setup.target, setup.options
    scope = options.scope
    if settings is None and scope.account is not None:
        settings = load_account_settings(scope.account)
    settings = settings or load_settings()
    result = PushResult(applied=options.apply, where=f"{target.describe()} -> {settings.base_url}")
    with _open_models(setup.models) as (engine, where):
        client = FeedbackClient(settings, transport=transport)
        setup.shown.watch(lambda: _figures(result, client))
        try:
            scope.check_models(engine, where, target.dataset)
            journal = Journal(engine, scope.journal_schema())
            result.run_id = journal.start(options.apply, options.force, [s.name for s in chosen])
            base = Context(engine, target.dataset, client, "", scope=scope)
            run = _Run(setup, push_settings, journal, result, base)
            run.journaled(chosen, declared)
        finally:
            result.seconds = time.perf_counter() - started
            writes = sum(n for r, n in client.stats.by_resource.items() if r.startswith("write:"))
            result.writes = writes
            result.reads = client.stats.requests - writes
            result.retries = client.stats.retries
            client.close()
    return result


def _chosen(setup: _Setup) -> tuple[list[TargetSpec], dict[str, curated_inputs.CuratedTable]]:
    """The targets asked for (all, by default), parents first, and the curated inputs
    declared beside them.

    Raises:
        ConfigError: a target asked for does not exist.
    """
    wanted = setup.options.targets
    specs = load_targets(setup.push_dir)
    declared = curated_inputs.load_declarations(setup.push_dir / "curated.toml")
    if wanted:
        unknown = [t for t in wanted if t not in specs]
        if unknown:
            raise ConfigError(
                f"unknown push target(s) {', '.join(unknown)}; the targets are {', '.join(specs)}"
            )
    chosen = [specs[t] for t in (wanted or specs)]
    chosen.sort(key=lambda s: (KINDS[s.kind].order, s.name))
    return chosen, declared


class _Run:
    """One push run once the warehouse is open: each chosen target in turn, its inputs, its
    plan and (``apply``) its writes, all journaled."""

    def __init__(
        self,
        setup: _Setup,
        push_settings: PushSettings,
        journal: Journal,
        result: PushResult,
        base: Context,
    ) -> None:
        self.setup = setup
        self.options = setup.options
        self.push_settings = push_settings
        self.journal = journal
        self.result = result
        # the warehouse and the client, for no target yet
        self.base = base
        ideas = base.model("ideas")
        if ideas is not None:
            base.known_ideas = _set(base, f"select idea_idx as idx from {ideas} as i")
        self.parents = _parents(base, self.options.apply)

    def journaled(
        self, chosen: list[TargetSpec], declared: dict[str, curated_inputs.CuratedTable]
    ) -> None:
        """Runs the targets and journals how the run ended: preview, ok, rows_failed, or
        failed with why."""
        result, journal = self.result, self.journal
        try:
            self._targets(chosen, declared)
        except BaseException as exc:
            result.error = (
                SCRUBBER.scrub(str(exc)) if isinstance(exc, Exception) else type(exc).__name__
            )
            journal.finish("failed", result.totals(), result.error)
            raise
        if not self.options.apply:
            status = "preview"
        else:
            status = "ok" if result.exit_code() == 0 else "rows_failed"
        journal.finish(status, result.totals(), None)

    def _targets(
        self, chosen: list[TargetSpec], declared: dict[str, curated_inputs.CuratedTable]
    ) -> None:
        """Every target's inputs first (a wrong one stops the run before anything is
        sent), then each chosen target in turn: its plan, and (``apply``) its writes."""
        base, shown = self.base, self.setup.shown
        inputs = _resolved(self.setup, self.push_settings, base.con, chosen, declared)
        self.result.skipped.update(inputs.skipped)
        for spec in chosen:
            if spec.name not in inputs.sources:
                continue
            none = self._none_of_account(spec, inputs.sources[spec.name])
            if none is not None:
                self.result.skipped[spec.name] = none
                continue
            ctx = Context(
                con=base.con,
                dataset=base.dataset,
                client=base.client,
                target=spec.name,
                scope=base.scope,
                parent_idx=self.parents,
                known_ideas=base.known_ideas,
            )
            shown.stage(f"planning {spec.name}")
            shown.say(f"push: planning {spec.name} ...")
            sql = render(spec, inputs.sources[spec.name], inputs.refs, inputs.variables)
            plan = self._plan(spec, sql, ctx)
            self.result.plans.append(plan)
            if self.options.apply:
                self._send(plan, ctx)

    def _none_of_account(self, spec: TargetSpec, sources: dict[str, str]) -> str | None:
        """Why a target is skipped for the run's account: its curated inputs hold no row
        of that account, and it never pushed anything for it. (An account without rows is
        not a broken input; a target that pushed for it before keeps the empty-set
        refusal, ``plan.Limits``.)"""
        account, con = self.base.scope.account, self.base.con
        if account is None or not sources or self.journal.known(spec.name):
            return None
        for sql in sources.values():
            rows = con.execute(con.translate(f"select count(*) from {sql} as s"))
            if rows and rows[0][0]:
                return None
        inputs = ", ".join(sorted(sources))
        return f"no rows of account {account} in its curated input {inputs}"

    def _plan(self, spec: TargetSpec, sql: str, ctx: Context) -> TargetPlan:
        """The target's rows (its ``sql``) read, diffed with the service and the journal,
        and each step's request made; creates whose parent will not exist are held back."""
        con, journal = ctx.con, self.journal
        kind = KINDS[spec.kind]
        ctx.taken_idxs = {k.idx for k in journal.known(spec.name).values() if k.idx}
        recovered = _recover(journal, spec, kind, ctx)
        try:
            names, tuples = con.query(con.translate(sql))
        except con.errors as exc:
            raise ConfigError(f"push target {spec.name} ({spec.path.name}) failed: {exc}") from None
        if spec.key not in names:
            raise ConfigError(f"push target {spec.name}: its SQL has no key column {spec.key!r}")
        rows = [dict(zip(names, row, strict=True)) for row in tuples]
        limits = Limits(
            max_change_share=self.push_settings.max_change_share,
            min_rows=self.push_settings.max_change_min_rows,
            force=self.options.force,
        )
        plan = plan_target(spec, kind, rows, ctx, journal, limits=limits)
        plan.recovered = recovered
        if kind.provides_parents:
            self.parents.planned.update(s.key for s in plan.steps if s.action == "create")
        for step in plan.steps:
            if step.action != "create" or step.record is None:
                continue
            step.request = kind.create(step.record, ctx)
            why = kind.held(step.record, self.parents, planning=True)
            if why is not None:
                step.action, step.reason = "held", why
        return plan

    def _send(self, plan: TargetPlan, ctx: Context) -> None:
        """Applies a plan: records adopted, writes sent (unless refused), and the steps that
        were not sent (invalid, held) journaled with why."""
        spec, journal = plan.spec, self.journal
        _adopt(plan, journal)
        if not plan.refused and plan.writes():
            self.setup.shown.stage(f"sending {spec.name}")
            self.setup.shown.say(f"push: sending {spec.name}: {len(plan.writes()):,} write(s) ...")
            sender = Sender(plan, ctx, journal, self.parents)
            try:
                sender.send()
            finally:
                if sender.custom.learned is not None:
                    self.result.custom_attributes_disabled = sender.custom.learned
        for step in plan.steps:
            if step.action in ("invalid", "held") and step.outcome is None:
                journal.row(journal.next_seq(), step, step.action, message=step.reason)


def _parents(base: Context, applied: bool) -> Parents:
    """The registry of the objects other records wait for, from the kind that provides
    them (a plain one when none does)."""
    for kind in KINDS.values():
        parents = kind.parents(base, applied)
        if parents is not None:
            return parents
    return Parents()


@dataclass
class _Inputs:
    """What the chosen targets read, for the run's account: per target the SQL of each of
    its curated inputs (a target skipped is in ``skipped``, with why), the relations
    ``ref()`` names, and the push settings ``var()`` reads."""

    sources: dict[str, dict[str, str]]
    skipped: dict[str, str]
    refs: dict[str, str]
    variables: dict[str, Any]


def _resolved(
    setup: _Setup,
    push_settings: PushSettings,
    con: Engine,
    chosen: list[TargetSpec],
    declared: dict[str, curated_inputs.CuratedTable],
) -> _Inputs:
    """Every chosen target's inputs, found and checked.

    Raises:
        ConfigError: an input that is wrong (its columns, its accounts), a target that
            names what does not exist, or a target asked for by name that would be skipped.
    """
    scope = setup.options.scope
    project = load_project(setup.root)
    refs = {m.name: scope.relation(con, m.layer, m.name) for m in project.models}
    variables = push_settings.variables()
    folder = push_settings.curated_dir if setup.target.reads_curated_files else None
    found = _Inputs({}, {}, refs, variables)
    for spec in chosen:
        sources, reason = _inputs(
            spec, declared, con, folder=folder, variables=variables, refs=refs, scope=scope
        )
        if reason is None:
            found.sources[spec.name] = sources
        elif setup.options.targets:
            raise ConfigError(f"push target {spec.name}: {reason}")
        else:
            found.skipped[spec.name] = reason
    return found


def _inputs(
    spec: TargetSpec,
    declared: dict[str, curated_inputs.CuratedTable],
    con: Engine,
    folder: Path | None,
    variables: dict[str, Any],
    refs: dict[str, str],
    scope: Scope,
) -> tuple[dict[str, str], str | None]:
    """The SQL of each curated input the target reads (``scope``'s account's rows), or why
    the target is skipped (an input or a setting it needs is missing).

    Raises:
        ConfigError: the target names an input or a model that does not exist, or an input
            is wrong (``curated.check_accounts``).
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
        curated_inputs.check_accounts(con, source, scope)
        sources[name] = curated_inputs.select_sql(source, scope.account)
    missing_vars = [v for v in sorted(spec.variables) if variables.get(v) is None]
    if reason is None and missing_vars:
        wanted = ", ".join("push." + v for v in missing_vars)
        reason = f"set {wanted} (PUSH__{missing_vars[0].upper()})"
    unknown_refs = [r for r in spec.refs if r not in refs]
    if unknown_refs:
        raise ConfigError(f"{spec.path}: ref('{unknown_refs[0]}') names no model of sql/")
    return sources, reason


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


def _recover(journal: Journal, spec: TargetSpec, kind: Kind, ctx: Context) -> int:
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
