"""Where a sync lands: ``Target``, one interface every destination implements.

A run names its destination (``--destination``, default ``duckdb``); ``Target(...)`` then
makes the one class that implements that destination, from the module ``DESTINATIONS``
names (any name it does not list is a dlt destination configured the dlt way,
``other.py``). Each lives in a module of its own and only it knows what its destination
does differently:

- ``duckdb.py``: one DuckDB file (the default);
- ``parquet.py``: one Parquet file per table, written from a working DuckDB file;
- ``postgres.py``: a PostgreSQL database;
- ``delta.py``: Delta Lake tables, local or in object storage;
- ``other.py``: any other dlt destination (loads and deletes; no models).

Code outside this package asks a target what to do (``describe``, ``pipeline``,
``reconcile``, ``open_models``...), never which destination it is. A new destination is a
module with a ``Target`` subclass named ``DESTINATION``, its line in ``DESTINATIONS`` and
its tests. The modules are imported by name when a target is made, as dlt finds its own
destinations, so a run imports only the one it uses.

Each warehouse has its own identity (``identity``) and, named after it, dlt's working folder
of its own (``working_folder.py``), so its state (cursors), pending packages and run lock
never mix with another warehouse's on the same machine.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from feedback_sync.errors import ConfigError, ModelError

if TYPE_CHECKING:  # dlt is imported where it is used: `feedback-sync status` runs without it
    from dlt.pipeline.pipeline import Pipeline

    from feedback_sync.warehouse.engines import Engine
    from feedback_sync.warehouse.history_sql import HistorySql

DEFAULT_DATASET = "feedback"
# the schemas feedback-sync keeps beside the datasets, which no dataset may be named: the
# models' (``models.project.LAYERS``), the push's journal and curated inputs, the models'
# build record (a test keeps this list and theirs in step); with accounts, a dataset
# named so would make ``staging_<account>`` and the like, which are the models' too
RESERVED_DATASETS = ("staging", "marts", "push", "curated", "_feedback_sync")


def check_dataset(name: str, said: str) -> str:
    """``name`` if a dataset may be named so; ``said``: how the user gave it (``--dataset``).

    Raises:
        ConfigError: not letters, digits and underscores, or a schema of the models.
    """
    from feedback_sync.errors import ConfigError

    if not name.replace("_", "").isalnum():
        raise ConfigError(f"{said} must be letters, digits and underscores, got {name!r}")
    if name.lower() in RESERVED_DATASETS:
        raise ConfigError(
            f"{said} may not be {name!r}: feedback-sync keeps its own schemas "
            f"{', '.join(RESERVED_DATASETS)} beside the datasets"
        )
    return name


PIPELINE_NAME = "feedback_sync"
# loaded packages kept in dlt's working folder for inspection (`dlt pipeline feedback_sync
# load-package`): a day of hourly runs. Without its data files a package holds its schema
# and dlt's copy of the state: 2.4-3.0 MB at `large` (20,000 ideas); dlt never deletes one
KEEP_LOADED_PACKAGES = 24

# --destination name -> the module that implements it (its class ``DESTINATION``)
DESTINATIONS = {
    "duckdb": "feedback_sync.warehouse.duckdb",
    "parquet": "feedback_sync.warehouse.parquet",
    "postgres": "feedback_sync.warehouse.postgres",
    "delta": "feedback_sync.warehouse.delta",
}
OTHER = "feedback_sync.warehouse.other"


def make_target(destination: str = "duckdb", **fields: Any) -> Target:
    """The target of ``destination``: the class its module (``DESTINATIONS``, else
    ``OTHER``) names ``DESTINATION``, made with the fields it declares. A field another
    destination declares (``parquet_dir`` for a DuckDB target) is not this one's and is
    left out, as the command line's options for other destinations are."""
    import dataclasses

    module = importlib.import_module(DESTINATIONS.get(destination, OTHER))
    chosen: type[Target] = module.DESTINATION
    own = {f.name for f in dataclasses.fields(chosen)}
    return chosen(destination=destination, **{k: v for k, v in fields.items() if k in own})


def probe_folder(folder: Path) -> str:
    """Whether a file can be made in ``folder`` (or, where it does not exist yet, in the
    nearest folder above it, where the first run makes it): a probe file made and removed.
    Says what was probed.

    Raises:
        WarehouseUnwritable: it cannot.
    """
    import tempfile

    from feedback_sync.errors import WarehouseUnwritable

    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise WarehouseUnwritable(f"{existing} is a file, where {folder} should be a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".feedback-sync-probe-")
    except OSError as exc:
        raise WarehouseUnwritable(
            f"cannot write in {existing}: {exc.strerror} (where {folder} goes)"
        ) from None
    os.close(fd)
    os.unlink(probe)
    if existing == folder.absolute():
        return f"a file was written in {folder} and removed"
    return f"{folder} does not exist yet; a file was written in {existing} and removed"


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


class KeptOpen:
    """What a sync keeps open across its steps (``Target.kept_open``); here, nothing."""

    def hold(self, *, create: bool = False) -> None:
        """Opens what is kept open, if it is not yet (``create``: even where the warehouse
        does not exist yet, right before the load that makes it)."""

    def release_memory(self) -> None:
        """Gives back what the warehouse cached for the step before."""

    def close(self) -> None:
        """Closes what ``hold`` opened."""


@dataclass
class Committed:
    """What the destination holds: the newest committed state and the tables' rows."""

    pipeline_name: str
    resources: dict[str, Any] | None = None  # None: nothing committed yet
    last_load: Any = None
    loads: int = 0
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Target(ABC):
    """The destination of a sync as the user named it, and everything that differs between
    destinations: each destination's module has a subclass (``make_target`` makes it), with
    the fields only it has (a DuckDB file, a folder). The abstract methods are what each
    implements; the others have a default that fits most."""

    destination: str = "duckdb"
    dataset: str = DEFAULT_DATASET
    pipelines_dir: Path | None = None

    # whether the SQL models, the dashboard and the push run here (``open_models``)
    builds_models: ClassVar[bool] = False
    # whether the push also reads curated inputs from files (data/curated/*.csv|.parquet)
    reads_curated_files: ClassVar[bool] = False
    # dlt's load file format and table format for every table (None: dlt's default)
    loader_file_format: ClassVar[str | None] = None
    table_format: ClassVar[Any] = None
    # the step a run spends on ``publish`` (its summary's name for it), None if it has none
    publish_step: ClassVar[str | None] = None
    # the SQL the history step speaks here (``history_sql.py``); None: no history is kept
    history_sql: ClassVar[type[HistorySql] | None] = None
    # how many load jobs dlt runs at once into tables the warehouse holds, whose merges read
    # them (None: dlt's ``[load] workers``, 20 by default); a first load, which only
    # appends, runs as many as dlt's setting says
    merge_load_workers: ClassVar[int | None] = None

    def loader_format(self, pipeline: Pipeline) -> str | None:
        """The load file format of this run (dlt's ``loader_file_format``): the class's,
        unless what the warehouse already holds asks for another."""
        return self.loader_file_format

    def __post_init__(self) -> None:
        """Checks what can be checked of the destination's name and settings before
        anything runs (``ConfigError``); a destination's module adds its own checks."""
        return None

    # what the destination's driver says when it fails (``driver_errors`` asks every
    # destination's class, loaded or not: the failure may come from a process that made no
    # target, as a Prefect task's retry decision)

    @classmethod
    def failed_to_connect(cls, error: BaseException) -> bool:
        """Whether ``error`` is a failure to connect to this destination, or a lost
        connection: dlt's ``DestinationConnectionError``; a driver's own error adds here."""
        from dlt.destinations.exceptions import DestinationConnectionError

        return isinstance(error, DestinationConnectionError)

    @classmethod
    def held_elsewhere(cls, error: BaseException) -> str | None:
        """The line for an error that says another process holds this warehouse (a later
        run may succeed); None otherwise."""
        return None

    @classmethod
    def out_of_memory(cls, error: BaseException) -> str | None:
        """The line for an error that says the destination ran out of the memory it may
        use, with the setting that raises it; None otherwise."""
        return None

    @classmethod
    def interrupted_statement(cls, error: BaseException) -> bool:
        """Whether ``error`` is the driver's word for a statement a Ctrl-C stopped."""
        return False

    @classmethod
    def connection_refused(cls, first_line: str) -> tuple[str, int] | None:
        """What a failed connection whose error begins ``first_line`` means here, where the
        driver's words say the settings are wrong (a retry cannot help): one line and exit
        code 2. None: nothing known (a server down may be back). Any server that says the
        user or the database it was given does not exist is refused here."""
        if "does not exist" in first_line:
            return (
                f"the destination refused the login: {first_line} (check "
                "DESTINATION__<NAME>__CREDENTIALS)",
                2,
            )
        return None

    def check_before_run(self) -> None:
        """Refuses, before a run touches the warehouse, what no run could work with (a
        destination's module adds its checks; ``ConfigError``)."""
        return None

    def writer_file(self) -> Path | None:
        """The file one writing process at a time may hold (a DuckDB file), whose locks sit
        beside it (``runlock``: the file's turns, each dataset's runs); None where the
        warehouse admits several writers."""
        return None

    # where the data is

    @property
    def pipeline_name(self) -> str:
        return f"{PIPELINE_NAME}_{self.destination}"

    def identity(self) -> str:
        """What makes this warehouse this one and no other: the kind of destination, where
        it is (``location``: the DuckDB file's or the folder's resolved path, the bucket,
        the server and database; never a user name or secret) and the dataset. Two targets
        with one identity share dlt's working folder, state and run lock; any two others
        never do."""
        return json.dumps([self.destination, self.location(), self.dataset])

    def identity_name(self) -> str:
        """A short readable name of where the warehouse is, for its working folder's name
        (the identity's hash, not this, keeps folders apart)."""
        location = self.location()
        return location.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]

    def working_root(self) -> Path:
        """The folder that holds this warehouse's dlt working folder and run lock
        (``working_folder.py``); nothing is made."""
        from feedback_sync.warehouse.working_folder import root_of

        return root_of(self)

    def committed_version_hash(self, pipeline: Pipeline) -> str | None:
        """The version hash of the newest state the warehouse committed for ``pipeline``'s
        name, None where there is none or it cannot be read cheaply (then an earlier
        version's working folder is never taken over: dlt restores instead)."""
        return None

    def exists(self) -> bool | None:
        """Whether the warehouse has been made: False where a first run would make it (a
        file not there yet, which dlt would create merely to look in it); None where that is
        not known without asking the destination."""
        return None

    @contextlib.contextmanager
    def kept_open(self) -> Iterator[KeptOpen]:
        """What a sync keeps open while the steps of one turn at the warehouse run
        (``KeptOpen``; ``runlock.turn``), closed at the end of the block."""
        kept = self._kept_open()
        kept.hold()
        try:
            yield kept
        finally:
            kept.close()

    def _kept_open(self) -> KeptOpen:
        return KeptOpen()

    def for_account(self, account: str) -> Target:
        """The target of one account's tables (``api/accounts.py``): this warehouse, with
        the account's own dataset ``<dataset>_<account>`` (and so its own identity, working
        folder, state and lock); a destination whose files are not kept per dataset keeps
        them in a folder of the account's as well."""
        import dataclasses

        from feedback_sync.api.accounts import dataset_of

        return dataclasses.replace(self, dataset=dataset_of(self.dataset, account))

    def describe(self) -> str:
        return f"{self.destination} (dataset {self.dataset})"

    @abstractmethod
    def check_writable(self) -> str:
        """What was verified of writing here now (``feedback-sync check``), leaving nothing
        behind; raises WarehouseUnwritable (or the driver's error) saying why not."""

    def location(self) -> str:
        """Where the loaded tables live, as a URL with no user name or secret in it."""
        return f"{self.destination}://"

    def relation_uri(self, schema: str, name: str, *, mart: bool) -> str | None:
        """A loaded table or a mart (``mart``) as a URL with no secret in it, for lineage;
        None where the location is not known."""
        location = self.location()
        if location.endswith("://"):
            return None
        return f"{location}/{schema}/{name}"

    def identity_path(self) -> Path | None:
        """The file or folder that is this warehouse, where one is (None for a server)."""
        return None

    def writer_name(self) -> tuple[str, str, str]:
        """``(kind, name, name if that is blank)`` of what one writer at a time may hold: a
        DuckDB file admits one writing process whatever the dataset; a server, one per
        dataset."""
        return self.destination, self.dataset, ""

    # loading

    def dlt_destination(self) -> Any:
        """What ``dlt.pipeline`` is given as the destination."""
        return self.destination

    def pipeline(self, progress: Any = None, *, take_over: bool = False) -> Pipeline:
        """The dlt pipeline for this target (created or attached), in its own working
        folder. ``take_over``: a sync holding the run lock may move an earlier version's
        shared working folder in (``working_folder.take_over_legacy``)."""
        import dlt

        self.check_before_run()
        destination = self.dlt_destination()
        # dlt's settings for this pipeline only, under its name's section (as
        # FEEDBACK_SYNC__LOAD__... would be): another dlt pipeline in the process keeps its own
        ours = self.pipeline_name
        # the source yields Arrow tables; reconcile and replace_children need every row's
        # load id, which dlt adds to Arrow rows only when asked
        dlt.config[f"{ours}.normalize.parquet_normalizer.add_dlt_load_id"] = True
        # a load job that fails for good aborts its package (state rewound, nothing committed)
        # instead of leaving it pending for every later run to fail on again
        dlt.config[f"{ours}.load.auto_abort_on_terminal_error"] = True
        # a loaded package's data files are not read again (the warehouse holds the rows; the
        # journal names only the load id), and dlt keeps them by default: an hourly sync's
        # working folder would grow by every run's data (98 MB for a first load at `large`).
        # A user's own setting wins: env, or `[load]` (or `[<pipeline>.load]`) in
        # config.toml, the layer this writes to.
        setting = "load.delete_completed_jobs"
        if dlt.config.get(setting) is None and dlt.config.get(f"{ours}.{setting}") is None:
            dlt.config[f"{ours}.{setting}"] = True
        from feedback_sync.warehouse import working_folder

        # this warehouse's own working folder: never another warehouse's cursors or packages
        root = working_folder.claim(self)

        def made() -> Pipeline:
            return dlt.pipeline(
                pipeline_name=self.pipeline_name,
                destination=destination,
                dataset_name=self.dataset,
                pipelines_dir=str(root),
                progress=progress,
            )

        pipeline = made()
        if take_over and working_folder.take_over_legacy(self, pipeline):
            pipeline = made()
        return pipeline

    def load(self, pipeline: Pipeline, *, first: bool = False) -> Any:
        """Loads what ``pipeline`` has normalized, no table of a package merged before every
        table of it was copied (``load_order``); dlt's ``LoadInfo``. ``first``: the
        warehouse holds none of the tables yet (the load only appends)."""
        from feedback_sync.warehouse import load_order

        with load_order.merges_last():
            if first or self.merge_load_workers is None:
                return pipeline.load()
            return pipeline.load(workers=self.merge_load_workers)

    def committed(self) -> Committed:
        """What the last committed sync saved (its resources' state) and what the tables
        hold, as the next run would resume from it."""
        return self.read_committed_with_dlt()

    def read_committed_with_dlt(self) -> Committed:
        """``committed`` as dlt reads it: the state restored from the destination."""
        from feedback_sync.source.resources import SOURCE_NAME

        pipeline = self.pipeline()
        pipeline.sync_destination()
        committed = Committed(pipeline_name=pipeline.pipeline_name)
        if not pipeline.default_schema_name:
            return committed
        sources = pipeline.state.get("sources", {})
        committed.resources = sources.get(SOURCE_NAME, {}).get("resources", {})
        committed.counts = self.table_counts(pipeline)
        committed.last_load, committed.loads = self.completed_loads(pipeline)
        return committed

    # after a load: what every destination does its own way

    @abstractmethod
    def replace_children(
        self, pipeline: Pipeline, load_id: str, had: frozenset[str] | None = None
    ) -> dict[str, int]:
        """Deletes child rows whose parent came again in ``load_id`` without them; counts.
        ``had``: the tables the warehouse had before the load, when known."""

    @abstractmethod
    def reconcile(
        self,
        pipeline: Pipeline,
        load_id: str,
        resources: Iterable[str],
        mode: str,
        had: frozenset[str] | None = None,
        gone: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, int]:
        """Removes (or marks, ``mode`` soft) rows of ``resources`` not seen in ``load_id``;
        counts per table. ``gone``: per resource the source compared (its unchanged rows
        not loaded again), the keys to remove instead (``reconcile.reconcile``)."""

    def record_history(
        self,
        pipeline: Pipeline,
        entities: Sequence[str],
        complete: Iterable[str],
        run_at: datetime,
        mode: str,
    ) -> dict[str, Any]:
        """Brings the history tables of ``entities`` up to the loaded state (``history.py``):
        ``history.Recorded`` per history table. Only where ``history_sql`` is set."""
        if not entities:
            return {}
        from feedback_sync.warehouse import history

        assert self.history_sql is not None, "history.chosen keeps none here"
        return history.record(
            pipeline, self.history_sql, entities, complete, run_at, soft=mode == "soft"
        )

    @abstractmethod
    def table_counts(self, pipeline: Pipeline) -> dict[str, int]:
        """Rows per data table (empty when nothing was loaded yet)."""

    @abstractmethod
    def load_completed(self, pipeline: Pipeline, load_id: str) -> bool:
        """Whether the destination recorded ``load_id`` as complete; raises where it cannot
        be asked."""

    @abstractmethod
    def completed_loads(self, pipeline: Pipeline) -> tuple[datetime | None, int]:
        """When the newest completed load was stored, and how many completed."""

    def state_is_current(self, pipeline: Pipeline) -> bool:
        """Whether the local state is the one the destination committed last, so dlt's
        restore is not needed; False lets dlt restore."""
        return False

    def prune_state_history(self, pipeline: Pipeline, keep: int = 10) -> None:
        """Keeps the last ``keep`` stored versions of the state, where the destination
        keeps them all."""
        return None  # dlt's filesystem destination keeps its own count (max_state_files)

    @abstractmethod
    def key_figures(self, pipeline: Pipeline, tables: Sequence[str], key: str) -> dict[str, Any]:
        """Per table present: rows, rows with a null ``key``, rows beyond the first per key."""

    @abstractmethod
    def newest(
        self, pipeline: Pipeline, tables: Sequence[str], columns: Sequence[str]
    ) -> dict[str, dict[str, Any]]:
        """Per table present: the newest value of each of ``columns`` it has."""

    def publish(
        self,
        pipeline: Pipeline,
        tables: Collection[str],
        loaded: Iterable[str],
        removed: Iterable[str],
        everything: bool,
    ) -> dict[str, int]:
        """After a run's load and deletes, makes what changed readable where readers look:
        ``tables`` the warehouse has, the tables the run ``loaded`` rows into and ``removed``
        rows from (``everything``: every table, after a run that finished another's load).
        Rows written per table; ``publish_step`` names the step."""
        return {}

    # the models

    def models_file(self) -> Path:
        """The DuckDB file the models are built in."""
        raise ModelError(f"{self.describe()} keeps its models in no DuckDB file")

    def open_models(
        self, *, read_only: bool = False, building: bool = False
    ) -> contextlib.AbstractContextManager[tuple[Engine, str]]:
        """The engine the models live on, and how messages name it. ``building``: for a
        models build, which may make the models file where it is not there yet.

        Raises:
            ModelError: the target keeps no models, or there is no warehouse yet.
        """
        raise ModelError(
            "the models, the dashboard and the push run on DuckDB, Parquet, Delta and "
            f"PostgreSQL targets; {self.describe()} is none of them (run the SQL of sql/ "
            "with your own tool there)"
        )

    def prepare_models(self, engine: Engine) -> None:
        """Makes the loaded tables readable to the models in ``engine`` (views over files,
        snapshots), or raises ``ModelError`` when nothing was synced here yet."""
        return None  # the loaded tables are the warehouse's own

    def after_models(
        self, engine: Engine, schema: str, marts: Mapping[str, int], reused: bool
    ) -> None:
        """What a models build leaves beside the warehouse: the marts (``marts``, rows per
        mart of ``schema``) as files. ``reused``: the build was skipped, inputs unchanged."""
        return None  # the marts are tables of the warehouse


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
