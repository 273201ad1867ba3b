"""Versioned history (warehouse/history.py): versions follow what the sandbox recorded.

The expected versions are computed here from the sandbox's own record of the moves and
spend changes (``/_sandbox/dump``: ``status_moves``, ``spend_changes``) and its dumps at
each sync, never from the warehouse's SQL.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import duckdb
import httpx
import pytest
from feedback_sync.errors import ConfigError
from feedback_sync.sandbox.timefmt import to_datetime

from tests.sync.harness import Harness, ts

Version = tuple[Any, ...]


def versions(
    h: Harness, table: str, fields: str, destination: str | None = None
) -> dict[str, list[Version]]:
    """Each key's versions, oldest first: (fields..., valid_from, valid_to, is_current)."""
    key = {"ideas_history": "idea_idx", "companies_history": "company_id"}.get(
        table, "announcement_idx"
    )
    found: dict[str, list[Version]] = defaultdict(list)
    for con in h.connect(destination):
        rows = con.execute(
            f"select {key}, {fields}, valid_from, valid_to, is_current "
            f'from feedback."{table}" order by {key}, valid_from, valid_to nulls last'
        ).fetchall()
        for row in rows:
            found[row[0]].append(tuple(row[1:]))
    return dict(found)


def assert_well_formed(history: dict[str, list[Version]]) -> None:
    """Per key: ranges in order, each ending where the next begins (or before it, after a
    delete), never overlapping; only the last may be current, and it is open-ended."""
    for key, rows in history.items():
        for earlier, later in pairwise(rows):
            assert earlier[-1] is False and earlier[-2] is not None, (key, rows)
            assert earlier[-3] <= earlier[-2] <= later[-3], (key, rows)
        last = rows[-1]
        assert (last[-1] is True) == (last[-2] is None), (key, rows)


def move(h: Harness, idea_idx: str, status_idx: str) -> datetime:
    answer = h.control.post(f"/ideas/{idea_idx}/status", json={"status_idx": status_idx})
    assert answer.status_code == 200, answer.text
    return datetime.fromisoformat(answer.json()["updated_at"]).astimezone(UTC)


def api(h: Harness, method: str, path: str, **body: Any) -> httpx.Response:
    """One API call with the sandbox's key."""
    with httpx.Client(base_url=h.server.base_url, timeout=30) as client:
        return client.request(
            method, path, json=body, headers={"Authorization": f"Bearer {h.server.api_key}"}
        )


def follower(h: Harness) -> str:
    return str(h.dump()["followers"][0]["idx"])


@pytest.fixture(params=["duckdb", "parquet", pytest.param("postgres", marks=pytest.mark.slow)])
def on(
    harness: Harness, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Harness:
    """The harness syncing into each warehouse that keeps history."""
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", dsn)
    harness.destination = request.param
    return harness


def topics(value: Any) -> Any:
    """A JSON column as read: text from DuckDB, parsed already from PostgreSQL."""
    return json.loads(value) if isinstance(value, str) else value


def test_idea_versions_follow_the_recorded_moves(on: Harness) -> None:
    h = on
    h.sync(full=True, models=False)
    first = h.dump()
    statuses = [s["idx"] for s in first["statuses"]]
    ideas = {i["idx"]: i for i in first["ideas"]}
    history = versions(h, "ideas_history", "status_idx, name, topic_idxs")
    # one version per idea, from the updated_at it was first read with
    assert set(history) == set(ideas)
    for idx, idea in ideas.items():
        (only,) = history[idx]
        assert only[:2] == (idea["status_idx"], idea["name"])
        assert topics(only[2]) == idea["topic_idxs"]
        assert only[3] == ts(idea["updated_at"]) and only[4:] == (None, True)

    a, b, c = sorted(ideas)[:3]
    move(h, a, next(s for s in statuses if s != ideas[a]["status_idx"]))
    # b moves twice between two syncs: the history sees the second move only
    for status in [s for s in statuses if s != ideas[b]["status_idx"]][:2]:
        move(h, b, status)
    # a comment bumps c's updated_at and its count: no new version
    commented = api(h, "post", "/comments", idea_idx=c, author_idx=follower(h), message="hi")
    assert commented.status_code == 200, commented.text
    h.sync(models=False)
    second = h.dump()
    moves = second["status_moves"]
    history = versions(h, "ideas_history", "status_idx, name, topic_idxs")
    assert_well_formed(history)
    # the record, per idea: the last move before the sync is the version the sync saw
    last_move: dict[str, dict[str, Any]] = {}
    for m in moves:
        last_move[m["idea_idx"]] = m
    for idx in (a, b):
        seen = last_move[idx]
        before, now = history[idx]
        assert before[0] == ideas[idx]["status_idx"] and before[4] == to_datetime(seen["at"])
        assert now[0] == seen["to_status_idx"] and now[3] == to_datetime(seen["at"])
        assert now[4:] == (None, True)
    # c has a new updated_at and no new version
    now_ideas = {i["idx"]: i for i in second["ideas"]}
    assert now_ideas[c]["updated_at"] != ideas[c]["updated_at"]
    assert len(history[c]) == 1, history[c]
    # nothing else moved, so nothing else has a second version
    assert {idx for idx, rows in history.items() if len(rows) > 1} == set(last_move)
    if h.destination == "parquet":  # the exported file holds the same versions
        assert (h.tmp / "parquet" / "history_checks.parquet").exists()
        file = h.tmp / "parquet" / "ideas_history.parquet"
        with duckdb.connect() as files:  # not the module's connection, shared by the worker
            exported = files.execute(
                f"select idea_idx, status_idx, valid_from, valid_to, is_current "
                f"from read_parquet('{file}') order by all"
            ).fetchall()
        assert exported == sorted(
            (idx, *row[:1], *row[3:]) for idx, rows in history.items() for row in rows
        )


def company_copies(dump: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each company's followers in a dump."""
    holders: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in dump["followers"]:
        for company in f.get("companies") or ():
            holders[company["id"]].append(f)
    return holders


def test_company_versions_follow_the_recorded_spend_changes(on: Harness) -> None:
    h = on
    h.sync(full=True, models=False)
    first = h.dump()
    holders = company_copies(first)
    spend = {c["id"]: c["monthly_spend"] for c in first["companies"]}
    history = versions(h, "companies_history", "monthly_spend, name")
    # one history per company, however many followers list it, from the copy under the
    # follower updated last
    assert set(history) == set(holders)
    for company_id, followers in holders.items():
        (only,) = history[company_id]
        assert only[0] == spend[company_id]
        assert only[2] == max(ts(f["updated_at"]) for f in followers)

    shared = next(cid for cid, fs in sorted(holders.items()) if len(fs) >= 2)
    name = next(c["name"] for c in first["companies"] if c["id"] == shared)
    changed_by = holders[shared][0]["idx"]
    answer = api(
        h,
        "post",
        f"/followers/{changed_by}",
        companies=[{"id": shared, "name": name, "monthly_spend": 123.45}],
    )
    assert answer.status_code == 200, answer.text
    # a normal run reads new followers only: it does not see the change, and closes nothing
    h.sync(models=False)
    assert versions(h, "companies_history", "monthly_spend, name") == history
    h.sync(full=True, models=False)
    second = h.dump()
    (change,) = [c for c in second["spend_changes"] if c["company_id"] == shared]
    assert (change["from_spend"], change["to_spend"]) == (spend[shared], 123.45)
    now = versions(h, "companies_history", "monthly_spend, name")
    assert_well_formed(now)
    before, after = now[shared]
    # the follower whose update changed it is the one updated last: its updated_at is the
    # change's moment, as the sandbox recorded it
    assert after[:2] == (123.45, name) and after[2] == to_datetime(change["at"])
    assert before[3] == after[2]
    assert {cid for cid, rows in now.items() if len(rows) > 1} == {shared}


def test_deletes_close_versions_only_when_read_completely(harness: Harness) -> None:
    h = harness
    # a company only one follower lists
    made = api(
        h,
        "post",
        "/followers",
        name="Solo Buyer",
        email="solo@buyer.test",
        companies=[{"id": "acct-solo", "name": "Solo Co", "monthly_spend": 50.5}],
    )
    assert made.status_code == 200, made.text
    only_one = "acct-solo"
    h.sync(full=True, models=False)
    assert api(h, "delete", f"/followers/{made.json()['data']['idx']}").status_code == 200
    deleted = h.mutate(4, {"ideas": {"delete": 1}})
    (gone_idea,) = deleted["ideas"]["deleted"]
    started = datetime.now(UTC)
    h.sync(models=False)
    ended = datetime.now(UTC)
    ideas = versions(h, "ideas_history", "status_idx")
    # ideas are read whole on every run: a deleted one's version ends at the run's time
    (closed,) = ideas[gone_idea]
    assert closed[-1] is False and started <= closed[-2] <= ended
    # followers are not: the company of a deleted follower stays current until a full run
    assert versions(h, "companies_history", "monthly_spend")[only_one][-1][-1] is True
    h.sync(full=True, models=False)
    companies = versions(h, "companies_history", "monthly_spend")
    assert companies[only_one][-1][-1] is False
    assert_well_formed(companies)
    assert_well_formed(ideas)


def test_history_settings_and_warehouses_without_history(harness: Harness) -> None:
    h = harness
    h.sync(full=True, models=False, history_ideas=False, history_announcements=True)
    for con in h.connect():
        tables = {
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_schema = 'feedback'"
            ).fetchall()
        }
    assert {"companies_history", "announcements_history"} <= tables
    assert "ideas_history" not in tables
    posts = versions(h, "announcements_history", "is_published, published_at")
    assert len(posts) == len(h.dump()["announcements"])
    # Delta keeps no history: not by default, and a setting asking for it is refused
    with pytest.raises(ConfigError, match=r"HISTORY_IDEAS .* Delta .* keeps no history"):
        h.sync(full=True, destination="delta", models=False, history_ideas=True)
    with pytest.raises(
        ConfigError,
        match=r"HISTORY_COMPANIES \(history_companies in \[sources.feedback\]\) must be true",
    ):
        h.settings(history_companies="sometimes")


def test_the_history_tables_have_the_columns_the_models_declare(harness: Harness) -> None:
    from feedback_sync.models.project import load_project
    from feedback_sync.warehouse.history import HISTORY_TABLES

    harness.sync(full=True, models=False, history_announcements=True)
    declared = {t: c for t, c in load_project().sources.items() if t in HISTORY_TABLES}
    kinds = {
        "VARCHAR": "varchar",
        "DOUBLE": "double",
        "BOOLEAN": "boolean",
        "JSON": "json",
        "TIMESTAMP WITH TIME ZONE": "timestamptz",
        "DATE": "date",
    }
    for con in harness.connect():
        for table, columns in declared.items():
            landed = con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_schema = 'feedback' and table_name = ? order by ordinal_position",
                [table],
            ).fetchall()
            found = {name: kinds[kind] for name, kind in landed}
            # a JSON field copied from a loaded table is text there, as dlt stores JSON
            found |= {
                n: "json" for n, k in found.items() if k == "varchar" and columns[n] == "json"
            }
            assert found == columns, table


def test_ideas_known_without_the_extension_keep_what_the_api_shows(harness: Harness) -> None:
    """Without /ideas, ideas come from announcements and links: no status, so their
    history is their name, and the status marts have no stays for them."""
    h = harness
    h.switches(ideas_endpoint=False)
    result = h.sync(full=True)
    assert result.ideas_endpoint is False
    history = versions(h, "ideas_history", "status_idx, name")
    assert history, "ideas discovered from announcements and links have versions"
    assert all(rows[-1][0] is None for rows in history.values())
    for con in h.connect():
        stays = con.execute("select count(*) from marts.idea_status_history").fetchone()
        assert stays == (0,)


def test_the_summary_and_json_say_what_the_history_did(harness: Harness, capsys: Any) -> None:
    from feedback_sync.app.documents import sync_document

    h = harness
    first = h.sync(full=True, models=False)
    ideas = len(h.dump()["ideas"])
    assert first.versions["ideas_history"].opened == ideas
    assert f"ideas_history {ideas:,} begun, 0 ended" in first.summary()
    document = sync_document(first, 0)
    assert document["history"]["ideas_history"] == {"versions_begun": ideas, "versions_ended": 0}
    assert document["tables"]["ideas_history"]["loaded"] == ideas
    # nothing changed: no version, and the summary's history line is gone
    again = h.sync(models=False)
    assert again.versions["ideas_history"].opened == 0
    assert "history versions:" not in again.summary()


def test_a_failing_history_step_keeps_the_data_and_the_next_run_records_it(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedback_sync.app.documents import sync_document
    from feedback_sync.warehouse import history

    h = harness
    h.sync(full=True, models=False)
    idea = sorted(i["idx"] for i in h.dump()["ideas"])[0]
    status = next(
        s["idx"]
        for s in h.dump()["statuses"]
        if s["idx"] != versions(h, "ideas_history", "status_idx")[idea][-1][0]
    )
    moved_at = move(h, idea, status)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(history, "record", broken)
    failed = h.sync(models=False)
    # the data landed; the run says the history failed, in one line
    for con in h.connect():
        row = con.execute("select status_idx from feedback.ideas where idx = ?", [idea]).fetchone()
        assert row == (status,)
    assert failed.history_error == "RuntimeError: disk on fire"
    assert "history FAILED (the synced data is kept" in failed.summary()
    assert sync_document(failed, 1)["error"] == "RuntimeError: disk on fire"
    assert versions(h, "ideas_history", "status_idx")[idea][-1][0] != status
    # the next run records the change, at the updated_at the idea carried
    monkeypatch.undo()
    again = h.sync(models=False)
    assert again.history_error is None
    last = versions(h, "ideas_history", "status_idx")[idea][-1]
    assert last[0] == status and last[1] == moved_at and last[-1] is True


def test_a_history_step_out_of_duckdb_memory_names_the_setting(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's own out-of-memory error, raised in the history step, says which setting
    gives DuckDB more (``FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT``); the data is kept."""
    import duckdb
    from feedback_sync.warehouse import history

    def starved(*args: Any, **kwargs: Any) -> Any:
        con = duckdb.connect(config={"memory_limit": "2MB", "threads": 1})
        try:
            con.execute("select list(range) from range(2000000)").fetchall()
        except duckdb.OutOfMemoryException as exc:  # raised as dlt's client raises it
            raise RuntimeError("the warehouse failed") from exc
        finally:
            con.close()
        raise AssertionError("DuckDB did not run out of its 2MB")

    monkeypatch.setenv("FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT", "300MB")
    monkeypatch.setattr(history, "record", starved)
    failed = harness.sync(full=True, models=False)
    error = failed.history_error or ""
    assert error.startswith("DuckDB ran out of the memory it may use (Out of Memory Error"), error
    assert error.endswith("raise FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT (now 300MB)"), error
    assert "\n" not in error
    for con in harness.connect():
        assert con.execute("select count(*) from feedback.ideas").fetchone() != (0,)


def test_a_table_named_like_the_staged_state_is_left_alone(harness: Harness) -> None:
    """On DuckDB the step stages each entity's current state in a temporary table named
    ``history_current``: a table of that name in the dataset is not the one dropped, and
    the versions are recorded as ever."""
    import duckdb

    h = harness
    h.sync(full=True, models=False)
    path = h.target("duckdb").duckdb_file()
    assert path is not None
    with duckdb.connect(str(path)) as con:
        con.execute("create table feedback.history_current (note text)")
        con.execute("insert into feedback.history_current values ('mine')")
    idea = sorted(i["idx"] for i in h.dump()["ideas"])[0]
    status = next(
        s["idx"]
        for s in h.dump()["statuses"]
        if s["idx"] != versions(h, "ideas_history", "status_idx")[idea][-1][0]
    )
    move(h, idea, status)
    assert h.sync(models=False).history_error is None
    assert versions(h, "ideas_history", "status_idx")[idea][-1][0] == status
    for con in h.connect("duckdb"):
        assert con.execute("select note from feedback.history_current").fetchall() == [("mine",)]


def test_duckdb_hands_back_the_loads_cache_before_the_history_step(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the load and the history step, DuckDB's buffer pool is emptied (the load's
    merges cached the tables' blocks), so the history step's memory does not come on top
    of the load's; the limit is the sync's again afterwards."""
    from feedback_sync.warehouse import duckdb as duck
    from feedback_sync.warehouse import history

    steps: list[tuple[Any, ...]] = []

    def cached(con: Any) -> int:
        row = con.execute("select sum(memory_usage_bytes) from duckdb_memory()").fetchone()
        return int(row[0] or 0)

    real_release = duck.release_memory

    def release(con: Any, limit: str) -> bool:
        before = cached(con)
        done = real_release(con, limit)
        limit_now = con.execute("select current_setting('memory_limit')").fetchone()
        steps.append(("release", done, before, cached(con), limit_now))
        return done

    real_record = history.record

    def record(*args: Any, **kwargs: Any) -> Any:
        steps.append(("history",))
        return real_record(*args, **kwargs)

    monkeypatch.setenv("FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT", "300MB")
    monkeypatch.setattr(duck, "release_memory", release)
    monkeypatch.setattr(history, "record", record)
    result = harness.sync(full=True, models=False)
    assert result.history_error is None
    assert [step[0] for step in steps] == ["release", "history"]
    _, done, before, after, limit = steps[0]
    assert done is True
    assert before > 0 and after < before / 2, (before, after)
    assert limit == ("286.1 MiB",)  # 300MB, as DuckDB writes it
