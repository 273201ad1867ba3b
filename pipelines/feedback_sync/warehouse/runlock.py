"""One run at a time per warehouse: an advisory lock held for a whole sync, push or models run.

DuckDB admits one writer per file, but only while a connection is open: a sync opens and
closes it several times (state, load, reconcile, models), and extracts into dlt's working
folder before it opens it at all. Two runs started together would both extract into the
same working folder and fail, or interleave, at whichever step met the lock first. So every
run that writes takes an exclusive ``flock`` first, on ``<warehouse>.lock`` beside the
DuckDB file (``<folder>/.feedback-sync/run.lock`` for Parquet) and, for any destination, on
``<pipeline's working folder>.lock``; a second run fails at once, naming the first (its
command and process id), or waits up to ``wait_seconds`` for it to end.

``flock`` locks belong to the open file: the kernel drops them when the process ends, a
SIGKILL included, so a dead run never leaves a lock behind and nothing needs cleaning up.
The lock files stay (empty of meaning once unlocked); deleting them is harmless.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from feedback_sync.errors import WarehouseBusy
from feedback_sync.warehouse.target import Target

POLL_SECONDS = 0.25
# locks this process holds, by path: (thread, depth). A run that calls another (a sync
# builds the models) holds them already; a lock held by another thread blocks like another
# process's (flock conflicts across open files, within one process too)
_held: dict[Path, tuple[int, int]] = {}
_held_guard = threading.Lock()


def lock_paths(target: Target) -> list[Path]:
    """The files a run of ``target`` locks, in a fixed order (no two runs deadlock)."""
    paths = []
    warehouse = target.duckdb_file()
    if warehouse is not None:
        paths.append(warehouse.with_name(f"{warehouse.name}.lock"))
    paths.append(_pipelines_dir(target) / f"{target.pipeline_name}.lock")
    return paths


def _pipelines_dir(target: Target) -> Path:
    if target.pipelines_dir is not None:
        return target.pipelines_dir
    from dlt.common.pipeline import get_dlt_pipelines_dir

    return Path(get_dlt_pipelines_dir())


@contextlib.contextmanager
def hold(target: Target, what: str, wait_seconds: float = 0.0) -> Iterator[None]:
    """Holds every lock of ``target`` for the block, or raises ``WarehouseBusy``."""
    with contextlib.ExitStack() as stack:
        for path in lock_paths(target):
            stack.enter_context(_hold_one(path, what, wait_seconds, target.describe()))
        yield


@contextlib.contextmanager
def _hold_one(path: Path, what: str, wait_seconds: float, where: str) -> Iterator[None]:
    path = path.absolute()
    me = threading.get_ident()
    with _held_guard:
        owner, depth = _held.get(path, (me, 0))
        nested = depth > 0 and owner == me
        if nested:
            _held[path] = (me, depth + 1)
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[path] = (me, _held[path][1] - 1)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_seconds
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise WarehouseBusy(_busy_message(path, where, wait_seconds)) from None
                if not told:
                    print(
                        f"{what}: waiting up to {wait_seconds:g}s: {_holder(path)} holds {where}",
                        file=sys.stderr,
                        flush=True,
                    )
                    told = True
                time.sleep(POLL_SECONDS)
        holder = {
            "command": what,
            "pid": os.getpid(),
            "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        }
        # who holds it, for the message of a run that finds it held; a full disk leaves it
        # unsaid (the lock itself needs no space)
        _write(fd, json.dumps(holder).encode())
        with _held_guard:
            _held[path] = (me, 1)
        try:
            yield
        finally:
            with _held_guard:
                _held.pop(path, None)
            _write(fd, b"")
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _write(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        if data:
            os.pwrite(fd, data, 0)


def _holder(path: Path) -> str:
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        holder = {}
    if not isinstance(holder, dict) or not holder.get("command"):
        return "another feedback-sync run"
    return (
        f"another feedback-sync {holder['command']} (process {holder.get('pid', '?')}, "
        f"since {holder.get('since', '?')})"
    )


def _busy_message(path: Path, where: str, waited: float) -> str:
    who = _holder(path)
    waited_text = f" after waiting {waited:g}s" if waited > 0 else ""
    return (
        f"{where} is in use by {who}{waited_text}; nothing was done. Run again when it "
        f"ends, or pass --wait SECONDS to wait for it (lock file {path})"
    )
