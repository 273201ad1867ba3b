"""``feedback-sync``: the command line.

Subcommands:
    sync      pull the Feedback API into DuckDB, Parquet or another dlt destination
    status    the saved state per resource and the row counts of the warehouse
    models    build the SQL models of sql/ (staging views, marts); --list describes them
    report    write a self-contained HTML dashboard drawn from the marts
    push      push curated warehouse rows back through the API (a preview; --apply sends)
    sandbox   run the reference server on loopback (tests, demos, benchmarks)
    demo      reference server, full sync, a change at the server, normal sync, summary

Exit codes: 0 success, 1 the run failed, 2 bad input or configuration.

POSIX only (Linux, macOS): the run lock is an ``fcntl`` file lock.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import ipaddress
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from feedback_sync import __version__
from feedback_sync.app import process
from feedback_sync.app.outcome import error_document, fail, print_json, reader_gone, run_command
from feedback_sync.app.process import heavy_imports
from feedback_sync.app.telemetry import telemetry_off_unless_chosen
from feedback_sync.errors import UsageError
from feedback_sync.extras import require
from feedback_sync.redaction import install_log_filters


def _target_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--destination",
        default="duckdb",
        metavar="duckdb|parquet|delta|NAME",
        help="duckdb (default: data/warehouse.duckdb, or DESTINATION__DUCKDB__CREDENTIALS), "
        "parquet (files under --parquet-dir), delta (Delta tables at "
        "DESTINATION__FILESYSTEM__BUCKET_URL, else under --delta-dir), or any dlt "
        "destination by name (postgres: DESTINATION__POSTGRES__CREDENTIALS)",
    )
    p.add_argument("--dataset", default="feedback", help="dataset (schema) name (default feedback)")
    p.add_argument(
        "--parquet-dir",
        default="data/parquet",
        help="folder of the Parquet output (default data/parquet)",
    )
    p.add_argument(
        "--delta-dir",
        default="data/delta",
        help="the Delta target's local folder: its models file, and its tables when no "
        "bucket_url is configured (default data/delta)",
    )
    p.add_argument(
        "--pipelines-dir",
        help="where each warehouse's dlt working folder goes (default: "
        "~/.dlt/pipelines/feedback-sync)",
    )


def _wait_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="when another run holds the warehouse (its dataset), wait up to this long for it "
        "to end (default 0: fail at once, exit 1)",
    )


def _target(args: argparse.Namespace) -> Any:
    if not args.destination.strip():
        raise UsageError("--destination must not be empty")
    # checked first: a bad argument is answered before dlt is imported
    from feedback_sync.errors import ConfigError
    from feedback_sync.warehouse.target import check_dataset, make_target

    try:
        check_dataset(args.dataset, "--dataset")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None

    return make_target(
        args.destination.strip(),
        dataset=args.dataset,
        parquet_dir=Path(args.parquet_dir),
        pipelines_dir=Path(args.pipelines_dir) if args.pipelines_dir else None,
        delta_dir=Path(args.delta_dir),
    )


def _sql_dir_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sql-dir",
        metavar="FOLDER",
        help="the SQL folder (sources.toml, staging/, marts/, push/); default: MODELS__SQL_DIR "
        "(sql_dir in [models] of .dlt/config.toml), else the one feedback-sync ships",
    )


def _json_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout instead of the text (its fields: the "
        "documentation's JSON output reference); progress and errors stay on stderr",
    )


def _progress_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        choices=["auto", "live", "plain", "off"],
        default="auto",
        help="how progress is shown on stderr: live (a display that redraws), plain (a line "
        "every few seconds), off; auto (default): live on a terminal, else plain",
    )


def _wait(args: argparse.Namespace) -> float:
    wait = float(args.wait)
    if not wait >= 0:  # also refuses nan
        raise UsageError(f"--wait must be a number of seconds >= 0, got {args.wait}")
    return wait


def _init_parser(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="start a project: write .dlt/config.toml and a .dlt/secrets.toml template",
        description="Write a commented .dlt/config.toml and a .dlt/secrets.toml template into "
        "the project folder (FOLDER, else --project-dir, else the current folder), never "
        "over a file that exists; in a git repository the secrets file is git-ignored. Then "
        "fill in base_url and api_key, and run `feedback-sync check`.",
    )
    p.add_argument("folder", nargs="?", metavar="FOLDER", help="the project folder")
    p.set_defaults(run=_run_init)


def _run_init(args: argparse.Namespace) -> int:
    from feedback_sync.app.init import init
    from feedback_sync.errors import ConfigError

    folder = Path(args.folder or os.environ.get("DLT_PROJECT_DIR") or ".")
    try:
        done = init(folder)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    print(done.summary())
    return 0


def _check_parser(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="test the configuration without syncing: settings, the API, the warehouse",
        description="Check the settings, make one authenticated request to the API, confirm "
        "the warehouse can be written (a file or object probe, removed again; a server "
        "connected to), and read the SQL folder and the push targets. One line per check "
        "with what to fix. Loads nothing. With accounts configured, each account's settings, "
        "key and server are checked on lines of their own, which name it. Exit codes: 0 every "
        "check passed, 1 a check failed, 2 the configuration is malformed.",
    )
    _target_arguments(p)
    _account_argument(p)
    _sql_dir_argument(p)
    _json_argument(p)
    p.set_defaults(run=_run_check)


def _run_check(args: argparse.Namespace) -> int:
    target = _target(args)
    accounts = _accounts(args)
    with heavy_imports():
        from feedback_sync.app.check import run_check

    result = run_check(target, sql_folder=args.sql_dir, accounts=accounts)
    if args.json:
        from feedback_sync.app.documents import check_document

        document = check_document(result)
        print_json(document)
        if document["error"]:
            print(f"feedback-sync check: error: {document['error']}", file=sys.stderr)
    else:
        print(result.report())
    return result.exit_code()


def _sync_parser(sub: Any) -> None:
    from feedback_sync.source.resources import NAMES as RESOURCES

    p = sub.add_parser(
        "sync",
        help="pull the Feedback API into the warehouse (incremental; --full reads everything)",
        description="Pull every resource of the Feedback API into DuckDB (default), Parquet, "
        "PostgreSQL, Delta or another dlt destination. A normal run fetches only what "
        "changed where the API allows it; --full reads everything and removes rows deleted "
        "at the source. "
        "Settings: section [sources.feedback] of .dlt/config.toml and .dlt/secrets.toml, "
        "or SOURCES__FEEDBACK__* environment variables.",
    )
    p.add_argument("--full", action="store_true", help="read everything; reconcile deletes")
    p.add_argument(
        "--no-models",
        action="store_true",
        help="do not build the SQL models after the load (feedback-sync models does it later)",
    )
    _sql_dir_argument(p)
    p.add_argument(
        "--resources",
        metavar="a,b",
        help=f"only these resources (comma-separated): {', '.join(RESOURCES)}",
    )
    _target_arguments(p)
    _account_argument(p)
    p.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_PARALLEL,
        metavar="N",
        help="with several accounts, how many sync at once, each in a process of its own "
        f"(default {DEFAULT_PARALLEL}; accounts that share one DuckDB file fetch side by side "
        "and load one at a time)",
    )
    _wait_argument(p)
    _json_argument(p)
    _progress_argument(p)
    p.add_argument(
        "--progress-every", type=float, default=5.0, metavar="SECONDS", help=argparse.SUPPRESS
    )
    p.set_defaults(run=_run_sync)


# accounts synced at once (``--parallel``): each is a process that parses on one core while
# its HTTP helper speaks on another; more than this on a small machine only queues them
DEFAULT_PARALLEL = 2


def _account_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--account",
        action="append",
        metavar="NAME",
        help="only this account (repeat for several; default: every account configured "
        "under [sources.feedback.accounts])",
    )


def _accounts(args: argparse.Namespace) -> tuple[str, ...]:
    """The accounts the command runs (``app/accounts.py``); () for a project of one
    account configured in ``[sources.feedback]`` itself."""
    return _configured_and_chosen(args)[1]


def _configured_and_chosen(
    args: argparse.Namespace,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every account configured, and those the command runs (``--account``, else all),
    the settings files read once."""
    from feedback_sync.app.accounts import chosen_accounts, configured_accounts_now
    from feedback_sync.errors import ConfigError

    try:
        configured = configured_accounts_now()
        asked = getattr(args, "account", None)  # a command without --account: all of them
        return configured, chosen_accounts(configured, asked)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


# The sync's first line, printed before its imports (`_run_sync`).
STARTING_LINE = "sync: starting ..."


def _sync_resources(args: argparse.Namespace, target: Any) -> list[str] | None:
    """``--resources`` as a list (None: all), after checking what of the sync's arguments
    can be checked before its imports: the resources' names and, where the run builds the
    models, an ``--sql-dir`` (``models.project.sql_dir`` reads it again, with its
    setting)."""
    from feedback_sync.errors import ConfigError
    from feedback_sync.models.settings import MODELS
    from feedback_sync.source.resources import check_resources

    resources = (
        [r.strip() for r in args.resources.split(",") if r.strip()] if args.resources else None
    )
    if args.resources is not None and not resources:
        raise UsageError("--resources needs at least one resource name")
    try:
        check_resources(resources)
        if args.sql_dir is not None and not args.no_models and target.builds_models:
            MODELS.given("sql_dir", args.sql_dir, "--sql-dir")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return resources


def _run_sync(args: argparse.Namespace) -> int:
    from feedback_sync.errors import ConfigError

    lock_wait = _wait(args)
    target = _target(args)  # bad arguments are answered before the sync's imports
    resources = _sync_resources(args, target)
    configured, accounts = _configured_and_chosen(args)
    if args.parallel < 1:
        raise UsageError(f"--parallel must be 1 or more, got {args.parallel}")
    if len(accounts) > 1:
        from feedback_sync.app.sync_accounts import sync_accounts

        return sync_accounts(args, target, accounts, configured)
    account = accounts[0] if accounts else None
    models_over = None
    if account is not None:
        from feedback_sync.models.accounts import ModelsScope

        # the models are over every account configured, this one synced now
        models_over = ModelsScope(target, configured)
        target = target.for_account(account)
    started = process.started()
    # A first line before the imports (dlt's take half a second or more, and the settings
    # are dlt's to resolve): a person sees the run begin at once. A bad setting found after
    # it is still one error line; this one only says the run started.
    print(STARTING_LINE, file=sys.stderr, flush=True)
    with heavy_imports():
        from feedback_sync.api.http_helper import prestart
        from feedback_sync.api.settings import env_name

        # the HTTP helper starts beside the imports (api/http_helper.py)
        prestart(os.environ.get(env_name("http_process"), "auto"))
        from feedback_sync.app.sync import SyncOptions, run_sync

    try:
        settings = None
        if account is not None:
            from feedback_sync.api.accounts import load_account_settings

            settings = load_account_settings(account)
        options = SyncOptions(
            settings=settings,
            full=args.full,
            resources=resources,
            progress_every=args.progress_every,
            progress=args.progress,
            models=not args.no_models,
            models_over=models_over,
            sql_folder=args.sql_dir,
            lock_wait=lock_wait,
            started=started,
        )
        result = run_sync(target, options)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    failure = result.models_error or result.history_error
    code = 1 if failure is not None else 0
    if args.json:
        from feedback_sync.app.documents import sync_document

        print_json(sync_document(result, code))
    else:
        print(result.summary())
    if failure is not None:
        print(f"feedback-sync sync: error: {failure}", file=sys.stderr)
    return code


def _models_parser(sub: Any) -> None:
    p = sub.add_parser(
        "models",
        help="build the SQL models (staging views, marts) in the warehouse; --list shows them",
        description="Apply the SQL models of sql/ in dependency order: staging views (schema "
        "staging) and mart tables (schema marts): in the DuckDB file or the PostgreSQL "
        "database; for Parquet in <parquet-dir>/models.duckdb over views of the files "
        "(marts also written to <parquet-dir>/marts/); for Delta in <delta-dir>/models.duckdb. "
        "Then the marts' data tests (each mart's tests: block and "
        "sql/tests/), reported per mart. One transaction: a failing model or data test "
        "changes nothing.",
    )
    p.add_argument(
        "--list", action="store_true", help="describe every model (grain, key, columns) and exit"
    )
    _sql_dir_argument(p)
    _target_arguments(p)
    _wait_argument(p)
    p.set_defaults(run=_run_models)


def _run_models(args: argparse.Namespace) -> int:
    with heavy_imports():
        from feedback_sync.models.project import apply, describe, load_project, sql_dir

    from feedback_sync.errors import ModelError

    try:
        project = load_project(sql_dir(args.sql_dir))
        if args.list:
            print(describe(project))
            return 0
        # with accounts configured, over every one of them (models/accounts.py)
        result = apply(_target(args), project, lock_wait=_wait(args), accounts=_accounts(args))
    except ModelError as exc:
        print(f"feedback-sync models: error: {exc}", file=sys.stderr)
        return 1
    print(result.summary())
    return 0


def _status_parser(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="saved state per resource and row counts per table",
        description="Show the state the last successful sync saved (cursors, windows, "
        "ideas tracked) and the rows per table in the warehouse. With accounts configured, "
        "each account's, one after another, under a line naming it.",
    )
    _target_arguments(p)
    _account_argument(p)
    _json_argument(p)
    p.set_defaults(run=_run_status)


def _run_status(args: argparse.Namespace) -> int:
    from feedback_sync.errors import ConfigError

    with heavy_imports():
        from feedback_sync.app.status import read_accounts, render, render_accounts

    target = _target(args)
    accounts = _accounts(args)
    try:
        if accounts:
            statuses = read_accounts(target, accounts)
        else:
            committed = target.committed()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        from feedback_sync.app.documents import status_accounts_document, status_document

        print_json(
            status_accounts_document(statuses) if accounts else status_document(target, committed)
        )
    else:
        print(render_accounts(statuses) if accounts else render(target, committed))
    return 0


def _report_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write a self-contained HTML dashboard drawn from the marts",
        description="Write one HTML file (styles and SVG charts inline; it fetches nothing) "
        "with revenue-weighted demand by idea, announcement cadence, comment activity, the "
        "status funnel and integration coverage, from the marts the last sync or "
        "`feedback-sync models` built, and when the data was last loaded.",
    )
    p.add_argument(
        "--output", default="data/report.html", help="the HTML file (default data/report.html)"
    )
    p.add_argument(
        "--currency",
        metavar="CODE",
        help="the currency of the monthly spend the API sends (EUR, USD, ...); default: "
        "[report] currency in .dlt/config.toml (REPORT__CURRENCY), else the page says "
        '"the account\'s currency"',
    )
    _account_argument(p)
    _target_arguments(p)
    p.set_defaults(run=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    with heavy_imports():
        from feedback_sync.app.report import currency_setting, write
        from feedback_sync.errors import ModelError

    currency = currency_setting(args.currency)  # a malformed one: one line, exit 2
    try:
        # with accounts configured, a board per account (all, or those of --account)
        accounts = _accounts(args)
        report = write(_target(args), Path(args.output), currency=currency, accounts=accounts)
    except ModelError as exc:
        print(f"feedback-sync report: error: {exc}", file=sys.stderr)
        return 1
    print(report.summary())
    return 0


def _push_parser(sub: Any) -> None:
    p = sub.add_parser(
        "push",
        help="push curated warehouse rows back through the API (preview; --apply sends)",
        description="Compare each push target of sql/push/ (the desired state, from curated "
        "inputs and the marts) with the service and the push journal, and print what would "
        "change: creates, updates, deletes, unchanged, invalid rows, with samples and "
        "payloads. Nothing is sent without --apply. Exit codes: 0 everything planned "
        "landed, 1 rows invalid, rejected or held, a target refused, or the run failed, "
        "2 bad input or configuration.",
    )
    p.add_argument("--apply", action="store_true", help="send the writes (default: preview only)")
    p.add_argument(
        "--targets",
        metavar="a,b",
        help="only these targets (default: every target whose curated inputs exist)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="send a target even when its desired set is empty or it would update or delete "
        "more than push.max_change_share of the rows it manages (those it matches at the "
        "service, and those it pushed before)",
    )
    p.add_argument("--curated-dir", help="folder of curated files (default data/curated)")
    _sql_dir_argument(p)
    p.add_argument("--samples", type=int, help="changed rows shown per target (default 5)")
    _target_arguments(p)
    _account_argument(p)
    _wait_argument(p)
    _json_argument(p)
    _progress_argument(p)
    p.set_defaults(run=_run_push)


def _run_push(args: argparse.Namespace) -> int:
    from feedback_sync.errors import ConfigError

    with heavy_imports():
        from feedback_sync.push.run import PushOptions, run_push
        from feedback_sync.push.settings import load_push_settings

    targets = [t.strip() for t in args.targets.split(",") if t.strip()] if args.targets else None
    if args.targets is not None and not targets:
        raise UsageError("--targets needs at least one target name")
    accounts = _accounts(args)
    try:
        push_settings = load_push_settings(curated_dir=args.curated_dir, sample_size=args.samples)
        options = PushOptions(
            targets=targets,
            apply=args.apply,
            force=args.force,
            sql_folder=args.sql_dir,
            lock_wait=_wait(args),
            progress=args.progress,
        )
        if accounts:  # each account in turn, then one summary (app/push_accounts.py)
            from feedback_sync.app.push_accounts import push_accounts

            return push_accounts(args, _target(args), accounts, options, push_settings)
        result = run_push(_target(args), options, push_settings=push_settings)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        from feedback_sync.app.documents import push_document

        print_json(push_document(result, push_settings.sample_size))
    else:
        print(result.report(push_settings.sample_size))
    return result.exit_code()


def _sandbox_parser(sub: Any) -> None:
    from feedback_sync.sandbox.scales import SCALES

    p = sub.add_parser(
        "sandbox",
        help="run the reference server (the Feedback API v1) on loopback",
        description="Run the reference server: a seeded, local implementation of the "
        "Feedback API v1, with switches for the contract's variants and faults. "
        "Its /_sandbox control routes need no key: it listens on loopback only, unless "
        "--allow-non-loopback insists.",
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port; 0 picks a free one (default 8765)")
    p.add_argument("--scale", choices=list(SCALES), default="demo", help="seeded data size")
    p.add_argument("--seed", type=int, default=1, help="data seed (same seed, same data)")
    p.add_argument(
        "--api-key",
        default=os.environ.get("FEEDBACK_SANDBOX_API_KEY"),
        help="the key clients must send (default: $FEEDBACK_SANDBOX_API_KEY, else a random one)",
    )
    _sandbox_behaviour_arguments(p)
    _sandbox_variant_arguments(p)
    p.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="listen on a non-loopback address (the control routes have no auth)",
    )
    p.add_argument("--ready-file", help="write {base_url, api_key} as JSON here once listening")
    p.set_defaults(run=_run_sandbox)


def _sandbox_behaviour_arguments(p: argparse.ArgumentParser) -> None:
    """The sandbox's switches of what it serves, how fast, and how often it fails."""
    from feedback_sync.sandbox.settings import FAULT_KINDS

    p.add_argument(
        "--no-custom-attributes",
        action="store_true",
        help="custom attributes disabled: 403 on writes, no attributes in lists",
    )
    p.add_argument(
        "--no-ideas-endpoint", action="store_true", help="switch off the /ideas extension (404)"
    )
    p.add_argument(
        "--rate-limit",
        type=float,
        metavar="RPS",
        help="requests per second per key (429 with Retry-After past it)",
    )
    p.add_argument("--latency-ms", type=float, default=0.0, help="added latency per request")
    p.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="share of /v1 requests that fail on purpose (0..1)",
    )
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws")
    p.add_argument(
        "--fault-kinds",
        default=",".join(FAULT_KINDS),
        help=f"comma-separated subset of {','.join(FAULT_KINDS)}",
    )
    p.add_argument(
        "--stall-seconds", type=float, default=30.0, help="how long a stalled answer waits"
    )


def _sandbox_variant_arguments(p: argparse.ArgumentParser) -> None:
    """The sandbox's variants of the contract: formats, page ends, orders, counts."""
    from feedback_sync.sandbox.settings import (
        ANNOUNCEMENT_ORDERS,
        LAST_PAGE_AFTER,
        TIMESTAMP_FORMATS,
    )

    p.add_argument(
        "--timestamp-format",
        choices=TIMESTAMP_FORMATS,
        default="contract",
        help="contract: links in ISO with microseconds and Z, the rest as YYYY-MM-DD HH:MM:SS; "
        "iso or plain: one format everywhere; mixed: one or the other per row",
    )
    p.add_argument(
        "--last-page-after",
        choices=LAST_PAGE_AFTER,
        default="cursor",
        help="pagination.after on the last page: the contract's cursor, null, "
        "or the request's own cursor repeated",
    )
    p.add_argument(
        "--announcement-order",
        choices=ANNOUNCEMENT_ORDERS,
        default="oldest_first",
        help="the order of GET /v1/announcements",
    )
    p.add_argument(
        "--page-overlap",
        type=int,
        default=0,
        help="each page of a cursor list starts with this many items of the page before",
    )
    p.add_argument(
        "--total-offset",
        type=int,
        default=0,
        help="pagination.total is off by this much (a count that disagrees with the items)",
    )


def _run_sandbox(args: argparse.Namespace) -> int:
    import time

    require("sandbox", "feedback-sync sandbox")
    from feedback_sync.sandbox.app import create_app
    from feedback_sync.sandbox.server import bind, serve_forever
    from feedback_sync.sandbox.settings import SettingsError

    try:
        loopback = args.host == "localhost" or ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        raise UsageError(f"--host: not an IP address: {args.host!r}") from None
    if not loopback and not args.allow_non_loopback:
        raise UsageError(
            f"--host {args.host} is not a loopback address; the control routes "
            "have no authentication (pass --allow-non-loopback to insist)"
        )
    settings = {
        "custom_attributes": not args.no_custom_attributes,
        "ideas_endpoint": not args.no_ideas_endpoint,
        "rate_limit_per_second": args.rate_limit,
        "latency_ms": args.latency_ms,
        "timestamp_format": args.timestamp_format,
        "last_page_after": args.last_page_after,
        "announcement_order": args.announcement_order,
        "page_overlap": args.page_overlap,
        "total_offset": args.total_offset,
        "faults": {
            "rate": args.fault_rate,
            "seed": args.fault_seed,
            "kinds": [k.strip() for k in args.fault_kinds.split(",") if k.strip()],
            "stall_seconds": args.stall_seconds,
        },
    }
    started = time.perf_counter()
    print(
        f"feedback-sync sandbox: seeding scale {args.scale!r}, seed {args.seed} ...",
        file=sys.stderr,
        flush=True,
    )
    try:
        app = create_app(args.scale, args.seed, api_key=args.api_key, settings=settings)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    root = f"http://{host}:{port}"
    counts = app.state.counts()
    print(
        f"seeded in {time.perf_counter() - started:.1f}s: "
        + ", ".join(f"{n} {name}" for name, n in counts.items()),
        file=sys.stderr,
    )
    print(f"base URL: {root}/v1")
    print(f"API key:  {app.state.settings.api_key}")
    print(f"OpenAPI:  {root}/openapi.json")
    print(f"control:  {root}/_sandbox/  (tests and demos only; no auth)")
    print("Ctrl-C stops it.", flush=True)
    if args.ready_file:
        # written aside and renamed: a reader polling for the file never sees half of it
        partial = f"{args.ready_file}.partial"
        with open(partial, "w", encoding="utf-8") as fh:
            json.dump({"base_url": f"{root}/v1", "api_key": app.state.settings.api_key}, fh)
        os.replace(partial, args.ready_file)
    # Ctrl-C (or SIGTERM) is how this server is meant to stop, not a run cut short. uvicorn
    # shuts down on the signal and raises it again after; whether Python then raises
    # KeyboardInterrupt here depends on when asyncio's runner sees it (under load, at times
    # not), so the line does not wait for one
    with contextlib.suppress(KeyboardInterrupt):
        serve_forever(app, sock)
    print("feedback-sync sandbox: stopped", file=sys.stderr)
    return 0


def _demo_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="start the reference server, change data, show a summary",
        description="The whole loop against the reference server, in one command: start it, "
        "a full sync into data/demo.duckdb, a change at the server, a normal sync, a push, "
        "the dashboard data/demo-report.html, and a summary of what each run did. It writes "
        "only those two files (and dlt's working folder data/.demo-pipelines): a warehouse "
        "or dashboard of your own in data/ is left alone. Needs the [sandbox] extra.",
    )
    p.add_argument(
        "--scale", default="demo", choices=["tiny", "demo", "large"], help="seeded data size"
    )
    p.add_argument("--seed", type=int, default=1, help="data seed (same seed, same data)")
    p.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    require("sandbox", "feedback-sync demo (it runs the reference server)")
    with heavy_imports():
        from feedback_sync.app import demo

    return demo.run(args.scale, args.seed)


def _posix() -> bool:
    """Whether this system has what the run lock needs (``fcntl``: Linux, macOS, BSDs)."""
    return os.name == "posix"


# the subcommands, in the order --help lists them
_COMMANDS: dict[str, Callable[[Any], None]] = {
    "init": _init_parser,
    "check": _check_parser,
    "sync": _sync_parser,
    "status": _status_parser,
    "models": _models_parser,
    "report": _report_parser,
    "push": _push_parser,
    "sandbox": _sandbox_parser,
    "demo": _demo_parser,
}


class _Parser(argparse.ArgumentParser):
    """argparse without prefix matching: ``push --a`` must not mean ``--apply``, nor
    ``sync --ful`` ``--full``; an option is spelled out or refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        # the options this parser takes, as they are added (its own --help among them)
        self.options: list[str] = []
        super().__init__(*args, **kwargs)
        # the subcommands' parsers, on the top-level parser (``build_parser``)
        self.commands: dict[str, _Parser] = {}

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options += action.option_strings
        return action

    def error(self, message: str) -> NoReturn:
        """argparse's usage line and message on stderr, exit 2; raised rather than exited
        so that ``main`` can also write the --json document. A command that is not one
        names the nearest."""
        choice = re.match(r"argument COMMAND: invalid choice: '([^']*)'", message)
        if choice and self.commands:
            message += _nearest(choice.group(1), list(self.commands))
        self.print_usage(sys.stderr)
        raise _BadArguments(self.prog, message)

    def parse_command_line(self, arguments: Sequence[str]) -> argparse.Namespace:
        """``parse_args``, except that arguments the command does not take are refused by
        the command's own parser (its usage, not the top level's) with the nearest
        option: ``sync --ful``: did you mean ``--full``?"""
        parsed, extra = self.parse_known_args(arguments)
        if extra:
            chosen = self.commands.get(parsed.command, self)
            unknown = next((a for a in extra if a.startswith("-")), extra[0])
            chosen.error(
                f"unrecognized arguments: {' '.join(extra)}"
                + _nearest(unknown.split("=", 1)[0], chosen.options)
            )
        return parsed


def _nearest(given: str, known: Sequence[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``known``, or nothing."""
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class _BadArguments(Exception):
    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


def build_parser() -> _Parser:
    parser = _Parser(
        prog="feedback-sync",
        description="Move a feedback service's data into a warehouse and back.",
    )
    parser.add_argument("--version", action="version", version=f"feedback-sync {__version__}")
    parser.add_argument(
        "--project-dir",
        metavar="DIR",
        help="the folder whose .dlt/ holds the settings (default: the current folder, or "
        "DLT_PROJECT_DIR); relative paths such as data/ stay relative to the current folder",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    for add_parser in _COMMANDS.values():
        add_parser(sub)
    parser.commands = {name: p for name, p in sub.choices.items() if isinstance(p, _Parser)}
    return parser


class _SignalNotice(logging.Filter):
    """Drops dlt's warning that its job pool stops on a signal ("Exiting runner due to
    signal 2"): the command says that Ctrl-C stopped it, in which step and what is
    committed, in its one line (``interrupts.interrupted_in``). Every other dlt record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Exiting runner due to signal")


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    install_log_filters()
    logging.getLogger("dlt").addFilter(_SignalNotice())
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_command_line(arguments)
    except _BadArguments as exc:
        print(f"{exc.prog}: error: {exc.message}", file=sys.stderr)
        if "--json" in arguments:
            command = next((a for a in arguments if a in _COMMANDS), "feedback-sync")
            print_json(error_document(command, 2, exc.message))
        return 2
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return reader_gone()


def _dispatch(args: argparse.Namespace) -> int:
    """Runs the command after what every command checks first (the project folder, the
    settings files, the system); every failure ends as one line on stderr and an exit
    code (``app/outcome.py``)."""
    if args.project_dir is not None:
        project = Path(args.project_dir)
        if not project.is_dir():
            return fail(args, f"--project-dir {args.project_dir}: no such folder", 2)
        # where dlt (and dlt_settings_mention) look for .dlt/config.toml and secrets.toml
        os.environ["DLT_PROJECT_DIR"] = str(project.resolve())
    if args.command != "sandbox":  # the reference server reads no settings file
        from feedback_sync.app.settings_files import check_settings_files
        from feedback_sync.errors import ConfigError

        try:
            # ``check`` lists every unknown setting with the other problems it finds
            check_settings_files(names=args.command != "check")
        except ConfigError as exc:
            return fail(args, str(exc), 2)
    telemetry_off_unless_chosen()
    if not _posix():
        return fail(
            args,
            f"feedback-sync runs on Linux and macOS (POSIX) only; this is {sys.platform} "
            "(its run lock is an fcntl file lock)",
            2,
        )
    return run_command(args)


def run() -> None:
    """The ``feedback-sync`` command: ``main`` in a process tuned for a command
    (``app/process.py``), then a quick exit, without the interpreter's teardown. Tests call
    ``main``, which returns; ``python -m feedback_sync.app.cli`` exits through the teardown
    (for profilers and coverage tools that write after it)."""
    process.tune()
    process.end_quickly(main())


if __name__ == "__main__":
    # the console script's process, with a normal exit (for profilers and coverage)
    process.tune()
    process.end_normally(main())
