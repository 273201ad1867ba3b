"""One run at a time per warehouse: an advisory lock held for a whole sync, push or models run.

DuckDB admits one writer per file, but only while a connection is open: a sync opens and
closes it several times (state, load, reconcile, models), and extracts into dlt's working
folder before it opens it at all. Two runs started together would both extract into the
same working folder and fail, or interleave, at whichever step met the lock first. So every
run that writes takes an exclusive ``flock`` first, on ``<warehouse>.lock`` beside the
DuckDB file (``<folder>/.feedback-sync/work.duckdb.lock`` for Parquet) and, for any
destination, on ``<pipeline name>.lock`` beside the warehouse's own dlt working folder
(``working_folder.py``), so runs of two warehouses never wait for each other. A second run
of the same warehouse fails at once, naming the warehouse, where it is and the first run
(its command and process id), or waits up to ``wait_seconds`` for it to end.

``flock`` locks belong to the open file: the kernel drops them when the process ends, a
SIGKILL included, so a dead run never leaves a lock behind and nothing needs cleaning up.
The lock files stay (empty of meaning once unlocked); deleting them is harmless. A run that
made the lock file beside a warehouse that is still not there when it ends (a first sync
that failed before its first load) removes it again, with the folders it made for it: a
failed first run leaves nothing in the project's folder. A run that takes a lock checks
that the file it locked is still the one at that path (another run may have removed it
meanwhile), so removing one never lets two runs hold a warehouse at once.
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
    return [path for path, _ in _locks(target)]


def _locks(target: Target) -> list[tuple[Path, Path | None]]:
    """Each lock file, with the warehouse file whose absence at the end of a run that made
    the lock file has it removed again (None: it stays)."""
    locks: list[tuple[Path, Path | None]] = []
    warehouse = target.writer_file()
    if warehouse is not None:
        locks.append((warehouse.with_name(f"{warehouse.name}.lock"), warehouse))
    locks.append((target.working_root() / f"{target.pipeline_name}.lock", None))
    return locks


def _warehouse(target: Target) -> str:
    """The warehouse a lock protects and where it is, for the messages."""
    where = target.location()
    return f"{target.describe()} at {where}" if not where.endswith("://") else target.describe()


@contextlib.contextmanager
def hold(target: Target, what: str, wait_seconds: float = 0.0) -> Iterator[None]:
    """Holds every lock of ``target`` for the block, or raises ``WarehouseBusy``."""
    with contextlib.ExitStack() as stack:
        where = _warehouse(target)
        for path, unless in _locks(target):
            stack.enter_context(_hold_one(path, what, wait_seconds, where, unless))
        yield


@contextlib.contextmanager
def _hold_one(
    path: Path, what: str, wait_seconds: float, where: str, unless: Path | None = None
) -> Iterator[None]:
    """Holds the lock ``path``; where this run made it and ``unless`` is not there at the
    end, removes it and the folders made for it."""
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
    while True:
        # again after a wait: the run that held it may have removed the folders too
        made = _missing_folders(path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, new = _open(path)
        except FileNotFoundError:  # its folder removed between the two: make it again
            continue
        try:
            _lock(fd, path, what, wait_seconds, where)
        except BaseException:
            os.close(fd)
            raise
        if _is_at(fd, path):
            break
        # removed (or replaced) by the run that held it: lock the file now at the path
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    try:
        holder = {
            "command": what,
            "warehouse": where,
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
            if new and unless is not None and not unless.exists():
                # nothing was made beside it: a failed first run leaves nothing behind
                with contextlib.suppress(OSError):
                    path.unlink()
                for folder in made:
                    with contextlib.suppress(OSError):  # not empty: something else is there
                        folder.rmdir()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _missing_folders(folder: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would make for ``folder``, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _open(path: Path) -> tuple[int, bool]:
    """The lock file opened (made where missing), and whether this call made it."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644), False


def _is_at(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is still the file at ``path``."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino)


def _lock(fd: int, path: Path, what: str, wait_seconds: float, where: str) -> None:
    """Takes the ``flock`` of ``fd``, waiting up to ``wait_seconds``; raises WarehouseBusy."""
    deadline = time.monotonic() + wait_seconds
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
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
        f"the warehouse {where} is in use by {who}{waited_text}; nothing was done. Run again "
        f"when it ends, or pass --wait SECONDS to wait for it (lock file {path})"
    )
