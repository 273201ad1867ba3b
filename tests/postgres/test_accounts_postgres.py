"""Several accounts into PostgreSQL, configured by environment variables alone: synced
side by side, the models over every account, and each account's rows its own truth."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models.test_accounts import assert_each_accounts_marts_are_its_truth, dump_of
from tests.sync.accounts import servers
from tests.sync.harness import PostgresReader

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


@pytest.mark.slow
def test_accounts_into_postgres_side_by_side_with_models_over_them(
    postgres_dsn: str, tmp_path: Path
) -> None:
    with servers() as (acme, globex):
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))
        }
        env.update(
            SOURCES__FEEDBACK__ACCOUNT_NAMES='["acme", "globex"]',
            SOURCES__FEEDBACK__ACCOUNTS__ACME__BASE_URL=acme.base_url,
            SOURCES__FEEDBACK__ACCOUNTS__ACME__API_KEY=acme.api_key,
            SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__BASE_URL=globex.base_url,
            SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__API_KEY=globex.api_key,
            DESTINATION__POSTGRES__CREDENTIALS=postgres_dsn,
        )
        sync = subprocess.run(
            [
                *(*CLI, "sync", "--destination", "postgres", "--parallel", "2"),
                *("--pipelines-dir", str(tmp_path / "pipelines"), "--progress", "off"),
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert sync.returncode == 0, sync.stdout + sync.stderr
        # PostgreSQL takes both writers at once: nothing said about going one at a time
        assert "2 accounts (acme, globex), 2 at a time" in sync.stderr
        assert "over 2 accounts (acme, globex)" in sync.stdout
        dumps = {"acme": dump_of(acme), "globex": dump_of(globex)}
    con = PostgresReader(postgres_dsn)
    try:
        cursor = con.execute("select * from marts.idea_engagement limit 0")
        assert cursor.description[0][0] == "account"
        assert_each_accounts_marts_are_its_truth(con, dumps)
        schemas = {row[0] for row in con.execute("select nspname from pg_namespace").fetchall()}
        expected = {"feedback_acme", "feedback_globex", "staging_acme", "marts_globex"}
        assert expected <= schemas and "feedback" not in schemas
    finally:
        con.close()
