"""Where a sync lands: the dlt pipeline and destination for ``duckdb``, ``parquet`` or a name.

- ``duckdb`` (default): one DuckDB file, ``data/warehouse.duckdb`` unless dlt's own setting
  ``DESTINATION__DUCKDB__CREDENTIALS`` (or ``[destination.duckdb] credentials``) names one.
- ``parquet``: one Parquet file per table under a folder (``data/parquet``), holding the
  current rows. dlt's plain filesystem destination appends on merge, so merges, deletes and
  state happen in a working DuckDB file inside the folder (``.feedback-sync/``), and every
  table a run touched is then written out as ``<table>.parquet`` (replaced atomically).
- ``delta``: Delta Lake tables, one per table, through dlt's filesystem destination with
  ``table_format="delta"``. They live where dlt's ``DESTINATION__FILESYSTEM__BUCKET_URL``
  says (a local folder, ``s3://``, ``gs://``, ``az://``, with dlt's credentials for it), else
  under ``data/delta``. Merges, deletes and soft deletes are Delta commits
  (``warehouse/delta.py``): a run writes only the files its changes touch. The models are
  built in a local DuckDB file (``<delta-dir>/models.duckdb``) over the tables' current
  snapshots.
- any other name: that dlt destination, configured the dlt way.

Each target has its own pipeline name, so its state (cursors) never mixes with another's.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from feedback_sync.errors import ConfigError, redact_url

if TYPE_CHECKING:  # dlt is imported where it is used: `feedback-sync status` runs without it
    from dlt.destinations.sql_client import SqlClientBase
    from dlt.pipeline.pipeline import Pipeline

DEFAULT_DUCKDB_PATH = Path("data/warehouse.duckdb")
DEFAULT_PARQUET_DIR = Path("data/parquet")
DEFAULT_DELTA_DIR = Path("data/delta")
DEFAULT_DATASET = "feedback"
PIPELINE_NAME = "feedback_sync"
# DuckDB's buffer pool during the load. The merge's de-duplicating window over the widest
# table (comments) is what fills it; 256MB keeps a sync's peak the same at 1x and 4x data
# (bench/RESULTS.md) at the price of spilling that window to disk on big loads
DUCKDB_MEMORY_LIMIT = "256MB"
WORKING_DIR = ".feedback-sync"
# loaded packages kept in dlt's working folder for inspection (`dlt pipeline feedback_sync
# load-package`): a day of hourly runs. Without its data files a package holds its schema
# and dlt's copy of the state: 2.4-3.0 MB at `large` (20,000 ideas); dlt never deletes one
KEEP_LOADED_PACKAGES = 24


def keep_loaded_packages() -> int:
    """How many loaded packages stay in dlt's working folder (``FEEDBACK_SYNC_KEEP_PACKAGES``,
    default 24; 0 keeps all).

    Raises:
        ConfigError: the variable is not a whole number of at least 0.
    """
    raw = os.environ.get("FEEDBACK_SYNC_KEEP_PACKAGES", "").strip()
    if not raw:
        return KEEP_LOADED_PACKAGES
    try:
        keep = int(raw)
    except ValueError:
        keep = -1
    if keep < 0:
        raise ConfigError(
            f"FEEDBACK_SYNC_KEEP_PACKAGES must be a whole number of at least 0 (0 keeps every "
            f"package), got {raw!r}"
        )
    return keep


def duckdb_memory_limit() -> str:
    """DuckDB's memory limit for syncs and models (``FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT``)."""
    return os.environ.get("FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT", DUCKDB_MEMORY_LIMIT)


@dataclass(frozen=True)
class Target:
    """The destination of a sync as the user named it."""

    destination: str = "duckdb"
    dataset: str = DEFAULT_DATASET
    duckdb_path: Path | None = None
    parquet_dir: Path = DEFAULT_PARQUET_DIR
    pipelines_dir: Path | None = None
    delta_dir: Path = DEFAULT_DELTA_DIR

    @property
    def is_parquet(self) -> bool:
        return self.destination == "parquet"

    @property
    def is_delta(self) -> bool:
        return self.destination == "delta"

    def bucket_url(self) -> str:
        """Where the Delta tables live: dlt's configured bucket, else ``delta_dir``."""
        configured: Any = os.environ.get("DESTINATION__FILESYSTEM__BUCKET_URL")
        if not configured:
            import dlt

            configured = dlt.config.get("destination.filesystem.bucket_url")
        if configured:
            return str(configured)
        return str(self.delta_dir.absolute())

    @property
    def is_duckdb_backed(self) -> bool:
        return self.destination in ("duckdb", "parquet")

    @property
    def builds_models(self) -> bool:
        """Whether ``models`` runs here: DuckDB, Parquet and Delta (through DuckDB) and
        PostgreSQL."""
        return self.is_duckdb_backed or self.is_delta or self.destination == "postgres"

    @property
    def pipeline_name(self) -> str:
        if self.destination == "duckdb":
            return PIPELINE_NAME
        return f"{PIPELINE_NAME}_{self.destination}"

    @property
    def loader_file_format(self) -> str | None:
        # parquet load files are 20-60x faster into DuckDB than insert statements.
        # PostgreSQL: measured, CSV through COPY was faster (a full sync at `demo` 6.0-7.0 s
        # against 8.3-8.6 s, at `medium` 69-78 s against 83-84 s; 2 rounds each, alternated,
        # one server), but dlt's COPY marks every nullable column FORCE_NULL, so an empty
        # string the API sent lands as NULL (tests/postgres/test_sync_postgres.py). Exact
        # values win: insert statements, dlt's default. dlt then warns, per table, that it
        # turns the Arrow items into statements row by row ("will degrade performance"):
        # that is this decision, and the warning is left to show.
        if self.is_duckdb_backed:
            return "parquet"
        return "insert_values" if self.destination == "postgres" else None

    @property
    def table_format(self) -> Any:
        """dlt's table format for every table: ``delta`` for the Delta target."""
        return "delta" if self.is_delta else None

    def duckdb_file(self) -> Path | None:
        """The DuckDB file written to (None for destinations other than DuckDB and Parquet)."""
        if self.is_parquet:
            return self.parquet_dir / WORKING_DIR / "work.duckdb"
        if self.destination != "duckdb":
            return None
        if self.duckdb_path is not None:
            return self.duckdb_path
        configured = _dlt_duckdb_credentials()
        return Path(configured) if configured is not None else DEFAULT_DUCKDB_PATH

    def check_duckdb_name(self) -> None:
        """DuckDB names the catalog after the file: "feedback.feedback" would be ambiguous."""
        path = self.duckdb_file()
        if path is not None and path.stem == self.dataset:
            raise ConfigError(
                f"the DuckDB file {path} is named like the dataset {self.dataset!r}; "
                "rename the file or pass another --dataset"
            )

    def describe(self) -> str:
        if self.is_parquet:
            return f"Parquet files in {self.parquet_dir}/"
        if self.destination == "duckdb":
            return f"DuckDB {self.duckdb_file()} (dataset {self.dataset})"
        if self.is_delta:
            return f"Delta tables in {redact_url(self.bucket_url())}/{self.dataset}/"
        return f"{self.destination} (dataset {self.dataset})"

    def location(self) -> str:
        """Where the loaded tables live, as a URL with no user name or secret in it: the
        DuckDB file, the Parquet folder, the Delta bucket or folder, the PostgreSQL server
        and database (from dlt's configuration, nothing is opened), else the destination."""
        if self.is_parquet:
            return f"file://{self.parquet_dir.resolve()}"
        if self.is_delta:
            url = self.bucket_url()
            if "://" not in url:
                return f"file://{Path(url).resolve()}"
            parts = urlsplit(url)
            return urlunsplit((parts.scheme, parts.hostname or "", parts.path.rstrip("/"), "", ""))
        path = self.duckdb_file()
        if path is not None:
            return f"duckdb://{path.resolve()}"
        if self.destination == "postgres":
            server = _postgres_server()
            if server:
                return f"postgres://{server}"
        return f"{self.destination}://"

    def pipeline(self, progress: Any = None) -> Pipeline:
        """The dlt pipeline for this target (created or attached)."""
        import dlt

        from feedback_sync.warehouse import load_order

        destination: Any
        path = self.duckdb_file()
        self.check_duckdb_name()
        if self.is_delta:
            from feedback_sync.warehouse import delta

            # each key once per load: delta-rs keeps or refuses repeats (warehouse/delta.py)
            delta.install()
            destination = dlt.destinations.filesystem(bucket_url=self.bucket_url())
        elif path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # absolute: dlt resolves a relative path against the folder the pipeline was
            # first run from (kept in its local state), so a working folder run from
            # elsewhere, or copied, would load into the first folder's file
            destination = _duckdb_file_destination(path.absolute(), self.pipeline_name)
        else:
            destination = self.destination
        # the source yields Arrow tables; reconcile and replace_children need every row's
        # load id, which dlt adds to Arrow rows only when asked
        dlt.config["normalize.parquet_normalizer.add_dlt_load_id"] = True
        # a load job that fails for good aborts its package (state rewound, nothing committed)
        # instead of leaving it pending for every later run to fail on again
        dlt.config["load.auto_abort_on_terminal_error"] = True
        # a loaded package's data files are not read again (the warehouse holds the rows; the
        # journal names only the load id), and dlt keeps them by default: an hourly sync's
        # working folder would grow by every run's data (98 MB for a first load at `large`).
        # A user's own setting wins: env, or `[load]` in config.toml, the layer this writes to.
        if dlt.config.get("load.delete_completed_jobs") is None:
            dlt.config["load.delete_completed_jobs"] = True
        # and no chain of it is merged before every table of it was copied
        load_order.install()
        return dlt.pipeline(
            pipeline_name=self.pipeline_name,
            destination=destination,
            dataset_name=self.dataset,
            pipelines_dir=str(self.pipelines_dir) if self.pipelines_dir else None,  # type: ignore[arg-type]
            progress=progress,
        )


def newest_state_sql(states: str, loads: str, column: str, param: str) -> str:
    """``column`` of the newest state dlt committed for one pipeline (the pipeline's name
    is the one parameter, written ``param``), as dlt's own ``get_stored_state`` finds it:
    state rows joined to completed loads, the newest load first. ``states`` and ``loads``
    are the qualified ``_dlt_pipeline_state`` and ``_dlt_loads``."""
    return (
        f"select s.{column} from {states} as s join {loads} as l on l.load_id = s._dlt_load_id "
        f"where s.pipeline_name = {param} and l.status = 0 order by l.load_id desc limit 1"
    )


def completed_loads_sql(loads: str) -> str:
    """When the newest completed load was stored, and how many completed."""
    return f"select max(inserted_at), count(*) from {loads} where status = 0"


def dataset_tables(client: SqlClientBase[Any]) -> list[str]:
    """Tables that exist in the client's dataset, sorted (the schema may name tables that
    were never created, when no row ever reached them)."""
    rows = client.execute_sql(
        "select table_name from information_schema.tables where table_schema = %s "
        "order by table_name",
        client.dataset_name,
    )
    return [row[0] for row in rows or ()]


def _postgres_server() -> str | None:
    """``host:port/database`` of the configured PostgreSQL credentials (no user, no
    password), or None when they are not set or not read as a connection string."""
    import dlt
    from dlt.destinations.impl.postgres.configuration import PostgresCredentials

    value: Any = os.environ.get("DESTINATION__POSTGRES__CREDENTIALS") or dlt.secrets.get(
        "destination.postgres.credentials"
    )
    credentials = PostgresCredentials()
    try:
        if isinstance(value, str):
            credentials.parse_native_representation(value)
        elif isinstance(value, Mapping):
            credentials.update(value)
        else:
            return None
    except ValueError:  # not a connection string (dlt says so when it connects)
        return None
    if not credentials.host:
        return None
    port = f":{credentials.port}" if credentials.port else ""
    return f"{credentials.host}{port}/{credentials.database or ''}"


def _dlt_settings_files() -> list[Path]:
    """Every TOML file dlt may read settings from: the project's ``.dlt`` folder (the
    working folder, or ``DLT_PROJECT_DIR``) and each folder dlt picks as its global one
    (``~/.dlt``, ``/var/dlt`` for root, ``$XDG_DATA_HOME/dlt``, the temp folder's ``dlt``).
    A superset on purpose: a file here that dlt would not read only costs dlt's import."""
    import tempfile

    project = Path(os.environ.get("DLT_PROJECT_DIR", ".")) / ".dlt"
    folders = [project, Path.home() / ".dlt", Path("/var/dlt"), Path(tempfile.gettempdir(), "dlt")]
    if os.environ.get("XDG_DATA_HOME"):
        folders.append(Path(os.environ["XDG_DATA_HOME"], "dlt"))
    return [f / name for f in folders for name in ("config.toml", "secrets.toml")]


def dlt_settings_mention(section: str) -> bool:
    """Whether any of dlt's settings files names ``section`` (in a key, a table or even a
    comment): when none does, dlt's settings cannot set anything under it, and reading them
    needs no import of dlt (1.2 s). When one does, dlt itself is asked."""
    for path in _dlt_settings_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        except OSError:
            return True
        if section in text.lower():
            return True
    return False


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
