"""``feedback-sync demo``: the product end to end on loopback, in one command.

Starts the reference server at ``demo`` scale, runs a full sync into a fresh DuckDB file
(``data/demo.duckdb``), changes 1% of the data at the server (seeded creates, updates and
deletes), runs a normal sync, pushes the curated rows of ``examples/curated`` back (a
preview, then ``--apply``, then once more to show it sends nothing), syncs again, and prints
what each run fetched and what changed in the warehouse.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import duckdb
import httpx

from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.app import report
from feedback_sync.app.sync import SyncOptions, SyncResult, run_sync
from feedback_sync.package_data import package_path
from feedback_sync.push.run import PushOptions, PushResult, run_push
from feedback_sync.push.settings import PushSettings
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import serve_in_thread
from feedback_sync.warehouse.duckdb import DuckDb
from feedback_sync.warehouse.target import Target

DEMO_DIR = Path("data")
# the demo's own files, beside a user's (data/warehouse.duckdb, data/report.html): it never
# writes those
DEMO_WAREHOUSE = DEMO_DIR / "demo.duckdb"
DEMO_REPORT = DEMO_DIR / "demo-report.html"
CURATED = package_path("examples", "curated")
NOTE_AUTHOR = "feedback-bot@example.net"


def _target() -> DuckDb:
    return DuckDb(
        duckdb_path=DEMO_WAREHOUSE,
        pipelines_dir=DEMO_DIR / ".demo-pipelines",
    )


def _fresh() -> None:
    for path in (DEMO_WAREHOUSE, DEMO_WAREHOUSE.with_name(f"{DEMO_WAREHOUSE.name}.wal")):
        path.unlink(missing_ok=True)
    shutil.rmtree(DEMO_DIR / ".demo-pipelines", ignore_errors=True)


def _changes_table(first: SyncResult, second: SyncResult) -> str:
    """What the normal sync did to each table: after full + added - removed = after normal."""
    tables = sorted(set(first.tables()) | set(second.tables()))
    width = max(len(t) for t in tables)
    lines = [
        f"  {'table':<{width}}  {'after full':>10}  {'added':>7}  {'updated':>7}  "
        f"{'removed':>7}  {'after normal':>12}"
    ]
    for table in tables:
        done = second.change(table)
        lines.append(
            f"  {table:<{width}}  {done.before:>10,}  {done.added:>7,}  {done.updated:>7,}  "
            f"{done.removed:>7,}  {done.after:>12,}"
        )
    return "\n".join(lines)


def run(scale: str = "demo", seed: int = 1) -> int:
    """Runs the demo (the module's docstring says what it does); returns the exit code."""
    started = time.perf_counter()
    print(f"demo: starting the reference server (scale {scale!r}, seed {seed}) ...", flush=True)
    app = create_app(scale, seed)
    _fresh()
    with serve_in_thread(app) as server:
        print(f"demo: serving {server.base_url}", flush=True)
        settings = FeedbackSettings.validate(base_url=server.base_url, api_key=server.api_key)
        target = _target()

        print("\n== 1. full sync ==", flush=True)
        first = run_sync(target, SyncOptions(full=True, settings=settings))
        print(first.summary())

        print("\n== 2. the service changes: 1% of every resource (seeded) ==", flush=True)
        _change(server.root_url, seed)

        print("\n== 3. normal sync ==", flush=True)
        second = run_sync(target, SyncOptions(settings=settings))
        print(second.summary())

        print("\n== 4. push back the curated rows of examples/curated/ ==", flush=True)
        if not _push_back(target, scale, settings):
            return 1

        # a full sync: a normal one reads only new followers, not changes to older ones
        print("\n== 5. full sync: the pushed values come back ==", flush=True)
        third = run_sync(target, SyncOptions(full=True, settings=settings))
        print(third.summary().splitlines()[0])
        print(_pushed(target))

    for result in (first, second, third):
        if result.models_error is not None:
            print(f"demo: error: {result.models_error}", file=sys.stderr)
            return 1
    print("\n== 6. the marts: ideas with the most revenue behind them (marts.idea_engagement) ==")
    print(_top_ideas(target))
    dashboard = report.write(target, DEMO_REPORT)
    print(f"  the dashboard: {dashboard.summary()}")

    print("\n== what changed in the warehouse ==")
    print(_changes_table(first, second))
    _last_words(first, second, started)
    return 0


def _change(root_url: str, seed: int) -> None:
    """Has the sandbox change 1% of every resource (seeded), and prints how much."""
    with httpx.Client(base_url=f"{root_url}/_sandbox", timeout=60) as control:
        changes = control.post("/mutate", json={"seed": seed, "fraction": 0.01}).json()
    for resource, c in changes.items():
        print(
            f"  {resource:<18} {len(c['created']):>3} created  {len(c['updated']):>3} "
            f"updated  {len(c['deleted']):>3} deleted"
        )


def _push_back(target: Target, scale: str, settings: FeedbackSettings) -> bool:
    """Pushes the curated rows: a preview, an apply, and an apply again that must send
    nothing. False (the apply's report on stderr) when an apply failed."""
    push_settings = PushSettings(curated_dir=CURATED, note_author_email=NOTE_AUTHOR, sample_size=2)
    # topics.csv renames a topic by its idx at the demo scale; other scales lack it
    targets = None if scale == "demo" else ["statuses", "followers", "idea_notes", "announcements"]
    if targets:
        print(f"  (scale {scale!r}: topics.csv names a topic of the demo scale; skipped)")

    def push(apply: bool) -> PushResult:
        return run_push(
            target,
            PushOptions(targets=targets, apply=apply),
            settings=settings,
            push_settings=push_settings,
        )

    preview = push(apply=False)
    print(preview.report(2))
    applied = push(apply=True)
    print(applied.table())
    print(f"  applied: {applied.writes:,} write request(s) in {applied.seconds:.1f}s")
    again = push(apply=True)
    print(f"  applied again at once: {again.writes:,} write request(s) (nothing changed)")
    if applied.exit_code() or again.exit_code():
        print(applied.report(2), file=sys.stderr)
        return False
    return True


def _last_words(first: SyncResult, second: SyncResult, started: float) -> None:
    """The demo's last words: what the normal sync saved, and where to look next."""
    share = second.requests / first.requests if first.requests else 0.0
    print(
        f"\ndemo: the normal sync made {second.requests:,} requests, "
        f"{share:.0%} of the full sync's {first.requests:,}; it picks up new followers, "
        "comments and posts, and every change to topics, statuses and ideas. Updates to "
        "older followers and comments, and deletes of them, arrive with `sync --full`."
    )
    print(
        f"demo: done in {time.perf_counter() - started:.1f}s. The warehouse is "
        f"{DEMO_WAREHOUSE}, its dashboard {DEMO_REPORT}: try\n"
        f"  python -c \"import duckdb; print(duckdb.connect('{DEMO_WAREHOUSE}', "
        "read_only=True).sql('select * from marts.status_summary'))\"\n"
        "  feedback-sync models --list   (what each mart holds)"
    )


def _pushed(target: DuckDb) -> str:
    """The followers of accounts.csv as the warehouse now holds them."""
    path = target.duckdb_file()
    assert path is not None
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "select f.email, c.company_name, c.monthly_spend, c.company_attributes ->> 'plan' "
            "from staging.followers f join staging.follower_companies c using (follower_idx) "
            "where lower(f.email) in (select lower(email) from read_csv(?, all_varchar = true)) "
            "and c.company_id in (select company_id from read_csv(?, all_varchar = true)) "
            "order by f.email, c.company_name",
            [str(CURATED / "accounts.csv")] * 2,
        ).fetchall()
    lines = [f"  {'follower':<30} {'company':<26} {'spend/month':>12} {'plan':<10}"]
    for email, company, spend, plan in rows:
        lines.append(
            f"  {email[:30]:<30} {company[:26]:<26} {spend or 0:>12,.2f} {plan or '-':<10}"
        )
    return "\n".join(lines)


def _top_ideas(target: DuckDb) -> str:
    path = target.duckdb_file()
    assert path is not None
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.execute(
            "select idea_name, coalesce(status_name, '-'), public_comments, private_notes, "
            "commenter_companies, commenter_monthly_spend from marts.idea_engagement "
            "order by commenter_monthly_spend desc, idea_idx limit 5"
        ).fetchall()
    lines = [
        f"  {'idea':<34} {'status':<14} {'comments':>8} {'notes':>6} {'companies':>9} "
        f"{'spend/month':>12}"
    ]
    for name, status, comments, notes, companies, spend in rows:
        lines.append(
            f"  {name[:34]:<34} {status[:14]:<14} {comments:>8,} {notes:>6,} {companies:>9,} "
            f"{spend:>12,.2f}"
        )
    return "\n".join(lines)
