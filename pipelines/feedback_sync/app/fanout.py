"""Several accounts in one command: one child process per account, some at a time.

Each account runs as ``feedback-sync sync --account NAME --json`` in a process of its own
(``python -m feedback_sync.app.cli``, with this process's environment and working folder):
an account that fails, runs out of memory or is killed takes nothing of the others with
it, each resolves its own settings (its key is never in another's process), and
``--parallel`` accounts use as many cores. Each child prints its progress on stderr,
relayed here line by line with the account's name before it, and its result as one JSON
document on stdout, read here when it ends. A child that ends without one (killed, say)
is a failed account, with what it said last.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

# an account's process: the ``feedback-sync`` command's own entry (``cli.run``), which exits
# without the interpreter's teardown; ``python -m feedback_sync.app.cli`` goes through it
# (for profilers), which cost each account's process 0.65 to 1.25 s after its work was done
# (measured by the accounts benchmark, bench/accounts.py)
CHILD = [sys.executable, "-c", "from feedback_sync.app.cli import run; run()"]


@dataclass(frozen=True)
class AccountRun:
    """What one account's run did."""

    account: str
    exit_code: int
    seconds: float
    # the child's JSON document (None: it printed none)
    document: dict[str, Any] | None
    # its error line (None: it succeeded)
    error: str | None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def requests(self) -> int:
        return int((self.document or {}).get("requests") or 0)

    @property
    def rows(self) -> int:
        tables = (self.document or {}).get("tables") or {}
        return sum(int(t.get("rows") or 0) for t in tables.values())

    def line(self, width: int) -> str:
        """One line of the summary."""
        head = f"  {self.account:<{width}}"
        if self.error is not None:
            return f"{head}  failed after {self.seconds:.1f}s: {self.error}"
        return f"{head}  ok in {self.seconds:.1f}s: {self.requests:,} requests, {self.rows:,} rows"


def run_accounts(
    accounts: Sequence[str],
    argv: Callable[[str], list[str]],
    *,
    parallel: int,
    err: IO[str] | None = None,
) -> list[AccountRun]:
    """Runs ``argv(account)`` (a ``feedback-sync`` command line) for each account,
    ``parallel`` at a time, and returns each one's run in the order of ``accounts``."""
    err = sys.stderr if err is None else err
    guard = threading.Lock()

    def one(account: str) -> AccountRun:
        return _run_one(account, [*CHILD, *argv(account)], err, guard)

    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="account") as pool:
        return list(pool.map(one, accounts))


def _run_one(account: str, command: list[str], err: IO[str], guard: threading.Lock) -> AccountRun:
    started = time.perf_counter()
    said: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    ) as child:
        relay = threading.Thread(target=_relay, args=(account, child.stderr, err, guard, said))
        relay.start()
        assert child.stdout is not None
        out = child.stdout.read()
        code = child.wait()
        relay.join()
    seconds = time.perf_counter() - started
    document = _document(out)
    if document is not None and code == 0:
        return AccountRun(account, 0, seconds, document, None)
    error = (document or {}).get("error") or _last_error(said) or f"exit code {code}"
    return AccountRun(account, code or 1, seconds, document, str(error))


def _relay(
    account: str, stream: IO[str] | None, err: IO[str], guard: threading.Lock, said: list[str]
) -> None:
    """Each line the child writes on stderr, with the account's name before it."""
    if stream is None:
        return
    for line in stream:
        said.append(line.rstrip("\n"))
        del said[:-20]
        with guard:
            err.write(f"[{account}] {line}")
            err.flush()


def _document(out: str) -> dict[str, Any] | None:
    try:
        document = json.loads(out)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _last_error(said: list[str]) -> str | None:
    """The child's error line: ``feedback-sync sync: error: ...`` without the prefix."""
    for line in reversed(said):
        _, marker, rest = line.partition(": error: ")
        if marker:
            return rest
    return said[-1] if said else None
