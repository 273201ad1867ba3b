"""The Prefect flow ``feedback-sync``: sync, models, data checks, assets and artifacts.

One run:

1. takes the warehouse's writer slot (a global concurrency limit, ``strict``: a missing
   limit is an error, never a silent free-for-all), so two runs never write one warehouse;
2. **sync** (task): the CLI's own ``run_sync``, not a subprocess. Prefect retries it only
   when ``feedback_sync.app.failures.is_transient`` says so (network trouble, retries exhausted at
   the API, a transient destination failure); the sync's resume (pending packages, state
   read back from the destination) makes a retry safe, on this machine or a fresh one;
3. **models** (task): the SQL models of ``sql/``;
4. **data checks** (task): root keys, row counts against the previous successful run,
   freshness, every mart built;
5. releases the slot, reports each table the run touched and each mart whose inputs
   changed as a materialized asset (rows, load id, checks), and writes two keyed
   artifacts (``flows/artifacts.py``);
6. fails the run, naming the check, table and figure, when a check failed.

Configuration is read the dlt way (``.dlt/``, ``SOURCES__FEEDBACK__*``,
``DESTINATION__DUCKDB__CREDENTIALS``); the API key comes from a Prefect ``Secret`` block
when one is configured (``flows/secrets.py``), and is never a parameter.

In a project of several accounts, a run syncs the one its ``account`` parameter names
into that account's dataset, holding that dataset's writer slot (``flows/accounts.py``;
the fan-out flow, ``flows/fanout.py``, starts one run per account).
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, cast

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.assets import Asset, AssetProperties, add_asset_metadata, materialize
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError
from prefect.tasks import Task

from feedback_sync.api.accounts import load_account_settings, section
from feedback_sync.api.config import load
from feedback_sync.api.settings import FeedbackSettings, load_settings
from feedback_sync.app.failures import explain, is_transient
from feedback_sync.app.settings import FLOWS
from feedback_sync.app.settings_files import check_settings_files
from feedback_sync.app.sync import SyncOptions, SyncResult, run_sync
from feedback_sync.app.telemetry import telemetry_off_unless_chosen
from feedback_sync.errors import ChecksFailed, ConfigError, WriterSlotMissing
from feedback_sync.flows import artifacts, lineage
from feedback_sync.flows.accounts import MODELS_NOT_BUILT, run_account
from feedback_sync.flows.logs import RunLogStream, forwarded
from feedback_sync.flows.secrets import api_key, block_name
from feedback_sync.flows.writer_slot import take_writer_slot
from feedback_sync.models.checks import (
    Check,
    failed,
    freshness_checks,
    key_checks,
    mart_checks,
    row_count_checks,
)
from feedback_sync.models.project import BuildResult, load_project
from feedback_sync.models.project import apply as apply_models
from feedback_sync.redaction import SCRUBBER, install_log_filters
from feedback_sync.source.resources import NAMES as RESOURCES
from feedback_sync.source.resources import check_resources
from feedback_sync.warehouse import history
from feedback_sync.warehouse.target import Target, check_dataset, make_target

DEFAULT_MAX_ROW_DROP = 0.25


def _failure(state: State[Any]) -> BaseException | None:
    data = state.data
    if isinstance(data, BaseException):
        return data
    try:
        result = state.result(raise_on_failure=False)
    except Exception as exc:  # the result could not be read back: judge by that error
        return exc
    return result if isinstance(result, BaseException) else None


def retry_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect's retry condition for the sync: only failures a later attempt may fix."""
    error = _failure(state)
    return error is not None and is_transient(error)


def _settings(account: str | None, key: str | None) -> FeedbackSettings:
    """The source's settings (the account's, where one is named), with the block's key.

    Raises:
        ConfigError: a setting missing or malformed; an account's missing key also names
            the Secret block the run looked for.
    """
    if account is None:
        return load_settings(api_key=key)
    try:
        return load_account_settings(account, api_key=key)
    except ConfigError as exc:
        if key is None and section(account).env("api_key") in str(exc):
            raise ConfigError(
                f"{exc}, or in the Prefect Secret block {block_name(account)!r}"
            ) from None
        raise


@task(name="sync", cache_policy=NO_CACHE, retry_condition_fn=retry_transient)
def sync(
    target: Target, full: bool, resources: list[str] | None, account: str | None = None
) -> SyncResult:
    """``feedback-sync sync`` in-process (of ``account``, where one is named), its output
    in the run's logs."""
    logger = get_run_logger()
    key, origin = api_key(account)
    logger.info("API key%s from %s", f" of account {account}" if account else "", origin)
    settings = _settings(account, key)
    stream = RunLogStream(logger)
    with forwarded(logger):
        options = SyncOptions(
            full=full,
            resources=resources,
            settings=settings,
            out=cast(IO[str], stream),
            models=False,
        )
        result = run_sync(target, options)
    stream.flush()
    for line in result.summary().splitlines():
        logger.info(line)
    return result


@task(name="models", cache_policy=NO_CACHE)
def models(target: Target) -> BuildResult:
    """The SQL models of ``sql/`` (staging views, marts), in one transaction."""
    built = apply_models(target)
    get_run_logger().info(built.summary())
    return built


@task(name="data checks", cache_policy=NO_CACHE)
def data_checks(
    target: Target,
    result: SyncResult,
    built: BuildResult | None,
    models_error: str | None,
    max_row_drop: float,
    max_age_hours: dict[str, float] | None,
) -> list[Check]:
    """Keys, row counts against the previous successful run, freshness, marts."""
    logger = get_run_logger()
    pipeline = target.pipeline()
    previous = artifacts.previous_counts(lineage.artifact_key(target, "baseline"))
    found = [
        *key_checks(target, pipeline),
        *row_count_checks(result.table_rows, previous, max_row_drop),
        *freshness_checks(target, pipeline, max_age_hours),
        *mart_checks(built, models_error),
    ]
    bad = failed(found)
    for check in bad:
        logger.error("check FAILED: %s", check.line())
    logger.info(
        "checks: %d passed, %d failed, %d reported only",
        sum(c.passed is True for c in found),
        len(bad),
        sum(c.passed is None for c in found),
    )
    return found


def _publish(asset: Asset, upstream: list[str], by: str, metadata: dict[str, Any]) -> None:
    """One materialization event for ``asset``, with ``upstream`` as its lineage."""

    def record(metadata: dict[str, Any]) -> None:
        add_asset_metadata(asset, metadata)

    name = (asset.properties.name if asset.properties else None) or asset.key
    materializing = materialize(
        asset, by=by, asset_deps=list(upstream), cache_policy=NO_CACHE, name=f"asset {name}"
    )(record)
    materializing(metadata)


def publish_assets(
    target: Target,
    base_url: str,
    result: SyncResult,
    built: BuildResult | None,
    checks: list[Check],
) -> list[str]:
    """Reports each touched table and each mart whose inputs changed; the keys reported."""
    versioned = set(result.history_changed())
    touched = sorted(
        t
        for t in result.table_rows
        if result.rows_loaded.get(t, 0) or result.rows_removed.get(t, 0) or t in versioned
    )
    reported: list[str] = []
    for table in touched:
        key = lineage.table_asset(target, table)
        metadata: dict[str, Any] = {
            "rows_loaded": result.rows_loaded.get(table, 0),
            "rows_removed": result.rows_removed.get(table, 0),
            "rows_now": result.table_rows.get(table, 0),
            "load_id": result.load_id,
            "checks": [c.as_dict() for c in checks if c.table == table],
        }
        if table in versioned:
            # a history table is made from loaded tables, by the sync's history step
            upstream = [lineage.table_asset(target, t) for t in history.READS[table]]
            done = result.versions[table]
            metadata |= {"versions_begun": done.opened, "versions_ended": done.closed}
            metadata["rows_loaded"] = done.opened
            by = "feedback-sync history"
        else:
            upstream = [lineage.resource_asset(base_url, lineage.root_resource(table))]
            by = "dlt"
        _publish(Asset(key=key, properties=AssetProperties(name=table)), upstream, by, metadata)
        reported.append(key)
    if built is None:
        return reported
    reads = lineage.mart_sources(load_project())
    for mart, rows in built.mart_rows.items():
        sources = reads.get(mart, set())
        if not sources & set(touched):
            continue  # rebuilt from inputs this run did not change
        key = lineage.mart_asset(target, mart)
        _publish(
            Asset(key=key, properties=AssetProperties(name=f"marts.{mart}")),
            [lineage.table_asset(target, t) for t in sorted(sources)],
            "feedback-sync models",
            {
                "rows_now": rows,
                "load_id": result.load_id,
                "checks": [c.as_dict() for c in checks if c.table == f"marts.{mart}"],
            },
        )
        reported.append(key)
    return reported


def flow_target(
    destination: str,
    dataset: str,
    parquet_dir: str,
    delta_dir: str,
    pipelines_dir: str | None = None,
) -> Target:
    """The target a flow's parameters name (checked: a bad one fails the run by name)."""
    if not destination.strip():
        raise ConfigError("destination must not be empty")
    check_dataset(dataset, "dataset")
    return make_target(
        destination.strip(),
        dataset=dataset,
        parquet_dir=Path(parquet_dir),
        delta_dir=Path(delta_dir),
        pipelines_dir=Path(pipelines_dir) if pipelines_dir else None,
    )


def _retry_options() -> tuple[int, list[float]]:
    """``sync_retries`` and ``sync_retry_delay_seconds`` of ``[flows]`` (``app/settings.py``).

    Raises:
        ConfigError: a setting of ``[flows]`` is malformed, by name.
    """
    settings = load(FLOWS)
    return settings.sync_retries, list(settings.sync_retry_delay_seconds)


@flow(name="feedback-sync", log_prints=False)
def feedback_sync(
    mode: Literal["incremental", "full"] = "incremental",
    resources: list[str] | None = None,
    destination: str = "duckdb",
    dataset: str = "feedback",
    run_models: bool = True,
    checks: bool = True,
    max_row_drop: float = DEFAULT_MAX_ROW_DROP,
    max_age_hours: dict[str, float] | None = None,
    parquet_dir: str = "data/parquet",
    delta_dir: str = "data/delta",
    pipelines_dir: str | None = None,
    account: str | None = None,
) -> dict[str, Any]:
    """Sync the Feedback API into the warehouse, build the models, check what landed.

    Args:
        mode: ``incremental`` reads what changed; ``full`` reads everything and removes
            what was deleted at the source.
        resources: only these resources (default: all).
        destination: ``duckdb``, ``parquet``, ``delta``, ``postgres`` or another dlt
            destination, configured the dlt way.
        dataset: the dataset (schema) name.
        run_models: build the SQL models after the load.
        checks: run the data checks; a failed check fails the run.
        max_row_drop: the share of a table's rows a run may remove before the row-count
            check fails (0.25: a quarter).
        max_age_hours: per resource, the oldest its newest ``created_at``/``updated_at``
            may be before the freshness check fails (say ``{"comments": 48}``); resources
            not named are reported only.
        parquet_dir: the Parquet target's folder.
        delta_dir: the Delta target's folder when no bucket is configured
            (``DESTINATION__FILESYSTEM__BUCKET_URL``), and where its models file lives.
        pipelines_dir: where each warehouse's dlt working folder goes (default:
            ~/.dlt/pipelines/feedback-sync). A fresh one resumes from the state the
            destination holds.
        account: the account to sync, where several are configured: into the dataset
            ``<dataset>_<account>``, without the models (the fan-out flow
            ``feedback-sync-accounts`` starts one run per account).
    """
    start_run()
    logger = get_run_logger()
    _check_parameters(mode, max_row_drop, max_age_hours)
    account = run_account(account)
    target = flow_target(destination, dataset, parquet_dir, delta_dir, pipelines_dir)
    target = target.for_account(account) if account else target
    selected = check_resources(resources)
    retries, delays = _retry_options()
    limit = lineage.concurrency_limit(target)
    logger.info("waiting for the writer slot of %s (limit %r)", target.describe(), limit)
    with ExitStack() as held:
        _take_slot(held, target, mode, limit)
        logger.info("holding the writer slot %r", limit)
        syncing = sync.with_options(retries=retries, retry_delay_seconds=delays)
        chosen = list(selected) if selected else None
        state = syncing(target, mode == "full", chosen, account, return_state=True)
        result = _synced(state, target, mode)
        made = _build_models(target, run_models, account)
        found: list[Check] | None = None
        if checks:
            found = _checks(target, result, made, max_row_drop, max_age_hours)
        # written while the slot is held, so the next run's checks see this run's counts
        _rows_artifacts(target, result, found)
    reported = publish_assets(target, _base_url(account), result, made.built, found or [])
    skipped = artifacts.skipped_lines(result, selected, made.not_built)
    create_markdown_artifact(
        artifacts.report_markdown(result, found, skipped, limit),
        key=lineage.artifact_key(target, "report"),
        description="feedback-sync run report: summary, checks, what was skipped",
    )
    _raise_what_failed(result, made.error if not checks else None, found)
    return {
        "load_id": result.load_id,
        "rows_loaded": result.rows_loaded,
        "rows_removed": result.rows_removed,
        "table_rows": result.table_rows,
        "assets": reported,
        "checks": [c.as_dict() for c in found or []],
    }


def start_run() -> None:
    """What every run does first: the log filters, dlt's telemetry, and the settings files
    checked as every command checks them (a broken file, or a key that is no setting,
    fails by name)."""
    install_log_filters()
    telemetry_off_unless_chosen()
    check_settings_files()


def _take_slot(held: ExitStack, target: Target, mode: str, limit: str) -> None:
    """Takes the warehouse's writer slot for the rest of ``held``; a slot not taken is
    reported (artifacts) and raised."""
    try:
        take_writer_slot(held, limit)
    except WriterSlotMissing as exc:
        _report_failure(target, mode, str(exc))
        raise
    except ConcurrencySlotAcquisitionError as exc:  # the server failed, the limit exists
        _report_failure(target, mode, f"could not take the writer slot {limit!r}: {exc}")
        raise


def _raise_what_failed(
    result: SyncResult, models_error: str | None, found: list[Check] | None
) -> None:
    """Fails the flow run for what failed after the data was kept: the history, the models
    (where no checks report them) or a check."""
    if result.history_error is not None:
        raise RuntimeError(
            f"the history step failed (the synced data is kept): {result.history_error}"
        )
    if models_error is not None:
        raise RuntimeError(f"the SQL models failed (the synced data is kept): {models_error}")
    problems = failed(found or [])
    if problems:
        raise ChecksFailed(problems)


def _synced(state: Any, target: Target, mode: str) -> SyncResult:
    """The sync task's result, or its failure reported (artifacts) and raised in one line
    (failed, crashed or cancelled)."""
    if state.is_completed():
        result: SyncResult = state.result()
        return result
    error = _failure(state) if state.is_failed() else None
    told = (explain(error)[0] if error is not None else None) or state.message
    message = SCRUBBER.scrub(f"the sync failed: {told or state.name}")
    _report_failure(target, mode, message)
    raise RuntimeError(message)


def _check_parameters(
    mode: str, max_row_drop: float, max_age_hours: dict[str, float] | None
) -> None:
    """Refuses a flow parameter no run can use (``ConfigError``, the run fails by name)."""
    if mode not in ("incremental", "full"):
        raise ConfigError(f"mode must be incremental or full, got {mode!r}")
    if not 0 <= max_row_drop <= 1:
        raise ConfigError(f"max_row_drop must be a share from 0 to 1, got {max_row_drop!r}")
    unknown = sorted(set(max_age_hours or {}) - set(RESOURCES))
    if unknown:
        raise ConfigError(
            f"max_age_hours names no resource: {', '.join(unknown)}; "
            f"choose from {', '.join(RESOURCES)}"
        )


@dataclass(frozen=True)
class _Models:
    """What the flow's models step did: the build, its error, or why it did not run."""

    built: BuildResult | None = None
    error: str | None = None
    not_built: str | None = None


def _build_models(target: Target, run_models: bool, account: str | None) -> _Models:
    """Builds the models where the flow and the target call for it (a failure is kept):
    not for one account of several (``MODELS_NOT_BUILT``)."""
    if not run_models:
        return _Models(not_built="run_models is off")
    if account is not None:
        return _Models(not_built=MODELS_NOT_BUILT)
    if not target.builds_models:
        why = f"they run on DuckDB, Parquet, PostgreSQL and Delta targets, not {target.describe()}"
        get_run_logger().warning("the SQL models were not built: %s", why)
        return _Models(not_built=why)
    model_state = models(target, return_state=True)
    if model_state.is_completed():
        return _Models(built=model_state.result())
    error = _failure(model_state)
    models_error = str(error) if error is not None else str(model_state.message)
    return _Models(error=models_error, not_built=f"the build failed: {models_error}")


def _checks(
    target: Target,
    result: SyncResult,
    made: _Models,
    max_row_drop: float,
    max_age_hours: dict[str, float] | None,
) -> list[Check]:
    """The data checks' findings; checks that could not run are one failed finding."""
    check_state = data_checks(
        target, result, made.built, made.error, max_row_drop, max_age_hours, return_state=True
    )
    if check_state.is_completed():
        found: list[Check] = check_state.result()
        return found
    error = _failure(check_state)
    reason = SCRUBBER.scrub(str(error or check_state.message))
    return [Check("checks ran", "warehouse", f"the checks failed: {reason}", False)]


def _rows_artifacts(target: Target, result: SyncResult, found: list[Check] | None) -> None:
    """The rows table of this run, and the baseline the next run's checks compare with
    (only after a run whose checks passed)."""
    table = artifacts.rows_table(result)
    create_table_artifact(
        table,
        key=lineage.artifact_key(target, "rows"),
        description="feedback-sync: rows per table, requests, retries, seconds per step",
    )
    if not failed(found or []):
        create_table_artifact(
            table,
            key=lineage.artifact_key(target, "baseline"),
            description="feedback-sync: rows per table after the last successful run",
        )


def _report_failure(target: Target, mode: str, message: str) -> None:
    """The run's artifacts when it stopped before it had anything else to say."""
    create_table_artifact(
        artifacts.failed_rows(mode),
        key=lineage.artifact_key(target, "rows"),
        description="feedback-sync: rows per table, requests, retries, seconds per step",
    )
    create_markdown_artifact(
        f"# feedback-sync: {mode} run FAILED\n\n{message}\n\n"
        "Nothing of this run was committed; the next run resumes from the last committed "
        "state.\n",
        key=lineage.artifact_key(target, "report"),
        description="feedback-sync run report",
    )


def _base_url(account: str | None) -> str:
    """The API's base URL (the account's, where one is named) for lineage keys (no key
    involved)."""
    if account is not None:
        return load_account_settings(account, api_key="-").base_url
    return load_settings(api_key="-").base_url
