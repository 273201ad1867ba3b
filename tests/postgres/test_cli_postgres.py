"""``feedback-sync sync|models|status|push|report --destination postgres`` as a user runs
them, configured the dlt way (DESTINATION__POSTGRES__CREDENTIALS): the summary, and the
database password nowhere a run leaves anything (output, dlt's working folder, the
dashboard, the warehouse)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedback_sync.sandbox.server import RunningSandbox

from tests.support.cli import said_lines
from tests.support.postgres import Server
from tests.sync.harness import PostgresReader

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--destination", "postgres", "--pipelines-dir", str(cwd / "pipelines")],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_sync_models_and_status_into_postgres_leave_the_password_nowhere(
    live_sandbox: RunningSandbox,
    postgres_server: Server,
    postgres_dsn: str,
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    env.update(
        SOURCES__FEEDBACK__BASE_URL=live_sandbox.base_url,
        SOURCES__FEEDBACK__API_KEY=live_sandbox.api_key,
        DESTINATION__POSTGRES__CREDENTIALS=postgres_dsn,
    )
    password = postgres_server.password
    sync = _cli(["sync", "--full"], env, tmp_path)
    assert sync.returncode == 0, sync.stderr
    assert "into postgres (dataset feedback)" in sync.stdout
    assert "models: built" in sync.stdout
    models = _cli(["models"], env, tmp_path)
    assert models.returncode == 0, models.stderr
    status = _cli(["status"], env, tmp_path)
    assert status.returncode == 0, status.stderr
    assert "followers" in status.stdout
    # a preview: no curated tables in PostgreSQL yet, so the targets that need them say so
    push = _cli(["push"], env, tmp_path)
    assert push.returncode == 0, push.stdout + push.stderr
    assert "push preview (dry run, nothing sent)" in push.stdout
    assert "a table curated.accounts" in push.stdout
    report = _cli(["report", "--output", str(tmp_path / "report.html")], env, tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "(6 charts" in report.stdout
    # a wrong password: one line naming the failure, without the password tried
    wrong = "not-the-password-" + password[:6]
    bad = dict(env, DESTINATION__POSTGRES__CREDENTIALS=postgres_dsn.replace(password, wrong))
    failed = _cli(["sync"], bad, tmp_path)
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "the destination refused the login" in failed.stderr
    assert "password authentication failed" in failed.stderr
    assert "Traceback" not in failed.stderr and len(said_lines(failed.stderr)) == 1
    # a server that is not there: exit 1 (a later run may succeed), one line
    gone = dict(
        env,
        DESTINATION__POSTGRES__CREDENTIALS=postgres_dsn.replace(f":{postgres_server.port}/", ":9/"),
    )
    down = _cli(["sync"], gone, tmp_path)
    assert down.returncode == 1, down.stdout + down.stderr
    assert "cannot connect to the destination" in down.stderr
    assert "Traceback" not in down.stderr
    for done in (sync, models, status, push, report, failed, down):
        for secret in (password, wrong):
            assert secret not in done.stdout and secret not in done.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    pg = PostgresReader(postgres_dsn)
    try:
        columns = pg.execute(
            "select table_schema, table_name, column_name from information_schema.columns "
            "where table_schema in ('feedback', 'staging', 'marts', 'push') "
            "and data_type in ('text', 'character varying', 'jsonb', 'json')"
        ).fetchall()
        assert len(columns) > 50
        for schema, table, column in columns:
            hits = pg.execute(
                f'select count(*) from "{schema}"."{table}" where "{column}"::text like %s',
                [f"%{password}%"],
            ).fetchone()
            assert hits == (0,), f"{schema}.{table}.{column}"
    finally:
        pg.close()
