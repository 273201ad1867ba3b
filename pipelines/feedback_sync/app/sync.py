"""``feedback-sync sync``: one run of the forward sync, from the API into the warehouse.

Order of a run:

1. finish what a run that died left behind (extracted or normalized packages not loaded),
   then align the local state with the destination's;
2. extract (the source streams pages; ``progress.py`` shows how far it came), normalize,
   load: state travels in the same load package as the data, so it is committed with it;
3. reconcile deletes for the resources read completely;
4. for Parquet, write the touched tables out;
5. build the SQL models of ``sql/`` (unless switched off; DuckDB, Parquet and PostgreSQL
   targets);
6. summarize.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import httpx
from dlt.pipeline.pipeline import Pipeline

from feedback_sync.api.settings import FeedbackSettings, load_settings
from feedback_sync.app.failures import explain, interrupted, terminal_job_failure
from feedback_sync.errors import Interrupted, LoadFailed, ModelError
from feedback_sync.progress import Figures, Progress
from feedback_sync.redaction import redact_url
from feedback_sync.source.context import SyncRun
from feedback_sync.source.resources import (
    COMPLETE_WHEN_FULL,
    PARENT_KEYS,
    SOURCE_NAME,
    check_resources,
)
from feedback_sync.source.resources import NAMES as RESOURCES
from feedback_sync.source.screening import REJECTED_TABLE
from feedback_sync.source.source import feedback
from feedback_sync.warehouse import history, runlock
from feedback_sync.warehouse.appends import owe, settle, warehouse_tables
from feedback_sync.warehouse.target import Target, duckdb_memory_limit, keep_loaded_packages

if TYPE_CHECKING:
    from feedback_sync.models.project import BuildResult

log = logging.getLogger("feedback_sync")


@dataclass
class SyncResult:
    """What a run did, for the summary and for tests."""

    target: str
    full: bool
    seconds: float = 0.0
    requests: int = 0
    retries: int = 0
    requests_by_resource: dict[str, int] = field(default_factory=dict)
    # rows per table in the load packages this run loaded (its own, and any an earlier run
    # left pending): new rows and rows that replaced one of the same key
    rows_loaded: dict[str, int] = field(default_factory=dict)
    # rows deleted per table (gone at the source, stale child rows, a gone row's children)
    rows_removed: dict[str, int] = field(default_factory=dict)
    # rows marked deleted per table (soft mode): they stay
    rows_marked: dict[str, int] = field(default_factory=dict)
    # rows per table before the run changed anything, and after it
    rows_before: dict[str, int] = field(default_factory=dict)
    table_rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    complete: list[str] = field(default_factory=list)
    # of the complete resources, those whose gone rows the source named (by key)
    gone: dict[str, list[str]] = field(default_factory=dict)
    # rows read and not loaded again, nothing in them having changed (per resource)
    unchanged: dict[str, int] = field(default_factory=dict)
    ideas_endpoint: bool | None = None
    recovered_packages: int = 0
    load_id: str | None = None
    exported: dict[str, int] = field(default_factory=dict)
    delete_mode: str = "hard"
    models: BuildResult | None = None
    models_error: str | None = None
    # the run's time (UTC): where a history version with no updated_at of its own starts, and
    # where the versions of rows gone at the source end
    run_at: datetime | None = None
    # the history step's failure: the synced data is kept, and the next run tries again
    history_error: str | None = None
    # per history table: versions begun and ended by this run (``warehouse/history.py``)
    versions: dict[str, history.Recorded] = field(default_factory=dict)
    # seconds per step, in run order: start (everything before the first request), fetch
    # (dlt's extract), load (normalize, load, stale child rows and deletes, the tables'
    # counts), history (the history step, where one is kept), then parquet and models when
    # they ran
    phases: dict[str, float] = field(default_factory=dict)
    # when the run began (``time.perf_counter``): ``seconds`` and ``start`` count from it
    started: float = field(default_factory=time.perf_counter, repr=False)

    def loaded(self, table: str) -> int:
        """Rows this run loaded into ``table``: for a history table, the versions it began."""
        versions = self.versions.get(table)
        return versions.opened if versions else self.rows_loaded.get(table, 0)

    def tables(self) -> list[str]:
        """The tables a summary accounts for: every data, child and history table (not the
        history step's record of when it compared, which is bookkeeping like dlt's own)."""
        return sorted(t for t in self.table_rows if t != history.CHECKS_TABLE)

    def change(self, table: str) -> TableChange:
        """What this run did to ``table``'s rows: ``before + added - removed = after``.

        ``removed`` is counted where rows are deleted; ``added`` is what the counts before
        and after leave for new keys, and the rest of the rows loaded replaced a row of
        the same key (``updated``). A history table's versions begun are its added rows,
        the versions ended its updated ones."""
        before = self.rows_before.get(table, 0)
        after = self.table_rows.get(table, 0)
        removed = self.rows_removed.get(table, 0)
        added = after - before + removed
        versions = self.versions.get(table)
        updated = versions.closed if versions else self.loaded(table) - added
        return TableChange(before, added, updated, removed, after, self.rows_marked.get(table, 0))

    def history_changed(self) -> list[str]:
        """The history tables this run added versions to or ended versions of."""
        return [t for t, done in self.versions.items() if done.opened or done.closed]

    def history_written(self) -> list[str]:
        """The tables the history step may have written: those it changed, and the record
        of when it compared them (``history_checks``, a tiny table)."""
        return [*self.history_changed(), history.CHECKS_TABLE] if self.versions else []

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Adds the seconds the block took to ``phases[step]``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases[step] = self.phases.get(step, 0.0) + time.perf_counter() - started

    def summary(self) -> str:
        """A short, readable account of the run."""
        kind = "full sync" if self.full else "sync"
        steps = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in self.phases.items())
        lines = [
            f"{kind} into {self.target} finished in {self.seconds:.1f}s"
            f"{f' ({steps})' if steps else ''}: "
            f"{self.requests:,} requests ({self.retries:,} retried)"
        ]
        if self.recovered_packages:
            lines.append(
                f"  first loaded {self.recovered_packages} package(s) a previous run left pending"
            )
        tables = self.tables()
        marked = any(self.rows_marked.values())
        width = max([len(t) for t in tables] + [5])
        heads = ["before", "added", "updated", "removed", "now"]
        if marked:
            heads.append("marked deleted")
        lines.append(f"  {'table':<{width}}" + "".join(f"  {h:>{_width(h)}}" for h in heads))
        for table in tables:
            done = self.change(table)
            figures = [done.before, done.added, done.updated, done.removed, done.after]
            if marked:
                figures.append(done.marked)
            lines.append(
                f"  {table:<{width}}"
                + "".join(f"  {n:>{_width(h)},}" for h, n in zip(heads, figures, strict=True))
            )
        changed = [
            f"{table} {done.opened:,} begun, {done.closed:,} ended"
            for table, done in sorted(self.versions.items())
            if done.opened or done.closed
        ]
        if changed:
            lines.append(f"  history versions: {'; '.join(changed)}")
        rejected = self.rows_loaded.get(REJECTED_TABLE, 0)
        if rejected:
            lines.append(
                f"  {rejected:,} item(s) the API sent could not land as rows (no idx, or keys "
                f"that collide); each is kept whole, with the reason, in {REJECTED_TABLE}"
                + (f" (_dlt_load_id = '{self.load_id}')" if self.load_id else "")
            )
        for resource, count in sorted(self.unchanged.items()):
            lines.append(f"  {resource}: {count:,} read and unchanged, not loaded again")
        if self.ideas_endpoint is False:
            lines.append("  /ideas is not served: ideas were discovered from other resources")
        for resource, count in sorted(self.skipped.items()):
            lines.append(f"  {resource}: skipped {count} idea(s) that no longer exist (404)")
        if self.exported:
            lines.append(f"  wrote {len(self.exported)} Parquet file(s)")
        if self.models is not None:
            lines += [f"  {line}" for line in self.models.summary().splitlines()]
        if self.history_error is not None:
            lines.append(
                "  history FAILED (the synced data is kept; the next run records the changes "
                f"again): {self.history_error}"
            )
        if self.models_error is not None:
            lines.append(f"  models FAILED (the synced data is kept): {self.models_error}")
        return "\n".join(lines)


@dataclass(frozen=True)
class TableChange:
    """One table's rows before and after a run, and what the run did to them."""

    before: int
    added: int
    updated: int
    removed: int
    after: int
    marked: int = 0  # marked deleted (soft mode); these rows stay, and count in none above


def _width(head: str) -> int:
    return max(len(head), 9)


def _figures(run: SyncRun, rows_before: dict[str, int]) -> Figures:
    """The fetch's figures so far (read from the progress display's thread). A resource's
    total is what its lists say they hold (``pagination.total``), and on a full run at
    least the rows its table held before (the lists of its per-idea reads begin one by
    one)."""
    stats = run.client.stats
    requests = {name: stats.by_resource.get(name, 0) for name in RESOURCES}
    read = [name for name, n in requests.items() if n]
    totals = {name: stats.total_by_resource.get(name, 0) for name in read}
    if run.full:
        totals = {name: max(n, rows_before.get(name, 0)) for name, n in totals.items()}
    return Figures(
        requests=stats.requests,
        retries=stats.retries,
        requests_by={name: requests[name] for name in read},
        rows_by={name: stats.rows_by_resource.get(name, 0) for name in read},
        done_by={name: stats.done_by_resource.get(name, 0) for name in read},
        total_by={name: n for name, n in totals.items() if n},
    )


def run_sync(
    target: Target,
    *,
    full: bool = False,
    resources: Sequence[str] | None = None,
    settings: FeedbackSettings | None = None,
    transport: httpx.BaseTransport | None = None,
    out: IO[str] | None = None,
    progress_every: float = 5.0,
    progress: str = "auto",
    after_extract: Callable[[Pipeline], None] | None = None,
    models: bool = True,
    sql_folder: str | Path | None = None,
    lock_wait: float = 0.0,
    started: float | None = None,
) -> SyncResult:
    """Runs one sync into ``target`` and returns what it did.

    Progress goes to ``out`` (stderr by default) as ``progress`` chooses (``progress.py``:
    auto, live, plain or off; plain lines every ``progress_every`` seconds).

    With ``models``, the models of ``sql_folder`` (``models.project.sql_dir``: by default
    the configured or shipped folder) are built after the load.

    The run holds ``target``'s run lock throughout (``warehouse.runlock``): another run of
    the same warehouse fails at once, or waits up to ``lock_wait`` seconds for this one.

    ``started`` (``time.perf_counter``) is when the run began, if before this call: the
    command line passes its process's start, so the summary's "finished in" is the time its
    user waited, and its ``start`` step (everything before the first request: the imports,
    the settings, the pipeline, what earlier runs left) says how much of it came first.

    Raises:
        ConfigError: a setting or an argument is wrong (nothing was fetched).
        WarehouseBusy: another run holds the warehouse (nothing was done).
        FeedbackError / dlt's PipelineStepFailed: the run failed; what was loaded before
            stays, and the next run resumes from the last committed state.
    """
    started = time.perf_counter() if started is None else started
    selected = check_resources(resources)
    settings = settings or load_settings()
    kept = history.chosen(settings.history_choices(), target.history_dialect, target.describe())
    keep = keep_loaded_packages()
    sql_root: Path | None = None
    if models and target.builds_models:
        # imported here: a sync told not to build the models never loads them
        from feedback_sync.models.project import sql_dir

        sql_root = sql_dir(sql_folder)  # a folder that is not there stops it before fetching
    shown = Progress("sync", out, mode=progress, every=progress_every, rows="rows fetched")
    with runlock.hold(target, "sync", lock_wait), shown, _ctrl_c() as checkpoint:
        shown.checkpoint = checkpoint
        try:
            return _run_sync(
                target,
                full,
                selected,
                settings,
                transport,
                shown,
                after_extract,
                sql_root,
                keep,
                started,
                kept,
            )
        except BaseException as exc:
            if interrupted(exc):
                raise Interrupted(interrupted_in(shown.current)) from exc
            raise


@contextmanager
def _ctrl_c() -> Iterator[Callable[[], None]]:
    """Notes every Ctrl-C while the run is on, and gives a check that raises
    ``KeyboardInterrupt`` once one came. Python raises it where the signal lands, but
    DuckDB turns it into its own error ("Query interrupted") inside a statement, and a step
    that keeps going after a failure of its own (the history, housekeeping) would swallow
    it: each step checks as it begins (``Progress.checkpoint``). Off the main thread (a
    Prefect task) signals are not this run's to handle."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    seen = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def noted(number: int, frame: Any) -> None:
        seen.set()
        if callable(previous):
            previous(number, frame)  # Python's own: KeyboardInterrupt here

    def check() -> None:
        if seen.is_set():
            raise KeyboardInterrupt

    if previous in (signal.SIG_IGN, None):  # Ctrl-C ignored here (nohup): left so
        yield check
        return
    signal.signal(signal.SIGINT, noted)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)


# what a Ctrl-C in each step of a sync leaves, and what finishes it
_INTERRUPTED = {
    "fetch": "interrupted while fetching: nothing of this run was committed; the next run "
    "resumes from the last committed state",
    "load": "interrupted during the load: what it fetched stays in dlt's working folder, and "
    "the next run loads it first (nothing is fetched twice or lost), then resumes",
    "after": "interrupted after the load: its data is committed; the next run first finishes "
    "what this one left (deletes, history, files)",
    "models": "interrupted while the models were built: the data is committed, the marts "
    "are not rebuilt (the last build's stay); run `feedback-sync models` to build them",
}
_STEPS = {
    "starting": "fetch",
    "extract": "fetch",
    "normalize": "load",
    "load": "load",
    "loaded": "after",
    "reconcile": "after",
    "history": "after",
    "parquet": "after",
    "models": "models",
}


def interrupted_in(stage: str) -> str:
    """The one line a sync interrupted in ``stage`` (``Progress.current``) ends with."""
    return _INTERRUPTED[_STEPS.get(stage, "after")]


class _KeptOpen:
    """Keeps the DuckDB file open while the sync's steps run, so each step's connection
    (dlt's sql clients, each load job) joins the open database instead of opening the file
    again and closing it after (a checkpoint each time): about 20 ms each, a dozen times a
    run with nothing to do and once per load job (two per table) in a full sync. Closed
    before the models, which open it with their own settings.

    ``hold()`` opens it if the file exists; ``hold(create=True)`` opens it even if not, right
    before the load, which creates the file anyway (a first run into an empty folder).
    """

    def __init__(self, target: Target) -> None:
        self.path = target.duckdb_file()
        self.con: Any = None

    def hold(self, create: bool = False) -> None:
        path = self.path
        if self.con is not None or path is None:
            return
        if not path.exists() and not (create and path.parent.is_dir()):
            return
        import duckdb

        # dlt's own connect (DuckDbConnectionPool.borrow_conn): the same absolute path and no
        # settings, so DuckDB hands dlt's connections this same database
        self.con = duckdb.connect(str(path.absolute()))

    def release_memory(self) -> None:
        """What DuckDB cached for the step before goes back (``warehouse.duckdb``)."""
        if self.con is not None:
            from feedback_sync.warehouse.duckdb import release_memory

            if not release_memory(self.con, duckdb_memory_limit()):
                log.debug("DuckDB kept what it cached (another limit, or nothing evictable)")

    def __enter__(self) -> _KeptOpen:
        self.hold()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None


def _run_sync(
    target: Target,
    full: bool,
    selected: tuple[str, ...] | None,
    settings: FeedbackSettings,
    transport: httpx.BaseTransport | None,
    out: Progress,
    after_extract: Callable[[Pipeline], None] | None,
    sql_root: Path | None,
    keep_packages: int,
    started: float,
    entities: tuple[str, ...],
) -> SyncResult:
    result = SyncResult(
        target=target.describe(), full=full, delete_mode=settings.delete_mode, started=started
    )
    run_at = result.run_at = datetime.now(UTC)
    with _KeptOpen(target) as kept:
        pipeline = target.pipeline(take_over=True)  # the run lock is held
        owed, existing = _catch_up(target, pipeline, result, out, entities, settings.delete_mode)
        run = SyncRun(settings, full=full, transport=transport, warehouse_tables=existing)
        load_id = _extract(target, pipeline, run, selected, result, out)
        _collect_cycles()
        # what this run still owes after its load, kept where a crash cannot lose it
        journal = _Journal(pipeline)
        journal.write(load_id, result.complete, settings.delete_mode, run_at, result.gone)
        if after_extract is not None:
            after_extract(pipeline)
        with result.timed("load"):
            out.stage("load")
            kept.hold(create=True)
            _load(target, pipeline, load_id, existing, settings.delete_mode, result, out, kept)
            target.prune_state_history(pipeline)
            _prune_loaded_packages(pipeline, keep_packages)
            result.ideas_endpoint = run.ideas_endpoint
            result.skipped = dict(run.skipped)
        if entities:
            kept.release_memory()  # what the load's merges cached, before history's reads
            with result.timed("history"):
                out.stage("history")
                _record_history(
                    target, pipeline, entities, result, run_at, settings.delete_mode, out
                )
        with result.timed("load"):
            result.table_rows = target.table_counts(pipeline)
        if target.publish_step is not None:
            out.stage(target.publish_step)
            with result.timed(target.publish_step):
                result.exported = target.publish(
                    pipeline,
                    result.table_rows,
                    loaded=[*result.rows_loaded, *result.history_written()],
                    removed=result.rows_removed,
                    # an earlier run's load may not have been published
                    everything=bool(result.recovered_packages or owed is not None),
                )
        journal.clear()
    if sql_root is not None:
        _build_models(target, sql_root, result, out)
    result.seconds = time.perf_counter() - result.started
    return result


def _data_rows(normalize_info: Any) -> dict[str, int]:
    """Rows per data table that dlt's normalize step wrote for the load (not dlt's own)."""
    return {
        table: count
        for table, count in normalize_info.row_counts.items()
        if not table.startswith("_dlt")
    }


def _rows_now(target: Target, pipeline: Pipeline) -> dict[str, int]:
    """Rows per table the warehouse holds now; nothing where it holds no table yet (no
    warehouse file, or no schema known here: the restore finds it first)."""
    path = target.duckdb_file()
    if path is not None and not path.exists():
        return {}
    if not pipeline.default_schema_name:
        return {}
    return target.table_counts(pipeline)


def _collect_cycles() -> None:
    """Frees what only reference cycles hold once the extract is done, before the load.

    The extract leaves thousands of objects in reference cycles (7,700 at ``large``, dlt's
    decoded copies of the state among them: one entry per idea, in several resources),
    which only Python's full collection frees, and that may not come before the load. A
    collection here takes about 12 ms at ``large`` and gave back 10 MB; a normal sync's
    peak after a 1% change there went 256-261 -> 246-255 MB, ``medium`` unchanged (a
    ``/tmp`` sampler of the process's RSS). One before the extract found nothing to free.
    """
    gc.collect()


def _catch_up(
    target: Target,
    pipeline: Pipeline,
    result: SyncResult,
    out: Progress,
    entities: tuple[str, ...],
    mode: str,
) -> tuple[dict[str, int] | None, frozenset[str] | None]:
    """What earlier runs left is finished first: packages pending, deletes and history owed
    after a load, the state restored where the local one is not the warehouse's, first loads
    settled. Returns what the journal owed (rows removed, or None) and the tables the
    warehouse has (None where every table merges)."""
    # the rows before this run changes any (what a pending package or a journal of an
    # earlier run finishes counts in this run); with no local schema, nothing can be
    # pending and the tables are known once the state is restored
    known = bool(pipeline.default_schema_name)
    if known:
        result.rows_before = _rows_now(target, pipeline)
    if pipeline.has_pending_data:
        _recover(pipeline, target, result, out)
        if entities and not _Journal(pipeline).path.exists():
            # a pending package's changes get their versions before this run's own load
            # could change the same rows again (the journal's replay does it where it names
            # the package)
            # (in soft mode, rows marked deleted are not current: they get no version)
            _record_history(target, pipeline, entities, result, datetime.now(UTC), mode, out)
    owed = _Journal(pipeline).replay(target, pipeline, out, entities, result)
    if owed is not None:
        _add(result.rows_removed, owed)
    if not target.state_is_current(pipeline) and not _nothing_to_restore(pipeline, target):
        pipeline.sync_destination()
    if not known:
        result.rows_before = _rows_now(target, pipeline)
    existing = warehouse_tables(pipeline, target.duckdb_file())
    if existing:
        # what an earlier run left owing, wherever it ran: rows that were there before
        _add(result.rows_removed, settle(pipeline))
    return owed, existing


def _extract(
    target: Target,
    pipeline: Pipeline,
    run: SyncRun,
    selected: tuple[str, ...] | None,
    result: SyncResult,
    out: Progress,
) -> str | None:
    """Reads the API into a load package (the fetch); the package's load id, and in
    ``result`` the requests made and the resources read completely."""
    try:
        source = feedback(run=run)
        if selected:
            source = source.with_resources(*selected)
        chosen = list(source.selected_resources)
        out.stage("extract")
        kind = "full run" if run.full else "incremental run"
        if not run.full and not pipeline.state.get("sources", {}).get(SOURCE_NAME):
            kind = "first run (nothing synced here yet: it reads everything)"
        out.say(
            f"sync: {kind} of {', '.join(chosen)} "
            f"from {redact_url(run.settings.base_url)} into {target.describe()}"
        )
        fmt: Any = target.loader_format(pipeline)
        out.watch(lambda: _figures(run, result.rows_before))
        result.phases["start"] = time.perf_counter() - result.started
        with result.timed("fetch"):
            extract_info = pipeline.extract(
                source, loader_file_format=fmt, table_format=target.table_format
            )
        stats = run.client.stats
        result.requests, result.retries = stats.requests, stats.retries
        result.requests_by_resource = dict(stats.by_resource)
    finally:
        run.client.close()
    load_id = extract_info.loads_ids[-1] if extract_info.loads_ids else None
    result.load_id = load_id
    complete = set(run.complete)
    if run.full:
        complete |= COMPLETE_WHEN_FULL
    result.complete = sorted(complete & set(chosen))
    result.gone = {r: keys for r, keys in run.gone.items() if r in result.complete}
    result.unchanged = dict(run.unchanged)
    return load_id


def _load(
    target: Target,
    pipeline: Pipeline,
    load_id: str | None,
    existing: frozenset[str] | None,
    delete_mode: str,
    result: SyncResult,
    out: Progress,
    kept: _KeptOpen | None = None,
) -> None:
    """Normalizes and loads the package, then settles first loads, replaces stale child
    rows and removes what the resources read completely no longer hold. ``kept``: the
    DuckDB file held open, whose cache of the load's merges goes back before the child
    tables are read whole."""
    if existing is not None:
        # the tables this load may append to (any other) owe a settle after it
        owe(pipeline, existing)
    normalize_info, _ = _normalize_and_load(target, pipeline, out, first=existing == frozenset())
    _add(result.rows_loaded, _data_rows(normalize_info))
    if kept is not None and existing and any(result.rows_loaded.values()):
        # the merges' cache goes back first: replacing child rows reads every child table's
        # keys, and a normal sync's peak at ``large`` was there, on top of the merges'
        # (238 -> 231 MB, medians of 7 alternated, and 227-245 -> 228-233 MB). A load of no
        # row merged nothing: nothing to give back.
        kept.release_memory()
    settle(pipeline)  # one row per key in the tables this load appended to
    if load_id is not None and set(result.rows_loaded) & set(PARENT_KEYS):
        # a parent row came again: its child rows not in this load are gone
        _add(result.rows_removed, target.replace_children(pipeline, load_id, existing))
    if load_id is not None and result.complete:
        gone = ", ".join(result.complete)
        out.stage("reconcile")
        out.say(f"sync: removing rows the service no longer has ({gone}) ...")
        removed = target.reconcile(
            pipeline, load_id, result.complete, delete_mode, existing, result.gone
        )
        _add(result.rows_marked if delete_mode == "soft" else result.rows_removed, removed)


def _record_history(
    target: Target,
    pipeline: Pipeline,
    entities: tuple[str, ...],
    result: SyncResult,
    run_at: datetime,
    mode: str,
    out: Progress,
    complete: Sequence[str] | None = None,
) -> None:
    """Keeps a version of each tracked row that changed (``warehouse/history.py``).

    A failure here does not fail the sync's data: it is kept in ``result.history_error``
    (the command then exits 1), and since the step compares the whole current state, the
    next run records the same changes. Raised instead, it would fail every later run in
    the journal's replay, before any fetch."""
    if not entities:
        return
    out.say(f"sync: recording history ({', '.join(entities)}) ...")
    done = result.complete if complete is None else complete
    try:
        recorded = target.record_history(pipeline, entities, done, run_at, mode)
    except Exception as exc:  # the data is loaded; this run says the history failed
        if interrupted(exc):  # Ctrl-C inside a statement: the run stops, not the step
            raise
        said, _ = explain(exc)
        text = str(exc).strip().splitlines()
        result.history_error = said or f"{type(exc).__name__}: {text[0] if text else 'no detail'}"
        log.warning("the history step failed; the next run tries again: %s", exc)
        return
    for table, done_here in recorded.items():
        mine = result.versions.setdefault(table, history.Recorded())
        mine.opened += done_here.opened
        mine.closed += done_here.closed
        mine.rows = done_here.rows


def _build_models(target: Target, root: Path, result: SyncResult, out: Progress) -> None:
    """Builds the SQL models of ``root``; a failure is kept in the result (the synced data
    stays)."""
    out.stage("models")
    out.say("sync: building the SQL models ...")
    with result.timed("models"):
        from feedback_sync.models.project import apply as apply_models
        from feedback_sync.models.project import load_project

        try:
            result.models = apply_models(target, load_project(root), reuse=True)
        except ModelError as exc:
            result.models_error = str(exc)


def _nothing_to_restore(pipeline: Pipeline, target: Target) -> bool:
    """Whether dlt's restore (``sync_destination``) could only find nothing: a pipeline
    with no local state and no DuckDB file yet. dlt would create the file to look in it
    (0.05-0.1 s of a first run); with local state it must run (a warehouse file deleted
    since wipes the state, so the next run starts over)."""
    path = target.duckdb_file()
    return path is not None and not path.exists() and not pipeline.has_data


def _recover(pipeline: Pipeline, target: Target, result: SyncResult, out: Progress) -> None:
    """Loads what a run that died left pending; a package that cannot load is given up.

    Giving a package up loses nothing: its state was never committed, so this run reads its
    rows again from the cursors the destination holds.
    """
    out.say("sync: loading what the previous run left pending ...")
    result.recovered_packages = len(pipeline.list_extracted_load_packages()) + len(
        pipeline.list_normalized_load_packages()
    )
    existing = warehouse_tables(pipeline, target.duckdb_file())
    if existing is not None:
        owe(pipeline, existing)  # the pending package may append to new tables
    try:
        normalized, recovered = _normalize_and_load(target, pipeline, out)
        _add(result.rows_loaded, _data_rows(normalized))
    except LoadFailed as exc:
        out.say(f"sync: a package an earlier run left could not be loaded: {exc}")
        recovered = None
    for loaded in recovered.loads_ids if recovered is not None else ():
        _add(result.rows_removed, target.replace_children(pipeline, loaded))
    if pipeline.has_pending_data:
        # dlt could not even start on them (say, a run killed before its schema was saved)
        out.say("sync: giving up packages dlt cannot load; their rows are read again")
        pipeline.abort_packages()


def _add(totals: dict[str, int], counts: dict[str, int]) -> None:
    for table, count in counts.items():
        totals[table] = totals.get(table, 0) + count


def _normalize_and_load(
    target: Target, pipeline: Pipeline, out: Progress | None = None, *, first: bool = False
) -> tuple[Any, Any]:
    """Normalizes and loads; a package dlt gives up on for good does not stay behind.

    The state saved at extract (new cursors) travels in the package. A load job that fails
    terminally (dlt's ``auto_abort_on_terminal_error``, set in ``warehouse.Target``) aborts
    the package: nothing of it is committed in ``_dlt_loads``, its state with it, and dlt
    rewinds the local state. Local state is dropped as well, so the next run restores the
    state the destination holds and reads the same rows again; it is never wedged retrying a
    package that cannot load. A transient failure (a lock, a lost connection) leaves the
    package pending for the next run to load first.

    Tables the package appended to (new to the warehouse: no staging copy held them back)
    may hold rows of the aborted package: ``appends.settle`` deletes them (should that
    fail, its record in the warehouse has the next run do it).

    Raises:
        LoadFailed: a load job failed for good; names the table, the column where the
            warehouse says which, and its reason.
    """
    from dlt.common.exceptions import SignalReceivedException
    from dlt.common.runtime import signals

    try:
        # dlt intercepts Ctrl-C in its steps and stops at its next check; a signal that
        # comes after its last check it forgets when the step ends, and the run would go
        # on. Held here around both steps, it stops the run once the load is done.
        intercept = pipeline.runtime_config.intercept_signals  # dlt's own setting holds
        with signals.intercepted_signals() if intercept else contextlib.nullcontext():
            if out is not None:
                out.stage("normalize")
                out.say("sync: normalizing ...")
            info = pipeline.normalize()
            if out is not None:
                out.stage("load")
                out.say("sync: loading ...")
            loaded = target.load(pipeline, first=first)
            if out is not None:
                out.stage("loaded")  # committed: a Ctrl-C from here on comes after the load
            signals.raise_if_signalled()
    except SignalReceivedException:
        raise  # the package stays as dlt left it: pending, or loaded
    except Exception as exc:
        if not pipeline.has_pending_data:
            log.warning(
                "the load was abandoned; dropping local state so the next run resumes "
                "from the state the destination holds"
            )
            pipeline.drop()
            _settle_after_abort(pipeline)
        failed = terminal_job_failure(exc)
        if failed is not None:
            raise LoadFailed(failed) from exc
        raise
    return info, loaded


_LOAD_ID = re.compile(r"\d+(\.\d+)?")


def _settle_after_abort(pipeline: Pipeline) -> None:
    """Deletes an aborted package's rows from the tables it appended to; best effort (the
    load's own error is the one reported, and the record stays for the next run)."""
    try:
        settle(pipeline)
    except Exception as exc:
        log.warning("the aborted load's appended rows are left for the next run: %s", exc)


def _prune_loaded_packages(pipeline: Pipeline, keep: int) -> None:
    """Deletes all but the newest ``keep`` loaded packages from dlt's working folder (0 keeps
    all; ``warehouse.KEEP_LOADED_PACKAGES``)."""
    if keep <= 0:
        return
    from dlt.common.storages import LoadStorage, LoadStorageConfiguration

    try:
        storage = LoadStorage(
            False,
            [],
            LoadStorageConfiguration(load_volume_path=os.path.join(pipeline.working_dir, "load")),
        )
        # load ids are Unix timestamps, so their numbers order the packages; a folder not
        # named like one is not dlt's package and is left alone
        numbered = [i for i in storage.list_loaded_packages() if _LOAD_ID.fullmatch(i)]
        for load_id in sorted(numbered, key=float)[:-keep]:
            storage.delete_loaded_package(load_id)
    except Exception as exc:  # housekeeping must not fail a good run
        log.warning("could not delete old load packages: %s", exc)


class _Journal:
    """What a run owes after its load (reconcile, Parquet export), in dlt's working folder.

    Written before the load and cleared at the end of the run; a run that finds one replays
    it once the package it names has landed, so a crash between load and reconcile (or
    export) cannot leave deletes unapplied or Parquet files stale.
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self.path = Path(pipeline.working_dir) / "feedback_sync_journal.json"

    def write(
        self,
        load_id: str | None,
        complete: list[str],
        mode: str,
        run_at: datetime,
        gone: dict[str, list[str]],
    ) -> None:
        body = {
            "load_id": load_id,
            "complete": complete,
            "mode": mode,
            "run_at": run_at.isoformat(),
            "gone": gone,
        }
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(body))
        os.replace(partial, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def replay(
        self,
        target: Target,
        pipeline: Pipeline,
        out: Progress,
        entities: tuple[str, ...] = (),
        result: SyncResult | None = None,
    ) -> dict[str, int] | None:
        """Does what the last run left undone (child rows, deletes, history versions, at
        that run's time); rows removed, or None when nothing was owed."""
        if not self.path.exists():
            return None
        body = json.loads(self.path.read_text())
        load_id = body.get("load_id")
        if not load_id or not target.load_completed(pipeline, load_id):
            self.clear()  # its package never landed: nothing to finish
            return None
        out.say("sync: finishing what the previous run left after its load ...")
        removed = target.replace_children(pipeline, load_id)
        reconciled = target.reconcile(
            pipeline,
            load_id,
            body.get("complete", []),
            body.get("mode", "hard"),
            gone=body.get("gone") or {},
        )
        if body.get("mode", "hard") != "soft":
            _add(removed, reconciled)
        elif result is not None:  # rows marked deleted stay: they are not removed
            _add(result.rows_marked, reconciled)
        if entities and result is not None:
            run_at = _journal_time(body.get("run_at"))
            mode = body.get("mode", "hard")
            complete = body.get("complete", [])
            _record_history(target, pipeline, entities, result, run_at, mode, out, complete)
        self.clear()
        return removed


def _journal_time(raw: Any) -> datetime:
    """The journaled run's time (a journal from before history kept none: now)."""
    try:
        moment = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        moment = None
    return moment if moment is not None and moment.tzinfo is not None else datetime.now(UTC)
