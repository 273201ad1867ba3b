"""The Delta destination: Delta Lake tables, one per table, through dlt's filesystem
destination with ``table_format="delta"``.

They live where dlt's ``DESTINATION__FILESYSTEM__BUCKET_URL`` says (a local folder,
``s3://``, ``gs://``, ``az://``, with dlt's credentials for it), else under ``data/delta``.
Merges, deletes and soft deletes are Delta commits (``delta_tables.py``, imported only by a
run that uses Delta: it needs delta-rs and pyarrow's datasets): a run writes only the files
its changes touch. The models are built in a local DuckDB file
(``<delta-dir>/models.duckdb``) over the tables' current snapshots.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from feedback_sync.errors import NothingSynced
from feedback_sync.extras import require
from feedback_sync.redaction import redact_url
from feedback_sync.warehouse.duckdb import MODELS_DUCKDB, check_file_names, open_duckdb_models
from feedback_sync.warehouse.target import Target

if TYPE_CHECKING:
    from dlt.pipeline.pipeline import Pipeline

    from feedback_sync.warehouse.engines import Engine


DEFAULT_DELTA_DIR = Path("data/delta")
# fsspec's schemes for Azure storage, whose URL's user part is the container
AZURE_SCHEMES = ("az", "abfs", "abfss", "adl")


# the modules its extra (``pip install 'feedback-sync[delta]'``) brings, that it imports
DRIVER_MODULES = ("deltalake",)


@dataclass(frozen=True)
class Delta(Target):
    """Delta tables in a folder or a bucket."""

    # the folder of the tables where dlt names no bucket, and of the models' DuckDB file
    delta_dir: Path = DEFAULT_DELTA_DIR

    builds_models: ClassVar[bool] = True
    reads_curated_files: ClassVar[bool] = True
    table_format: ClassVar[Any] = "delta"

    def bucket_url(self) -> str:
        """Where the Delta tables live: dlt's configured bucket, else ``delta_dir``."""
        configured: Any = os.environ.get("DESTINATION__FILESYSTEM__BUCKET_URL")
        if not configured:
            import dlt

            configured = dlt.config.get("destination.filesystem.bucket_url")
        if configured:
            return str(configured)
        return str(self.delta_dir.absolute())

    def check_writable(self) -> str:
        """A local folder is probed as any; in object storage, an object is written
        under the dataset's prefix through dlt's own client for the bucket (its
        credentials) and removed again."""
        import uuid

        from feedback_sync.errors import WarehouseUnwritable
        from feedback_sync.warehouse.target import probe_folder

        url = self.bucket_url()
        if "://" not in url or url.startswith("file://"):
            return probe_folder(Path(url.removeprefix("file://")) / self.dataset)
        shown = redact_url(url)
        with self.pipeline().destination_client() as client:
            fs = client.fs_client  # type: ignore[attr-defined]
            probe = f"{client.dataset_path.rstrip('/')}/.feedback-sync-probe-{uuid.uuid4().hex}"  # type: ignore[attr-defined]
            try:
                fs.pipe(probe, b"")
                fs.rm(probe)
            except Exception as exc:
                raise WarehouseUnwritable(
                    f"cannot write under {shown}/{self.dataset}/: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}"
                ) from None
        return f"{shown}/{self.dataset}/: an object was written and removed"

    def describe(self) -> str:
        return f"Delta tables in {redact_url(self.bucket_url())}/{self.dataset}/"

    def location(self) -> str:
        url = self.bucket_url()
        if "://" not in url:
            return f"file://{Path(url).resolve()}"
        parts = urlsplit(url)
        # on Azure the user part names the container (az://container@account): kept;
        # elsewhere it is a login (s3://KEY:SECRET@bucket), never kept. The port is kept.
        host = parts.hostname or ""
        if parts.username and parts.scheme in AZURE_SCHEMES:
            host = f"{parts.username}@{host}"
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))

    def relation_uri(self, schema: str, name: str, *, mart: bool) -> str | None:
        if mart:  # the marts are tables of the local models file
            return f"duckdb://{self.models_file().resolve()}/{schema}/{name}"
        return super().relation_uri(schema, name, mart=mart)

    def dlt_destination(self) -> Any:
        import dlt

        require("delta", "the Delta destination", DRIVER_MODULES)
        from feedback_sync.warehouse import delta_tables

        # each key once per load: delta-rs keeps or refuses repeats (delta_tables.py)
        delta_tables.install()
        return dlt.destinations.filesystem(bucket_url=self.bucket_url())

    def replace_children(
        self, pipeline: Pipeline, load_id: str, had: frozenset[str] | None = None
    ) -> dict[str, int]:
        from feedback_sync.warehouse import delta_tables

        return delta_tables.replace_children(pipeline, load_id)

    def reconcile(
        self,
        pipeline: Pipeline,
        load_id: str,
        resources: Iterable[str],
        mode: str,
        had: frozenset[str] | None = None,
        gone: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, int]:
        from feedback_sync.warehouse import delta_tables

        # every idea loads into Delta tables (the source compares ideas only where the
        # warehouse's tables are known, ``appends.warehouse_tables``): nothing is ``gone``
        # by key here, and rows not in the load are gone
        if gone:
            raise ValueError(f"Delta tables remove rows by load, not by key: {sorted(gone)}")
        return delta_tables.reconcile(pipeline, load_id, resources, mode)

    def table_counts(self, pipeline: Pipeline) -> dict[str, int]:
        from feedback_sync.warehouse import delta_tables

        return delta_tables.table_counts(pipeline)

    def load_completed(self, pipeline: Pipeline, load_id: str) -> bool:
        from feedback_sync.warehouse import delta_tables

        return delta_tables.load_completed(pipeline, load_id)

    def completed_loads(self, pipeline: Pipeline) -> tuple[datetime | None, int]:
        from feedback_sync.warehouse import delta_tables

        return delta_tables.completed_loads(pipeline)

    def key_figures(self, pipeline: Pipeline, tables: Sequence[str], key: str) -> dict[str, Any]:
        from feedback_sync.warehouse import delta_tables

        found = delta_tables.tables(pipeline)
        return {t: delta_tables.key_figures(found[t], key) for t in tables if t in found}

    def newest(
        self, pipeline: Pipeline, tables: Sequence[str], columns: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        from feedback_sync.warehouse import delta_tables

        found = delta_tables.tables(pipeline)
        newest: dict[str, dict[str, Any]] = {}
        for table in tables:
            if table in found:
                latest = delta_tables.newest(found[table], columns)
                if latest:
                    newest[table] = latest
        return newest

    def models_file(self) -> Path:
        return self.delta_dir / MODELS_DUCKDB

    def check_before_run(self) -> None:
        check_file_names([(self.models_file(), False)], self.dataset)

    def open_models(
        self, *, read_only: bool = False, building: bool = False
    ) -> contextlib.AbstractContextManager[tuple[Engine, str]]:
        self.check_before_run()
        return open_duckdb_models(self.models_file(), read_only=read_only, create=building)

    def prepare_models(self, engine: Engine) -> None:
        from feedback_sync.warehouse import delta_tables

        # a table delta-rs cannot hand over as files raises DeltaError, a ModelError
        made = delta_tables.snapshot_views(engine.con, self.pipeline(), self.dataset)  # type: ignore[attr-defined]
        if not made:
            raise NothingSynced(f"no Delta tables in {self.describe()}: run a sync first")


DESTINATION = Delta
