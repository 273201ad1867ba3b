"""dlt's working folder of one warehouse: one per warehouse, never shared with another.

dlt keeps a pipeline's state (the incremental cursors), its schemas and the load packages
not loaded yet under ``<pipelines_dir>/<pipeline_name>``, whatever the destination's
credentials say. With one pipeline name per kind of destination, every DuckDB file synced
on a machine shared one folder: a normal run into one file resumed from the cursors a run
into another had advanced and skipped what changed in between, and one file's run held
the other's run lock. So each warehouse has a folder of its own, named after its identity
(``Target.identity``: the kind of destination, where the warehouse is, the dataset):

    <root>/<kind>-<name>-<dataset>-<hash>/
        warehouse.json          which warehouse this folder belongs to
        <pipeline name>/        dlt's working folder (state, schemas, packages, journal)
        <pipeline name>.lock    the run lock (``runlock.py``)

``<root>`` is ``--pipelines-dir`` where one is given, else ``feedback-sync`` in dlt's
pipelines folder (``~/.dlt/pipelines/feedback-sync``, ``/var/dlt/...`` as root). The
pipeline's name is what it always was, so dlt finds the state a warehouse holds under it.

Earlier versions kept the working folder at ``<pipelines dir>/<pipeline name>``, one per
kind of destination. A sync of a warehouse whose own folder holds nothing yet takes that
folder over, under the warehouse's run lock, when it is provably this warehouse's: the
newest package it loaded is a load this warehouse completed, its state is the one the
warehouse committed last (two warehouses of one account can hold equal states, so the
state alone proves nothing), and no load package is pending in it; all of that is checked
while holding the old folder's own run lock, so no run of an older version is using it.
Otherwise the new folder starts empty and dlt restores the state from the warehouse
itself, as on a new machine; the old folder is left where it is for the warehouse it
belongs to. Other commands (``status``, ``report``, ``check``) never move it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from feedback_sync.errors import ConfigError

if TYPE_CHECKING:
    from dlt.pipeline.pipeline import Pipeline


class Target(Protocol):
    """What this module asks of a ``target.Target`` (which imports this module)."""

    @property
    def destination(self) -> str: ...

    @property
    def dataset(self) -> str: ...

    @property
    def pipelines_dir(self) -> Path | None: ...

    @property
    def pipeline_name(self) -> str: ...

    def identity(self) -> str: ...

    def identity_name(self) -> str: ...

    def describe(self) -> str: ...

    def location(self) -> str: ...

    def committed_version_hash(self, pipeline: Pipeline) -> str | None: ...

    def load_completed(self, pipeline: Pipeline, load_id: str) -> bool: ...


log = logging.getLogger("feedback_sync")

# the folder in dlt's pipelines folder that holds one working folder per warehouse
ROOT_NAME = "feedback-sync"
MARKER = "warehouse.json"
# dlt's folders of packages not loaded yet (extracted; normalized; being made)
_PENDING = (("normalize", "extracted"), ("load", "normalized"), ("load", "new"))


def default_root() -> Path:
    """``feedback-sync`` in dlt's pipelines folder (``$DLT_DATA_DIR/pipelines``)."""
    return Path(_dlt_pipelines_dir()) / ROOT_NAME


def _dlt_pipelines_dir() -> str:
    from dlt.common.pipeline import get_dlt_pipelines_dir

    return get_dlt_pipelines_dir()


def folder_name(target: Target) -> str:
    """``<kind>-<name>-<dataset>-<hash>``: readable in a listing, unique by the hash of the
    whole identity (the readable part may be cut or shared by two warehouses)."""
    digest = hashlib.sha256(target.identity().encode("utf-8")).hexdigest()[:12]
    parts = [target.destination, target.identity_name(), target.dataset]
    readable = "-".join(_slug(part) for part in parts if _slug(part))
    return f"{readable[:60]}-{digest}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "-", text.lower()).strip("-")


def root_of(target: Target) -> Path:
    """The folder given to dlt as ``pipelines_dir`` for ``target``'s pipeline."""
    base = target.pipelines_dir if target.pipelines_dir is not None else default_root()
    return base / folder_name(target)


def claim(target: Target) -> Path:
    """Makes ``target``'s folder where it is missing and names the warehouse in it; the
    folder.

    Raises:
        ConfigError: the folder names another warehouse (a folder copied or moved by hand).
    """
    root = root_of(target)
    marker = root / MARKER
    identity = target.identity()
    try:
        found = json.loads(marker.read_text(encoding="utf-8"))
    except FileNotFoundError:
        found = None
    except (OSError, ValueError):
        found = {}  # unreadable: written again below
    known = found.get("identity") if isinstance(found, dict) else None
    if known is not None and known != identity:
        raise ConfigError(
            f"dlt's working folder {root} belongs to another warehouse "
            f"({found.get('warehouse', '?')}), not to {target.describe()}; "
            "move it back or remove it (the next run restores the state from the warehouse)"
        )
    if known is None:  # written once: the same warehouse may be named another way later
        named = {
            "identity": identity,
            "warehouse": target.describe(),
            "location": target.location(),
            "dataset": target.dataset,
        }
        root.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=root, prefix=f".{MARKER}.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(named, indent=2) + "\n")
        os.replace(partial, marker)
    return root


def take_over_legacy(target: Target, pipeline: Pipeline) -> bool:
    """Moves the shared working folder of an earlier version into ``target``'s own, where
    it is provably this warehouse's (the module's docstring); whether it did.

    ``pipeline`` is ``target``'s pipeline in its own folder, which must hold nothing of
    its own yet (``has_data``); the caller holds the warehouse's run lock.
    """
    base = target.pipelines_dir if target.pipelines_dir is not None else Path(_dlt_pipelines_dir())
    legacy = base / target.pipeline_name
    if pipeline.has_data or not (legacy / "state.json").is_file():
        return False
    mine = Path(pipeline.working_dir)
    with _held(base / f"{target.pipeline_name}.lock") as free:
        # checked under the old folder's lock: no run of an earlier version changes it now
        if not free:
            log.info("the working folder %s is in use by an older run: not taken over", legacy)
            return False
        local_hash = _state_hash(legacy)
        newest = _newest_loaded(legacy)
        if local_hash is None or newest is None or _has_pending(legacy):
            return False
        if target.committed_version_hash(pipeline) != local_hash:
            return False
        if not target.load_completed(pipeline, newest):
            return False
        aside = mine.with_name(f".{mine.name}.fresh")
        shutil.rmtree(aside, ignore_errors=True)
        if mine.exists():
            os.replace(mine, aside)
        try:
            os.replace(legacy, mine)
        except OSError as exc:  # another disk, say: the folder made just now stays
            if aside.exists():
                os.replace(aside, mine)
            log.warning("could not take over dlt's working folder %s: %s", legacy, exc)
            return False
        shutil.rmtree(aside, ignore_errors=True)
    log.info("took over dlt's working folder %s for %s", legacy, target.describe())
    return True


def _state_hash(folder: Path) -> str | None:
    """The version hash of the state dlt keeps in ``folder``, None where it keeps none."""
    try:
        state: Any = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = state.get("_version_hash") if isinstance(state, dict) else None
    return value if isinstance(value, str) and value else None


def _newest_loaded(folder: Path) -> str | None:
    """The load id of the newest package dlt loaded from ``folder`` (the sync keeps at least
    the newest one, ``keep_loaded_packages``), None where there is none."""
    try:
        ids = [p.name for p in (folder / "load" / "loaded").iterdir()]
    except OSError:
        return None
    numeric = []
    for load_id in ids:
        with contextlib.suppress(ValueError):
            numeric.append((float(load_id), load_id))
    return max(numeric)[1] if numeric else None


def _has_pending(folder: Path) -> bool:
    """Whether ``folder`` holds a load package not loaded yet (whichever warehouse it was
    meant for: an old folder cannot say, so nothing pending is ever moved)."""
    for parts in _PENDING:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            if any(folder.joinpath(*parts).iterdir()):
                return True
    return False


@contextlib.contextmanager
def _held(path: Path) -> Any:
    """The run lock of an older version on its shared folder, if free (yields whether)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
