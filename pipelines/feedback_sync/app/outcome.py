"""How a command ends: its exit code and, when it fails, one line on stderr (with
``--json``, also the error document of ``app/documents`` on stdout).

Exit codes: 0 success, 1 the run failed, 2 bad input or configuration, 130 Ctrl-C, 141
stdout's reader went away (``READER_GONE``). What a failure says comes from
``app/failures.explain``; an error nobody foresaw is one line too, with its trace in a file
(``app/crash.py``). Every message is scrubbed of secrets last.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from typing import Any

from feedback_sync.errors import UsageError


def print_json(document: dict[str, Any]) -> None:
    """One JSON document on stdout (``--json``)."""
    from feedback_sync.app.documents import dumps

    print(dumps(document), flush=True)


def run_command(args: argparse.Namespace) -> int:
    """Runs the parsed command (``args.run``); every failure ends as one line on stderr and
    an exit code (and, with --json, the error document on stdout)."""
    try:
        code: int = args.run(args)
        return code
    except UsageError as exc:
        return fail(args, str(exc), 2)
    except KeyboardInterrupt:
        return fail(args, "interrupted; the next run resumes from the last committed state", 130)
    except BrokenPipeError:
        return reader_gone()
    except Exception as exc:
        from feedback_sync.app.failures import explain

        message, code = explain(exc)
        if message is None:
            return _unexpected(args, exc)
        return fail(args, message, code)


# the exit code of a command whose reader went away (`status | head`): what a shell reports
# for a process that SIGPIPE ended (128 + 13), without the signal
READER_GONE = 141


def reader_gone() -> int:
    """stdout's reader closed the pipe: stop quietly. Python's own advice: point stdout at
    /dev/null, so the flush at exit cannot fail again (and print a traceback)."""
    # stdout that is no file (a test's capture) has nothing to flush
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return READER_GONE


def fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Says ``message`` as the command's one error line (and, with --json, in the error
    document); returns ``code``."""
    from feedback_sync.redaction import SCRUBBER

    message = SCRUBBER.scrub(message)  # the messages never carry a secret; a last guard
    try:
        print(f"feedback-sync {args.command}: error: {message}", file=sys.stderr, flush=True)
        if getattr(args, "json", False):
            print_json(error_document(args.command, code, message))
    except BrokenPipeError:
        return reader_gone()
    return code


def error_document(command: str, code: int, message: str) -> dict[str, Any]:
    """The --json document of a command that failed with ``code``."""
    from feedback_sync.app.documents import envelope

    return envelope(command, code, message)


def _unexpected(args: argparse.Namespace, exc: BaseException) -> int:
    """An error nobody foresaw: one line, and the trace in a file (``app/crash.py``)."""
    from feedback_sync.app.crash import write_trace
    from feedback_sync.redaction import SCRUBBER

    try:  # first: it registers the secrets the line is scrubbed of too
        where = f"the full trace is in {write_trace(args.command, exc)}"
    except OSError as error:
        where = f"its trace could not be written ({error})"
    what = SCRUBBER.scrub(f"{type(exc).__name__}: {_first_line(exc)}")
    return fail(
        args,
        f"unexpected {what} ({where}; this is a bug in feedback-sync or a case it does not "
        "handle yet: please report it with that file)",
        1,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "no detail"
