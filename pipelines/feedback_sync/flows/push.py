"""The Prefect flow ``feedback-push``: the reverse sync (``feedback-sync push``) on a schedule.

One run takes the warehouse's writer slot (the one ``feedback-sync`` holds: the push writes
its journal into the warehouse, and must not plan against a half-loaded copy), runs
``feedback_sync.push.run.run_push`` in-process, and writes two keyed artifacts:

- ``...-push-preview``: the preview (markdown): counts per target, samples with old and new
  values and the exact requests; written by every run, so a dry run's plan can be read
  in the UI before anyone flips ``apply``;
- ``...-push-results`` (table): per target the creates, updates, deletes, unchanged,
  invalid, rejected and held rows of this run.

The run fails when rows were invalid, rejected or held, or a target was refused (the same
rule as the CLI's exit code 1); the artifacts say which. ``prefect.yaml`` deploys it to run
after each completed ``feedback-sync/incremental`` run.

With accounts configured, the run pushes the account its ``account`` parameter names, or
else every account, one after another as ``feedback-sync push`` does
(``app/push_accounts.py``): every account's inputs are checked before anything is sent;
each account then holds its own writer slot, is sent with its own settings (its key from
its own Secret block, ``secrets.py``), and writes its own two artifacts (keyed by its
dataset). An account that fails does not stop the others;
the run fails at the end, naming each account that failed or had rows refused.
"""

from __future__ import annotations

import dataclasses
from contextlib import ExitStack
from typing import IO, Any, cast

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from feedback_sync.api.accounts import load_account_settings
from feedback_sync.api.settings import FeedbackSettings, load_settings
from feedback_sync.app.failures import explain
from feedback_sync.app.settings_files import check_settings_files
from feedback_sync.app.telemetry import telemetry_off_unless_chosen
from feedback_sync.errors import ConfigError, PushFailed
from feedback_sync.flows import lineage
from feedback_sync.flows.logs import RunLogStream, forwarded
from feedback_sync.flows.secrets import api_key
from feedback_sync.flows.sync import flow_target
from feedback_sync.flows.writer_slot import take_writer_slot
from feedback_sync.push.run import PushOptions, PushResult, check_push, run_push
from feedback_sync.push.scope import Scope
from feedback_sync.push.settings import load_push_settings
from feedback_sync.redaction import SCRUBBER, install_log_filters
from feedback_sync.warehouse.target import Target


@task(name="push", cache_policy=NO_CACHE)
def push(target: Target, options: PushOptions) -> PushResult:
    """``feedback-sync push`` in-process (for ``options.scope``'s account), its output in the
    run's logs."""
    logger = get_run_logger()
    stream = RunLogStream(logger)
    with forwarded(logger):
        result = run_push(
            target,
            options,
            settings=_settings(options.scope.account),
            push_settings=load_push_settings(),
            out=cast(IO[str], stream),
        )
    stream.flush()
    return result


def _settings(account: str | None) -> FeedbackSettings:
    """The API settings of the run: the key from the Secret block where one holds it (an
    account's own block, ``secrets.py``), else resolved the dlt way."""
    key, origin = api_key(account)
    get_run_logger().info("API key from %s", origin)
    if account is not None:
        return load_account_settings(account, api_key=key)
    return load_settings(api_key=key)


def flow_accounts(account: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(accounts the run pushes, every account configured)``: ``account``, else every
    one; none where no accounts are configured.

    Raises:
        ConfigError: ``account`` is given but not configured.
    """
    from feedback_sync.app.accounts import chosen_accounts
    from feedback_sync.flows.accounts import configured

    names = configured()
    try:
        chosen = chosen_accounts(names, [account] if account else None)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("--account", "the parameter account", 1)) from None
    return chosen, names


def results_table(result: PushResult) -> list[dict[str, Any]]:
    rows = []
    for plan in result.plans:
        counts = result.counts(plan)
        rows.append(
            {
                "target": plan.spec.name,
                "mode": plan.spec.mode,
                **{a: counts[a] for a in ("create", "update", "delete", "unchanged")},
                **{a: counts[a] for a in ("invalid", "rejected", "held")},
                "refused": plan.refused or "",
            }
        )
    for name, reason in result.skipped.items():
        rows.append({"target": name, "mode": "", "refused": f"skipped: {reason}"})
    return rows


@flow(name="feedback-push", log_prints=False)
def feedback_push(
    targets: list[str] | None = None,
    apply: bool = False,
    force: bool = False,
    destination: str = "duckdb",
    dataset: str = "feedback",
    parquet_dir: str = "data/parquet",
    delta_dir: str = "data/delta",
    account: str | None = None,
) -> dict[str, Any]:
    """Push curated warehouse rows back through the API (a preview unless ``apply``); with
    accounts configured, ``account``'s (default: every account's, one after another).

    Args:
        targets: only these push targets of ``sql/push`` (default: every target whose
            curated inputs exist).
        apply: send the writes; without it the run only plans and writes the preview.
        force: send targets the safety limits refuse (an empty desired set, too many
            updates or deletes).
        destination: ``duckdb``, ``parquet``, ``delta`` (the push reads the models' DuckDB
            file) or ``postgres`` (the curated tables and the journal are in the database).
        dataset: the dataset (schema) name.
        parquet_dir: the Parquet target's folder.
        delta_dir: the Delta target's folder (its models file is there).
        account: with accounts configured, only this account (default: every one).
    """
    install_log_filters()
    telemetry_off_unless_chosen()
    # as every command: a broken settings file, or a key that is no setting, fails by name
    check_settings_files()
    target = flow_target(destination, dataset, parquet_dir, delta_dir)
    options = PushOptions(targets=targets, apply=apply, force=force)
    accounts, configured = flow_accounts(account)
    if not accounts:
        result = _pushed(target, options)
        if result.exit_code():
            raise PushFailed(_problems(result))
        return {"run_id": result.run_id, "writes": result.writes, "totals": dict(result.totals())}
    chosen = [dataclasses.replace(options, scope=Scope(a, configured)) for a in accounts]
    for one in chosen:  # every account's inputs, before anything is sent to any
        check_push(target, one)
    done: dict[str, Any] = {}
    failed: list[str] = []
    for one in chosen:
        name = str(one.scope.account)
        try:
            result = _pushed(target, one)
        except Exception as exc:  # one account's failure never stops the others
            line = SCRUBBER.scrub(explain(exc)[0] or f"{type(exc).__name__}: {exc}")
            get_run_logger().error("account %s: push failed: %s", name, line)
            failed.append(f"{name} (failed: {line})")
            continue
        done[name] = {"run_id": result.run_id, "writes": result.writes}
        if result.exit_code():
            failed.append(f"{name} ({_problems(result)})")
    if failed:
        raise PushFailed(f"{len(failed)} of {len(chosen)} account(s): {'; '.join(failed)}")
    return {"accounts": done}


def _pushed(target: Target, options: PushOptions) -> PushResult:
    """One push (of ``options.scope``'s account, holding that account's writer slot), its
    two artifacts written and its report logged."""
    logger = get_run_logger()
    account = options.scope.account
    mine = target if account is None else target.for_account(account)
    limit = lineage.concurrency_limit(mine)
    logger.info("waiting for the writer slot of %s (limit %r)", mine.describe(), limit)
    with ExitStack() as held:
        take_writer_slot(held, limit)
        result = push(target, options)
    report = SCRUBBER.scrub(result.report(load_push_settings().sample_size))
    what = "apply" if options.apply else "preview"
    title = f"feedback-push ({what})" if account is None else f"feedback-push {account} ({what})"
    create_markdown_artifact(
        f"# {title}\n\n```\n{report}\n```\n",
        key=lineage.artifact_key(mine, "push-preview"),
        description="feedback-push: the plan, with samples and payloads",
    )
    create_table_artifact(
        results_table(result),
        key=lineage.artifact_key(mine, "push-results"),
        description="feedback-push: rows per target and outcome",
    )
    for line in report.splitlines()[:40]:
        logger.info(line)
    return result


def _problems(result: PushResult) -> str:
    totals = result.totals()
    refused = ", ".join(p.spec.name for p in result.plans if p.refused) or "none"
    return (
        f"{totals['invalid']} invalid, {totals['rejected']} rejected, {totals['held']} held "
        f"row(s); refused: {refused}"
    )
