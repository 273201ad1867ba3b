"""dlt's load packages in a warehouse's working folder: loading one, finishing what a run
that died left pending, and deleting old loaded ones.

The state saved at extract (new cursors) travels in the package, so it is committed with
the data or not at all. A load job that fails for good (dlt's
``auto_abort_on_terminal_error``, set in ``Target.pipeline``) aborts the package: nothing of
it is committed in ``_dlt_loads``, its state with it, and dlt rewinds the local state. The
local state is dropped as well, so the next run restores the state the destination holds and
reads the same rows again: it is never wedged retrying a package that cannot load. A
transient failure (a lock, a lost connection) leaves the package pending for the next run
to load first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from feedback_sync.errors import LoadFailed, causes
from feedback_sync.progress import Progress
from feedback_sync.warehouse.appends import owe, settle, warehouse_tables

if TYPE_CHECKING:
    from dlt.pipeline.pipeline import Pipeline

    from feedback_sync.warehouse.target import Target

log = logging.getLogger("feedback_sync")

# a loaded package's folder is named by its load id, a Unix timestamp
_LOAD_ID = re.compile(r"\d+(\.\d+)?")
# a destination's words for the column of a value it refused (PostgreSQL's COPY)
_SOURCE_COLUMN = re.compile(r'source column "?([^"\s]+)"?')


@dataclass
class Loaded:
    """What a load did: rows written per data table (dlt's normalize counts) and the load
    ids that landed."""

    rows: dict[str, int] = field(default_factory=dict)
    load_ids: list[str] = field(default_factory=list)


@dataclass
class Recovered:
    """What loading an earlier run's pending packages did."""

    packages: int = 0
    rows_loaded: dict[str, int] = field(default_factory=dict)
    rows_removed: dict[str, int] = field(default_factory=dict)


def normalize_and_load(
    target: Target, pipeline: Pipeline, out: Progress | None = None, *, first: bool = False
) -> Loaded:
    """Normalizes and loads what ``pipeline`` extracted; a package dlt gives up on for good
    does not stay behind (see the module). ``first``: the warehouse holds none of the
    tables yet. Tables the package appended to may hold rows of an aborted package:
    ``appends.settle`` deletes them (should that fail, its record in the warehouse has the
    next run do it).

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
            _stage(out, "normalize", "normalizing")
            info = pipeline.normalize()
            _stage(out, "load", "loading")
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
    rows = {t: n for t, n in info.row_counts.items() if not t.startswith("_dlt")}
    return Loaded(rows=rows, load_ids=list(loaded.loads_ids))


def _stage(out: Progress | None, stage: str, doing: str) -> None:
    if out is not None:
        out.stage(stage)
        out.say(f"sync: {doing} ...")


def load_pending(target: Target, pipeline: Pipeline, out: Progress) -> Recovered:
    """Loads what a run that died left pending; a package that cannot load is given up.

    Giving a package up loses nothing: its state was never committed, so this run reads its
    rows again from the cursors the destination holds.
    """
    out.say("sync: loading what the previous run left pending ...")
    done = Recovered(
        packages=len(pipeline.list_extracted_load_packages())
        + len(pipeline.list_normalized_load_packages())
    )
    existing = warehouse_tables(pipeline, target.exists())
    if existing is not None:
        owe(pipeline, existing)  # the pending package may append to new tables
    try:
        loaded = normalize_and_load(target, pipeline, out)
    except LoadFailed as exc:
        out.say(f"sync: a package an earlier run left could not be loaded: {exc}")
        loaded = Loaded()
    done.rows_loaded = loaded.rows
    for load_id in loaded.load_ids:
        add(done.rows_removed, target.replace_children(pipeline, load_id))
    if pipeline.has_pending_data:
        # dlt could not even start on them (say, a run killed before its schema was saved)
        out.say("sync: giving up packages dlt cannot load; their rows are read again")
        pipeline.abort_packages()
    return done


def add(totals: dict[str, int], counts: dict[str, int]) -> None:
    """Adds ``counts`` into ``totals``, table by table."""
    for table, count in counts.items():
        totals[table] = totals.get(table, 0) + count


def terminal_job_failure(exc: BaseException) -> str | None:
    """One line for a load job that failed for good, or None for any other failure."""
    from dlt.load.exceptions import LoadClientJobFailed

    for error in causes(exc):
        if isinstance(error, LoadClientJobFailed):
            table = str(error.job_id).split(".", 1)[0]
            # the destination's own message; dlt's failed_message is a whole traceback
            own = str(error.client_exception or "").strip()
            told = own or str(error.failed_message)
            lines = [line.strip() for line in told.splitlines() if line.strip()]
            lines = lines or ["no reason given"]
            reason = lines[0] if own else lines[-1]
            column = _SOURCE_COLUMN.search(reason)
            where = f"table {table}" + (f", column {column.group(1)}" if column else "")
            return (
                f"the warehouse refused the load of {where}: {reason}. The run's load package "
                "was aborted: its state was not committed, so the next run reads its rows "
                "again"
            )
    return None


def _settle_after_abort(pipeline: Pipeline) -> None:
    """Deletes an aborted package's rows from the tables it appended to; best effort (the
    load's own error is the one reported, and the record stays for the next run)."""
    try:
        settle(pipeline)
    except Exception as exc:
        log.warning("the aborted load's appended rows are left for the next run: %s", exc)


def prune_loaded(pipeline: Pipeline, keep: int) -> None:
    """Deletes all but the newest ``keep`` loaded packages from dlt's working folder (0 keeps
    all; ``target.KEEP_LOADED_PACKAGES``)."""
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
