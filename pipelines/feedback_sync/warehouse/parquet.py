"""The Parquet destination: one Parquet file per table under a folder (``data/parquet``),
holding the current rows.

dlt's plain filesystem destination appends on merge, so merges, deletes and state happen in
a working DuckDB file inside the folder (``.feedback-sync/``), and every table a run
touched is then written out as ``<table>.parquet`` (replaced atomically,
``parquet_files.py``). The models are built in ``<folder>/models.duckdb`` over views of the
files, and the marts are written as ``<folder>/marts/<mart>.parquet``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from feedback_sync.errors import ModelError, NothingSynced
from feedback_sync.warehouse.duckdb import MODELS_DUCKDB, DuckDb
from feedback_sync.warehouse.target import PIPELINE_NAME, Target

if TYPE_CHECKING:
    from dlt.pipeline.pipeline import Pipeline

    from feedback_sync.warehouse.engines import Engine

DEFAULT_PARQUET_DIR = Path("data/parquet")
# the folder under the Parquet folder that holds the working DuckDB file
WORKING_DIR = ".feedback-sync"
MARTS_FOLDER = "marts"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Parquet(DuckDb):
    """Parquet files, written from a working DuckDB file."""

    parquet_dir: Path = DEFAULT_PARQUET_DIR

    publish_step: ClassVar[str | None] = "parquet"

    def for_account(self, account: str) -> Target:
        """The account's dataset, and its files in a folder of its own under
        ``parquet_dir`` (``data/parquet/acme/ideas.parquet``)."""
        import dataclasses

        chosen = super().for_account(account)
        assert isinstance(chosen, Parquet)
        return dataclasses.replace(chosen, parquet_dir=self.parquet_dir / account)

    def check_writable(self) -> str:
        from feedback_sync.warehouse.target import probe_folder

        return probe_folder(self.parquet_dir)

    @property
    def pipeline_name(self) -> str:
        return f"{PIPELINE_NAME}_{self.destination}"

    def duckdb_file(self) -> Path | None:
        return self.parquet_dir / WORKING_DIR / "work.duckdb"

    def duckdb_files(self) -> list[tuple[Path, bool]]:
        return [(self._file(), False), (self.models_file(), False)]

    def describe(self) -> str:
        return f"Parquet files in {self.parquet_dir}/"

    def location(self) -> str:
        return f"file://{self.parquet_dir.resolve()}"

    def relation_uri(self, schema: str, name: str, *, mart: bool) -> str | None:
        folder = f"{MARTS_FOLDER}/" if mart else ""
        return f"{self.location()}/{folder}{name}.parquet"

    def identity_path(self) -> Path | None:
        return self.parquet_dir

    def writer_name(self) -> tuple[str, str, str]:
        return "parquet", Path(self.parquet_dir).resolve().name, "root"

    def publish(
        self,
        pipeline: Pipeline,
        tables: Collection[str],
        loaded: Iterable[str],
        removed: Iterable[str],
        everything: bool,
    ) -> dict[str, int]:
        """Writes ``<table>.parquet`` for the tables the run loaded or removed rows from
        (with the child tables of a root it removed rows from) and any whose file is
        missing; ``everything``: every table (an earlier run's load may not have been
        written out)."""
        from feedback_sync.warehouse.parquet_files import export_parquet

        removed = set(removed)
        touched = set(loaded) | removed
        for root in removed:
            touched |= {t for t in tables if t.startswith(f"{root}__")}
        missing = {t for t in tables if not (self.parquet_dir / f"{t}.parquet").exists()}
        if everything:
            touched = set(tables)
        written = sorted((touched | missing) & set(tables))
        return export_parquet(pipeline, self.parquet_dir, written)

    def models_file(self) -> Path:
        return self.parquet_dir / MODELS_DUCKDB

    def open_models(
        self, *, read_only: bool = False, building: bool = False
    ) -> contextlib.AbstractContextManager[tuple[Engine, str]]:
        self.check_before_run()
        # an account's files are in a folder of its own (``for_account``)
        files = (self.parquet_dir.glob(pattern) for pattern in ("*.parquet", "*/*.parquet"))
        if building and not any(any(found) for found in files):
            # before the models file is made: a mistyped folder is left as it was
            raise NothingSynced(f"no Parquet files in {self.parquet_dir}/: run a sync first")
        return super().open_models(read_only=read_only, building=building)

    def _models_file_made_by_build(self) -> bool:
        return True

    def prepare_models(self, engine: Engine) -> None:
        parquet_views(engine.con, self.parquet_dir, self.dataset)  # type: ignore[attr-defined]

    def after_models(
        self, engine: Engine, schema: str, marts: Mapping[str, int], reused: bool
    ) -> None:
        folder = self.parquet_dir / MARTS_FOLDER
        if not reused or not all((folder / f"{name}.parquet").exists() for name in marts):
            export_marts(engine.con, schema, folder, marts)  # type: ignore[attr-defined]


def parquet_views(con: Any, folder: Path, dataset: str) -> list[str]:
    """Views ``<dataset>.<table>`` over ``<folder>/<table>.parquet``; the tables viewed.

    Views of files no longer there are dropped. The paths are absolute: the models file is
    rebuilt by every ``models`` run, so a moved folder needs one run to follow.
    """
    import duckdb

    con.execute(f'create schema if not exists "{dataset}"')
    tables = []
    for file in sorted(folder.glob("*.parquet")):
        table = file.stem
        if not _IDENT.match(table):
            continue
        path = str(file.resolve()).replace("'", "''")
        view = f'"{dataset}"."{table}"'
        try:
            con.execute(f"create or replace view {view} as select * from read_parquet('{path}')")
        except duckdb.Error as exc:
            raise ModelError(f"cannot read {file}: {exc}") from None
        tables.append(table)
    stale = con.execute(
        "select view_name from duckdb_views() where schema_name = ? and not internal", [dataset]
    ).fetchall()
    for (name,) in stale:
        if name not in tables:
            con.execute(f'drop view "{dataset}"."{name}"')
    return tables


def export_marts(con: Any, schema: str, folder: Path, names: Iterable[str]) -> None:
    """Each mart of ``schema`` as ``<folder>/<mart>.parquet``: all written aside first, then
    all renamed."""
    import duckdb

    from feedback_sync.warehouse.parquet_files import write_parquet

    staged = folder / ".next"
    try:
        staged.mkdir(parents=True, exist_ok=True)
        written = []
        for name in names:
            relation = f'"{schema}"."{name}"'
            write_parquet(con.execute, relation, staged / f"{name}.parquet")
            written.append(name)
        for name in written:
            (staged / f"{name}.parquet").replace(folder / f"{name}.parquet")
        staged.rmdir()
    except (OSError, duckdb.Error) as exc:
        raise ModelError(f"writing the marts to {folder}: {exc}") from None


DESTINATION = Parquet
