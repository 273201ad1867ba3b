"""``feedback-sync sync`` with several accounts: each account synced by a process of its
own (``fanout.py``), ``--parallel`` at a time, then one summary.

A failed account never stops the others: each other account completes and commits, and
the command exits 1 with one line per account (requests, rows, time, or the error). Run
again, the accounts that succeeded make a normal sync (only what changed), and the failed
ones resume from their last committed state. Accounts whose tables share one DuckDB file
(the default warehouse) fetch side by side and write the file in turns: DuckDB takes one
writing process per file, and each account's run holds it only around the steps that
write it (``warehouse/runlock.py``). Then the staging views and marts are built once, over
every account configured (``models/accounts.py``), those that failed now with what they
last committed.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from feedback_sync.app.fanout import AccountRun, run_accounts
from feedback_sync.warehouse.target import Target


def sync_accounts(
    args: argparse.Namespace,
    target: Target,
    accounts: tuple[str, ...],
    configured: tuple[str, ...],
) -> int:
    """Syncs each of ``accounts`` into its dataset of ``target``, then builds the models
    over every account ``configured``; the exit code."""
    started = time.perf_counter()
    parallel = min(args.parallel, len(accounts))
    shared = _shared_writer_file(target, accounts)
    if shared is not None and parallel > 1:
        print(
            f"sync: the accounts share one DuckDB file ({shared}), which takes one writer at "
            "a time: their fetches overlap, and their loads take the file in turn",
            file=sys.stderr,
        )
    print(
        f"sync: {len(accounts)} accounts ({', '.join(accounts)}), {parallel} at a time",
        file=sys.stderr,
        flush=True,
    )
    runs = run_accounts(accounts, lambda account: child_argv(args, account), parallel=parallel)
    models, models_error = None, None
    if not args.no_models and target.builds_models and any(run.ok for run in runs):
        models, models_error = _build_models(args, target, configured)
    code = 0 if all(run.ok for run in runs) and models_error is None else 1
    if args.json:
        from feedback_sync.app.documents import dumps, models_document

        doc = document(runs, code)
        doc["models"] = models_document(models)
        doc["models_error"] = models_error
        print(dumps(doc))
    else:
        print(summary(runs, target, time.perf_counter() - started))
        if models is not None:
            print(models.summary())
    if models_error is not None:
        print(f"feedback-sync sync: error: {models_error}", file=sys.stderr)
    return code


def _build_models(
    args: argparse.Namespace, target: Target, configured: tuple[str, ...]
) -> tuple[Any, str | None]:
    """The models over every configured account (``models/accounts.py``), after the
    accounts' syncs: what was built, or why not."""
    from feedback_sync.errors import ModelError, WarehouseBusy
    from feedback_sync.models.project import apply, load_project, sql_dir

    print("sync: building the SQL models over every account ...", file=sys.stderr, flush=True)
    try:
        project = load_project(sql_dir(args.sql_dir))
        built = apply(target, project, lock_wait=float(args.wait), reuse=True, accounts=configured)
        return built, None
    except (ModelError, WarehouseBusy) as exc:
        return None, str(exc)
    except Exception as exc:  # a driver's: every account's line is still printed
        from feedback_sync.app.failures import explain

        said, _ = explain(exc)
        return None, said or f"the models over every account failed: {type(exc).__name__}"


def _shared_writer_file(target: Target, accounts: tuple[str, ...]) -> str | None:
    """The one file every account's run must hold to write (a DuckDB file), if they share
    one."""
    files = {target.for_account(account).writer_file() for account in accounts}
    if len(files) == 1:
        (only,) = files
        return str(only) if only is not None else None
    return None


def child_argv(args: argparse.Namespace, account: str) -> list[str]:
    """The command line of one account's run: this command's, for that account alone,
    its result as JSON, its progress as plain lines, and no models (built once, after
    every account)."""
    argv = ["--project-dir", args.project_dir] if args.project_dir else []
    argv += ["sync", "--account", account, "--json", "--no-models"]
    argv += ["--progress", "off" if args.progress == "off" else "plain"]
    argv += ["--progress-every", str(args.progress_every)]
    argv += ["--destination", args.destination, "--dataset", args.dataset]
    argv += ["--parquet-dir", args.parquet_dir, "--delta-dir", args.delta_dir]
    argv += ["--wait", str(args.wait)]
    if args.pipelines_dir:
        argv += ["--pipelines-dir", args.pipelines_dir]
    if args.full:
        argv.append("--full")
    if args.resources:
        argv += ["--resources", args.resources]
    return argv


def summary(runs: list[AccountRun], target: Target, seconds: float) -> str:
    """One line per account, then the totals."""
    width = max(len(run.account) for run in runs)
    failed = [run.account for run in runs if not run.ok]
    lines = [
        f"sync of {len(runs)} accounts into {target.describe()}, each in its dataset "
        f"{target.dataset}_<account>:"
    ]
    lines += [run.line(width) for run in runs]
    done = len(runs) - len(failed)
    total = (
        f"{done} of {len(runs)} accounts synced in {seconds:.1f}s, "
        f"{sum(r.requests for r in runs):,} requests"
    )
    if failed:
        total += f"; failed: {', '.join(failed)} (run again: the others make a normal sync)"
    lines.append(total)
    return "\n".join(lines)


def document(runs: list[AccountRun], code: int) -> dict[str, Any]:
    """The --json document: the envelope, then each account's own document."""
    from feedback_sync.app.documents import envelope

    failed = [run.account for run in runs if not run.ok]
    error = f"{len(failed)} account(s) failed: {', '.join(failed)}" if failed else None
    result = envelope("sync", code, error)
    result["accounts"] = {
        run.account: {
            "ok": run.ok,
            "exit_code": run.exit_code,
            "seconds": round(run.seconds, 3),
            "error": run.error,
            "requests": run.requests,
            "rows": run.rows,
            "result": run.document,
        }
        for run in runs
    }
    return result
