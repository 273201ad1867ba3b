"""The DuckDB destination (the default): one DuckDB file.

``data/warehouse.duckdb`` unless dlt's own setting ``DESTINATION__DUCKDB__CREDENTIALS``
(``[destination.duckdb] credentials``) names another. The
models are built in the same file, beside the loaded dataset.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import json
import logging
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from feedback_sync.errors import ConfigError, ModelError, NothingSynced
from feedback_sync.source.resources import SOURCE_NAME
from feedback_sync.warehouse.base import completed_loads_sql, newest_state_sql
from feedback_sync.warehouse.history_sql import HistorySql
from feedback_sync.warehouse.sql import SqlTarget
from feedback_sync.warehouse.target import (
    PIPELINE_NAME,
    Committed,
    KeptOpen,
    dlt_settings_mention,
)

log = logging.getLogger("feedback_sync")

DEFAULT_DUCKDB_PATH = Path("data/warehouse.duckdb")
# DuckDB's buffer pool during the load. The merge's de-duplicating window over the widest
# table (comments) is what fills it; 256MB keeps a sync's peak the same at 1x and 4x data
# (bench/RESULTS.md) at the price of spilling that window to disk on big loads
DUCKDB_MEMORY_LIMIT = "256MB"
# the DuckDB file the models of a Parquet or Delta target are built in
MODELS_DUCKDB = "models.duckdb"

# the catalog name a models DuckDB file is attached under (``open_models_file``): not a
# plain identifier, so never a schema's name (the product's schemas, or a --dataset)
MODELS_CATALOG = "feedback-sync warehouse"

# dlt's typed JSON marks decimals, datetimes, dates, ... with a first character from this
# range (dlt.common.json, PUA_START 0xf026 unless DLT_JSON_TYPED_PUA_START moves it)
_TYPED_MARKS = frozenset(chr(c) for c in range(0xF026, 0xF026 + 8))

if TYPE_CHECKING:
    import duckdb as duckdb_module

    from feedback_sync.warehouse.engines import Engine


class DuckDbHistorySql(HistorySql):
    """The history step's SQL on DuckDB."""

    text_type = "VARCHAR"
    json_type = "JSON"
    timestamp_type = "TIMESTAMP WITH TIME ZONE"
    boolean_type = "BOOLEAN"
    # the temporary table (the connection's own catalog ``temp``) an entity's current state
    # is staged in while it is compared, dropped after
    staged = 'temp.main."history_current"'

    def json_list(self, value: str, order: str) -> str:
        return f"to_json(list({value} order by {order}))"

    def stage(self, query: str) -> str:
        """The rows are computed once, into a temporary table, that the update, the
        closing and the insert read: the companies' window over every follower's copy, run
        inside each of those statements, held more memory at the normal sync's peak at
        ``large`` (319-323 MB against 307 MB staged, at the 256MB limit)."""
        self.client.execute_sql(f"create temporary table {self.staged} as {query}")
        return f"select * from {self.staged}"

    def unstage(self) -> None:
        self.client.execute_sql(f"drop table {self.staged}")


# DuckDB's words for a file another process holds (dlt wraps it as a connection error), and
# for a statement SIGINT interrupted (duckdb 2.0 raises a bare RuntimeError)
LOCKED = "Could not set lock on file"
QUERY_INTERRUPTED = "Query interrupted"


@dataclass(frozen=True)
class DuckDb(SqlTarget):
    """One DuckDB file; dlt loads Parquet files into it."""

    # the file (None: dlt's own setting, else ``DEFAULT_DUCKDB_PATH``)
    duckdb_path: Path | None = None

    builds_models: ClassVar[bool] = True
    history_sql: ClassVar[type[HistorySql] | None] = DuckDbHistorySql
    reads_curated_files: ClassVar[bool] = True
    # parquet load files are 20-60x faster into DuckDB than insert statements
    loader_file_format: ClassVar[str | None] = "parquet"
    # one load job at a time into tables the file holds: each merge reads its table, and
    # dlt's 20 at once held the working memory of several merges together (a normal sync's
    # peak after a 1% change at ``large`` 256-261 -> 232-245 MB, a ``/tmp`` sampler of the
    # process's RSS); DuckDB spreads each statement over every core on its own. A first
    # load keeps dlt's parallel copies: one at a time took a full sync at ``small`` from
    # 2.35 to 2.46 s (medians of 6, alternated)
    merge_load_workers: ClassVar[int | None] = 1

    @classmethod
    def held_elsewhere(cls, error: BaseException) -> str | None:
        if LOCKED in str(error):
            first = str(error).split("\n")[0]
            return (
                "the DuckDB file is in use by another process (only one writer at a time): " + first
            )
        return None

    @classmethod
    def out_of_memory(cls, error: BaseException) -> str | None:
        kind = type(error)
        if kind.__name__ == "OutOfMemoryException" and kind.__module__.lstrip("_") == "duckdb":
            text = str(error).strip()
            first = text.splitlines()[0] if text else kind.__name__
            return (
                f"DuckDB ran out of the memory it may use ({first}): raise "
                f"FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT (now {duckdb_memory_limit()})"
            )
        return None

    @classmethod
    def interrupted_statement(cls, error: BaseException) -> bool:
        if type(error).__name__ == "InterruptException":
            return True
        return isinstance(error, RuntimeError) and str(error) == QUERY_INTERRUPTED

    @property
    def pipeline_name(self) -> str:
        return PIPELINE_NAME

    def duckdb_file(self) -> Path | None:
        """The DuckDB file dlt loads into (its lock and its keep-open are the run's)."""
        if self.duckdb_path is not None:
            return self.duckdb_path
        configured = _dlt_duckdb_credentials()
        return Path(configured) if configured is not None else DEFAULT_DUCKDB_PATH

    def describe(self) -> str:
        return f"DuckDB {self.duckdb_file()} (dataset {self.dataset})"

    def exists(self) -> bool | None:
        return self._file().exists()

    def _kept_open(self) -> KeptOpen:
        return KeptFileOpen(self._file())

    def location(self) -> str:
        return f"duckdb://{self._file().resolve()}"

    def writer_name(self) -> tuple[str, str, str]:
        return "duckdb", self._file().stem, "warehouse"

    def duckdb_files(self) -> list[tuple[Path, bool]]:
        """The DuckDB files this target writes (dlt's, the models'), each with whether the
        user names it or its name is fixed (``check_file_names``)."""
        return [(self._file(), True)]  # the models are built in the same file

    def check_before_run(self) -> None:
        check_file_names(self.duckdb_files(), self.dataset)

    def writer_file(self) -> Path | None:
        return self._file()

    def identity_path(self) -> Path | None:
        return self._file()

    def _file(self) -> Path:
        path = self.duckdb_file()
        assert path is not None  # a DuckDB target always has its file
        return path

    def dlt_destination(self) -> Any:
        path = self._file()
        path.parent.mkdir(parents=True, exist_ok=True)
        # absolute: dlt resolves a relative path against the folder the pipeline was first
        # run from (kept in its local state), so a working folder run from elsewhere, or
        # copied, would load into the first folder's file
        return _duckdb_file_destination(path.absolute(), self.pipeline_name)

    def models_file(self) -> Path:
        return self._file()

    def check_writable(self) -> str:
        from feedback_sync.errors import WarehouseUnwritable
        from feedback_sync.warehouse.target import probe_folder

        self.check_before_run()
        path = self.duckdb_file()
        assert path is not None
        if not path.exists():
            return (
                f"{path} does not exist yet (the first sync makes it); {probe_folder(path.parent)}"
            )
        import duckdb

        try:
            duckdb.connect(str(path)).close()
        except duckdb.Error as exc:
            raise WarehouseUnwritable(
                f"cannot open {path} for writing: {str(exc).splitlines()[0]}"
            ) from None
        return f"{path}: opened for writing"

    def open_models(
        self, *, read_only: bool = False, building: bool = False
    ) -> contextlib.AbstractContextManager[tuple[Engine, str]]:
        self.check_before_run()
        return open_duckdb_models(
            self.models_file(),
            read_only=read_only,
            create=building and self._models_file_made_by_build(),
        )

    def _models_file_made_by_build(self) -> bool:
        """Whether a models build makes the models file when it is missing (a file of its
        own beside files or tables, not the warehouse a sync makes)."""
        return False

    def committed(self) -> Committed:
        """Read with DuckDB alone (dlt's import costs 1.2 s, six times the rest of
        ``status``): dlt's own two tables, queried the way dlt queries them
        (``_dlt_pipeline_state`` joined to the completed ``_dlt_loads``, newest first).
        Where that could differ from what dlt would read (a typed value in the state), dlt
        reads it instead."""
        return _read_committed(self) or self.read_committed_with_dlt()

    def prepare_models(self, engine: Engine) -> None:
        from feedback_sync.warehouse.engines import has_schema

        if not has_schema(engine, self.dataset):
            raise NothingSynced(
                f"{self.models_file()} has no dataset {self.dataset!r}: run a sync first"
            )


@contextlib.contextmanager
def open_duckdb_models(
    path: Path, *, read_only: bool = False, create: bool = False
) -> Iterator[tuple[Engine, str]]:
    """The engine over the models' DuckDB file at ``path``, and the file's name for
    messages. ``create``: make the file (and its folder) if it is not there yet.

    Raises:
        ModelError: no file at ``path`` (and not ``create``), or it cannot be opened.
    """
    from feedback_sync.warehouse.engines.duckdb import DuckDbEngine

    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.exists():
        raise ModelError(f"no warehouse at {path}: run `feedback-sync sync` first")
    con = open_models_file(path, read_only=read_only)
    try:
        yield DuckDbEngine(con), str(path)
    finally:
        con.close()


def _read_committed(target: DuckDb) -> Committed | None:
    """The committed state and counts read with DuckDB alone; None where dlt must read them."""
    import os

    if os.environ.get("DLT_JSON_TYPED_PUA_START"):
        return None
    path = target.duckdb_file()  # dlt's settings decide it only where they mention it
    assert path is not None
    target.check_before_run()
    committed = Committed(pipeline_name=target.pipeline_name)
    if not path.exists():
        return committed

    import duckdb

    with duckdb.connect(str(path), read_only=True) as con:
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_schema = ? "
                "order by table_name",
                [target.dataset],
            ).fetchall()
        ]
        if "_dlt_pipeline_state" not in tables or "_dlt_loads" not in tables:
            return committed
        schema = '"' + target.dataset.replace('"', '""') + '"'
        states, loads_table = f"{schema}._dlt_pipeline_state", f"{schema}._dlt_loads"
        row = con.execute(
            newest_state_sql(states, loads_table, "state", "?"), [target.pipeline_name]
        ).fetchone()
        if row is None:
            return committed
        state = _decode_state(row[0])
        if state is None:
            return None
        sources = state.get("sources", {})
        committed.resources = sources.get(SOURCE_NAME, {}).get("resources", {})
        loads = con.execute(completed_loads_sql(loads_table)).fetchone()
        if loads is not None:
            committed.last_load, committed.loads = loads[0], loads[1]
        for table in tables:
            if not table.startswith("_dlt"):
                quoted = '"' + table.replace('"', '""') + '"'
                counted = con.execute(f"select count(*) from {schema}.{quoted}").fetchone()
                committed.counts[table] = int(counted[0]) if counted else 0
    return committed


def _decode_state(stored: str) -> dict[str, Any] | None:
    """dlt's stored state (zlib-compressed JSON in base64, or plain JSON); None when it holds
    a typed value, which only dlt's own decoder reads faithfully."""
    try:
        raw = zlib.decompress(base64.b64decode(stored, validate=True))
    except binascii.Error:
        raw = stored.encode()
    state = json.loads(raw)
    if not isinstance(state, dict) or _has_typed(state):
        return None
    return state


def _has_typed(value: Any) -> bool:
    if isinstance(value, str):
        return bool(value) and value[0] in _TYPED_MARKS
    if isinstance(value, dict):
        return any(_has_typed(k) or _has_typed(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_typed(v) for v in value)
    return False


def open_models_file(path: Path, *, read_only: bool = False) -> duckdb_module.DuckDBPyConnection:
    """A connection to a models DuckDB file, with the sync's memory limit.

    The file is attached under a catalog name of its own (``MODELS_CATALOG``) instead of
    being opened as the connection's database, which DuckDB names after the file: in
    ``marts.duckdb`` the catalog is ``marts``, and ``marts.x`` is then ambiguous between that
    catalog and the schema ``marts`` (DuckDB's Binder Error), as are ``staging.x`` in
    ``staging.duckdb`` and ``push.x`` in ``push.duckdb``. Under its own name every
    ``schema.relation`` the models, the report and the push write means the schema, whatever
    the file is called. The name is not stored: a view keeps its SQL as written (schema and
    relation), so the file opened directly, or renamed, reads the same views and tables.
    (A file named like the dataset cannot work even so: ``check_file_names``.)

    Raises:
        ModelError: the file cannot be opened (say, a sync holds it).
    """
    import duckdb

    quoted = str(path).replace("'", "''")
    mode = " (read_only)" if read_only else ""
    con = None
    try:
        # DuckDB spills beside a file it opens itself (``<file>.tmp``); an in-memory
        # database would spill into the current folder
        con = duckdb.connect(
            config={"memory_limit": duckdb_memory_limit(), "temp_directory": f"{path}.tmp"}
        )
        con.execute(f"attach '{quoted}' as \"{MODELS_CATALOG}\"{mode}")
        con.execute(f'use "{MODELS_CATALOG}"')
    except duckdb.Error as exc:
        if con is not None:
            con.close()
        raise ModelError(f"cannot open {path}: {exc}") from None
    return con


class KeptFileOpen(KeptOpen):
    """Keeps the DuckDB file open while the steps of a sync's turn at it run
    (``runlock.turn``), so each step's connection (dlt's sql clients, each load job) joins
    the open database instead of opening the file again and closing it after (a
    checkpoint each time): about 20 ms each, a dozen times a run with nothing to do and
    once per load job (two per table) in a full sync. Closed at the end of each turn: the
    fetch runs with the file closed, for the runs of the file's other datasets to write
    it, and the models open it with their own settings."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.con: duckdb_module.DuckDBPyConnection | None = None

    def hold(self, *, create: bool = False) -> None:
        if self.con is not None:
            return
        if not self.path.exists() and not (create and self.path.parent.is_dir()):
            return
        import duckdb

        # dlt's own connect (DuckDbConnectionPool.borrow_conn): the same absolute path and no
        # settings, so DuckDB hands dlt's connections this same database
        self.con = duckdb.connect(str(self.path.absolute()))

    def release_memory(self) -> None:
        if self.con is not None and not release_memory(self.con, duckdb_memory_limit()):
            log.debug("DuckDB kept what it cached (another limit, or nothing evictable)")

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None


def check_file_names(files: list[tuple[Path, bool]], dataset: str) -> None:
    """Refuses, before anything runs, a DuckDB file whose name no run can work with
    (``files``: each with whether the user names it).

    DuckDB names a file's catalog after the file (``_duckdb_catalog``), and a two-part
    name whose first part is both that catalog and a schema is ambiguous (its Binder
    Error). The models, the report and the push open the file under a catalog name of
    their own (``open_models_file``), so the file may be named like any schema they make
    (``marts.duckdb``, ``staging.duckdb``, ``push.duckdb``). dlt's load, though, writes
    ``<dataset>.<table>`` and ``information_schema.<view>`` into the file under its own
    name, and the staging views keep ``<dataset>.<table>`` in their SQL, read as written
    when someone opens the file directly: a file named like the dataset, or like
    ``information_schema``, cannot work either way.

    Raises:
        ConfigError: one line naming the file and what to change.
    """
    # dlt's merges also write the staging dataset (``<dataset>_staging``, dlt's
    # ``staging_dataset_name_layout``) by its two-part name
    datasets = {dataset.casefold(), f"{dataset}_staging".casefold()}
    for path, named_by_user in files:
        catalog = _duckdb_catalog(path)
        if catalog.casefold() in datasets:
            fix = (
                "rename the file or pass another --dataset"
                if named_by_user
                else ("pass another --dataset")
            )
            which = (
                f"the dataset {dataset!r}"
                if catalog.casefold() == dataset.casefold()
                else f"dlt's staging dataset {dataset + '_staging'!r}"
            )
            raise ConfigError(
                f"the DuckDB file {path} is named like {which} "
                f"(DuckDB names the file's catalog {catalog!r}, and {catalog}.<table> "
                f"would be ambiguous); {fix}"
            )
        if catalog.casefold() == "information_schema":
            raise ConfigError(
                f"the DuckDB file {path} is named like DuckDB's information_schema "
                "(dlt's load reads information_schema.<view>, which the file's name "
                "makes ambiguous); rename the file"
            )


def _duckdb_catalog(path: Path) -> str:
    """The catalog DuckDB names the database in the file ``path`` (its
    ``ExtractDatabaseName``): the file's name up to its first dot (``marts.v2.duckdb`` ->
    ``marts``; leading dots skipped), with ``_db`` added to ``main``, ``temp`` and ``system``."""
    name = next((part for part in path.name.split(".") if part), "")
    return f"{name}_db" if name in ("main", "temp", "system") else name


def duckdb_memory_limit() -> str:
    """DuckDB's memory limit for syncs and models (``FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT``)."""
    return os.environ.get("FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT", DUCKDB_MEMORY_LIMIT)


def release_memory(con: duckdb_module.DuckDBPyConnection, limit: str) -> bool:
    """Has the database of ``con`` hand back the memory it cached for the statements before
    (a load's merges: 60-70 MB at ``large``), so that a step after them does not add its own
    on top: a sync's peak is then its largest step's, not their sum. Whether it did.

    DuckDB keeps the blocks its statements read in its buffer pool, up to its memory limit,
    and gives them back only when the limit asks it to or the database closes (closing and
    opening the file again costs a checkpoint and an open). So the limit is lowered to 1MB,
    which evicts every block nothing holds, and set back to ``limit``, the sync's. Only
    where that is the limit in effect: DuckDB writes its limit back to a tenth of a unit
    (1.5GB reads "1.3 GiB"), so a limit read back could not be set again exactly, and
    another limit (dlt's own ``global_config`` setting) is left alone. DuckDB refuses a
    limit it cannot meet (a temporary table that cannot spill): then nothing changed, which
    is not an error of the run.
    """
    import duckdb

    if _shown_limit(con) != _limit_as_shown(limit):
        return False
    try:
        con.execute("set memory_limit = '1MB'")
    except duckdb.Error:
        return False  # refused: the limit is as it was
    con.execute(f"set memory_limit = '{limit.replace(chr(39), chr(39) * 2)}'")
    return True


def _shown_limit(con: duckdb_module.DuckDBPyConnection) -> Any:
    """The memory limit in effect on ``con``, as DuckDB writes it back."""
    return con.execute("select current_setting('memory_limit')").fetchone()


@functools.cache
def _limit_as_shown(limit: str) -> Any:
    """How DuckDB writes ``limit`` back, asked of an in-memory database once per limit and
    process: a sync that loads asks twice, and each open and close of one took 17-20 ms
    (60 ms the first in a process)."""
    import duckdb

    probe = duckdb.connect(config={"memory_limit": limit})
    try:
        return _shown_limit(probe)
    finally:
        probe.close()


def _duckdb_file_destination(path: Path, pipeline_name: str) -> Any:
    """dlt's DuckDB destination for the file at ``path``, with credentials that render as
    text without SQLAlchemy.

    dlt prints a load's credentials (``str()``) for the load's step info, and its own
    rendering imports SQLAlchemy (0.13-0.17 s of every run that loads) to print a file path.
    dlt resolves credentials it is given again into its own class unless they arrive
    resolved, so they are resolved here the way dlt would (every other setting, such as
    ``DESTINATION__DUCKDB__CREDENTIALS__PRAGMAS``, still comes from dlt's providers) and
    handed over resolved, in a subclass whose text is dlt's own for a file
    (``duckdb:///`` and the path). Resolved anew for each pipeline, in its name's config
    section as dlt's load would (``FEEDBACK_SYNC__DESTINATION__DUCKDB__CREDENTIALS__...``
    applies to ``pipeline_name`` only): settings read at one run's start apply to that run.
    """
    import dlt
    from dlt.common.configuration.resolve import inject_section
    from dlt.common.configuration.specs import ConfigSectionContext
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    # DuckDB caches freely (80% of RAM by default); a limit keeps a sync's memory bounded
    # and lets DuckDB spill to disk instead. The path is set, not parsed: parsing tries it
    # as a connection URL first, which imports SQLAlchemy only to fall back to a file path
    given = DuckDbCredentials(global_config={"memory_limit": duckdb_memory_limit()})
    given.database = str(path)
    factory = dlt.destinations.duckdb(credentials=given)
    with inject_section(ConfigSectionContext(pipeline_name=pipeline_name, sections=())):
        resolved = factory.configuration(factory.spec(), accept_partial=True)
    credentials = _duckdb_file_credentials()()
    for field, value in resolved.credentials.items():
        setattr(credentials, field, value)
    return dlt.destinations.duckdb(credentials=credentials.resolve())


@functools.cache
def _duckdb_file_credentials() -> Any:
    """dlt's DuckDB credentials class, whose text for a file is dlt's own without
    SQLAlchemy (``duckdb:///`` and the path); made once, on first use (dlt is imported
    late)."""
    from dlt.common.configuration import configspec
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    @configspec(init=False)
    class DuckDbFileCredentials(DuckDbCredentials):
        def __str__(self) -> str:
            return f"duckdb:///{self.database}"

    return DuckDbFileCredentials


def _dlt_duckdb_credentials() -> str | None:
    """The DuckDB file the user configured for dlt's DuckDB destination, if any."""
    value: Any = os.environ.get("DESTINATION__DUCKDB__CREDENTIALS")
    if not value and dlt_settings_mention("destination"):
        import dlt

        value = dlt.config.get("destination.duckdb.credentials") or dlt.secrets.get(
            "destination.duckdb.credentials"
        )
    if not value:
        return None
    if isinstance(value, dict) and isinstance(value.get("database"), str):
        value = value["database"]
    if not isinstance(value, str):
        raise ConfigError(
            "destination.duckdb.credentials must be the DuckDB file's path "
            f"(or a table with `database`), got {type(value).__name__}"
        )
    return value.removeprefix("duckdb:///")


DESTINATION = DuckDb
