"""The Prefect flow ``feedback-sync-accounts``: every account's sync as a flow run of its own,
spread over the work pool's workers.

One run:

1. checks its parameters, that the sync deployment exists and that each account's writer
   limit exists (``lineage.concurrency_limit`` of the account's dataset): a missing one
   fails the run before any account starts, naming the commands that create them;
2. starts one run of the sync deployment (``feedback-sync/account`` by default) per
   account, with ``run_deployment(..., as_subflow=True)``, so the UI shows each under this
   run and any worker of the pool may take it: at most ``max_parallel`` at once, and never
   two that share a writer limit (accounts whose datasets are in one DuckDB file go one at
   a time, as DuckDB takes one writing process per file; into PostgreSQL or Delta tables
   each account has its own limit and they run side by side);
3. waits for every one: a failed account never stops the others;
4. writes the keyed artifact ``...-accounts``: one line per account (state, rows,
   requests, time, and the error line of a failed one);
5. builds the staging views and marts over every account configured, once, holding the
   warehouse's writer slot (``models_over_accounts``: the limit of the dataset the accounts'
   datasets are named after, checked in step 1 with theirs), unless ``run_models`` is off
   or no account completed;
6. fails, naming the failed accounts (and a models build that failed), when any failed.

Each account is retried on its own, inside its run: the sync flow retries its sync task
after a failure that may pass (``[flows] sync_retries``), as for any run. The fan-out
starts no account twice; run it again and the accounts that completed make a normal sync
while a failed one resumes from its last committed state.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Collection, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact

from feedback_sync.errors import (
    AccountsFailed,
    ConfigError,
    ModelError,
    WarehouseBusy,
    WriterSlotMissing,
)
from feedback_sync.flows import lineage
from feedback_sync.flows.accounts import configured, fanout_accounts
from feedback_sync.flows.sync import flow_target, start_run
from feedback_sync.flows.writer_slot import take_writer_slot
from feedback_sync.source.resources import check_resources
from feedback_sync.warehouse.target import Target

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun

# how often the runs of the accounts are asked for their state, in seconds
POLL_SECONDS = 2.0
# Prefect's words before a failed flow run's exception
_RAISED = re.compile(r"^Flow run encountered an exception: (?:[\w.]+: )?")


@dataclass(frozen=True)
class AccountOutcome:
    """How one account's run ended: its line of the fan-out's report."""

    account: str
    state: str
    flow_run: str
    seconds: float
    rows_loaded: int | None = None
    rows_now: int | None = None
    requests: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED"


@flow(name="feedback-sync-accounts", log_prints=False)
def feedback_sync_accounts(
    accounts: list[str] | None = None,
    mode: Literal["incremental", "full"] = "incremental",
    max_parallel: int = 2,
    sync_deployment: str = "feedback-sync/account",
    resources: list[str] | None = None,
    destination: str = "duckdb",
    dataset: str = "feedback",
    parquet_dir: str = "data/parquet",
    delta_dir: str = "data/delta",
    pipelines_dir: str | None = None,
    run_models: bool = True,
) -> dict[str, Any]:
    """Sync every account, each by a run of the sync deployment, ``max_parallel`` at once,
    then build the models over every account.

    Args:
        accounts: only these accounts (default: every account configured).
        mode: ``incremental`` or ``full``, for every account.
        max_parallel: how many accounts' runs at once, at most (accounts that share a
            writer limit, as in one DuckDB file, still go one at a time).
        sync_deployment: the deployment of the flow ``feedback-sync`` each account runs
            through (``<flow>/<deployment>``). Its own parameters (checks, max_row_drop,
            ...) apply to every account; those below are passed over them.
        resources: only these resources (default: all).
        destination: where every account lands, each in its dataset ``<dataset>_<account>``.
        dataset: the first part of each account's dataset.
        parquet_dir: the Parquet target's folder (each account in a folder of its own).
        delta_dir: the Delta target's folder.
        pipelines_dir: where each warehouse's dlt working folder goes.
        run_models: build the staging views and marts over every account after the runs.
    """
    start_run()
    chosen = fanout_accounts(accounts)
    _check_parameters(mode, max_parallel, sync_deployment)
    check_resources(resources)
    target = flow_target(destination, dataset, parquet_dir, delta_dir, pipelines_dir)
    limits = {account: lineage.concurrency_limit(target.for_account(account)) for account in chosen}
    models_limit = lineage.concurrency_limit(target) if run_models else None
    _check_ready(sync_deployment, {*limits.values(), *([models_limit] if models_limit else [])})
    passed = {
        "mode": mode,
        "resources": resources,
        "destination": destination,
        "dataset": dataset,
        "parquet_dir": parquet_dir,
        "delta_dir": delta_dir,
        "pipelines_dir": pipelines_dir,
    }
    runs = _run_accounts(sync_deployment, limits, passed, max_parallel)
    outcomes = _outcomes(chosen, runs)
    models, models_error = "not built: run_models is off", None
    if models_limit is not None:
        models, models_error = models_over_accounts(target, outcomes, models_limit)
    create_markdown_artifact(
        report_markdown(outcomes, target, f"{mode} run through `{sync_deployment}`", models),
        key=lineage.artifact_key(target, "accounts"),
        description="feedback-sync-accounts: one line per account",
    )
    failed = [o for o in outcomes if not o.ok]
    if failed:
        raise AccountsFailed(
            f"{len(failed)} of {len(outcomes)} accounts failed: "
            + "; ".join(f"{o.account} ({o.error})" for o in failed)
            + (f"; and the models: {models_error}" if models_error else "")
        )
    if models_error is not None:
        raise ModelError(models_error)
    return {o.account: asdict(o) for o in outcomes}


def _check_parameters(mode: str, max_parallel: int, sync_deployment: str) -> None:
    """Refuses a parameter no run can use (``ConfigError``, the run fails by name)."""
    if mode not in ("incremental", "full"):
        raise ConfigError(f"mode must be incremental or full, got {mode!r}")
    if not isinstance(max_parallel, int) or max_parallel < 1:
        raise ConfigError(f"max_parallel must be 1 or more, got {max_parallel!r}")
    flow_name, _, deployment = sync_deployment.partition("/")
    if not flow_name or not deployment or "/" in deployment:
        raise ConfigError(
            f"sync_deployment must be <flow>/<deployment> (feedback-sync/account), "
            f"got {sync_deployment!r}"
        )


def _check_ready(sync_deployment: str, limits: Collection[str]) -> None:
    """The sync deployment and every writer limit exist on the server.

    Raises:
        ConfigError: no such deployment.
        WriterSlotMissing: limits missing, each named with the command that creates it.
    """
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    missing: list[str] = []
    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(sync_deployment)
        except ObjectNotFound:
            raise ConfigError(
                f"sync_deployment: no deployment {sync_deployment!r} on the Prefect server; "
                "deploy the flow feedback-sync under that name first (prefect.yaml)"
            ) from None
        for name in sorted(limits):
            try:
                client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                missing.append(name)
    if missing:
        commands = "; ".join(f"prefect gcl create {name} --limit 1" for name in missing)
        raise WriterSlotMissing(
            f"no global concurrency limit named {', '.join(map(repr, missing))} on the "
            "Prefect server (one writer per account's dataset, and one for the models over "
            f"them); create each once with: "
            f"{commands}"
        )


def startable(
    waiting: Sequence[str], running: Collection[str], limits: Mapping[str, str], at_most: int
) -> list[str]:
    """The accounts of ``waiting`` to start now, in order: never more than ``at_most``
    running in all, never two that hold one writer limit (``limits``: account -> limit)."""
    held = {limits[account] for account in running}
    chosen: list[str] = []
    for account in waiting:
        if len(running) + len(chosen) >= at_most:
            break
        if limits[account] not in held:
            held.add(limits[account])
            chosen.append(account)
    return chosen


def _run_accounts(
    deployment: str, limits: Mapping[str, str], passed: dict[str, Any], at_most: int
) -> dict[str, FlowRun]:
    """Starts a run of ``deployment`` per account (``startable`` at a time) and waits for
    every one; ``{account: its flow run, ended}``."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    logger = get_run_logger()
    waiting = list(limits)
    logger.info(
        "%d accounts (%s), each by a run of %s, at most %d at once%s",
        len(waiting),
        ", ".join(waiting),
        deployment,
        at_most,
        _one_writer(limits),
    )
    running: dict[str, FlowRun] = {}
    ended: dict[str, FlowRun] = {}
    while waiting or running:
        for account in startable(waiting, running, limits, at_most):
            waiting.remove(account)
            run = run_deployment(  # a sync call: a FlowRun, no coroutine
                deployment,
                parameters={**passed, "account": account},
                flow_run_name=f"{account}-{passed['mode']}",
                tags=[f"account:{account}"],
                timeout=0,
                as_subflow=True,
            )
            assert not isinstance(run, Coroutine)
            running[account] = run
            logger.info("account %s: started the flow run %s", account, run.name)
        time.sleep(POLL_SECONDS)
        with get_client(sync_client=True) as client:
            for account, run in list(running.items()):
                now = client.read_flow_run(run.id)
                if now.state is not None and now.state.is_final():
                    ended[account] = now
                    del running[account]
                    logger.info("account %s: %s", account, now.state.type.value)
    return ended


def _one_writer(limits: Mapping[str, str]) -> str:
    """What the run says of the accounts that share a writer limit (one at a time)."""
    counts = Counter(limits.values())
    shared = [limit for limit, count in counts.items() if count > 1]
    if not shared:
        return ""
    return f"; those sharing the writer limit {', '.join(map(repr, shared))} one at a time"


def _outcomes(accounts: Sequence[str], runs: Mapping[str, FlowRun]) -> list[AccountOutcome]:
    """Each account's line, from its flow run and the rows table it wrote."""
    from prefect.client.orchestration import get_client

    outcomes = []
    with get_client(sync_client=True) as client:
        for account in accounts:
            run = runs[account]
            state = run.state
            ok = state is not None and state.is_completed()
            row = _run_row(client, run)
            outcomes.append(
                AccountOutcome(
                    account=account,
                    state=state.type.value if state is not None else "UNKNOWN",
                    flow_run=run.name,
                    seconds=round(run.total_run_time.total_seconds(), 1),
                    rows_loaded=row.get("loaded"),
                    rows_now=row.get("now"),
                    requests=row.get("requests"),
                    error=None if ok else error_line(state.name if state else None, _said(run)),
                )
            )
    return outcomes


def _said(run: FlowRun) -> str | None:
    return run.state.message if run.state is not None else None


def error_line(state: str | None, message: str | None) -> str:
    """A failed run's error as one line: Prefect's words before the exception left out."""
    lines = (message or "").strip().splitlines()
    text = _RAISED.sub("", lines[0]) if lines else ""
    return text or f"the run ended {state or 'without a state'}"


def _run_row(client: SyncPrefectClient, run: FlowRun) -> dict[str, Any]:
    """The ``run`` row of the rows table the account's run wrote (``artifacts.rows_table``;
    a run that stopped before loading wrote one without figures); {} when it wrote none."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    found = client.read_artifacts(
        artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]))
    )
    for artifact in found:
        if not (artifact.key or "").endswith("-rows"):
            continue
        rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("kind") == "run":
                return row
    return {}


def models_over_accounts(
    target: Target, outcomes: Sequence[AccountOutcome], limit: str
) -> tuple[str, str | None]:
    """Builds the staging views and marts over every account configured
    (``models/accounts.py``) into ``target``, once, after the accounts' runs, holding the
    writer slot ``limit``; what the report says of them, and the error line of a build that
    failed (None)."""
    if not target.builds_models:
        return f"not built: {target.describe()} keeps no models", None
    if not any(o.ok for o in outcomes):
        return "not built: no account completed", None
    from contextlib import ExitStack

    from feedback_sync.models.project import apply

    logger = get_run_logger()
    with ExitStack() as held:
        take_writer_slot(held, limit)
        try:
            built = apply(target, reuse=True, accounts=configured())
        except (ModelError, WarehouseBusy) as exc:
            logger.error("the models over every account failed: %s", exc)
            return f"failed: {exc}", str(exc)
    logger.info(built.summary())
    return built.summary().splitlines()[0].removeprefix("models: "), None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "/").replace("\n", " ")


def report_markdown(
    outcomes: Sequence[AccountOutcome], target: Target, what: str, models: str
) -> str:
    """The fan-out's report: one line per account, then what failed and the models."""
    failed = [o.account for o in outcomes if not o.ok]
    parts = [
        f"# feedback-sync-accounts: {len(outcomes)} accounts",
        "",
        f"Warehouse: {target.describe()}, each account in its dataset "
        f"`{target.dataset}_<account>`; {what}.",
        "",
        "| account | state | rows loaded | rows now | requests | seconds | flow run | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        cells = (o.account, o.state, o.rows_loaded, o.rows_now, o.requests, o.seconds)
        parts.append("| " + " | ".join(_cell(c) for c in (*cells, o.flow_run, o.error)) + " |")
    done = len(outcomes) - len(failed)
    summary = f"{done} of {len(outcomes)} accounts completed"
    if failed:
        summary += (
            f"; failed: {', '.join(failed)} (run again: the others make a normal sync, "
            "a failed one resumes from its last committed state)"
        )
    parts += ["", summary + ".", "", f"Models over every account: {models}."]
    return "\n".join(parts) + "\n"
