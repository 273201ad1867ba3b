"""One run at a time per warehouse dataset, one writer at a time per DuckDB file.

Every run that writes (a sync, a push, a models build) takes exclusive ``flock`` locks, in
this order and never the reverse:

1. the **pipeline lock**, ``<pipeline name>.lock`` beside the warehouse's own dlt working
   folder (``working_folder.py``), for any destination: the run's state, pending packages
   and journal are that folder's;
2. where the warehouse is a DuckDB file (``Target.writer_file``; for Parquet the working
   ``<folder>/.feedback-sync/work.duckdb``), the **dataset lock**
   ``<file>.<dataset>.lock`` beside it: runs of one dataset of the file meet there from
   whatever working folder they use (another ``--pipelines-dir``, another user);
3. then the **file lock**, ``<file>.lock`` beside it: DuckDB admits one writing process
   per file, whatever the dataset.

A run holds the first two for its whole length (``hold_run``). A second run of the same
warehouse and dataset fails at once, naming the warehouse, where it is and the first run
(its command and process id), or waits up to ``wait_seconds`` (``--wait``) for it to end:
two runs of one dataset never overlap at all, and runs of two warehouses never wait for
each other.

The file lock is a **turn** (``turn``), waited for as long as it takes: a sync takes it
only around the steps that open the file (what earlier runs left and the state restore;
the load and everything after it to the publish; the models) and keeps the file open only
inside them (``Target.kept_open``). Its extract, most of a run, neither holds the lock nor
has the file open, so the runs of the other datasets of one file (the accounts,
``api/accounts.py``) fetch side by side and write in turn. A push and a models build hold
their turn for their whole run (``hold``). The wait has no limit and no circle: whoever
holds the file is a run of another dataset (the first two locks keep the same dataset's
out) inside a step that ends, and no run waits for a pipeline or dataset lock while it
holds the file (``hold_run`` refuses to, so the order above is the only one).

``flock`` locks belong to the open file: the kernel drops them when the process ends, a
SIGKILL included, so a dead run never leaves a lock behind and nothing needs cleaning up;
a run killed between its extract and its load leaves a pending package, which the next
run loads first. The lock files stay (empty of meaning once unlocked); deleting them is
harmless. A run that made a lock file beside a warehouse that is still not there when it
lets go (a first sync that failed before its first load) removes it again, with the
folders it made for it: a failed first run leaves nothing in the project's folder. A run
that takes a lock checks that the file it locked is still the one at that path (another
run may have removed it meanwhile), so removing one never lets two runs hold it at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from feedback_sync.errors import WarehouseBusy
from feedback_sync.warehouse.target import Target

POLL_SECONDS = 0.25
# locks this process holds, by path: (thread, depth). A run that calls another (a sync
# builds the models) holds them already; a lock held by another thread blocks like another
# process's (flock conflicts across open files, within one process too)
_held: dict[Path, tuple[int, int]] = {}
# of those, the file locks (turns): a thread holding one takes no other lock afresh
_turns: set[Path] = set()
_held_guard = threading.Lock()


@dataclass(frozen=True)
class _Lock:
    """A lock file, and the warehouse file whose absence when a run that made the lock
    file lets go has it removed again (None: it stays)."""

    path: Path
    unless: Path | None = None
    turn: bool = False


@dataclass(frozen=True)
class _Holder:
    """Who holds a lock, written into its file for the messages of a run that finds it
    held."""

    command: str
    warehouse: str
    dataset: str


def lock_paths(target: Target) -> list[Path]:
    """The files a run of ``target`` locks, in the order it takes them: those it holds
    throughout, then the file lock of its turns."""
    turn = _file_lock(target)
    return [lock.path for lock in [*_run_locks(target), *([turn] if turn else [])]]


def _run_locks(target: Target) -> list[_Lock]:
    """The pipeline lock, and the dataset lock where the warehouse is a DuckDB file."""
    locks = [_Lock(target.working_root() / f"{target.pipeline_name}.lock")]
    file = target.writer_file()
    if file is not None:
        locks.append(_Lock(file.with_name(f"{file.name}.{target.dataset}.lock"), file))
    return locks


def _file_lock(target: Target) -> _Lock | None:
    """The lock of the file one writing process at a time may hold; None where there is
    none (a server admits several writers)."""
    file = target.writer_file()
    return None if file is None else _Lock(file.with_name(f"{file.name}.lock"), file, turn=True)


def _warehouse(target: Target) -> str:
    """The warehouse a lock protects and where it is, for the messages."""
    where = target.location()
    return f"{target.describe()} at {where}" if not where.endswith("://") else target.describe()


@contextlib.contextmanager
def hold(target: Target, what: str, wait_seconds: float = 0.0) -> Iterator[None]:
    """Holds every lock of ``target`` for the block (a push, a models build): the run
    locks (``hold_run``), then the file's turn (``turn``).

    Raises:
        WarehouseBusy: another run of the same warehouse and dataset holds it.
    """
    with hold_run(target, what, wait_seconds), turn(target, what):
        yield


@contextlib.contextmanager
def hold_run(target: Target, what: str, wait_seconds: float = 0.0) -> Iterator[None]:
    """Holds the pipeline lock and, on a DuckDB file, the dataset lock for the block, each
    waited for up to ``wait_seconds``; the run takes its turns at the file inside
    (``turn``).

    Raises:
        WarehouseBusy: another run of the same warehouse and dataset holds one.
    """
    holder = _Holder(what, _warehouse(target), target.dataset)
    with contextlib.ExitStack() as stack:
        for lock in _run_locks(target):
            stack.enter_context(_hold_one(lock, holder, _Waiting(holder.warehouse, wait_seconds)))
        yield


@contextlib.contextmanager
def turn(target: Target, what: str, say: Callable[[str], None] | None = None) -> Iterator[None]:
    """Holds the file lock for the block, taken inside ``hold_run``: this run's turn at a
    DuckDB file the runs of other datasets write too. Waited for as long as the run that
    holds it takes, saying so once through ``say`` (stderr by default); nothing where the
    warehouse has no such file."""
    lock = _file_lock(target)
    if lock is None:
        yield
        return
    run_locks = [run_lock.path.absolute() for run_lock in _run_locks(target)]
    with _held_guard:
        inside = all(_held.get(path, (0, 0))[0] == threading.get_ident() for path in run_locks)
    if not inside:
        raise RuntimeError(f"a turn at {lock.path} is taken inside hold_run (the lock order)")
    holder = _Holder(what, _warehouse(target), target.dataset)
    with _hold_one(lock, holder, _Waiting(holder.warehouse, None, say)):
        yield


@dataclass(frozen=True)
class _Waiting:
    """How long a lock is waited for (None: as long as it takes) and where the line that
    says so goes (stderr where ``say`` is None)."""

    where: str
    seconds: float | None
    say: Callable[[str], None] | None = None

    def tell(self, path: Path, what: str) -> None:
        if self.seconds is None:
            line = (
                f"{what}: waiting for its turn at {path.with_suffix('')}: {_holder(path)}"
                f"{_of_dataset(path)} is writing there (the datasets of one DuckDB file write "
                "one at a time)"
            )
        else:
            line = f"{what}: waiting up to {self.seconds:g}s: {_holder(path)} holds {self.where}"
        if self.say is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self.say(line)


@contextlib.contextmanager
def _hold_one(lock: _Lock, holder: _Holder, waiting: _Waiting) -> Iterator[None]:
    """Holds ``lock``; where this run made its file and the warehouse file it names is not
    there at the end, removes it and the folders made for it."""
    path = lock.path.absolute()
    me = threading.get_ident()
    with _held_guard:
        owner, depth = _held.get(path, (me, 0))
        nested = depth > 0 and owner == me
        if nested:
            _held[path] = (me, depth + 1)
        elif any(_held.get(held, (0, 0))[0] == me for held in _turns):
            raise RuntimeError(f"{path} is locked before the file's turn, never inside it")
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[path] = (me, _held[path][1] - 1)
        return
    fd, made, new = _locked(path, holder.command, waiting)
    try:
        # who holds it, for the message of a run that finds it held; a full disk leaves it
        # unsaid (the lock itself needs no space)
        _write(fd, json.dumps(_holding(holder)).encode())
        with _held_guard:
            _held[path] = (me, 1)
            if lock.turn:
                _turns.add(path)
        try:
            yield
        finally:
            with _held_guard:
                _held.pop(path, None)
                _turns.discard(path)
            _write(fd, b"")
            if new and lock.unless is not None and not lock.unless.exists():
                # nothing was made beside it: a failed first run leaves nothing behind
                with contextlib.suppress(OSError):
                    path.unlink()
                for folder in made:
                    with contextlib.suppress(OSError):  # not empty: something else is there
                        folder.rmdir()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holding(holder: _Holder) -> dict[str, object]:
    return {
        "command": holder.command,
        "warehouse": holder.warehouse,
        "dataset": holder.dataset,
        "pid": os.getpid(),
        "since": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _locked(path: Path, what: str, waiting: _Waiting) -> tuple[int, list[Path], bool]:
    """The lock file at ``path`` opened and locked: its descriptor, the folders made for
    it, and whether this run made the file."""
    while True:
        # again after a wait: the run that held it may have removed the folders too
        made = _missing_folders(path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, new = _open(path)
        except FileNotFoundError:  # its folder removed between the two: make it again
            continue
        try:
            _lock(fd, path, what, waiting)
        except BaseException:
            os.close(fd)
            raise
        if _is_at(fd, path):
            return fd, made, new
        # removed (or replaced) by the run that held it: lock the file now at the path
        fcntl.flock(fd, fcntl.LOCK_UN)
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


def _lock(fd: int, path: Path, what: str, waiting: _Waiting) -> None:
    """Takes the ``flock`` of ``fd``, waiting as ``waiting`` says; raises WarehouseBusy."""
    deadline = None if waiting.seconds is None else time.monotonic() + waiting.seconds
    told = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if deadline is not None and time.monotonic() >= deadline:
                raise WarehouseBusy(
                    _busy_message(path, waiting.where, waiting.seconds or 0.0)
                ) from None
            if not told:
                waiting.tell(path, what)
                told = True
            time.sleep(POLL_SECONDS)


def _write(fd: int, data: bytes) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        if data:
            os.pwrite(fd, data, 0)


def _read_holder(path: Path) -> dict[str, object]:
    try:
        holder = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _of_dataset(path: Path) -> str:
    dataset = _read_holder(path).get("dataset")
    return f" of the dataset {dataset}" if dataset else ""


def _holder(path: Path) -> str:
    holder = _read_holder(path)
    if not holder.get("command"):
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
