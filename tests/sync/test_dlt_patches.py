"""The two places feedback-sync wraps dlt's own functions (dlt offers no hook for either):
each changes only this product's loads, and each fails here first when dlt changes the
function it wraps (then read the new code, re-check the wrapper, and record the new hash
and CHECKED_DLT)."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from typing import Any

import dlt
import pytest
from feedback_sync.warehouse import delta_tables, load_order

# sha256 of each wrapped function's source in dlt CHECKED_DLT
WRAPPED = {
    "dlt.load.utils.filter_new_jobs": (
        "4a71d48b2fa75f4cb14e29f81864b3ba3ef9e0a8a70c8d8c0aac92043335b122"
    ),
    "DeltaLoadFilesystemJob.run": (
        "fdbfcdbce14a3ce42a0528505ff9ef3b2151dc10ce800535e569e0f54206918d"
    ),
    "dlt.common.libs.pyarrow.get_local_dataset_reader": (
        "c6cf3a41d1db0a077e62e94622ad723fb553ecf067b7fe589867b681363ff7af"
    ),
}


def _source_hash(function: Callable[..., Any]) -> str:
    original = getattr(function, "__wrapped__", function)
    return hashlib.sha256(inspect.getsource(original).encode()).hexdigest()


def test_the_wrapped_functions_are_those_checked() -> None:
    import dlt.common.libs.pyarrow as dlt_arrow
    import dlt.load.load as loader
    import dlt.load.utils as load_utils
    from dlt.destinations.impl.filesystem.filesystem import DeltaLoadFilesystemJob

    assert load_order.CHECKED_DLT == delta_tables.CHECKED_DLT == dlt.__version__
    found = {
        "dlt.load.utils.filter_new_jobs": _source_hash(load_utils.filter_new_jobs),
        "DeltaLoadFilesystemJob.run": _source_hash(DeltaLoadFilesystemJob.run),
        "dlt.common.libs.pyarrow.get_local_dataset_reader": _source_hash(
            dlt_arrow.get_local_dataset_reader
        ),
    }
    assert found == WRAPPED
    # the loader asks the function by its module-level name, which is what is wrapped
    assert "filter_new_jobs(" in inspect.getsource(loader.Load.start_new_jobs)
    # and the Delta job imports the reader when it runs, so the wrapped one is used
    run = getattr(DeltaLoadFilesystemJob.run, "__wrapped__", DeltaLoadFilesystemJob.run)
    assert "import pyarrow as pa, get_local_dataset_reader" in inspect.getsource(run)


JOBS = ["comments.a1.0.parquet", "followers__companies.b2.0.sql", "topics.c3.0.parquet"]


@pytest.fixture
def wrapped() -> Callable[..., Any]:
    load_order.install()
    import dlt.load.load as loader

    return loader.filter_new_jobs  # type: ignore[attr-defined,no-any-return]


def _started(filter_new_jobs: Callable[..., Any]) -> list[str]:
    config: Any = type("Config", (), {"parallelism_strategy": None})()
    caps: Any = type("Caps", (), {"loader_parallelism_strategy": "parallel"})()
    return list(filter_new_jobs(JOBS, caps, config, [], 10))


def test_merges_wait_for_copies_only_in_this_products_loads(wrapped: Callable[..., Any]) -> None:
    assert _started(wrapped) == JOBS  # another pipeline's load: as dlt does
    with load_order.merges_last():
        assert _started(wrapped) == [JOBS[0], JOBS[2]]
    assert _started(wrapped) == JOBS


def test_delta_jobs_of_another_source_read_their_files_as_dlt_does() -> None:
    """The keys are kept once only in jobs that load the feedback source's schema."""
    table = {"columns": {"idx": {"name": "idx", "data_type": "text", "primary_key": True}}}

    def job(schema_name: str) -> Any:
        schema = type("Schema", (), {"name": schema_name})()
        client = type("Client", (), {"schema": schema})()
        return type("Job", (), {"_job_client": client, "_load_table": table})()

    assert delta_tables._keys_to_keep_once(job("feedback")) == ["idx"]
    assert delta_tables._keys_to_keep_once(job("someone_elses")) is None
