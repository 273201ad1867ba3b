"""A package's merges run only after every table of it has been copied.

dlt loads a merge table in two steps: a copy job puts the package's rows in the staging
dataset, then, once every table of that root's chain is copied, a SQL job merges them into
the dataset. It starts each chain's merge as soon as that chain is copied, while other
chains may still be copying. If a later copy then fails for good, the package is aborted
(its state is never committed) but the chains merged before stay merged: readers see half
of a package, and dlt warns that the destination "may be in an inconsistent state".

Holding back every SQL job until no copy job is waiting or running closes that window: a
copy that fails aborts the package before any chain was merged, so the dataset keeps the
last committed package whole. What remains is a merge that itself fails after other
merges ran (each chain's merge is its own transaction), which no type or value the API
sends can cause.

A table's first load appends (``SyncRun.write_disposition``): its copy job writes into
the dataset itself, with nothing to hold back; ``appends.settle`` deletes an aborted
package's rows from those tables.

dlt has no setting or hook for this (its ``parallelism_strategy`` orders tables, not a
package's copies before its merges), so ``install`` wraps the one function its loader asks
which new jobs to start (``dlt.load.load.filter_new_jobs``, checked against dlt
``CHECKED_DLT``). The wrapper holds merges back only inside ``merges_last()``, which the
sync puts around its own loads: any other dlt pipeline in the same process loads as dlt
would. ``tests/sync/test_type_drift.py`` checks the order on every run of the suite, and
``tests/sync/test_dlt_patches.py`` fails when dlt's function changes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dlt.common.storages.load_package import ParsedLoadJobFileName

_FOLLOWUP_FORMAT = "sql"
# the dlt release whose filter_new_jobs this wraps (its source is pinned by a test)
CHECKED_DLT = "1.31.0"
# set in the thread that runs one of this product's loads (dlt asks which jobs to start in
# the thread that called ``pipeline.load()``)
_ours = threading.local()


def _is_followup(file_name: str) -> bool:
    return ParsedLoadJobFileName.parse(file_name).file_format == _FOLLOWUP_FORMAT


def _wrap(original: Callable[..., Sequence[str]]) -> Callable[..., Sequence[str]]:
    """Wraps dlt's ``filter_new_jobs``: inside ``merges_last``, SQL jobs wait while any copy
    job waits or runs."""

    def filter_new_jobs(
        file_names: Sequence[str],
        capabilities: Any,
        config: Any,
        running_jobs: Sequence[Any],
        available_slots: int,
    ) -> Sequence[str]:
        copying = any(not _is_followup(name) for name in file_names) or any(
            not _is_followup(job.file_name()) for job in running_jobs
        )
        if copying and getattr(_ours, "active", False):
            file_names = [name for name in file_names if not _is_followup(name)]
        return original(file_names, capabilities, config, running_jobs, available_slots)

    filter_new_jobs.__wrapped__ = original  # type: ignore[attr-defined]
    return filter_new_jobs


@contextlib.contextmanager
def merges_last() -> Iterator[None]:
    """The dlt loads this thread runs in the block start their merges only after every copy
    job of the package (``install`` is done first)."""
    install()
    before = getattr(_ours, "active", False)
    _ours.active = True
    try:
        yield
    finally:
        _ours.active = before


def install() -> None:
    """Wraps dlt's ``filter_new_jobs`` (idempotent); the wrapper changes nothing outside
    ``merges_last``."""
    import dlt.load.load as loader

    # imported there from dlt.load.utils, not re-exported
    current = loader.filter_new_jobs  # type: ignore[attr-defined]
    if not hasattr(current, "__wrapped__"):
        loader.filter_new_jobs = _wrap(current)  # type: ignore[attr-defined]
