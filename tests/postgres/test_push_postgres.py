"""The reverse sync and the dashboard on a PostgreSQL warehouse: the desired state read
from curated tables there, the same plan and the same dashboard as on DuckDB from the same
data, the journal there, idempotence, and a SIGKILL between send and journal."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from feedback_sync.app.report import write as write_report
from feedback_sync.push.kinds.base import marked_key
from feedback_sync.push.run import PushResult

from tests.push.helpers import (
    ACCOUNT_COLUMNS,
    BOT,
    NEW,
    accounts,
    kill_during_writes,
    push,
    write_counts,
    write_csv,
    writes,
)
from tests.support.pages import comparable
from tests.sync.harness import Harness, PostgresReader

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


@pytest.fixture
def pg(harness: Harness, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Harness:
    """The harness syncing into a new database on the worker's PostgreSQL server."""
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres_dsn)
    harness.destination = "postgres"
    harness.postgres_dsn = postgres_dsn
    return harness


def curated_table(dsn: str, name: str, rows: list[dict[str, Any]]) -> None:
    """``curated.<name>`` in PostgreSQL, every column text, as a team's own job makes it."""
    columns = list(dict.fromkeys(c for row in rows for c in row))
    con = PostgresReader(dsn)
    try:
        con.execute("create schema if not exists curated")
        con.execute(f'drop table if exists curated."{name}"')
        declared = ", ".join(f'"{c}" text' for c in columns)
        con.execute(f'create table curated."{name}" ({declared})')
        for row in rows:
            con.execute(
                f'insert into curated."{name}" values ({", ".join("?" for _ in columns)})',
                [row.get(c) for c in columns],
            )
    finally:
        con.close()


def _plan(result: PushResult) -> dict[str, list[tuple[Any, ...]]]:
    """Each target's steps, by key: what would be sent, and why."""
    return {
        plan.spec.name: sorted(
            (
                step.key,
                step.action,
                step.request.method if step.request else None,
                step.request.path if step.request else None,
                repr(step.request.body) if step.request else None,
                repr(sorted(step.changes.items())),
            )
            for step in plan.steps
        )
        for plan in result.plans
    }


def _page(path: Path) -> str:
    """The dashboard without when and from where it was drawn and loaded (the two
    warehouses were loaded a few seconds apart)."""
    return comparable(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_push_and_dashboard_on_postgres_equal_duckdb_and_journal_there(
    pg: Harness, tmp_path: Path
) -> None:
    assert pg.postgres_dsn is not None
    pg.sync(full=True)
    pg.sync(full=True, destination="duckdb")
    rows = accounts(pg.dump())
    for row in rows[:2]:
        row["attr__tier"] = "gold"  # packed into attributes (json_build_object there)
    rows[2]["name"] = 'O\'Brien, "Jr." 100%'  # quotes and a percent sign, sent as written
    curated_table(pg.postgres_dsn, "accounts", rows)
    files = tmp_path / "curated"
    write_csv(files / "accounts.csv", rows, [*ACCOUNT_COLUMNS, "attr__tier"])

    # the same dashboard from the same data
    on_pg = write_report(pg.target(), tmp_path / "pg.html")
    on_duckdb = write_report(pg.target("duckdb"), tmp_path / "duckdb.html")
    assert on_pg.charts == on_duckdb.charts == 6
    assert _page(tmp_path / "pg.html") == _page(tmp_path / "duckdb.html")
    assert "no data yet" not in _page(tmp_path / "pg.html")

    # the same plan: desired state, diff against the warehouse copy, requests
    preview = push(pg, tmp_path / "no-files-read-on-postgres")
    assert writes(pg) == [], "a preview sends no write request"
    pg.destination = "duckdb"
    expected = push(pg, files)
    pg.destination = "postgres"
    assert _plan(preview) == _plan(expected)
    followers = preview.plans[[p.spec.name for p in preview.plans].index("followers")]
    assert preview.counts(followers) == Counter(create=2, update=3), preview.report()
    notes = _plan(preview)["idea_notes"]
    assert notes and all("Revenue-weighted demand: " in n[4] for n in notes), notes

    applied = push(pg, tmp_path, apply=True)
    assert applied.exit_code() == 0, applied.report()
    assert write_counts(pg)[("POST", "followers")] == 5
    again = push(pg, tmp_path, apply=True)  # the copy is stale: re-read, nothing sent
    assert writes(pg) == [], again.report()
    assert again.exit_code() == 0

    after = pg.dump()
    landed = {f["email"].lower(): f for f in after["followers"]}
    assert landed[rows[0]["email"].lower()]["attributes"]["tier"] == "gold"
    assert landed[rows[2]["email"].lower()]["name"] == rows[2]["name"]
    assert landed[NEW]["companies"][0]["monthly_spend"] == 3200.5
    pg.sync(full=True)
    for con in pg.connect():
        spend = con.execute(
            "select c.monthly_spend, c.company_attributes ->> 'plan' from staging.followers f "
            "join staging.follower_companies c using (follower_idx) "
            "where c.company_id = 'acct-900001'"
        ).fetchall()
        assert spend == [(3200.5, "business")]
        states = dict(
            con.execute("select state, count(*) from push._push_rows group by state").fetchall()
        )
        assert states["confirmed"] == states["intent"] > 5, states
        runs = con.execute("select applied, status from push._push_runs order by started_at")
        assert runs.fetchall() == [(False, "preview"), (True, "ok"), (True, "ok")]
        created = con.execute(
            "select key, idx from push._push_rows where target = 'followers' "
            "and action = 'create' and state = 'confirmed' order by key"
        ).fetchall()
        assert [k for k, _ in created] == sorted([BOT, NEW])


@pytest.mark.slow
def test_push_killed_between_send_and_journal_on_postgres(pg: Harness, tmp_path: Path) -> None:
    """A real ``feedback-sync push --apply --destination postgres`` killed while its writes
    are at the server; the next run finds them (journal intents in PostgreSQL) and sends
    only what is missing."""
    assert pg.postgres_dsn is not None
    pg.sync(full=True)
    curated_table(pg.postgres_dsn, "accounts", accounts(pg.dump(), n=4))
    curated_table(pg.postgres_dsn, "topics", [{"topic_key": "ai", "name": "AI assistants"}])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "PUSH__"))
    }
    env.update(
        SOURCES__FEEDBACK__BASE_URL=pg.server.base_url,
        SOURCES__FEEDBACK__API_KEY=pg.server.api_key,
        SOURCES__FEEDBACK__MAX_CONCURRENCY="3",
        DESTINATION__POSTGRES__CREDENTIALS=pg.postgres_dsn,
        PUSH__NOTE_AUTHOR_EMAIL=BOT,
    )
    command = [
        *CLI,
        "push",
        "--apply",
        "--force",
        "--destination",
        "postgres",
        "--pipelines-dir",
        str(tmp_path / "pipelines"),
    ]
    pg.switches(latency_ms=250)
    kills = kill_during_writes(pg, command, env, (1, 3))
    assert kills == 2, "the runs ended before they could be killed"
    pg.switches(latency_ms=0)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "push applied" in done.stdout
    for con in pg.connect():
        states = dict(
            con.execute("select state, count(*) from push._push_rows group by state").fetchall()
        )
        assert states.get("recovered", 0) >= 1, states
        crashed = con.execute("select count(*) from push._push_runs where status = 'crashed'")
        assert crashed.fetchall() == [(2,)]
    after = pg.dump()
    emails = Counter(f["email"].lower() for f in after["followers"])
    assert max(emails.values()) == 1
    notes = Counter(marked_key(c["message"], "idea_notes") for c in after["comments"])
    notes.pop(None, None)
    assert notes and max(notes.values()) == 1, notes
    assert [t["name"] for t in after["topics"]].count("AI assistants") == 1
    final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stdout + final.stderr
    assert "0 write request(s)" in final.stdout, final.stdout
