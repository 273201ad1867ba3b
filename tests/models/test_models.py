"""The SQL models on the sandbox's tiny data: built, documented, keyed, related, and equal to
the marts computed in Python from the server's ground truth."""

from __future__ import annotations

import math
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.app.cli import main
from feedback_sync.errors import ModelError
from feedback_sync.models.project import apply, build, describe, load_project

from tests.models.history_truth import HistoryTruth
from tests.models.truth import Truth
from tests.sync.harness import Harness

PROJECT = load_project()
MARTS = [m for m in PROJECT.models if m.layer == "marts"]

# (relation.column, must be found in relation.column); NULLs are not checked
RELATIONSHIPS = [
    ("staging.comments.idea_idx", "staging.ideas.idea_idx"),
    ("staging.comments.follower_idx", "staging.followers.follower_idx"),
    ("staging.comment_attachments.comment_idx", "staging.comments.comment_idx"),
    ("staging.follower_companies.follower_idx", "staging.followers.follower_idx"),
    ("staging.follower_attributes.follower_idx", "staging.followers.follower_idx"),
    ("staging.announcement_categories.announcement_idx", "staging.announcements.announcement_idx"),
    ("staging.announcement_ideas.announcement_idx", "staging.announcements.announcement_idx"),
    ("staging.announcement_ideas.idea_idx", "staging.ideas.idea_idx"),
    ("staging.announcement_reactions.announcement_idx", "staging.announcements.announcement_idx"),
    ("staging.ideas.status_idx", "staging.statuses.status_idx"),
    ("staging.idea_topics.idea_idx", "staging.ideas.idea_idx"),
    ("staging.idea_topics.topic_idx", "staging.topics.topic_idx"),
    ("staging.integration_links.idea_idx", "staging.ideas.idea_idx"),
    ("marts.idea_engagement.idea_idx", "staging.ideas.idea_idx"),
    ("marts.idea_engagement.status_idx", "marts.status_summary.status_idx"),
    ("marts.company_feedback.company_id", "staging.follower_companies.company_id"),
    ("marts.idea_company_activity.idea_idx", "marts.idea_engagement.idea_idx"),
    ("marts.idea_company_activity.company_id", "marts.company_feedback.company_id"),
    ("marts.follower_activity.follower_idx", "staging.followers.follower_idx"),
    ("marts.topic_summary.topic_idx", "staging.topics.topic_idx"),
    ("marts.status_summary.status_idx", "staging.statuses.status_idx"),
    ("marts.integration_coverage.integration_type", "staging.integration_links.integration_type"),
    ("staging.ideas.idea_idx", "marts.idea_engagement.idea_idx"),
    ("staging.followers.follower_idx", "marts.follower_activity.follower_idx"),
]


def _connect(harness: Harness) -> duckdb.DuckDBPyConnection:
    path = harness.target().duckdb_file()
    assert path is not None
    return duckdb.connect(str(path), read_only=True)


def _utc(value: Any) -> Any:
    return value.astimezone(UTC) if isinstance(value, datetime) else value


def _mart(con: duckdb.DuckDBPyConnection, name: str) -> dict[Any, dict[str, Any]]:
    """The mart's rows keyed by its documented key (one column: the value; more: a tuple)."""
    model = PROJECT.model(name)
    cursor = con.execute(f'select * from marts."{name}"')
    columns = [d[0] for d in cursor.description]
    out = {}
    for values in cursor.fetchall():
        row = {c: _utc(v) for c, v in zip(columns, values, strict=True)}
        key = tuple(row.pop(k) for k in model.key)
        out[key[0] if len(key) == 1 else key] = row
    return out


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, float) or isinstance(actual, float):
        return actual is not None and math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-9)
    return bool(expected == actual)


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
@pytest.mark.slow
def test_every_mart_equals_the_truth_computed_in_python(harness: Harness, delete_mode: str) -> None:
    harness.sync(delete_mode=delete_mode)
    first = harness.dump()
    harness.mutate(seed=3, fraction=0.2)  # deletes, renames, moves, new rows: not just the seed
    # enough moves that statuses have several ended stays (their median and 90th percentile)
    harness.mutate(seed=4, counts={"ideas": {"update": 15}})
    # soft mode keeps the deleted followers (and their companies) in the warehouse, marked
    second = harness.sync(full=True, delete_mode=delete_mode)
    assert second.run_at is not None
    last = harness.dump()
    assert last["status_moves"] and last["spend_changes"], "the mutation moves and changes spend"
    truth = Truth(last, HistoryTruth(first, last, second.run_at, full=True))
    con = _connect(harness)
    try:
        for model in MARTS:
            expected = getattr(truth, model.name)()
            actual = _mart(con, model.name)
            assert expected, f"{model.name}: the tiny data should give rows"
            assert set(actual) == set(expected), model.name
            # every measure column of the mart is computed here too
            measures = set(model.columns) - set(model.key)
            assert all(set(row) == measures for row in expected.values()), model.name
            for key, row in expected.items():
                for column, value in row.items():
                    assert _same(value, actual[key][column]), (
                        f"{model.name}[{key}].{column}: expected {value!r}, "
                        f"got {actual[key][column]!r}"
                    )
    finally:
        con.close()


def test_models_are_documented_keyed_and_related(harness: Harness) -> None:
    # every history table on, so that no model reads as empty
    result = harness.sync(history_announcements=True)
    assert result.models is not None and result.models_error is None
    # every SQL model, and the two views the runner builds from the loaded columns
    generated = {"staging.type_drift", "staging.custom_fields"}
    expected = {f"{m.layer}.{m.name}" for m in PROJECT.models} | generated
    assert set(result.models.built) == expected
    con = _connect(harness)
    try:
        for model in PROJECT.models:
            cursor = con.execute(f"select * from {model.relation} limit 0")
            built = [d[0] for d in cursor.description]
            assert built == list(model.columns), f"{model.name}: documented columns differ"
            assert model.key, f"{model.name}: no key documented"
            keys = ", ".join(model.key)
            nulls = " or ".join(f"{k} is null" for k in model.key)
            row = con.execute(
                f"select count(*), count(distinct ({keys})), count(*) filter (where {nulls}) "
                f"from {model.relation}"
            ).fetchone()
            assert row is not None
            total, distinct, null_keys = row
            # rejected_rows holds what could not land: nothing, on the sandbox's clean data
            assert total > 0 or model.name == "rejected_rows", f"{model.name} is empty"
            assert (distinct, null_keys) == (total, 0), f"{model.name}: key not unique or null"
        # no dlt bookkeeping in the staging views
        for model in PROJECT.models:
            assert not any(c.startswith("_dlt") for c in model.columns), model.name
        for child, parent in RELATIONSHIPS:
            c_rel, c_col = child.rsplit(".", 1)
            p_rel, p_col = parent.rsplit(".", 1)
            orphans = con.execute(
                f"select count(*) from {c_rel} where {c_col} is not null "
                f"and {c_col} not in (select {p_col} from {p_rel} where {p_col} is not null)"
            ).fetchone()
            assert orphans == (0,), f"{child} -> {parent}: {orphans[0] if orphans else '?'}"
    finally:
        con.close()


def test_a_failing_model_names_itself_and_keeps_the_previous_build(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    harness.sync()
    broken = tmp_path / "sql"
    shutil.copytree(PROJECT.models[0].path.parent.parent, broken)
    (broken / "marts" / "idea_engagement.sql").write_text(
        "-- idea_engagement: broken\n-- grain: none\n-- columns:\n--   x: y\n"
        "select no_such_column from {{ ref('ideas') }}\n"
    )
    path = harness.target().duckdb_file()
    assert path is not None
    con = duckdb.connect(str(path))
    try:
        before = con.execute("select count(*) from marts.idea_engagement").fetchone()
        with pytest.raises(ModelError) as caught:
            build(con, "feedback", load_project(broken))
        message = str(caught.value)
        assert "marts.idea_engagement" in message and "idea_engagement.sql" in message
        assert "no_such_column" in message  # DuckDB's own message
        # one transaction: the mart (and everything else) is as the last good build left it
        assert con.execute("select count(*) from marts.idea_engagement").fetchone() == before
        columns = [d[0] for d in con.execute("select * from marts.idea_engagement").description]
        assert "commenter_monthly_spend" in columns
    finally:
        con.close()
    _point_cli_at(harness, monkeypatch)
    assert main(["models", "--sql-dir", str(broken)]) == 1
    err = capsys.readouterr().err
    assert "feedback-sync models: error: model marts.idea_engagement" in err


def _point_cli_at(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    path = harness.target().duckdb_file()
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(path))


def test_sql_folder_mistakes_are_named(tmp_path: Path) -> None:
    root = tmp_path / "sql"
    shutil.copytree(PROJECT.models[0].path.parent.parent, root)
    (root / "marts" / "loop.sql").write_text(
        "-- loop: a\n-- grain: b\n-- columns:\n--   x: y\nselect * from {{ ref('loop2') }}\n"
    )
    (root / "marts" / "loop2.sql").write_text(
        "-- loop2: a\n-- grain: b\n-- columns:\n--   x: y\nselect * from {{ ref('loop') }}\n"
    )
    with pytest.raises(ModelError, match="cycle"):
        load_project(root)
    (root / "marts" / "loop2.sql").write_text(
        "-- loop2: a\n-- grain: b\n-- columns:\n--   x: y\nselect * from {{ ref('nothing') }}\n"
    )
    with pytest.raises(ModelError, match=r"loop2\.sql: ref\('nothing'\)"):
        load_project(root)
    (root / "marts" / "loop2.sql").write_text("select 1\n")
    with pytest.raises(ModelError, match=r"loop2\.sql: opens without its doc comment"):
        load_project(root)
    (root / "marts" / "loop2.sql").unlink()
    (root / "marts" / "loop.sql").write_text(
        "-- loop: a\n-- grain: b\n-- columns:\n--   x: y\nselect * from {{ source('nope') }}\n"
    )
    with pytest.raises(ModelError, match=r"loop\.sql: source\('nope'\)"):
        load_project(root)


def test_tables_never_loaded_read_as_empty_and_soft_deletes_are_hidden(harness: Harness) -> None:
    # only two resources: every other source is missing, and the models still build
    result = harness.sync(resources=["topics", "statuses"])
    assert result.models is not None, result.models_error
    assert "comments" in result.models.missing_sources
    con = _connect(harness)
    try:
        assert con.execute("select count(*) from marts.idea_engagement").fetchone() == (0,)
        assert con.execute("select count(*) from marts.topic_summary").fetchone() == (6,)
    finally:
        con.close()


@pytest.mark.slow
def test_soft_deleted_rows_stay_out_of_the_models(harness: Harness) -> None:
    harness.sync(delete_mode="soft")
    harness.mutate(seed=4, counts={"followers": {"delete": 3}, "comments": {"delete": 4}})
    harness.sync(full=True, delete_mode="soft")
    truth = harness.dump()
    con = _connect(harness)
    try:
        marked = con.execute(
            "select count(*) from feedback.followers where _deleted_at is not null"
        ).fetchone()
        assert marked == (3,)
        followers = con.execute("select count(*) from staging.followers").fetchone()
        assert followers == (len(truth["followers"]),)
        comments = con.execute("select count(*) from staging.comments").fetchone()
        assert comments == (len(truth["comments"]),)
    finally:
        con.close()


@pytest.mark.slow
def test_parquet_models_match_the_duckdb_ones(harness: Harness) -> None:
    harness.sync()
    result = harness.sync(destination="parquet")
    assert result.models is not None, result.models_error
    folder = harness.tmp / "parquet"
    con = _connect(harness)
    try:
        for model in MARTS:
            file = folder / "marts" / f"{model.name}.parquet"
            assert file.exists(), file
            order = ", ".join(model.key)
            from_duckdb = con.execute(f"select * from marts.{model.name} order by {order}")
            with duckdb.connect() as files:  # not the module's connection, shared by the worker
                from_parquet = files.execute(
                    f"select * from read_parquet('{file}') order by {order}"
                ).fetchall()
            assert from_duckdb.fetchall() == from_parquet, model.name
    finally:
        con.close()
    # the models file queries the Parquet files through views
    with duckdb.connect(str(folder / "models.duckdb"), read_only=True) as models:
        sql = "select count(*) from staging.comments"
        assert models.execute(sql).fetchone() == (len(harness.dump()["comments"]),)


def test_no_models_switch_and_the_models_command(
    harness: Harness, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.sync(models=False)
    con = _connect(harness)
    try:
        sql = "select schema_name from information_schema.schemata"
        schemas = {r[0] for r in con.execute(sql).fetchall()}
    finally:
        con.close()
    assert "marts" not in schemas
    _point_cli_at(harness, monkeypatch)
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    # the count check and models --list say, then the two views every build makes
    assert (
        f"models: built {len(PROJECT.models)} models and the 2 generated views "
        "(staging.type_drift, staging.custom_fields); mart rows: "
    ) in out
    assert main(["models", "--list"]) == 0
    listed = capsys.readouterr().out
    assert listed.rstrip().endswith(
        f"{len(PROJECT.models)} models, and the 2 generated views every build adds"
    )
    con = _connect(harness)
    try:
        assert con.execute("select count(*) from marts.idea_engagement").fetchone() == (12,)
    finally:
        con.close()


def test_models_list_shows_grain_key_and_columns(capsys: Any) -> None:
    assert main(["models", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == describe(PROJECT)
    for model in MARTS:
        assert f"marts.{model.name}: " in out
        assert model.grain in out
        for column in model.columns:
            assert f"- {column}: " in out


def test_models_on_a_target_without_a_sync_say_so(tmp_path: Path) -> None:
    from feedback_sync.warehouse.target import make_target

    with pytest.raises(ModelError, match="run `feedback-sync sync` first"):
        apply(make_target(destination="duckdb", duckdb_path=tmp_path / "none.duckdb"))
    with pytest.raises(ModelError, match="DuckDB, Parquet, Delta and PostgreSQL targets"):
        apply(make_target(destination="bigquery"))


def test_a_column_split_by_type_reads_as_one_and_casts(tmp_path: Path) -> None:
    # the loader fixes a column's type by the first value of a run; a later value of another
    # type lands in a variant column (monthly_spend__v_double), which the models read too
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    try:
        con.execute("create schema feedback")
        con.execute(
            "create table feedback.followers__companies as select * from (values "
            "('flw_1', 0, 'acct-1', 'One', 500::bigint, null::double), "
            "('flw_2', 0, 'acct-2', 'Two', null, 499.5)) "
            "t(follower_idx, _dlt_list_idx, id, name, monthly_spend, monthly_spend__v_double)"
        )
        build(con, "feedback", PROJECT)
        rows = con.execute(
            "select company_id, monthly_spend from staging.follower_companies order by 1"
        ).fetchall()
        assert rows == [("acct-1", 500.0), ("acct-2", 499.5)]
        spend = con.execute("select sum(monthly_spend) from marts.company_feedback").fetchone()
        assert spend == (999.5,)
    finally:
        con.close()


def test_the_declared_sources_agree_with_the_loaders_declarations() -> None:
    """sql/sources.toml declares the columns the resource registry (source/resources.py,
    through types.DECLARED) does, with the same types, so a model never reads a column as a
    type the loader does not write."""
    from feedback_sync.models.project import load_project
    from feedback_sync.source.types import DECLARED

    sql_kinds = {
        "varchar": "text",
        "bigint": "bigint",
        "double": "double",
        "boolean": "bool",
        "timestamptz": "timestamp",
        "json": "json",
    }
    from feedback_sync.warehouse.history import HISTORY_TABLES

    sources = load_project().sources
    # the history tables are the history step's, not the loader's (tests/sync/test_history.py)
    assert set(sources) - HISTORY_TABLES == set(DECLARED)
    for table, columns in sources.items():
        if table in HISTORY_TABLES:
            continue
        assert {c: sql_kinds[t] for c, t in columns.items()} == DECLARED[table], table


@pytest.mark.slow
def test_a_sync_reuses_the_models_only_while_nothing_they_read_changed(harness: Harness) -> None:
    """A sync whose load changed nothing the models read skips their build (and says so);
    a change at the server, a model dropped since, or a changed row in the warehouse
    builds them again, and the rebuilt marts are those of a build from scratch."""
    first = harness.sync()
    assert first.models is not None and first.models.reused_from is None, first.models_error
    again = harness.sync()  # nothing changed at the server
    assert again.models is not None and again.models.reused_from is not None
    assert again.models.mart_rows == first.models.mart_rows
    assert again.models.built == first.models.built
    assert "up to date, nothing they read changed" in again.models.summary()

    harness.mutate(7, {"comments": {"create": 3}, "ideas": {"update": 2}})
    changed = harness.sync()
    assert changed.models is not None and changed.models.reused_from is None
    with duckdb.connect(str(harness.tmp / "scratch.duckdb")) as scratch:
        path = harness.target().duckdb_file()
        scratch.execute(f"attach '{path}' as w (read_only)")
        scratch.execute("create schema feedback")
        for (table,) in scratch.execute(
            "select table_name from information_schema.tables "
            "where table_catalog = 'w' and table_schema = 'feedback'"
        ).fetchall():
            scratch.execute(
                f'create table feedback."{table}" as select * from w.feedback."{table}"'
            )
        scratch.execute("detach w")
        fresh = build(scratch, "feedback", PROJECT)
    assert changed.models.mart_rows == fresh.mart_rows

    con = duckdb.connect(str(harness.target().duckdb_file()))
    try:
        con.execute("drop table marts.topic_summary")
    finally:
        con.close()
    assert harness.sync().models.reused_from is None  # type: ignore[union-attr]

    con = duckdb.connect(str(harness.target().duckdb_file()))
    try:
        con.execute("update feedback.topics set name = name || ' (renamed by hand)'")
        again = build(con, "feedback", PROJECT, reuse=True)
        assert again.reused_from is None
        renamed = con.execute(
            "select count(*) from marts.topic_summary where topic_name like '%(renamed by hand)'"
        ).fetchone()
        assert renamed is not None and renamed[0] > 0
        assert build(con, "feedback", PROJECT, reuse=True).reused_from is not None
    finally:
        con.close()


def test_models_that_read_the_clock_are_always_built(harness: Harness, tmp_path: Path) -> None:
    harness.sync(models=False)
    project = tmp_path / "sql"
    shutil.copytree(PROJECT.models[0].path.parent.parent, project)
    mart = project / "marts" / "status_summary.sql"
    sql = mart.read_text()
    assert "    row_number() over" in sql
    mart.write_text(
        sql.replace("    row_number() over", "    current_date as built_on, row_number() over")
    )
    con = duckdb.connect(str(harness.target().duckdb_file()))
    try:
        assert build(con, "feedback", load_project(project), reuse=True).reused_from is None
        assert build(con, "feedback", load_project(project), reuse=True).reused_from is None
        assert build(con, "feedback", PROJECT, reuse=True).reused_from is None  # SQL changed
        assert build(con, "feedback", PROJECT, reuse=True).reused_from is not None
    finally:
        con.close()


def _loaded(path: Path, tables: dict[str, str]) -> duckdb.DuckDBPyConnection:
    """A warehouse file whose dataset holds ``tables``: name -> ``(values ...) t(columns)``."""
    con = duckdb.connect(str(path))
    con.execute("create schema feedback")
    for name, rows in tables.items():
        con.execute(f"create table feedback.{name} as select * from {rows}")
    return con


FOLLOWERS = "(values ('flw_1', 'One'), ('flw_2', 'Two')) t(idx, name)"
COMPANY_COLUMNS = "t(follower_idx, _dlt_list_idx, id, name, monthly_spend)"


def test_a_company_sent_without_an_id_is_left_out_and_the_tests_pass(tmp_path: Path) -> None:
    """The spec lets a company entry lack an id; such entries are not one company (earlier
    they were all one row with a NULL key), and the marts' data tests still hold."""
    companies = (
        "(values ('flw_1', 0, 'acct-1', 'One Inc', 500.0), ('flw_1', 1, null, 'No id', 70.0), "
        f"('flw_2', 0, null, 'No id either', 30.0)) {COMPANY_COLUMNS}"
    )
    con = _loaded(
        tmp_path / "w.duckdb", {"followers": FOLLOWERS, "followers__companies": companies}
    )
    try:
        result = build(con, "feedback", PROJECT)
        assert result.tests and all(o.passed for o in result.tests)
        found = con.execute("select company_id, monthly_spend from marts.company_feedback")
        assert found.fetchall() == [("acct-1", 500.0)]
        spend = con.execute(
            "select company_monthly_spend from marts.follower_activity order by follower_idx"
        ).fetchall()
        assert spend == [(500.0,), (0.0,)]
    finally:
        con.close()


def test_a_negative_spend_leaves_the_share_of_spend_untold(tmp_path: Path) -> None:
    """A credit (a negative monthly spend, which the spec's "number" allows) makes a share
    of the total meaningless: the shares are NULL, the spend is summed as sent, and the
    data tests pass (a share outside 0..1 would fail them)."""
    moment = "timestamptz '2025-01-01 00:00:00+00'"
    con = _loaded(
        tmp_path / "w.duckdb",
        {
            "followers": FOLLOWERS,
            "followers__companies": "(values ('flw_1', 0, 'acct-1', 'Big', 500.0), "
            f"('flw_2', 0, 'acct-2', 'Credit', -200.0)) {COMPANY_COLUMNS}",
            "statuses": f"(values ('sts_1', 'Planned', {moment})) t(idx, name, created_at)",
            "ideas": "(values ('ide_1', 'An idea', 'sts_1')) t(idx, name, status_idx)",
            "comments": f"(values ('cmt_1', 'ide_1', 'flw_1', false, {moment})) "
            "t(idx, idea_idx, follower__idx, is_private, created_at)",
        },
    )
    try:
        result = build(con, "feedback", PROJECT)
        assert result.tests and all(o.passed for o in result.tests)
        row = con.execute(
            "select commenter_companies, commenter_monthly_spend, share_of_spend "
            "from marts.status_summary"
        ).fetchone()
        assert row == (1, 500.0, None)
        total = con.execute("select sum(monthly_spend) from marts.company_feedback").fetchone()
        assert total == (300.0,)
    finally:
        con.close()
