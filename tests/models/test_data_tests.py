"""The marts' data tests (``models/datatests.py``): each kind finds exactly the rows that
break it; a failing test fails the build by name and leaves the previous marts as they
were; ``models`` reports the tests per mart; a malformed test is named with its file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.app.cli import main
from feedback_sync.errors import DataTestsFailed, ModelError
from feedback_sync.models import datatests
from feedback_sync.models.project import SQL_DIR, apply, build, load_project
from feedback_sync.warehouse.engines.duckdb import DuckDbEngine

from tests.sync.harness import Harness

PROJECT = load_project()


def _failures(con: duckdb.DuckDBPyConnection, lines: list[tuple[str, str]]) -> dict[str, int]:
    relations = {"parents": '"s"."parents"'}
    tests = datatests.generic(
        "kids",
        '"m"."kids"',
        ["id", "parent", "share", "low", "high"],
        ["id"],
        lines,
        lambda name: relations[name],
        "kids.sql",
    )
    return {o.name: o.failures for o in datatests.run(DuckDbEngine(con), tests)}


def test_every_kind_of_data_test_finds_the_rows_that_break_it() -> None:
    con = duckdb.connect()
    con.execute("create schema m; create schema s")
    con.execute("create table s.parents as select * from (values ('p1'), ('p2')) t(id)")
    con.execute(
        "create table m.kids as select * from (values "
        "(1, 'p1', 0.5, 1, 2), (2, 'p3', 1.5, 3, 2), (2, null, null, null, 5), "
        "(3, 'p9', -0.1, 1, 1)) t(id, parent, share, low, high)"
    )
    found = _failures(
        con,
        [
            ("not_null", "share, low"),
            ("unique", "parent"),
            ("relationships", "parent -> parents.id"),
            ("accepted_range", "share 0..1"),
            ("accepted_range", "high 2.."),
            ("accepted_range", "low ..2"),
            ("expression", "low <= high"),
        ],
    )
    assert found == {
        "id unique": 1,  # the key's: id 2 twice
        "share not null": 1,
        "low not null": 1,
        "parent unique": 0,  # one NULL is no duplicate
        "parent -> parents.id": 2,  # p3, p9; the NULL is not checked
        "share in 0..1": 2,  # 1.5 and -0.1; NULL is not out of range
        "high in 2..": 1,
        "low in ..2": 1,
        "low <= high": 1,  # 3 > 2; NULL counts as true
    }
    con.close()


@pytest.mark.parametrize(
    ("kind", "arguments", "message"),
    [
        ("between", "share 0..1", "unknown test 'between'"),
        ("accepted_range", "share 0-1", "write it as column min..max"),
        ("accepted_range", "share ..", "write it as column min..max"),
        ("relationships", "parent = parents.id", "write it as column -> model.column"),
        ("relationships", "parent -> nowhere.id", "no model named 'nowhere'"),
        ("not_null", "shares", "'shares' is not a column of kids"),
        ("unique", "", "list column names"),
    ],
)
def test_a_malformed_data_test_is_named_with_its_file(
    kind: str, arguments: str, message: str
) -> None:
    con = duckdb.connect()
    with pytest.raises(ModelError, match=rf"kids\.sql: tests: {kind}: .*{message}"):
        _failures(con, [(kind, arguments)])
    con.close()


def test_a_singular_data_test_needs_its_header_and_known_refs(tmp_path: Path) -> None:
    root = tmp_path / "sql"
    shutil.copytree(SQL_DIR, root)
    test = root / "tests" / "extra.sql"
    test.write_text("select 1 where false\n")
    with pytest.raises(ModelError, match=r"extra\.sql: a data test opens with"):
        load_project(root)
    test.write_text("-- extra: nothing\n-- mart: no_such_mart\nselect 1 where false\n")
    with pytest.raises(ModelError, match=r"extra\.sql: a data test opens with"):
        load_project(root)
    test.write_text(
        "-- extra: nothing\n-- mart: status_summary\nselect * from {{ ref('nothing') }}\n"
    )
    with pytest.raises(ModelError, match=r"extra\.sql: ref\('nothing'\) names no model"):
        load_project(root)
    test.write_text("-- extra: nothing\n-- mart: status_summary\nselect 1 where false\n")
    assert "extra" in {t.name for t in load_project(root).tests if t.mart == "status_summary"}
    staging = root / "staging" / "topics.sql"
    staging.write_text(
        staging.read_text().replace("-- columns:", "-- tests:\n--   x: y\n-- columns:")
    )
    with pytest.raises(ModelError, match=r"topics\.sql: data tests are for marts"):
        load_project(root)


def _counting_companies_per_idea(root: Path) -> None:
    """The bug the status funnel once had: a company counted once per idea."""
    mart = root / "marts" / "demand_by_group.sql"
    sql = mart.read_text()
    distinct = "select distinct m.group_kind, m.group_key, ica.company_id"
    assert distinct in sql
    mart.write_text(sql.replace(distinct, distinct.replace("distinct ", "")))


def _marts(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            m.name: sorted(con.execute(f"select * from marts.{m.name}").fetchall(), key=repr)
            for m in PROJECT.models
            if m.layer == "marts"
        }


@pytest.mark.slow
def test_a_failing_data_test_fails_the_build_by_name_and_keeps_the_previous_marts(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    harness.sync()
    path = harness.target().duckdb_file()
    assert path is not None
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(path))
    capsys.readouterr()
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    per_mart = {m.name: 0 for m in PROJECT.models if m.layer == "marts"}
    for test in PROJECT.tests:
        per_mart[test.mart] += 1
    counts = ", ".join(f"{mart} {n}" for mart, n in sorted(per_mart.items()))
    assert f"data tests: {len(PROJECT.tests)} passed ({counts})" in out
    assert all(n > 0 for n in per_mart.values()), "every mart has data tests"
    before = _marts(path)

    broken = tmp_path / "sql"
    shutil.copytree(SQL_DIR, broken)
    _counting_companies_per_idea(broken)
    assert main(["models", "--sql-dir", str(broken)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "data tests failed, so the models were not replaced" in err[0]
    assert "marts.demand_by_group: share_of_spend in 0..1: " in err[0]
    assert "marts.status_summary: commenter_companies <= (select count(*) from " in err[0]
    assert _marts(path) == before  # the whole build rolled back

    con = duckdb.connect(str(path))
    try:
        with pytest.raises(DataTestsFailed) as caught:
            build(con, "feedback", load_project(broken))
        failed = {(o.mart, o.name) for o in caught.value.outcomes if not o.passed}
        assert ("demand_by_group", "share_of_spend in 0..1") in failed
        assert ("status_summary", "share_of_spend in 0..1") in failed
        assert all(o.mart in per_mart for o in caught.value.outcomes)
    finally:
        con.close()
    assert _marts(path) == before


@pytest.mark.slow
def test_a_failing_data_test_keeps_the_previous_parquet_marts(
    harness: Harness, tmp_path: Path
) -> None:
    harness.sync(destination="parquet")
    folder = harness.tmp / "parquet" / "marts"
    before = {f.name: f.read_bytes() for f in folder.glob("*.parquet")}
    assert "status_summary.parquet" in before
    broken = tmp_path / "sql"
    shutil.copytree(SQL_DIR, broken)
    _counting_companies_per_idea(broken)
    with pytest.raises(DataTestsFailed, match=r"share_of_spend in 0\.\.1"):
        apply(harness.target("parquet"), load_project(broken))
    assert {f.name: f.read_bytes() for f in folder.glob("*.parquet")} == before


def test_models_list_shows_each_marts_data_tests(capsys: Any) -> None:
    assert main(["models", "--list"]) == 0
    out = capsys.readouterr().out
    assert "    data tests: status_idx unique; funnel_position not null;" in out
    assert "status_funnel_counts_each_idea_once" in out
