"""``feedback-sync push`` with accounts configured: each account pushed in turn, then one
summary.

First, for every account the command runs, what its push would refuse is checked
(``push.run.check_push``: its settings, its models, and every curated input, whose column
``account`` must name accounts that are configured): one thing wrong stops the command
(exit 2) before anything is sent to any account. Then each account is pushed
(``push.run.run_push`` with that account's ``Scope``): diffed with its own rows of the
models, sent with its own address and key, journaled in its own schema
``push_<account>``. An account whose push fails (its service down, its key refused, its
warehouse busy) is named in the summary and the others are pushed all the same; the
command then exits 1, as it does when an account's rows were invalid, rejected or held.

The accounts are pushed in this process, one after another, not in processes of their
own as a sync's are: a push is small (a few requests per changed row, after the copy in
the warehouse answers for the rest), it spends its time waiting for the service rather
than parsing, and the push of accounts that share one DuckDB file could not overlap
anyway. Each account's client is made from its own settings, so a key is only ever sent
to its own account's address.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from feedback_sync.api.accounts import load_account_settings
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.app.accounts import configured_accounts_now
from feedback_sync.errors import WarehouseBusy
from feedback_sync.push.run import ACTIONS, PushOptions, PushResult, check_push, run_push
from feedback_sync.push.scope import Scope
from feedback_sync.push.settings import PushSettings
from feedback_sync.redaction import SCRUBBER
from feedback_sync.warehouse.target import Target


@dataclass(frozen=True)
class AccountPush:
    """What one account's push did: its result, or the error that stopped it."""

    account: str
    seconds: float
    result: PushResult | None
    error: str | None = None
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def status(self) -> str:
        if self.error is not None:
            return "failed"
        return "ok" if self.ok else "problems"

    def line(self, width: int) -> str:
        """One line of the summary."""
        head = f"  {self.account:<{width}}  {self.status():<8}"
        if self.result is None:
            return f"{head}  after {self.seconds:.1f}s: {self.error}"
        return f"{head}  {_counts(self.result.totals())}; {_requests(self.result)}"


def push_accounts(
    args: argparse.Namespace,
    target: Target,
    accounts: tuple[str, ...],
    options: PushOptions,
    push_settings: PushSettings,
) -> int:
    """Pushes each of ``accounts`` of the warehouse ``target``; prints the reports and the
    summary (or, with ``args.json``, one document); the exit code.

    Raises:
        ConfigError: an account's settings, models or curated inputs are wrong (nothing
            was sent to any account).
    """
    started = time.perf_counter()
    configured = configured_accounts_now()
    settings = {account: load_account_settings(account) for account in accounts}
    chosen = {
        account: dataclasses.replace(options, scope=Scope(account, configured))
        for account in accounts
    }
    busy: dict[str, AccountPush] = {}
    for account in accounts:
        try:
            check_push(target, chosen[account], push_settings=push_settings)
        except WarehouseBusy as exc:  # its warehouse busy: named, the others still go
            busy[account] = AccountPush(account, 0.0, None, str(exc), 1)
    runs = []
    for n, account in enumerate(accounts, 1):
        if account in busy:
            runs.append(busy[account])
            continue
        print(f"push: account {account} ({n} of {len(accounts)}) ...", file=sys.stderr, flush=True)
        runs.append(_push_one(target, chosen[account], settings[account], push_settings))
    code = 0 if all(run.ok for run in runs) else 1
    seconds = time.perf_counter() - started
    if args.json:
        from feedback_sync.app.documents import dumps

        print(dumps(document(runs, code, options.apply, seconds, push_settings.sample_size)))
    else:
        print(report(runs, options.apply, seconds, push_settings.sample_size))
    return code


def _push_one(
    target: Target,
    options: PushOptions,
    settings: FeedbackSettings,
    push_settings: PushSettings,
) -> AccountPush:
    """One account's push; a failure is its result, not the command's."""
    from feedback_sync.app.failures import explain

    assert options.scope.account is not None
    account = options.scope.account
    started = time.perf_counter()
    try:
        result = run_push(target, options, settings=settings, push_settings=push_settings)
    except Exception as exc:  # one account's failure never stops the others
        message, code = explain(exc)
        if message is None:
            message = f"unexpected {type(exc).__name__}: {_first_line(exc)}"
        seconds = time.perf_counter() - started
        return AccountPush(account, seconds, None, SCRUBBER.scrub(message), code or 1)
    seconds = time.perf_counter() - started
    return AccountPush(account, seconds, result, result.error, result.exit_code())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "no detail"


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[action]:,} {action}" for action in ACTIONS)


def _requests(result: PushResult) -> str:
    if result.applied:
        return f"{result.writes:,} write(s) sent, {result.reads:,} read(s)"
    return f"{result.planned_writes():,} write(s) planned, {result.reads:,} read(s)"


def report(runs: list[AccountPush], applied: bool, seconds: float, samples: int) -> str:
    """Each account's report under its name, then one line per account and the totals."""
    lines: list[str] = []
    for run in runs:
        lines.append(f"account {run.account}:")
        if run.result is not None:
            lines.append(run.result.report(samples))
        else:
            lines.append(f"push FAILED: {run.error}")
        lines.append("")
    width = max([len(run.account) for run in runs] + [len("total")])
    what = "push --apply" if applied else "push preview (nothing sent)"
    lines.append(f"{what} of {len(runs)} account(s), each to its own service and journal:")
    lines += [run.line(width) for run in runs]
    total: Counter[str] = Counter()
    for run in runs:
        if run.result is not None:
            total.update(run.result.totals())
    lines.append(f"  {'total':<{width}}  {'':<8}  {_counts(total)}")
    failed = [run.account for run in runs if run.error is not None]
    problems = [run.account for run in runs if run.error is None and not run.ok]
    done = [run.result for run in runs if run.result is not None]
    ended = f"{len(done)} of {len(runs)} account(s) {'pushed' if applied else 'previewed'}"
    if applied:
        ended += f" in {seconds:.1f}s: {sum(r.writes for r in done):,} write(s) sent"
    else:
        planned = sum(r.planned_writes() for r in done)
        ended += f" in {seconds:.1f}s: {planned:,} write(s) planned (--apply sends them)"
    if failed:
        ended += f"; failed: {', '.join(failed)} (run again: nothing that landed is sent twice)"
    if problems:
        ended += f"; with problems: {', '.join(problems)} (see their reports above)"
    lines.append(ended)
    return "\n".join(lines)


def document(
    runs: list[AccountPush], code: int, applied: bool, seconds: float, samples: int
) -> dict[str, Any]:
    """The --json document: the envelope, the totals, then each account's own document."""
    from feedback_sync.app.documents import envelope, push_document

    failed = [run.account for run in runs if not run.ok]
    error = f"{len(failed)} account(s) did not push cleanly: {', '.join(failed)}"
    result = envelope("push", code, error if failed else None)
    total: Counter[str] = Counter()
    for run in runs:
        if run.result is not None:
            total.update(run.result.totals())
    result.update(
        {
            "applied": applied,
            "seconds": round(seconds, 3),
            "totals": {action: total[action] for action in ACTIONS},
            "accounts": {
                run.account: {
                    "ok": run.ok,
                    "exit_code": run.exit_code,
                    "seconds": round(run.seconds, 3),
                    "error": run.error,
                    "result": None if run.result is None else push_document(run.result, samples),
                }
                for run in runs
            },
        }
    )
    return result
