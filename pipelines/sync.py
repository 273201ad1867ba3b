"""``feedback-sync sync``: one run of the forward sync, from the API into the warehouse.

Order of a run:

1. finish what a run that died left behind (extracted or normalized packages not loaded),
   then align the local state with the destination's;
2. extract (the source streams pages; progress is printed every few seconds), normalize,
   load: state travels in the same load package as the data, so it is committed with it;
3. reconcile deletes for the resources read completely;
4. for Parquet, write the touched tables out;
5. summarize.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import httpx
from dlt.pipeline.pipeline import Pipeline

from pipelines.export import data_tables, export_parquet
from pipelines.feedback import RESOURCES, SyncRun, feedback
from pipelines.feedback.errors import ConfigError
from pipelines.feedback.settings import FeedbackSettings, load_settings
from pipelines.reconcile import reconcile
from pipelines.warehouse import Target

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
    rows_loaded: dict[str, int] = field(default_factory=dict)
    rows_removed: dict[str, int] = field(default_factory=dict)
    table_rows: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    complete: list[str] = field(default_factory=list)
    ideas_endpoint: bool | None = None
    recovered_packages: int = 0
    load_id: str | None = None
    exported: dict[str, int] = field(default_factory=dict)
    delete_mode: str = "hard"

    def summary(self) -> str:
        """A short, readable account of the run."""
        kind = "full sync" if self.full else "sync"
        lines = [
            f"{kind} into {self.target} finished in {self.seconds:.1f}s: "
            f"{self.requests:,} requests ({self.retries:,} retried)"
        ]
        if self.recovered_packages:
            lines.append(
                f"  first loaded {self.recovered_packages} package(s) a previous run left pending"
            )
        removed_word = "marked deleted" if self.delete_mode == "soft" else "removed"
        width = max([len(t) for t in self.table_rows] + [5])
        lines.append(f"  {'table':<{width}}  {'loaded':>9}  {removed_word:>14}  {'now':>10}")
        for table in sorted(self.table_rows):
            lines.append(
                f"  {table:<{width}}  {self.rows_loaded.get(table, 0):>9,}  "
                f"{self.rows_removed.get(table, 0):>14,}  {self.table_rows[table]:>10,}"
            )
        if self.ideas_endpoint is False:
            lines.append("  /ideas is not served: ideas were discovered from other resources")
        for resource, count in sorted(self.skipped.items()):
            lines.append(f"  {resource}: skipped {count} idea(s) that no longer exist (404)")
        if self.exported:
            lines.append(f"  wrote {len(self.exported)} Parquet file(s)")
        return "\n".join(lines)


class Progress:
    """Prints what the run has fetched so far, every ``every`` seconds, until stopped."""

    def __init__(self, run: SyncRun, out: IO[str], every: float = 5.0) -> None:
        self._run = run
        self._out = out
        self._every = every
        self._stop = threading.Event()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="sync-progress", daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self.line()

    def line(self) -> None:
        stats = self._run.client.stats
        parts = [
            f"{name} {stats.rows_by_resource.get(name, 0):,}"
            for name in RESOURCES
            if stats.by_resource.get(name)
        ]
        print(
            f"sync: {time.perf_counter() - self._started:5.1f}s  {stats.requests:,} requests "
            f"({stats.retries:,} retried); rows fetched: {', '.join(parts) or 'none yet'}",
            file=self._out,
            flush=True,
        )


def check_resources(names: Sequence[str] | None) -> tuple[str, ...] | None:
    if not names:
        return None
    unknown = [n for n in names if n not in RESOURCES]
    if unknown:
        raise ConfigError(
            f"--resources: unknown {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(RESOURCES)}"
        )
    return tuple(dict.fromkeys(names))


def run_sync(
    target: Target,
    *,
    full: bool = False,
    resources: Sequence[str] | None = None,
    settings: FeedbackSettings | None = None,
    transport: httpx.BaseTransport | None = None,
    out: IO[str] = sys.stderr,
    progress_every: float = 5.0,
    after_extract: Callable[[Pipeline], None] | None = None,
) -> SyncResult:
    """Runs one sync into ``target`` and returns what it did.

    Raises:
        ConfigError: a setting or an argument is wrong (nothing was fetched).
        FeedbackError / dlt's PipelineStepFailed: the run failed; what was loaded before
            stays, and the next run resumes from the last committed state.
    """
    selected = check_resources(resources)
    settings = settings or load_settings()
    started = time.perf_counter()
    result = SyncResult(target=target.describe(), full=full, delete_mode=settings.delete_mode)
    pipeline = target.pipeline()
    fmt: Any = target.loader_file_format

    if pipeline.has_pending_data:
        print("sync: loading what the previous run left pending ...", file=out, flush=True)
        result.recovered_packages = len(pipeline.list_extracted_load_packages()) + len(
            pipeline.list_normalized_load_packages()
        )
        pipeline.normalize()
        pipeline.load()
    pipeline.sync_destination()

    run = SyncRun(settings, full=full, transport=transport)
    try:
        source = feedback(run=run)
        if selected:
            source = source.with_resources(*selected)
        chosen = list(source.selected_resources)
        print(
            f"sync: {'full' if full else 'incremental'} run of {', '.join(chosen)} "
            f"from {settings.base_url} into {target.describe()}",
            file=out,
            flush=True,
        )
        with Progress(run, out, progress_every):
            extract_info = pipeline.extract(source, loader_file_format=fmt)
        stats = run.client.stats
        result.requests, result.retries = stats.requests, stats.retries
        result.requests_by_resource = dict(stats.by_resource)
    finally:
        run.client.close()
    if after_extract is not None:
        after_extract(pipeline)
    load_id = extract_info.loads_ids[-1] if extract_info.loads_ids else None
    result.load_id = load_id
    print("sync: normalizing and loading ...", file=out, flush=True)
    normalize_info = pipeline.normalize()
    pipeline.load()
    result.rows_loaded = {
        table: count
        for table, count in normalize_info.row_counts.items()
        if not table.startswith("_dlt")
    }

    complete = set(run.complete)
    if full:
        complete |= {"comments", "integration_links"}
    result.complete = sorted(complete & set(chosen))
    if load_id is not None and result.complete:
        result.rows_removed = reconcile(pipeline, load_id, result.complete, settings.delete_mode)

    result.ideas_endpoint = run.ideas_endpoint
    result.skipped = dict(run.skipped)
    result.table_rows = table_counts(pipeline)
    if target.is_parquet:
        touched = set(result.rows_loaded) | set(result.rows_removed)
        for root in result.rows_removed:
            touched |= {t for t in result.table_rows if t.startswith(f"{root}__")}
        missing = {
            t for t in result.table_rows if not (target.parquet_dir / f"{t}.parquet").exists()
        }
        result.exported = export_parquet(
            pipeline, target.parquet_dir, sorted((touched | missing) & set(result.table_rows))
        )
    result.seconds = time.perf_counter() - started
    return result


def table_counts(pipeline: Pipeline) -> dict[str, int]:
    """Rows per data table in the destination (empty when nothing was loaded yet)."""
    counts: dict[str, int] = {}
    try:
        tables = data_tables(pipeline)
    except Exception:
        tables = [
            name for name in pipeline.default_schema.data_table_names() if not name.startswith("_")
        ]
    with pipeline.sql_client() as client:
        for table in tables:
            rows = client.execute_sql(
                f"select count(*) from {client.make_qualified_table_name(table)}"
            )
            counts[table] = int(rows[0][0]) if rows else 0
    return counts
