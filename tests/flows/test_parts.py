"""The flow's parts that need no server: retry classification, names, artifacts, checks,
log forwarding, the alarm file."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import httpx
import psycopg2
import pytest
from feedback_sync.app.failures import explain
from feedback_sync.app.sync import SyncResult
from feedback_sync.errors import (
    ApiError,
    ConfigError,
    DataError,
    LoadFailed,
    ModelError,
    PushFailed,
    RetriesExhausted,
)
from feedback_sync.flows import alarm, artifacts, lineage
from feedback_sync.flows.logs import RunLogStream, forwarded
from feedback_sync.flows.sync import retry_transient
from feedback_sync.models.checks import row_count_checks
from feedback_sync.models.project import load_project
from feedback_sync.redaction import SCRUBBER
from feedback_sync.warehouse.target import make_target
from prefect.states import Failed


def _retried(error: BaseException) -> bool:
    return retry_transient(None, None, Failed(data=error))  # type: ignore[arg-type]


def _wrapped(error: BaseException) -> BaseException:
    """As dlt hands it over: the cause inside a step failure."""
    try:
        try:
            raise error
        except BaseException as inner:
            raise RuntimeError("Pipeline execution failed at stage extract") from inner
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (RetriesExhausted("followers", "GET", "/followers", 503, "gave up"), True),
        (httpx.ConnectError("refused"), True),
        (RuntimeError("IO Error: Could not set lock on file"), True),
        (ApiError("followers", "GET", "/followers", 401, "bad key"), False),
        (ConfigError("missing setting"), False),
        (DataError("a row without its key"), False),
        (LoadFailed("the warehouse refused the load"), False),
        (ValueError("anything else"), False),
        # PostgreSQL: a server that is down may come back; a refused login will not
        (psycopg2.OperationalError('connection to server at "db" failed: refused'), True),
        (psycopg2.OperationalError("FATAL:  password authentication failed for user"), False),
    ],
)
def test_only_transient_failures_are_retried(error: BaseException, retry: bool) -> None:
    assert _retried(error) is retry
    assert _retried(_wrapped(error)) is retry


def test_a_known_permanent_cause_wins_over_a_transient_wrapper() -> None:
    try:
        try:
            raise ConfigError("bad setting")
        except ConfigError as inner:
            raise httpx.ConnectError("while reporting") from inner
    except httpx.ConnectError as outer:
        assert not _retried(outer)


def test_names_derive_from_the_warehouse_and_carry_no_secret(tmp_path: Path) -> None:
    duck = make_target(duckdb_path=tmp_path / "My Warehouse.duckdb", dataset="feedback")
    assert lineage.concurrency_limit(duck) == "feedback-sync-duckdb-my-warehouse"
    assert re.fullmatch(
        r"feedback-sync-duckdb-my-warehouse-feedback-[0-9a-f]{8}-rows",
        lineage.artifact_key(duck, "rows"),
    )
    elsewhere = make_target(duckdb_path=tmp_path / "b" / "My Warehouse.duckdb", dataset="feedback")
    assert lineage.concurrency_limit(elsewhere) == lineage.concurrency_limit(duck)  # take turns
    assert lineage.artifact_key(elsewhere, "rows") != lineage.artifact_key(duck, "rows")
    key = lineage.table_asset(duck, "followers")
    assert key.startswith("duckdb://") and " " not in key and key.endswith("/feedback/followers")
    parquet = make_target(destination="parquet", parquet_dir=tmp_path / "out")
    assert lineage.table_asset(parquet, "topics") == f"file://{tmp_path / 'out'}/topics.parquet"
    assert lineage.concurrency_limit(parquet) == "feedback-sync-parquet-out"
    assert lineage.concurrency_limit(make_target(destination="postgres", dataset="fb")) == (
        "feedback-sync-postgres-fb"
    )
    resource = lineage.resource_asset("https://user:pw@feedback.example.com:8443/v1", "comments")
    assert resource == "https://feedback.example.com:8443/v1/comments"


def test_server_and_bucket_assets_name_where_they_are_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two PostgreSQL servers, or two buckets, never share an asset or an artifact history,
    and no user name or secret is part of either."""
    monkeypatch.delenv("DESTINATION__FILESYSTEM__BUCKET_URL", raising=False)
    pg = make_target(destination="postgres", dataset="fb")
    dsn = "postgresql://loader:s3cr3t-pw@db.internal:6432/analytics?sslmode=require"
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", dsn)
    assert (
        lineage.table_asset(pg, "followers") == "postgres://db.internal:6432/analytics/fb/followers"
    )
    assert lineage.mart_asset(pg, "topic_summary").endswith("/analytics/marts/topic_summary")
    first = lineage.artifact_key(pg, "rows")
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", dsn.replace("db.internal", "db2"))
    assert lineage.artifact_key(pg, "rows") != first
    assert lineage.concurrency_limit(pg) == "feedback-sync-postgres-fb"

    local = make_target(destination="delta", delta_dir=tmp_path / "lake")
    assert lineage.table_asset(local, "topics") == f"file://{tmp_path / 'lake'}/feedback/topics"
    assert lineage.mart_asset(local, "topic_summary") == (
        f"duckdb://{tmp_path / 'lake' / 'models.duckdb'}/marts/topic_summary"
    )
    local_history = lineage.artifact_key(local, "rows")
    monkeypatch.setenv(
        "DESTINATION__FILESYSTEM__BUCKET_URL", "s3://key:secret@team-lake/feedback-sync/"
    )
    in_bucket = make_target(destination="delta", delta_dir=tmp_path / "lake")
    key = lineage.table_asset(in_bucket, "followers")
    assert key == "s3://team-lake/feedback-sync/feedback/followers"
    assert lineage.artifact_key(in_bucket, "rows") != local_history
    for text in (key, lineage.artifact_key(in_bucket, "rows"), lineage.table_asset(pg, "x")):
        assert "secret" not in text and "s3cr3t" not in text and "loader" not in text


def test_marts_depend_on_the_tables_their_staging_models_read() -> None:
    project = load_project()
    reads = lineage.mart_sources(project)
    assert set(reads) == {m.name for m in project.models if m.layer == "marts"}
    assert {"ideas", "followers__companies"} <= reads["idea_engagement"]
    assert reads["status_summary"] >= {"statuses"}
    assert all(not any(t.startswith("stg") for t in tables) for tables in reads.values())


def _result() -> SyncResult:
    result = SyncResult(target="DuckDB x", full=False)
    result.rows_loaded = {"comments": 3}
    result.rows_removed = {"followers": 1}
    result.table_rows = {"comments": 160, "followers": 39}
    result.requests, result.retries = 12, 1
    result.requests_by_resource = {"comments": 8, "followers": 4}
    result.phases = {"fetch": 0.5, "load": 0.25}
    result.complete = ["topics"]
    return result


def test_the_rows_table_round_trips_to_counts() -> None:
    rows = artifacts.rows_table(_result())
    assert {tuple(r) for r in rows} == {artifacts.COLUMNS}
    assert artifacts.counts_from_rows(rows) == {"comments": 160, "followers": 39}
    run = next(r for r in rows if r["kind"] == "run")
    assert (run["requests"], run["retries"], run["loaded"]) == (12, 1, 3)
    assert [r["name"] for r in rows if r["kind"] == "step"] == ["fetch", "load"]


def test_the_report_says_what_a_normal_run_skipped() -> None:
    skipped = artifacts.skipped_lines(
        _result(), ["comments", "followers", "topics"], models="run_models is off"
    )
    text = "\n".join(skipped)
    assert "resources not selected: announcements, statuses, integration_links, ideas" in text
    assert "deletes not reconciled for comments, followers" in text
    assert "the SQL models were not built: run_models is off" in text
    assert not any("models" in line for line in artifacts.skipped_lines(_result(), None, None))
    report = artifacts.report_markdown(_result(), None, skipped, "limit-x")
    assert "Checks were switched off" in report and "`limit-x`" in report


def test_row_count_drops_fail_beyond_the_share() -> None:
    checks = {
        c.table: c for c in row_count_checks({"a": 75, "b": 74, "c": 5}, {"a": 100, "b": 100}, 0.25)
    }
    assert checks["a"].passed is True
    assert checks["b"].passed is False and "-26.0%" in checks["b"].figure
    assert checks["c"].passed is None  # no earlier count
    assert all(c.passed is None for c in row_count_checks({"a": 1}, None, 0.1))
    vanished = row_count_checks({"a": 100}, {"a": 100, "gone": 10}, 0.25)
    assert [c.table for c in vanished if c.passed is False] == ["gone"]


class _Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[int, str]] = []

    def info(self, message: str) -> None:
        self.records.append((logging.INFO, message))

    def log(self, level: int, message: str) -> None:
        self.records.append((level, message))


def test_progress_lines_and_dlt_warnings_reach_the_run_logger_scrubbed() -> None:
    SCRUBBER.register("s3cr3t-token-for-log-test")
    recorder: Any = _Recorder()
    stream = RunLogStream(recorder)
    stream.write("sync: 1.0s  3 requests\nsync: half a ")
    stream.write("line with s3cr3t-token-for-log-test\n\n")
    stream.write("no newline yet")
    stream.flush()
    with forwarded(recorder):
        logging.getLogger("dlt").warning("schema %s changed", "feedback")
        logging.getLogger("dlt").info("not forwarded: below WARNING")
    logging.getLogger("dlt").warning("after the block: not forwarded")
    assert recorder.records == [
        (logging.INFO, "sync: 1.0s  3 requests"),
        (logging.INFO, "sync: half a line with ***"),
        (logging.INFO, "no newline yet"),
        (logging.WARNING, "dlt: schema feedback changed"),
    ]


def test_the_alarm_file_is_a_valid_automation_and_takes_a_window() -> None:
    from prefect.events.schemas.automations import AutomationCore

    spec = alarm.read(alarm.FILE, within=10, notify=None)
    automation = AutomationCore.model_validate(spec)
    assert automation.trigger.within.total_seconds() == 10  # type: ignore[union-attr]
    default = AutomationCore.model_validate(alarm.read(alarm.FILE, None, None))
    assert default.trigger.within.total_seconds() == 7200  # type: ignore[union-attr]
    assert default.trigger.posture == "Proactive"  # type: ignore[union-attr]
    with pytest.raises(Exception, match="10 seconds"):
        AutomationCore.model_validate(alarm.read(alarm.FILE, within=5, notify=None))


def test_the_alarm_notifies_through_a_block_named_by_its_type_and_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--notify type/name`` puts the block document's id in the action, read with
    Prefect's client as ``Block.load`` reads it; a block the server lacks is one line."""
    import uuid
    from types import SimpleNamespace

    import prefect.client.orchestration as orchestration
    from prefect.exceptions import ObjectNotFound

    found = uuid.uuid4()
    asked: list[tuple[str, str]] = []

    class Client:
        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def read_block_document_by_name(self, name: str, block_type_slug: str) -> Any:
            asked.append((block_type_slug, name))
            if name != "on-call":
                raise ObjectNotFound(httpx.HTTPError("404"))
            return SimpleNamespace(id=found)

    monkeypatch.setattr(orchestration, "get_client", lambda sync_client: Client())
    spec = alarm.read(alarm.FILE, within=None, notify="slack-webhook/on-call")
    assert [a["block_document_id"] for a in spec["actions"]] == [str(found)]
    with pytest.raises(SystemExit) as exited:
        alarm.read(alarm.FILE, within=None, notify="slack-webhook/gone")
    assert str(exited.value) == (
        "feedback_sync.flows.alarm: no block 'slack-webhook/gone' on the server: Unable to "
        "find block document named gone for block type slack-webhook"
    )
    assert asked == [("slack-webhook", "on-call"), ("slack-webhook", "gone")]


@pytest.mark.parametrize(
    ("error", "code", "resumes"),
    [
        (ApiError("followers", "GET", "/followers", 401, "bad key"), 1, True),
        (DataError("a row without its key"), 1, True),
        (ConfigError("missing setting"), 2, False),
        (LoadFailed("the warehouse refused the load"), 1, False),
        (ModelError("model marts.x (x.sql): boom"), 1, False),
        (PushFailed("2 rows were rejected"), 1, False),
    ],
)
def test_every_error_of_the_tree_is_one_line_with_its_exit_code(
    error: Exception, code: int, resumes: bool
) -> None:
    """The tree's own errors carry their exit code; only those that stop a sync before it
    committed anything say that the next run resumes."""
    message, exit_code = explain(_wrapped(error))
    assert exit_code == code and message is not None and "\n" not in message
    assert message.startswith(str(error))
    assert message.endswith("the next run resumes.") is resumes


def test_the_flows_read_their_settings_from_the_declaration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``[flows]`` as the flows read it (``app/settings.py``): the block's name and the
    sync's retries, each malformed setting refused by name."""
    from feedback_sync.flows.secrets import block_name
    from feedback_sync.flows.sync import _retry_options

    monkeypatch.setenv("FLOWS__API_KEY_SECRET_BLOCK", " our-key ")
    monkeypatch.setenv("FLOWS__SYNC_RETRIES", "4")
    monkeypatch.setenv("FLOWS__SYNC_RETRY_DELAY_SECONDS", "[1, 2.5]")
    assert block_name() == "our-key"
    assert _retry_options() == (4, [1.0, 2.5])
    monkeypatch.setenv("FLOWS__SYNC_RETRIES", "4.5")
    with pytest.raises(ConfigError) as refused:
        _retry_options()
    assert str(refused.value) == (
        "FLOWS__SYNC_RETRIES (sync_retries in [flows]) must be an integer >= 0, got '4.5'"
    )
