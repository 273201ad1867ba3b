"""The fault matrix: each fault kind at each rate, against a full sync, a normal sync, a push.

One cell is one fault kind at one rate (``faults.rate``, ``faults.kinds=[kind]`` at the
sandbox, seeded), on a fresh ``tiny`` sandbox and an empty warehouse:

- **full sync**, then **normal sync** (after seeded creates at the server, which a normal
  run must fetch): each either ends equal to the server's ground truth, row by row, with no
  key twice, or fails with a one-line message and leaves the warehouse exactly as it was
  before the run (every table's rows, ``_dlt_loads`` and the saved state included);
- **push**: followers from a curated table and a note per idea, pushed under the same
  faults, run again (up to ``PUSH_RUNS`` runs) while a run reports rows it could not settle.
  Then, with faults off, a preview must plan nothing (no write lost), and the server's
  request log must show no write applied twice (same method, path and body).

``rate_limit_cell`` checks the pacing: against a server limited to ``RATE_LIMIT`` requests
per second, which the client is not told, the most requests that reached the server in
any one second.
"""

from __future__ import annotations

import io
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from feedback_sync.app.failures import explain
from feedback_sync.push.kinds.base import marked_key
from feedback_sync.push.run import PushOptions, run_push
from feedback_sync.push.settings import PushSettings
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import serve_in_thread

from tests.push.helpers import BOT, accounts, write_csv
from tests.sync.harness import COLUMNS, Harness, expected_rows

KINDS = ("429", "429_bare", "500", "502", "503", "stall", "drop", "truncate")
RATES = (0.01, 0.10, 0.30)
CHECKS = ("full sync", "normal sync", "push")
SCALE = "tiny"
KEY = "reliability-key-3f9c"
TIMEOUT_SECONDS = 1.0  # the client's; a stall lasts longer
STALL_SECONDS = 1.5
PUSH_RUNS = 4
PAGE_SIZE = 2  # many pages: a 1% rate still meets faults
RATE_LIMIT = 20.0
# what a normal run must fetch (creates: a normal run reads new rows, not edits)
CHANGES = {"followers": {"create": 4}, "comments": {"create": 6}, "announcements": {"create": 2}}
_NOT_APPLIED = {"429", "429_bare", "500", "502", "503"}  # answered before the API acted
_WRITES = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass
class Cell:
    """What one check met under one fault kind at one rate."""

    check: str
    kind: str
    rate: float
    outcome: str = ""  # "equal", "failed cleanly", or what went wrong
    runs: int = 1
    requests: int = 0
    faults: int = 0
    rows_compared: int = 0
    rows_lost: int = 0
    rows_unexpected: int = 0
    duplicates: int = 0
    writes: int = 0
    writes_twice: int = 0
    writes_lost: int = 0
    seconds: float = 0.0
    message: str = ""

    @property
    def ok(self) -> bool:
        clean = self.outcome in ("equal", "failed cleanly")
        counts = (self.rows_lost, self.rows_unexpected, self.duplicates)
        return clean and not any(counts) and not self.writes_twice and not self.writes_lost


@contextmanager
def _sandbox(seed: int, workdir: Path) -> Iterator[Harness]:
    app = create_app(SCALE, seed, api_key=KEY)
    with serve_in_thread(app) as server:
        harness = Harness(server, workdir)
        harness.overrides = {"timeout_seconds": TIMEOUT_SECONDS, "page_size": PAGE_SIZE}
        try:
            yield harness
        finally:
            harness.close()


def _faults(harness: Harness, kind: str, rate: float, seed: int) -> None:
    harness.switches(
        faults={
            "rate": rate,
            "seed": seed,
            "kinds": kind.split("+"),  # "502+drop": either, drawn per fault
            "stall_seconds": STALL_SECONDS,
            "retry_after_seconds": 1,
        }
    )


def sync_cells(kind: str, rate: float, seed: int, workdir: Path) -> list[Cell]:
    """A full sync, then a normal sync after seeded creates, under ``kind`` at ``rate``."""
    with _sandbox(seed, workdir) as harness:
        _faults(harness, kind, rate, seed)
        full = _sync_cell(harness, "full sync", kind, rate, full=True)
        harness.mutate(seed=seed, counts=CHANGES)
        normal = _sync_cell(harness, "normal sync", kind, rate, full=False)
    return [full, normal]


def exhausted_cell(kind: str, seed: int, workdir: Path) -> Cell:
    """Retries that run out: after a clean full sync and seeded creates, every request
    meets ``kind`` and the client gives up after 2 retries. The run must fail with one line
    and leave the warehouse (and its saved state) exactly as it was."""
    with _sandbox(seed, workdir) as harness:
        harness.sync(full=True)
        harness.mutate(seed=seed, counts=CHANGES)
        _faults(harness, kind, 1.0, seed)
        harness.overrides["max_retries"] = 2
        cell = _sync_cell(harness, "retries run out", kind, 1.0, full=False)
        # and the next run, faults gone, recovers by itself
        harness.switches(faults={"rate": 0.0})
        recovered = _sync_cell(harness, "after", kind, 0.0, full=False)
    if cell.outcome == "failed cleanly" and recovered.outcome != "equal":
        cell.outcome = f"the next run did not recover: {recovered.outcome}"
    cell.rows_compared = recovered.rows_compared
    return cell


def _sync_cell(harness: Harness, check: str, kind: str, rate: float, *, full: bool) -> Cell:
    cell = Cell(check, kind, rate)
    before = fingerprint(harness)
    harness.mark_requests()
    started = time.perf_counter()
    try:
        harness.sync(full=full)
    except Exception as exc:
        message, _ = explain(exc)
        cell.message = message or f"{type(exc).__name__}: {exc}"
        after = fingerprint(harness)
        if message is None or "\n" in message:
            cell.outcome = "failed without a one-line message"
        elif after != before:
            changed = sorted(t for t in {*before, *after} if before.get(t) != after.get(t))
            cell.outcome = f"failed and changed {', '.join(changed)}"
        else:
            cell.outcome = "failed cleanly"
    else:
        compare(harness, cell)
    cell.seconds = time.perf_counter() - started
    log = harness.requests()
    cell.requests = len(log)
    cell.faults = sum(1 for r in log if r["fault"])
    return cell


def fingerprint(harness: Harness) -> dict[str, tuple[int, str]]:
    """``{schema.table: (rows, hash of all rows)}`` of the warehouse (dlt's working staging
    dataset aside: it is the load's scratch space, emptied by every load)."""
    path = harness.target().duckdb_file()
    if path is None or not path.exists():
        return {}
    out: dict[str, tuple[int, str]] = {}
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.execute(
            "select table_schema, table_name from information_schema.tables "
            "where table_type = 'BASE TABLE' and table_schema <> 'feedback_staging'"
        ).fetchall()
        for schema, table in tables:
            row = con.execute(
                f'select count(*), coalesce(sum(hash(t)), 0)::varchar from "{schema}"."{table}" t'
            ).fetchone()
            assert row is not None
            out[f"{schema}.{table}"] = (int(row[0]), str(row[1]))
    return out


def compare(harness: Harness, cell: Cell) -> None:
    """Every table against the server's ground truth, and no key twice."""
    truth = expected_rows(harness.dump())
    for table in COLUMNS:
        expected = truth[table]
        try:
            actual = harness.table_rows(table)
        except duckdb.CatalogException:
            actual = Counter()
        cell.rows_compared += sum(expected.values())
        cell.rows_lost += sum((expected - actual).values())
        cell.rows_unexpected += sum((actual - expected).values())
    cell.duplicates = keys_twice(harness)
    history_lost, history_twice = history_problems(harness)
    cell.rows_lost += history_lost
    cell.duplicates += history_twice
    problems = cell.rows_lost or cell.rows_unexpected or cell.duplicates
    cell.outcome = "equal" if not problems else "differs from the ground truth"


def keys_twice(harness: Harness) -> int:
    """Rows beyond the first per key, in every table (a root's idx, a child's parent key
    and position)."""
    twice = 0
    for con in harness.connect():
        for table in COLUMNS:
            key = "idx" if "__" not in table else f"{COLUMNS[table][0]}, _dlt_list_idx"
            try:
                row = con.execute(
                    f'select count(*) - count(distinct ({key})) from feedback."{table}"'
                ).fetchone()
            except duckdb.CatalogException:
                continue
            except Exception as exc:  # PostgreSQL: a table no row reached yet
                if type(exc).__name__ != "UndefinedTable":
                    raise
                continue
            twice += int(row[0]) if row else 0
    return twice


# history table -> its key column
HISTORY_KEYS = {"ideas_history": "idea_idx", "companies_history": "company_id"}


def history_problems(harness: Harness) -> tuple[int, int]:
    """``(gaps, twice)`` in the history tables: a current row whose current version is
    missing or says otherwise (its status and name; a company's spend and name from its most
    recently updated follower's copy, computed here), and versions of one key that overlap
    or are current twice. Zeros where the warehouse keeps no history."""
    gaps = twice = 0
    for con in harness.connect():
        tables = {
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = 'feedback'"
            ).fetchall()
        }
        for table, key in HISTORY_KEYS.items():
            if table not in tables:
                continue
            rows = con.execute(
                f'select {key}, valid_from, valid_to, is_current from feedback."{table}" '
                f"order by {key}, valid_from, valid_to nulls last"
            ).fetchall()
            last: dict[str, Any] = {}
            for k, valid_from, valid_to, is_current in rows:
                before = last.get(k)
                if before is not None and (before[1] is None or before[1] > valid_from):
                    twice += 1  # overlaps the version before, or a second current one
                if is_current != (valid_to is None):
                    twice += 1
                last[k] = (valid_from, valid_to)
        if "ideas_history" in tables:
            ideas = {
                r[0]: (r[1], r[2])
                for r in con.execute("select idx, status_idx, name from feedback.ideas").fetchall()
            }
            current = {
                r[0]: (r[1], r[2])
                for r in con.execute(
                    "select idea_idx, status_idx, name from feedback.ideas_history where is_current"
                ).fetchall()
            }
            gaps += sum(1 for idx, row in ideas.items() if current.get(idx) != row)
        if "companies_history" in tables:
            stamps = dict(con.execute("select idx, updated_at from feedback.followers").fetchall())
            newest: dict[str, tuple[Any, ...]] = {}
            for follower, company, spend, name in con.execute(
                "select follower_idx, id, monthly_spend, name from feedback.followers__companies"
            ).fetchall():
                if follower not in stamps or company is None:
                    continue
                rank = (stamps[follower], follower)
                if company not in newest or rank > newest[company][0]:
                    newest[company] = (rank, spend, name)
            current = {
                r[0]: (r[1], r[2])
                for r in con.execute(
                    "select company_id, monthly_spend, name from feedback.companies_history "
                    "where is_current"
                ).fetchall()
            }
            gaps += sum(1 for c, (_, *row) in newest.items() if current.get(c) != tuple(row))
    return gaps, twice


def push_cell(kind: str, rate: float, seed: int, workdir: Path) -> Cell:
    """Followers and idea notes pushed under ``kind`` at ``rate``, run again until settled."""
    cell = Cell("push", kind, rate, runs=0)
    with _sandbox(seed, workdir) as harness:
        harness.sync(full=True)
        curated = workdir / "curated"
        write_csv(curated / "accounts.csv", accounts(harness.dump(), n=8))
        settings = PushSettings(curated_dir=curated, note_author_email=BOT, sample_size=1)
        _faults(harness, kind, rate, seed)
        harness.mark_requests()
        started = time.perf_counter()
        messages = []
        for _ in range(PUSH_RUNS):
            cell.runs += 1
            try:
                result = run_push(
                    harness.target(),
                    PushOptions(targets=["followers", "idea_notes"], apply=True),
                    settings=harness.settings(),
                    push_settings=settings,
                    out=io.StringIO(),
                )
            except Exception as exc:
                message, _ = explain(exc)
                messages.append(message or f"{type(exc).__name__}: {exc}")
                continue
            if result.exit_code() == 0:
                break
            messages.append(result.error or "some rows were not settled")
        cell.seconds = time.perf_counter() - started
        log = harness.requests()
        harness.switches(faults={"rate": 0.0})
        cell.requests = len(log)
        cell.faults = sum(1 for r in log if r["fault"])
        after = push_aftermath(harness, log, settings)
        cell.writes, cell.writes_twice, cell.writes_lost, cell.duplicates = after
    cell.message = messages[-1] if messages else ""
    problems = cell.writes_twice or cell.writes_lost or cell.duplicates
    cell.outcome = "equal" if not problems else "writes lost or sent twice"
    return cell


def push_aftermath(
    harness: Harness,
    log: list[dict[str, Any]],
    settings: PushSettings,
    targets: tuple[str, ...] = ("followers", "idea_notes"),
) -> tuple[int, int, int, int]:
    """After pushes (faults off now): ``(writes applied, applied twice, left to send,
    objects twice at the server)``. Applied: a write the API acted on (no fault answered
    in its place, a 2xx status), keyed by method, path and body hash."""
    applied = Counter(
        (r["method"], r["path"], r["body_sha256"])
        for r in log
        if r["method"] in _WRITES
        and r["fault"] not in _NOT_APPLIED
        and r["status"] is not None
        and r["status"] < 300
    )
    twice = sum(n - 1 for n in applied.values() if n > 1)
    # nothing may be left to do: a preview plans no change
    preview = run_push(
        harness.target(),
        PushOptions(targets=list(targets)),
        settings=harness.settings(),
        push_settings=settings,
        out=io.StringIO(),
    )
    left = preview.totals()
    lost = sum(left[action] for action in ("create", "update", "delete", "held"))
    dump = harness.dump()
    notes = Counter(
        marked_key(c["message"], "idea_notes")
        for c in dump["comments"]
        if marked_key(c["message"], "idea_notes")
    )
    emails = Counter(f["email"].lower() for f in dump["followers"])
    doubled = sum(n - 1 for n in notes.values() if n > 1)
    doubled += sum(n - 1 for n in emails.values() if n > 1)
    return sum(applied.values()), twice, lost, doubled


def rate_limit_cell(seed: int, workdir: Path) -> tuple[Cell, float]:
    """A full sync against a server limited to ``RATE_LIMIT`` per second (the client not
    told); returns the cell and the most requests the server saw in any one second."""
    cell = Cell("full sync", f"limit {RATE_LIMIT:g}/s", 0.0)
    with _sandbox(seed, workdir) as harness:
        harness.switches(rate_limit_per_second=RATE_LIMIT)
        cell = _sync_cell(harness, "full sync", f"limit {RATE_LIMIT:g}/s", 0.0, full=True)
        arrivals = sorted(r["at"] for r in harness.requests())
    busiest, start = 0, 0
    for end, at in enumerate(arrivals):
        while at - arrivals[start] >= 1.0:
            start += 1
        busiest = max(busiest, end - start + 1)
    return cell, float(busiest)


def totals(cells: list[Cell]) -> dict[str, Any]:
    return {
        "cells": len(cells),
        "equal": sum(c.outcome == "equal" for c in cells),
        "failed cleanly": sum(c.outcome == "failed cleanly" for c in cells),
        "wrong": sum(not c.ok for c in cells),
        "requests": sum(c.requests for c in cells),
        "faults": sum(c.faults for c in cells),
        "rows compared": sum(c.rows_compared for c in cells),
        "rows lost": sum(c.rows_lost for c in cells),
        "rows unexpected": sum(c.rows_unexpected for c in cells),
        "duplicates": sum(c.duplicates for c in cells),
        "writes": sum(c.writes for c in cells),
        "writes sent twice": sum(c.writes_twice for c in cells),
        "writes lost": sum(c.writes_lost for c in cells),
    }
