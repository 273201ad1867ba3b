"""The Delta target (``--destination delta``): dlt's filesystem destination with Delta
tables in a local folder, merges and deletes as Delta commits, the models and the
dashboard over the tables' snapshots."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from deltalake import DeltaTable
from feedback_sync.app.report import write as write_report

from tests.postgres.test_models_postgres import _rows
from tests.postgres.test_push_postgres import _plan
from tests.push.helpers import ACCOUNT_COLUMNS, NEW, accounts, push, write_counts, write_csv, writes
from tests.sync.harness import Harness
from tests.sync.test_full_and_incremental import CHANGES


@pytest.fixture
def delta(harness: Harness) -> Harness:
    harness.destination = "delta"
    return harness


def _table(h: Harness, name: str) -> DeltaTable:
    return DeltaTable(str(h.tmp / "delta" / "feedback" / name))


@pytest.mark.slow
def test_full_normal_and_full_again_equal_the_server(delta: Harness, tmp_path: Path) -> None:
    first = delta.sync(full=True)
    delta.assert_equals_truth()
    assert first.table_rows["followers"] == len(delta.dump()["followers"])
    assert first.models is not None and first.models_error is None
    delta.mutate(seed=5, counts=CHANGES)
    after = delta.dump()
    normal = delta.sync()
    assert normal.rows_removed.get("topics") == 1
    delta.assert_equals_truth(after, tables=["topics", "statuses", "ideas", "ideas__topics"])
    full = delta.sync(full=True)
    delta.assert_equals_truth(after)
    assert full.rows_removed["followers"] == 2
    assert full.rows_removed["comments"] >= 3
    report = write_report(delta.target(), tmp_path / "report.html")
    assert report.charts == 6


@pytest.mark.slow
def test_soft_deletes_mark_rows_in_delta(delta: Harness) -> None:
    delta.sync(full=True, delete_mode="soft", models=False)
    changes = delta.mutate(seed=9, counts={"followers": {"delete": 2}, "comments": {"delete": 2}})
    result = delta.sync(full=True, delete_mode="soft", models=False)
    assert result.rows_marked["followers"] == 2
    marked = _table(delta, "followers").to_pyarrow_table()
    deleted = {
        idx
        for idx, at in zip(
            marked.column("idx").to_pylist(), marked.column("_deleted_at").to_pylist(), strict=True
        )
        if at is not None
    }
    assert deleted == set(changes["followers"]["deleted"])
    delta.assert_equals_truth(tables=["followers", "comments"], where="where _deleted_at is null")
    first = max(at for at in marked.column("_deleted_at").to_pylist() if at is not None)
    again = delta.sync(full=True, delete_mode="soft", models=False)
    assert again.rows_marked.get("followers", 0) == 0  # already marked: not counted again
    kept = _table(delta, "followers").to_pyarrow_table().column("_deleted_at").to_pylist()
    assert max(at for at in kept if at is not None) == first, "the first time is kept"


@pytest.mark.slow
def test_models_on_delta_hold_the_same_rows_as_on_duckdb(harness: Harness) -> None:
    """The same sandbox data into DuckDB and into Delta tables, models built on each (the
    Delta ones in a DuckDB file over the tables' snapshots): every staging view and mart
    holds the same rows. A drifted number and undeclared company fields give type_drift,
    custom_fields and try_cast rows to compare."""
    harness.switches(number_drift=1, company_fields="top_level")
    for destination in ("duckdb", "delta"):
        # Delta keeps no history: DuckDB's is off too, for the same work
        off = {"history_ideas": False, "history_companies": False}
        result = harness.sync(full=True, destination=destination, **off)
        assert result.models is not None and not result.models_error, result.models_error
    assert_same_models(
        harness.target("duckdb").duckdb_file(), harness.target("delta").models_file()
    )


def assert_same_models(duckdb_file: Path | None, other: Path) -> None:
    """Every staging view and mart of the DuckDB warehouse ``duckdb_file`` holds the same
    rows in the models file ``other``."""
    assert duckdb_file is not None
    duck = duckdb.connect(str(duckdb_file), read_only=True)
    on_delta = duckdb.connect(str(other), read_only=True)
    try:
        listed = (
            "select table_schema, table_name from information_schema.tables "
            "where table_schema in ('staging', 'marts') order by 1, 2"
        )
        relations = duck.execute(listed).fetchall()
        assert len(relations) >= 20
        assert on_delta.execute(listed).fetchall() == relations
        compared = 0
        for schema, name in relations:
            relation = f'"{schema}"."{name}"'
            expected, actual = _rows(duck, relation), _rows(on_delta, relation)
            assert actual == expected, relation
            compared += sum(expected.values())
        assert compared > 500
    finally:
        duck.close()
        on_delta.close()


@pytest.mark.slow
def test_a_run_commits_only_to_the_tables_it_changed(delta: Harness) -> None:
    """Merges and deletes are Delta commits on the tables they touch; a table nothing
    changed in keeps its version, and no table is overwritten whole."""
    delta.sync(full=True, models=False)
    folder = delta.tmp / "delta" / "feedback"
    names = sorted(p.parent.name for p in folder.glob("*/_delta_log"))
    assert "followers" in names and "comments" in names
    before = {name: _table(delta, name).version() for name in names}
    delta.mutate(seed=3, counts={"topics": {"update": 1}})
    result = delta.sync(models=False)
    after = {name: _table(delta, name).version() for name in before}
    changed = {name for name in before if after[name] != before[name]}
    assert "topics" in changed, result.rows_loaded
    assert "followers" not in changed and "comments" not in changed, changed
    for name in changed:
        operations = [
            c["operation"] for c in _table(delta, name).history(after[name] - before[name])
        ]
        assert set(operations) <= {"MERGE", "DELETE"}, (name, operations)


@pytest.mark.slow
def test_repeated_items_in_one_run_land_once_in_delta(delta: Harness) -> None:
    """Pages that repeat the previous page's last items put one key twice in one load: the
    Delta upsert must still land every row once (and the next run's merge must succeed)."""
    delta.switches(page_overlap=2, total_offset=7)
    delta.sync(full=True, models=False)
    delta.assert_equals_truth()
    delta.mutate(seed=4, counts={"followers": {"create": 3}, "comments": {"create": 5}})
    delta.sync(models=False)
    delta.sync(full=True, models=False)
    delta.assert_equals_truth()


@pytest.mark.slow
def test_push_on_delta_plans_as_on_duckdb_and_applies_once(delta: Harness, tmp_path: Path) -> None:
    """The reverse sync on the Delta target: the desired state from the curated folder, the
    warehouse copy from the models file over the Delta snapshots; the same plan as on
    DuckDB from the same data, applied once, with its journal in the models file."""
    delta.sync(full=True)
    delta.sync(full=True, destination="duckdb")
    rows = accounts(delta.dump())
    rows[0]["attr__tier"] = "gold"
    write_csv(tmp_path / "curated" / "accounts.csv", rows, [*ACCOUNT_COLUMNS, "attr__tier"])
    preview = push(delta, tmp_path / "curated")
    assert writes(delta) == [], "a preview sends no write request"
    delta.destination = "duckdb"
    expected = push(delta, tmp_path / "curated")
    delta.destination = "delta"
    assert _plan(preview) == _plan(expected)
    assert sum(len(p.steps) for p in preview.plans) > 5

    applied = push(delta, tmp_path / "curated", apply=True)
    assert applied.exit_code() == 0, applied.report()
    assert write_counts(delta)[("POST", "followers")] == 5
    again = push(delta, tmp_path / "curated", apply=True)
    assert writes(delta) == [], again.report()
    landed = {f["email"].lower(): f for f in delta.dump()["followers"]}
    assert landed[rows[0]["email"].lower()]["attributes"]["tier"] == "gold"
    assert landed[NEW]["companies"][0]["monthly_spend"] == 3200.5
    with duckdb.connect(str(delta.target().models_file()), read_only=True) as con:
        states = dict(
            con.execute("select state, count(*) from push._push_rows group by state").fetchall()
        )
        runs = con.execute("select applied, status from push._push_runs order by started_at")
        assert runs.fetchall() == [(False, "preview"), (True, "ok"), (True, "ok")]
    assert states["confirmed"] == states["intent"] > 5, states


def test_key_and_freshness_figures_read_from_delta(tmp_path: Path) -> None:
    """The flow's checks on Delta read key and time columns through delta-rs: a null key,
    a repeated key and the newest time are measured, not assumed."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from deltalake import write_deltalake
    from feedback_sync.warehouse import delta_tables as delta

    stamps = [datetime(2026, 1, d, tzinfo=UTC) for d in (1, 3, 2, 2)]
    rows = pa.table(
        {
            "idx": pa.array(["a", "b", "b", None]),
            "created_at": pa.array(stamps, pa.timestamp("us", tz="UTC")),
        }
    )
    write_deltalake(str(tmp_path / "t"), rows)
    table = DeltaTable(str(tmp_path / "t"))
    assert delta.key_figures(table, "idx") == (4, 1, 1)
    assert delta.newest(table, ["created_at", "updated_at"]) == {"created_at": stamps[1]}
