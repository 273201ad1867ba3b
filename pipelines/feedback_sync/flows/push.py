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
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import IO, Any, cast

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from feedback_sync.api.settings import load_settings
from feedback_sync.app.settings_files import check_settings_files
from feedback_sync.app.telemetry import telemetry_off_unless_chosen
from feedback_sync.errors import PushFailed
from feedback_sync.flows import lineage
from feedback_sync.flows.logs import RunLogStream, forwarded
from feedback_sync.flows.secrets import api_key
from feedback_sync.flows.sync import flow_target
from feedback_sync.flows.writer_slot import take_writer_slot
from feedback_sync.push.run import PushOptions, PushResult, run_push
from feedback_sync.push.settings import load_push_settings
from feedback_sync.redaction import SCRUBBER, install_log_filters
from feedback_sync.warehouse.target import Target


@task(name="push", cache_policy=NO_CACHE)
def push(target: Target, targets: list[str] | None, apply: bool, force: bool) -> PushResult:
    """``feedback-sync push`` in-process, its output in the run's logs."""
    logger = get_run_logger()
    key, origin = api_key()
    logger.info("API key from %s", origin)
    stream = RunLogStream(logger)
    with forwarded(logger):
        result = run_push(
            target,
            PushOptions(targets=targets, apply=apply, force=force),
            settings=load_settings(api_key=key),
            push_settings=load_push_settings(),
            out=cast(IO[str], stream),
        )
    stream.flush()
    return result


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
) -> dict[str, Any]:
    """Push curated warehouse rows back through the API (a preview unless ``apply``).

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
    """
    install_log_filters()
    telemetry_off_unless_chosen()
    # as every command: a broken settings file, or a key that is no setting, fails by name
    check_settings_files()
    logger = get_run_logger()
    target = flow_target(destination, dataset, parquet_dir, delta_dir)
    limit = lineage.concurrency_limit(target)
    logger.info("waiting for the writer slot of %s (limit %r)", target.describe(), limit)
    with ExitStack() as held:
        take_writer_slot(held, limit)
        result = push(target, targets, apply, force)
    report = SCRUBBER.scrub(result.report(load_push_settings().sample_size))
    create_markdown_artifact(
        f"# feedback-push ({'apply' if apply else 'preview'})\n\n```\n{report}\n```\n",
        key=lineage.artifact_key(target, "push-preview"),
        description="feedback-push: the plan, with samples and payloads",
    )
    create_table_artifact(
        results_table(result),
        key=lineage.artifact_key(target, "push-results"),
        description="feedback-push: rows per target and outcome",
    )
    for line in report.splitlines()[:40]:
        logger.info(line)
    if result.exit_code():
        totals = result.totals()
        refused = ", ".join(p.spec.name for p in result.plans if p.refused) or "none"
        raise PushFailed(
            f"{totals['invalid']} invalid, {totals['rejected']} rejected, {totals['held']} held "
            f"row(s); refused: {refused}"
        )
    return {"run_id": result.run_id, "writes": result.writes, "totals": dict(result.totals())}
