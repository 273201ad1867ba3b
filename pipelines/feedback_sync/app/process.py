"""What the command line sets for its own process, and how that process ends.

``feedback-sync`` (the console script, ``cli.run``) and ``python -m feedback_sync.app.cli``
call ``tune`` before the command; ``cli.main``, which tests call in their own process,
leaves the process as it found it (``heavy_imports`` then changes nothing). Code that
imports ``feedback_sync.app.sync`` in a process of its own (a Prefect worker, a notebook)
keeps that process's settings. Each policy says below the measurement it rests on:

- ``heavy_imports``: a command's up-front imports run with the garbage collector off, what
  they made is frozen, and the run collects after ``GC_GENERATION0_THRESHOLD`` new objects;
  Arrow gets the system allocator (``ARROW_POOL``) unless the user chose one; httpx's
  command-line client is not imported (``internals.skip_httpx_cli``: 40-45 ms);
- ``process_start``: a sync's "finished in" counts from the process's start, read from the
  kernel;
- ``end_quickly``: the console script's process ends without the interpreter's teardown
  (0.3 s) once the output is flushed and the exit handlers ran; ``end_normally`` is
  ``python -m``'s exit, for a profiler or a coverage tool that writes after it.

This module imports no heavy library (``tests/sync/test_cli_imports.py``).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from feedback_sync.internals import run_exit_handlers, skip_httpx_cli

# Python's cyclic garbage collector, around a command's up-front imports (modules a command
# imports later, such as the SQL models after a sync's load, are collected as usual). Those
# imports (dlt, Arrow, DuckDB, httpx: about 85,000 objects that live as long as the
# process) ran some 200 collections, and each full collection of the run after them walked
# them all again: 0.19-0.21 s of a 2.3 s `small` full sync, all of it holding the GIL the
# request threads wait for. So the imports run with the collector off, what they made is
# frozen (``gc.freeze``: never scanned again), and the run collects after this many new
# objects instead of 700: a sync's rows are plain dicts freed by reference counting, so the
# collector there only finds the odd cycle; 0.04 s of collections left in the same run.
# (Cycles the imports leave behind are frozen too, never freed: the collections during the
# imports used to free about 480 objects, kept now for the life of a command.)
GC_GENERATION0_THRESHOLD = 10_000
# Arrow's memory pool: the system allocator unless the user chose one
# (``ARROW_DEFAULT_MEMORY_POOL``). pyarrow's default, mimalloc, maps its memory in 2 MB huge
# pages the kernel zeroes as each is first touched: 4% of a `small` full sync's CPU (perf),
# and more peak memory (`small` 317 -> 248 MB, `medium` 589 -> 486 MB) for no speed at
# `medium` (25.8 s either way); `small`'s answers replayed without a network, 1.58 ->
# 1.44 s (medians of 8).
ARROW_POOL = "system"

# whether ``tune`` turned the policies on, and when the tuned process started
_tuned = False
_started: float | None = None


def tune() -> None:
    """Turns this module's policies on for the process, and notes when it started."""
    global _tuned, _started
    _started = process_start()
    _tuned = True


def started() -> float:
    """When the command began, on ``time.perf_counter``'s clock: the process's start where
    ``tune`` noted it, else now (``main`` called in a process of its own: tests)."""
    return _started if _started is not None else time.perf_counter()


def process_start() -> float:
    """When this process started, on ``time.perf_counter``'s clock: from the kernel where
    it says (Linux's ``/proc/self/stat``, in ticks since boot), else now. A sync's "finished
    in" counts from here: the interpreter's start and the imports are part of what the
    person or scheduler running it waited for (the summary shows them as its ``start``).
    That is 0.11-0.23 s before the first line of ``cli.run`` (the interpreter's start and
    the command line's imports; median 0.15 s of 8 on a busy 2-core machine, measured as
    ``time.perf_counter() - process_start()`` right after ``from feedback_sync.app.cli
    import run``), which a clock started in ``run`` would leave out."""
    now = time.perf_counter()
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        # starttime, the 22nd field: the 20th after the command's name
        since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    # a clock tick is 10 ms: never more than a minute, never negative
    return now - min(max(age, 0.0), 60.0)


@contextlib.contextmanager
def heavy_imports() -> Iterator[None]:
    """A command's heavy imports, under the process's policies where ``tune`` turned them on
    (the module's docstring; the measurements beside ``GC_GENERATION0_THRESHOLD`` and
    ``ARROW_POOL``, and in ``internals.skip_httpx_cli``)."""
    if not _tuned:
        yield
        return
    # read by pyarrow when its default pool is first asked for
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_POOL)
    skip_httpx_cli()
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.set_threshold(GC_GENERATION0_THRESHOLD, *gc.get_threshold()[1:])
        if collecting:
            gc.enable()


def end_quickly(code: int) -> NoReturn:
    """Ends the process with ``code``, without the interpreter's teardown.

    Once a command is done, the teardown would spend 0.3 s (a fifth of a sync with nothing
    to do) collecting the million objects dlt's imports made, memory the operating system
    takes back at once anyway, and DuckDB's bindings print a line for every object of
    theirs still alive then ("nanobind: leaked ..."). So the exit does what a normal one
    must, in the same order (wait for the threads that are not daemons, run the exit
    handlers: temporary folders, DuckDB's, dlt's; close the logs, flush the output) and
    then ends the process, whatever threads are left.
    """
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()  # as the interpreter's own exit does, before the exit handlers
    run_exit_handlers()  # what sys.exit would run; os._exit runs none
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that went away: nothing more to say
            stream.flush()
    os._exit(code)


def end_normally(code: int) -> NoReturn:
    """Ends the process with ``code`` through the interpreter's teardown (``python -m``'s
    exit). What the imports made was frozen (``heavy_imports``): the teardown's collection
    would skip it, and DuckDB's bindings would print a "nanobind: leaked" line for each of
    their objects among it. Unfrozen, the teardown frees them as any program's."""
    gc.unfreeze()
    sys.exit(code)
