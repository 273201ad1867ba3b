"""A user's own SQL folder: ``--sql-dir`` on sync, models and push, or ``MODELS__SQL_DIR``.

The folder is a copy of the shipped one with a mart added and the push targets cut to one;
the commands run as users run them (the console script, from a folder of their own).
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from feedback_sync.models.project import SQL_DIR

from tests.sync.harness import Harness

MART = """\
-- status_names: How many statuses share each name (a user's own mart).
-- grain: one row per status name
-- key: status_name
-- columns:
--   status_name: the status's name
--   statuses: statuses with that name
select status_name, count(*) as statuses
from {{ ref('statuses') }}
group by status_name
"""


def _feedback_sync(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MODELS__", "PUSH__"))}
    return subprocess.run(
        [str(Path(sys.executable).with_name("feedback-sync")), *args],
        cwd=cwd,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def project(harness: Harness, tmp_path: Path) -> Path:
    """A user's folder: settings in .dlt/, their SQL in my-sql/ (one mart more, one push
    target only)."""
    folder = tmp_path / "project"
    (folder / ".dlt").mkdir(parents=True)
    (folder / ".dlt" / "config.toml").write_text(
        f'[sources.feedback]\nbase_url = "{harness.server.base_url}"\n'
    )
    (folder / ".dlt" / "secrets.toml").write_text(
        f'[sources.feedback]\napi_key = "{harness.server.api_key}"\n'
    )
    sql = folder / "my-sql"
    shutil.copytree(SQL_DIR, sql)
    (sql / "marts" / "status_names.sql").write_text(MART)
    for target in (sql / "push").glob("*.sql"):
        if target.name != "statuses.sql":
            target.unlink()
    return folder


@pytest.mark.slow
def test_sync_models_and_push_read_the_users_folder(harness: Harness, project: Path) -> None:
    synced = _feedback_sync(project, "sync", "--sql-dir", "my-sql")
    assert synced.returncode == 0, synced.stderr
    statuses = harness.dump()["statuses"]
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        landed = dict(
            con.execute("select status_name, statuses from marts.status_names").fetchall()
        )
        # the shipped marts are built beside it
        assert con.execute("select count(*) from marts.status_summary").fetchone() == (
            len(statuses),
        )
    assert landed == dict(Counter(s["name"] for s in statuses))

    # the setting names the folder for every command; without it, the shipped one is used
    listed = _feedback_sync(project, "models", "--list", env={"MODELS__SQL_DIR": "my-sql"})
    assert listed.returncode == 0, listed.stderr
    assert "marts.status_names:" in listed.stdout
    shipped = _feedback_sync(project, "models", "--list")
    assert shipped.returncode == 0 and "status_names" not in shipped.stdout

    built = _feedback_sync(project, "models", env={"MODELS__SQL_DIR": "my-sql"})
    assert built.returncode == 0, built.stderr

    # push: only the folder's own target, and the rename it asks for
    curated = project / "data" / "curated"
    curated.mkdir(parents=True)
    first = statuses[0]
    with (curated / "statuses.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["status_key", "name", "idx"])
        writer.writerow(["first", first["name"] + " (renamed)", first["idx"]])
    # the shipped followers target would read this; the folder has none
    (curated / "accounts.csv").write_text("email\nsomeone@example.com\n")
    preview = _feedback_sync(project, "push", "--sql-dir", "my-sql")
    assert preview.returncode == 0, preview.stdout + preview.stderr
    assert "statuses" in preview.stdout and "followers" not in preview.stdout
    assert f"{first['name']} (renamed)" in preview.stdout


@pytest.mark.parametrize("command", ["sync", "models", "push"])
def test_a_folder_that_is_not_there_is_one_line(project: Path, command: str) -> None:
    done = _feedback_sync(project, command, "--sql-dir", "nope")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"feedback-sync {command}: error: --sql-dir nope: no such folder (the SQL models' folder)"
    ]
    assert not (project / "data" / "warehouse.duckdb").exists()  # nothing was fetched
