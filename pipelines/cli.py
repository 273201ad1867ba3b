"""``feedback-sync``: the command line.

Subcommands:
    sandbox   run the reference server on loopback (tests, demos, benchmarks)
    demo      start the reference server, change data, print a summary
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from collections.abc import Sequence
from typing import Any


class UsageError(Exception):
    """Bad command-line input: printed without a traceback, exit code 2."""


def _sandbox_parser(sub: Any) -> None:
    from sandbox.seed import SCALES
    from sandbox.settings import (
        ANNOUNCEMENT_ORDERS,
        FAULT_KINDS,
        LAST_PAGE_AFTER,
        TIMESTAMP_FORMATS,
    )

    p = sub.add_parser(
        "sandbox",
        help="run the reference server (the Feedback API v1) on loopback",
        description="Run the reference server: a seeded, local implementation of the "
        "Feedback API v1, with switches for the contract's variants and faults. "
        "Its /_sandbox control routes need no key: it listens on loopback only.",
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
    p.add_argument("--timestamp-format", choices=TIMESTAMP_FORMATS, default="contract")
    p.add_argument(
        "--last-page-after",
        choices=LAST_PAGE_AFTER,
        default="cursor",
        help="pagination.after on the last page: the contract's cursor, null, "
        "or the request's own cursor repeated",
    )
    p.add_argument("--announcement-order", choices=ANNOUNCEMENT_ORDERS, default="oldest_first")
    p.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="listen on a non-loopback address (the control routes have no auth)",
    )
    p.add_argument("--ready-file", help="write {base_url, api_key} as JSON here once listening")
    p.set_defaults(run=_run_sandbox)


def _run_sandbox(args: argparse.Namespace) -> int:
    import time

    from sandbox.app import create_app
    from sandbox.server import bind, serve_forever
    from sandbox.settings import SettingsError

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
        with open(args.ready_file, "w", encoding="utf-8") as fh:
            json.dump({"base_url": f"{root}/v1", "api_key": app.state.settings.api_key}, fh)
    serve_forever(app, sock)
    return 0


def _demo_parser(sub: Any) -> None:
    p = sub.add_parser("demo", help="start the reference server, change data, show a summary")
    p.add_argument("--scale", default="demo", choices=["tiny", "demo", "large"])
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from pipelines import demo

    return demo.run(args.scale, args.seed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedback-sync",
        description="Move a feedback service's data into a warehouse and back.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _sandbox_parser(sub)
    _demo_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
        return code
    except UsageError as exc:
        print(f"feedback-sync {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
