"""The models over several accounts: each account's own, unioned with ``account`` first,
and each account's rows equal to the marts computed in Python from that account's server
alone."""

from __future__ import annotations

import html
import json
import re
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.app.cli import main
from feedback_sync.errors import ModelError
from feedback_sync.models.project import GENERATED_VIEWS, build, load_project
from feedback_sync.sandbox.server import RunningSandbox

from tests.models.test_models import PROJECT, _same, _utc
from tests.models.truth import Truth
from tests.sync.accounts import (
    configure_three,
    configure_two,
    free_port,
    servers,
    write_settings,
)
from tests.sync.conftest import project

__all__ = ["project"]  # the fixture, shared with the accounts' sync tests

# the marts of the history tables need two syncs' truth (tests/models/test_models.py)
HISTORY_MARTS = {"idea_status_history", "status_flow", "company_spend_by_month"}


def _relations(con: duckdb.DuckDBPyConnection, schema: str) -> list[str]:
    rows = con.execute(
        "select table_name from information_schema.tables where table_schema = ?", [schema]
    ).fetchall()
    return sorted(name for (name,) in rows)


def _columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    return [d[0] for d in con.execute(f"select * from {relation} limit 0").description]


def _rows_of(con: Any, mart: str, account: str) -> dict[Any, dict]:
    """One account's rows of a union mart, keyed by the mart's key, without ``account``."""
    model = PROJECT.model(mart)
    cursor = con.execute(f'select * from marts."{mart}" where account = ?', [account])
    columns = [d[0] for d in cursor.description]
    out = {}
    for values in cursor.fetchall():
        row = {c: _utc(v) for c, v in zip(columns, values, strict=True)}
        assert row.pop("account") == account
        key = tuple(row.pop(k) for k in model.key)
        out[key[0] if len(key) == 1 else key] = row
    return out


def assert_each_accounts_marts_are_its_truth(con: Any, dumps: dict[str, dict[str, Any]]) -> None:
    """Each account's rows of the union views and marts equal what its own server's data
    gives, computed in Python (``tests/models/truth.py``); ``con``: DuckDB's or a
    ``PostgresReader``."""
    for account, dump in dumps.items():
        # the staging rows: each account's own
        ideas = con.execute(
            "select count(*) from staging.ideas where account = ?", [account]
        ).fetchall()
        assert ideas == [(len(dump["ideas"]),)]
        truth = Truth(dump)
        for model in PROJECT.models:
            if model.layer != "marts" or model.name in HISTORY_MARTS:
                continue
            expected = getattr(truth, model.name)()
            actual = _rows_of(con, model.name, account)
            assert set(actual) == set(expected), (account, model.name)
            for key, row in expected.items():
                for column, value in row.items():
                    assert _same(value, actual[key][column]), (
                        f"{account}: {model.name}[{key}].{column}: expected {value!r}, "
                        f"got {actual[key][column]!r}"
                    )


def _sync(project: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    code = main(["sync", "--pipelines-dir", str(project / "pipelines"), "--json", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.slow
def test_the_marts_over_accounts_hold_each_accounts_own_truth(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with servers() as (acme, globex):
        configure_two(project, acme, globex)
        code, document = _sync(project, capsys)
        assert code == 0, (document["error"], document.get("models_error"), capsys.readouterr())
        models = document["models"]
        assert models["accounts"] == ["acme", "globex"] and models["unsynced_accounts"] == []
        # each account's data tests ran on its own marts
        failed = [name for mart in models["tests"].values() for name in mart["failed"]]
        assert failed == []
        dumps = {"acme": dump_of(acme), "globex": dump_of(globex)}
    con = duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True)
    try:
        staging = [m.name for m in PROJECT.models if m.layer == "staging"]
        assert _relations(con, "staging") == sorted([*staging, *GENERATED_VIEWS])
        for schema in ("staging", "marts"):
            for name in _relations(con, schema):
                union = _columns(con, f'{schema}."{name}"')
                assert union[0] == "account", f"{schema}.{name}"
                # and then the columns of one account's own, in their order
                assert union[1:] == _columns(con, f'{schema}_acme."{name}"')
        assert_each_accounts_marts_are_its_truth(con, dumps)
        # the two servers' data differ: the accounts' rows are not each other's
        spend = dict(
            con.execute(
                "select account, sum(monthly_spend) from marts.company_feedback group by 1"
            ).fetchall()
        )
        assert set(spend) == {"acme", "globex"} and spend["acme"] != spend["globex"]
    finally:
        con.close()
    _check_dashboard(project, capsys, dumps)


def _boards(page: str) -> dict[str, dict[str, str]]:
    """Each account's board on the page: its tiles' texts."""
    boards = {}
    for account, body in re.findall(
        r'<div class="board" id="account-(\w+)" data-account="\w+">(.*?)</main>\n</div>',
        page,
        re.S,
    ):
        tiles = re.findall(r'data-figure="(\w+)"><b>([^<]+)</b>', body)
        boards[account] = {key: html.unescape(value) for key, value in tiles}
    return boards


def _check_dashboard(
    project: Path, capsys: pytest.CaptureFixture[str], dumps: dict[str, dict[str, Any]]
) -> None:
    """One board per account, each account's tiles counted from its own server's data; the
    page names the accounts it shows; ``--account`` leaves the others out entirely."""
    out = project / "report.html"
    assert main(["report", "--output", str(out)]) == 0, capsys.readouterr()
    page = out.read_text(encoding="utf-8")
    assert "Accounts shown: acme, globex" in page
    boards = _boards(page)
    assert list(boards) == ["acme", "globex"]
    for account, dump in dumps.items():
        comments = Counter(c["is_private"] for c in dump["comments"])
        published = sum(1 for a in dump["announcements"] if a["is_published"])
        expected = {
            "ideas": f"{len(dump['ideas']):,}",
            "followers": f"{len(dump['followers']):,}",
            "public_comments": f"{comments[False]:,}",
            "private_notes": f"{comments[True]:,}",
            "posts_published": f"{published:,}",
        }
        assert {key: boards[account][key] for key in expected} == expected, account
        # the filter: a radio per account, and the rule that hides the other boards
        assert f'id="show-{account}"' in page
        assert f'body:has(#show-{account}:checked) .board:not([data-account="{account}"])' in page
        assert f'<section id="{account}-demand">' in page
    capsys.readouterr()
    assert main(["report", "--output", str(out), "--account", "globex"]) == 0
    page = out.read_text(encoding="utf-8")
    assert list(_boards(page)) == ["globex"]
    assert "show-acme" not in page and "Accounts shown: globex ·" in page
    assert 'name="account"' not in page  # no filter with one account to show


def dump_of(server: RunningSandbox) -> dict[str, Any]:
    import httpx

    response = httpx.get(f"{server.root_url}/_sandbox/dump", timeout=30)
    response.raise_for_status()
    return dict(response.json())


@pytest.mark.slow
def test_one_account_synced_builds_the_models_over_those_synced_and_names_the_rest(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with servers() as (acme, globex):
        configure_three(project, acme, globex, free_port())
        code = main(["sync", "--account", "acme", "--pipelines-dir", str(project / "pipelines")])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "over 1 account (acme)" in out
        assert "not in them, never synced: 2 accounts (globex, initech)" in out
        # the models command builds the same, over every account configured
        assert main(["models"]) == 0
        out = capsys.readouterr().out
        assert "over 1 account (acme)" in out and "(globex, initech)" in out
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        accounts = con.execute("select distinct account from marts.idea_engagement").fetchall()
    assert accounts == [("acme",)]


@pytest.mark.parametrize("destination", ["parquet", "delta"])
@pytest.mark.slow
def test_parquet_and_delta_accounts_have_the_models_over_every_account(
    project: Path, capsys: pytest.CaptureFixture[str], destination: str
) -> None:
    with servers() as (acme, globex):
        configure_two(project, acme, globex)
        code, document = _sync(project, capsys, "--destination", destination)
        assert code == 0, document["error"]
        assert document["models"]["accounts"] == ["acme", "globex"]
        dumps = {"acme": dump_of(acme), "globex": dump_of(globex)}
    folder = project / "data" / destination
    with duckdb.connect(str(folder / "models.duckdb"), read_only=True) as con:
        assert_each_accounts_marts_are_its_truth(con, dumps)
    if destination == "delta":
        return
    assert (folder / "acme" / "ideas.parquet").is_file()
    assert (folder / "globex" / "ideas.parquet").is_file()
    # the marts written as files hold every account's rows, account first
    marts = (
        duckdb.connect()
        .sql(
            f"select account, count(*) from read_parquet('{folder}/marts/idea_engagement.parquet') "
            "group by 1 order by 1"
        )
        .fetchall()
    )
    assert marts == [(name, len(dump["ideas"])) for name, dump in dumps.items()]


def test_no_account_synced_is_one_line(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_settings(
        project,
        '[sources.feedback.accounts.acme]\nbase_url = "http://127.0.0.1:1/v1"\n',
        '[sources.feedback.accounts.acme]\napi_key = "k"\n',
    )
    (project / "data").mkdir()
    duckdb.connect(str(project / "data" / "warehouse.duckdb")).close()
    code = main(["models"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err.startswith("feedback-sync models: error: no account is synced into DuckDB")
    assert "(acme): run a sync first" in err and len(err.splitlines()) == 1


def test_a_model_with_its_own_account_column_is_refused_over_accounts(tmp_path: Path) -> None:
    sql = tmp_path / "sql"
    (sql / "staging").mkdir(parents=True)
    (sql / "marts").mkdir()
    (sql / "sources.toml").write_text('[ideas]\nidx = "varchar"\n', encoding="utf-8")
    (sql / "staging" / "ideas.sql").write_text(
        textwrap.dedent(
            """\
            -- ideas: ideas, with the board they came from
            -- grain: one row per idea
            -- columns:
            --   idea_idx: the idea's id
            --   account: a column of the model's own
            select idx as idea_idx, 'x' as account from {{ source('ideas') }}
            """
        ),
        encoding="utf-8",
    )
    con = duckdb.connect()
    for account in ("a", "b"):
        con.execute(f"create schema feedback_{account}")
        con.execute(f"create table feedback_{account}.ideas as select 'i1' as idx")
    with pytest.raises(ModelError, match=r"model staging\.ideas: has a column named 'account'"):
        build(con, "feedback", load_project(sql), accounts=["a", "b"])
    # nothing of the build is kept
    assert con.execute(
        "select count(*) from information_schema.tables where table_schema = 'staging'"
    ).fetchone() == (0,)
    # one account's models alone build
    assert build(con, "feedback_a", load_project(sql)).built


def test_a_build_over_accounts_never_reads_an_accounts_sync_half_done(tmp_path: Path) -> None:
    """Into Parquet (or PostgreSQL, Delta) nothing else keeps a build out of an account's
    sync: a build that finds one running leaves the models as they were, and says why."""
    import threading

    from feedback_sync.errors import WarehouseBusy
    from feedback_sync.models.project import apply
    from feedback_sync.warehouse import runlock
    from feedback_sync.warehouse.target import make_target

    target = make_target(
        "parquet", parquet_dir=tmp_path / "parquet", pipelines_dir=tmp_path / "pipelines"
    )
    holding, done = threading.Event(), threading.Event()

    def globex_syncing() -> None:
        with runlock.hold_run(target.for_account("globex"), "sync"):
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=globex_syncing)
    thread.start()
    try:
        assert holding.wait(30)
        with pytest.raises(WarehouseBusy) as busy:
            apply(target, accounts=["acme", "globex"])
        assert str(busy.value).startswith(
            "the models over every account were not rebuilt: account globex is being synced"
        )
    finally:
        done.set()
        thread.join()
    # once it ended, the build goes on (here: to say nothing was synced)
    with pytest.raises(ModelError, match="no Parquet files"):
        apply(target, accounts=["acme", "globex"])
