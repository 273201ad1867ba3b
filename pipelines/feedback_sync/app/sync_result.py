"""What a sync did (``SyncResult``), for its summary, ``--json``, the flows and the tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from feedback_sync.source.screening import REJECTED_TABLE
from feedback_sync.warehouse import history

if TYPE_CHECKING:
    from feedback_sync.models.project import BuildResult


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
    # (dlt's extract), wait (only where the run waited after the fetch for its turn at a
    # DuckDB file another dataset's run was writing), load (normalize, load, stale child
    # rows and deletes, the tables' counts), history (the history step, where one is
    # kept), then parquet and models when they ran
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
