"""Ctrl-C during a sync: every press is noted, each step checks as it begins, and the one
line the run ends with says what the interrupted step leaves and what finishes it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def ctrl_c() -> Iterator[Callable[[], None]]:
    """Notes every Ctrl-C while the run is on, and gives a check that raises
    ``KeyboardInterrupt`` once one came. Python raises it where the signal lands, but
    DuckDB turns it into its own error ("Query interrupted") inside a statement, and a step
    that keeps going after a failure of its own (the history, housekeeping) would swallow
    it: each step checks as it begins (``Progress.checkpoint``). Off the main thread (a
    Prefect task) signals are not this run's to handle."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    seen = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def noted(number: int, frame: Any) -> None:
        seen.set()
        if callable(previous):
            previous(number, frame)  # Python's own: KeyboardInterrupt here

    def check() -> None:
        if seen.is_set():
            raise KeyboardInterrupt

    if previous in (signal.SIG_IGN, None):  # Ctrl-C ignored here (nohup): left so
        yield check
        return
    signal.signal(signal.SIGINT, noted)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, previous)


# what a Ctrl-C in each step of a sync leaves, and what finishes it
_INTERRUPTED = {
    "fetch": "interrupted while fetching: nothing of this run was committed; the next run "
    "resumes from the last committed state",
    "load": "interrupted during the load: what it fetched stays in dlt's working folder, and "
    "the next run loads it first (nothing is fetched twice or lost), then resumes",
    "after": "interrupted after the load: its data is committed; the next run first finishes "
    "what this one left (deletes, history, files)",
    "models": "interrupted while the models were built: the data is committed, the marts "
    "are not rebuilt (the last build's stay); run `feedback-sync models` to build them",
}
_STEPS = {
    "starting": "fetch",
    "extract": "fetch",
    "normalize": "load",
    "load": "load",
    "loaded": "after",
    "reconcile": "after",
    "history": "after",
    "parquet": "after",
    "models": "models",
}


def interrupted_in(stage: str) -> str:
    """The one line a sync interrupted in ``stage`` (``Progress.current``) ends with."""
    return _INTERRUPTED[_STEPS.get(stage, "after")]
