"""The push with several accounts: each account's curated rows (the column ``account``)
diffed with its own copy and sent to its own server with its own key, journaled apart; a
wrong input refused before anything is sent; one account's server down never stops the
others."""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from dlt.common.configuration.container import Container
from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext
from feedback_sync.app.cli import main
from feedback_sync.errors import ConfigError
from feedback_sync.models.project import _record_build
from feedback_sync.push import curated
from feedback_sync.push.scope import Scope
from feedback_sync.push.targets import PUSH_DIR
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread
from feedback_sync.warehouse.engines.duckdb import DuckDbEngine

from tests.push.helpers import NEW, accounts, push, write_csv, writes
from tests.sync.conftest import project
from tests.sync.harness import Harness, PostgresReader

__all__ = ["project"]  # the accounts tests' project fixture

KEYS = {"acme": "acme-key-1234", "globex": "globex-key-5678"}
SEEDS = {"acme": 1, "globex": 2}


def _configure(project: Path, urls: dict[str, str], *, alone: str | None = None) -> None:
    """One table per account (its address, and its key in the secrets file); or, with
    ``alone``, a project of one account, that account's server in ``[sources.feedback]``."""
    config = "[sources.feedback]\npage_size = 7\nmax_retries = 1\ntimeout_seconds = 2\n"
    secrets = ""
    if alone is not None:
        config += f'base_url = "{urls[alone]}"\n'
        secrets += f'[sources.feedback]\napi_key = "{KEYS[alone]}"\n'
        urls = {}
    for name, url in urls.items():
        config += f'[sources.feedback.accounts.{name}]\nbase_url = "{url}"\n'
        secrets += f'[sources.feedback.accounts.{name}]\napi_key = "{KEYS[name]}"\n'
    (project / ".dlt" / "config.toml").write_text(config, encoding="utf-8")
    (project / ".dlt" / "secrets.toml").write_text(secrets, encoding="utf-8")
    Container()[PluggableRunContext].reload(str(project))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server(name: str, port: int = 0) -> contextlib.AbstractContextManager[RunningSandbox]:
    return serve_in_thread(create_app("tiny", SEEDS[name], api_key=KEYS[name]), port=port)


def _cli(
    project: Path, capsys: pytest.CaptureFixture[str], *args: str, destination: str = "parquet"
) -> tuple[int, str, str]:
    """``feedback-sync ARGS`` into the project's warehouse: exit code, stdout, stderr."""
    where = ["--destination", destination, "--pipelines-dir", str(project / "pipelines")]
    quiet = [] if args[0] == "models" else ["--progress", "off"]
    code = main([args[0], *where, *quiet, *args[1:]])
    out, err = capsys.readouterr()
    return code, out, err


def _sync(project: Path, capsys: pytest.CaptureFixture[str], *args: str, **kw: Any) -> None:
    """A sync (every account configured, each in a process of its own), and the models
    over every account it builds."""
    code, out, err = _cli(project, capsys, "sync", *args, **kw)
    assert code == 0, out + err


def _push(
    project: Path, capsys: pytest.CaptureFixture[str], *args: str, **kw: Any
) -> tuple[int, str, str]:
    return _cli(project, capsys, "push", "--curated-dir", str(project / "curated"), *args, **kw)


def _rows(dump: dict[str, Any], account: str) -> list[dict[str, Any]]:
    """Curated accounts rows for ``account``'s server (existing followers changed, a new
    one), each naming the account."""
    rows = [r for r in accounts(dump) if "company_id" in r]
    return [{**row, "account": account} for row in rows]


@contextlib.contextmanager
def _inspect(*servers: RunningSandbox) -> Iterator[list[Harness]]:
    """A harness per server, to read its state and the requests it answered."""
    seen = [Harness(server, Path("inspect")) for server in servers]
    try:
        yield seen
    finally:
        for h in seen:
            h.close()


def _topics(server: RunningSandbox) -> set[str]:
    with _inspect(server) as (seen,):
        return {t["name"] for t in seen.dump()["topics"]}


def _journal(project: Path) -> dict[str, set[str]]:
    """The journal schemas of the Parquet target's models file and the keys each one's
    snapshot holds (no API key in any of their rows)."""
    path = project / "data" / "parquet" / "models.duckdb"
    with duckdb.connect(str(path), read_only=True) as con:
        schemas = [
            r[0]
            for r in con.execute(
                "select schema_name from information_schema.schemata "
                "where schema_name like 'push%' order by 1"
            ).fetchall()
        ]
        for schema in schemas:  # no API key in any of the journal's tables
            for table in ("_push_runs", "_push_rows", "_push_snapshot"):
                text = str(con.execute(f"select * from {schema}.{table}").fetchall())
                assert KEYS["acme"] not in text and KEYS["globex"] not in text
        snapshot = "select key from {}._push_snapshot"
        return {
            schema: {r[0] for r in con.execute(snapshot.format(schema)).fetchall()}
            for schema in schemas
        }


@pytest.mark.slow
def test_each_account_lands_at_its_own_server_only_and_once(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        _server("acme") as acme,
        _server("globex") as globex,
        _inspect(acme, globex) as (at_acme, at_globex),
    ):
        _configure(project, {"acme": acme.base_url, "globex": globex.base_url})
        _sync(project, capsys)
        seen = {"acme": at_acme, "globex": at_globex}
        before = {name: h.dump() for name, h in seen.items()}
        rows = _rows(before["acme"], "acme") + _rows(before["globex"], "globex")
        write_csv(project / "curated" / "accounts.csv", rows)
        topics = [
            {"topic_key": "roadmap", "name": "Acme roadmap", "account": "acme"},
            {"topic_key": "roadmap", "name": "Globex roadmap", "account": "globex"},
        ]
        write_csv(project / "curated" / "topics.csv", topics)

        for h in seen.values():
            h.mark_requests()
        code, out, err = _push(project, capsys, "--json")
        assert code == 0, out + err
        preview = json.loads(out)
        assert [h for h in seen.values() if writes(h)] == [], "a preview sends nothing"
        assert list(preview["accounts"]) == ["acme", "globex"]
        for name in ("acme", "globex"):
            result = preview["accounts"][name]["result"]
            where = f"Parquet files in data/parquet/{name}/ -> {seen[name].server.base_url}"
            assert result["where"] == where
            followers = next(t for t in result["targets"] if t["name"] == "followers")
            assert followers["counts"]["create"] == 1, followers  # the new follower
            assert followers["counts"]["update"] == 3, followers
        assert preview["totals"]["create"] == 4  # a topic and a follower per account

        code, out, err = _push(project, capsys, "--apply")
        assert code == 0, out + err
        lines = out.splitlines()
        summary = lines[lines.index(next(x for x in lines if x.startswith("push --apply of"))) :]
        assert [line.split()[:2] for line in summary[1:3]] == [["acme", "ok"], ["globex", "ok"]]
        assert summary[3].split()[0] == "total"
        sent = sum(len(writes(h)) for h in seen.values())
        assert sent == 10  # per account: a topic, a follower created and three updated
        assert re.fullmatch(
            rf"2 of 2 account\(s\) pushed in [0-9.]+s: {sent} write\(s\) sent", summary[4]
        )
        for text in (out, err):
            assert KEYS["acme"] not in text and KEYS["globex"] not in text

        after = {name: h.dump() for name, h in seen.items()}
        for name, other in (("acme", "globex"), ("globex", "acme")):
            names = {t["name"] for t in after[name]["topics"]}
            assert f"{name.title()} roadmap" in names
            assert f"{other.title()} roadmap" not in names
            emails = {f["email"].lower() for f in after[name]["followers"]}
            created = emails - {f["email"].lower() for f in before[name]["followers"]}
            assert created == {NEW}, created
            for row in _rows(before[name], name)[:3]:
                email = row["email"].lower()
                follower = next(f for f in after[name]["followers"] if f["email"] == email)
                company = next(c for c in follower["companies"] if c["id"] == row["company_id"])
                assert company["monthly_spend"] == float(row["monthly_spend"])
            sent = seen[name].requests()
            assert sent and all(r["status"] != 401 for r in sent), "each key at its own server"

        # the journal of each account is its own, in its own schema
        assert _journal(project) == {
            f"push_{name}": {r["email"].lower() for r in _rows(before[name], name)} | {"roadmap"}
            for name in ("acme", "globex")
        }

        # idempotent, per account: a second apply sends nothing to either server
        for h in seen.values():
            h.mark_requests()
        code, out, err = _push(project, capsys, "--apply", "--json")
        assert code == 0, out + err
        again = json.loads(out)
        assert [h for h in seen.values() if writes(h)] == []
        assert {n: a["result"]["writes"] for n, a in again["accounts"].items()} == {
            "acme": 0,
            "globex": 0,
        }

        # one account alone: only its server is read
        for h in seen.values():
            h.mark_requests()
        code, out, err = _push(project, capsys, "--account", "globex", "--apply", "--json")
        assert code == 0, out + err
        assert list(json.loads(out)["accounts"]) == ["globex"]
        assert seen["acme"].requests() == []

        # an input that lost every row of an account it pushed for before is refused for
        # that account (the empty-set safety limit), not skipped
        write_csv(project / "curated" / "topics.csv", topics[:1])
        code, out, err = _push(project, capsys, "--targets", "topics")
        assert code == 1, out + err
        acme_part, globex_part = out.split("account globex:")
        assert "REFUSED" not in acme_part
        assert "topics: REFUSED: its desired set is empty" in globex_part


@pytest.mark.slow
def test_one_account_down_never_stops_the_other_and_a_rerun_lands_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _free_port()
    with _server("acme") as acme:
        with _server("globex", port) as globex:
            _configure(project, {"acme": acme.base_url, "globex": globex.base_url})
            _sync(project, capsys, destination="duckdb")
        topics = [
            {"topic_key": "roadmap", "name": "Acme roadmap", "account": "acme"},
            {"topic_key": "roadmap", "name": "Globex roadmap", "account": "globex"},
        ]
        write_csv(project / "curated" / "topics.csv", topics)

        code, out, err = _push(project, capsys, "--apply", "--json", destination="duckdb")
        assert code == 1, out + err
        document = json.loads(out)
        assert document["ok"] is False and "globex" in document["error"]
        assert document["accounts"]["acme"]["ok"] is True
        assert document["accounts"]["acme"]["result"]["writes"] == 1
        failed = document["accounts"]["globex"]
        assert failed["ok"] is False and failed["result"] is None
        assert "cannot reach" in failed["error"] or "127.0.0.1" in failed["error"], failed
        assert "Acme roadmap" in _topics(acme)

        # the text summary names it too
        code, out, err = _push(project, capsys, destination="duckdb")
        assert code == 1
        assert any(line.split()[:2] == ["globex", "failed"] for line in out.splitlines()), out
        assert "failed: globex" in out.splitlines()[-1]

        with _server("globex", port) as back, _inspect(acme) as (at_acme,):
            at_acme.mark_requests()
            code, out, err = _push(project, capsys, "--apply", "--json", destination="duckdb")
            assert code == 0, out + err
            assert writes(at_acme) == [], "what landed is not sent again"
            assert "Globex roadmap" in _topics(back)


@pytest.mark.slow
def test_an_input_naming_an_unknown_account_is_refused_before_anything_is_sent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        _server("acme") as acme,
        _server("globex") as globex,
        _inspect(acme, globex) as seen,
    ):
        _configure(project, {"acme": acme.base_url, "globex": globex.base_url})
        _sync(project, capsys)
        for h in seen:
            h.mark_requests()
        topics = [
            {"topic_key": "roadmap", "name": "Acme roadmap", "account": "acme"},
            {"topic_key": "news", "name": "Initech news", "account": "initech"},
        ]
        write_csv(project / "curated" / "topics.csv", topics)
        code, out, err = _push(project, capsys, "--apply")
        assert code == 2
        assert out == ""
        assert err.strip().splitlines() == [
            f"feedback-sync push: error: {project / 'curated' / 'topics.csv'}: row 2 (topic_key "
            "'news') names account 'initech', which is not configured; the accounts are "
            "acme, globex"
        ]
        # without the column at all, with two accounts
        write_csv(project / "curated" / "topics.csv", [{"topic_key": "k", "name": "n"}])
        code, out, err = _push(project, capsys, "--apply", "--account", "acme")
        assert code == 2
        assert "topics.csv: no column account; with several accounts configured" in err
        assert len(err.strip().splitlines()) == 1
        assert [r for h in seen for r in h.requests() if r["method"] != "GET"] == []
        assert [r for h in seen for r in h.requests()] == [], "nothing read either"


def _one_dataset_models_then_accounts(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    urls: dict[str, str],
    destination: str,
) -> None:
    """Models over one dataset, built before the accounts were configured: a project of
    one account (acme's server) syncing into the dataset ``feedback_acme``; then acme and
    globex configured as accounts."""
    _configure(project, urls, alone="acme")
    _sync(project, capsys, "--dataset", "feedback_acme", destination=destination)
    _configure(project, urls)


@pytest.mark.slow
def test_models_of_one_dataset_are_the_copy_of_its_account_alone(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Models built before the accounts were configured, over acme's dataset alone (no
    column account): another account's push would diff against them, and is refused;
    acme's own push works, and its journal is its own schema of the file."""
    with _server("acme") as acme, _server("globex") as globex:
        urls = {"acme": acme.base_url, "globex": globex.base_url}
        _one_dataset_models_then_accounts(project, capsys, urls, "duckdb")
        write_csv(
            project / "curated" / "topics.csv",
            [
                {"topic_key": "roadmap", "name": "Acme roadmap", "account": "acme"},
                {"topic_key": "roadmap", "name": "Globex roadmap", "account": "globex"},
            ],
        )
        code, out, err = _push(project, capsys, "--account", "globex", destination="duckdb")
        assert code == 2, out + err
        assert err.strip().splitlines() == [
            "feedback-sync push: error: data/warehouse.duckdb: its models are not account "
            "globex's (staging.ideas does not read its dataset feedback_globex, and has no "
            "column account: built before the accounts were configured?): build the models "
            "over every account first (`feedback-sync models`)"
        ]
        code, out, err = _push(
            project, capsys, "--account", "acme", "--apply", destination="duckdb"
        )
        assert code == 0, out + err
        assert "Acme roadmap" in _topics(acme) and "Globex roadmap" not in _topics(acme)
        assert "Acme roadmap" not in _topics(globex) and "Globex roadmap" not in _topics(globex)
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        schemas = {
            r[0]
            for r in con.execute("select schema_name from information_schema.schemata").fetchall()
        }
    assert "push_acme" in schemas and "push" not in schemas and "push_globex" not in schemas


@pytest.mark.slow
def test_one_account_configured_needs_no_column(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _server("acme") as acme:
        _configure(project, {"acme": acme.base_url})
        _sync(project, capsys, destination="duckdb")
        write_csv(
            project / "curated" / "topics.csv", [{"topic_key": "roadmap", "name": "Acme roadmap"}]
        )
        code, out, err = _push(project, capsys, "--apply", destination="duckdb")
        assert code == 0, out + err
        assert "Acme roadmap" in _topics(acme)


def test_no_accounts_and_a_column_account_is_refused(harness: Harness, tmp_path: Path) -> None:
    harness.sync(full=True)
    rows = [{**row, "account": "acme"} for row in accounts(harness.dump())]
    write_csv(tmp_path / "curated" / "accounts.csv", rows)
    with pytest.raises(ConfigError) as refused:
        push(harness, tmp_path / "curated", apply=True)
    assert str(refused.value) == (
        f"{tmp_path / 'curated' / 'accounts.csv'}: a column account, but no accounts are "
        "configured (one table [sources.feedback.accounts.<name>] each); remove the column "
        "or configure them"
    )
    assert writes(harness) == []


# --- the column account, checked on its own ---------------------------------------------


def _source(folder: Path, rows: list[dict[str, Any]]) -> tuple[DuckDbEngine, curated.Source]:
    write_csv(folder / "releases.csv", rows)
    declared = curated.load_declarations(PUSH_DIR / "curated.toml")
    con = DuckDbEngine(duckdb.connect())
    source = curated.find(con, declared["releases"], folder)
    assert source is not None
    return con, source


def _release(key: str, account: str | None) -> dict[str, Any]:
    return {"release_key": key, "name": "n", "content": "c", "account": account}


def test_a_row_without_an_account_is_named_with_how_many_more(tmp_path: Path) -> None:
    rows = [_release("a", "acme"), _release("b", ""), _release("c", "globex"), _release("d", None)]
    con, source = _source(tmp_path, rows)
    with pytest.raises(ConfigError) as refused:
        curated.check_accounts(con, source, Scope("acme", ("acme", "globex")))
    assert str(refused.value) == (
        f"{tmp_path / 'releases.csv'}: row 2 (release_key 'b') has no account (and 1 more "
        "row(s)); every row names one of acme, globex"
    )


def test_each_account_reads_its_own_rows_and_one_alone_reads_all(tmp_path: Path) -> None:
    rows = [_release("a", "acme"), _release("b", " globex "), _release("c", "acme")]
    con, source = _source(tmp_path, rows)
    both = ("acme", "globex")
    curated.check_accounts(con, source, Scope("globex", both))
    for account, keys in (("acme", ["a", "c"]), ("globex", ["b"])):
        sql = f"select release_key from {curated.select_sql(source, account)} order by 1"
        assert [r[0] for r in con.execute(sql)] == keys
    plain = [{k: v for k, v in r.items() if k != "account"} for r in rows]
    con, source = _source(tmp_path, plain)
    curated.check_accounts(con, source, Scope("acme", ("acme",)))  # one account: no column
    with pytest.raises(ConfigError, match="no column account; with several accounts"):
        curated.check_accounts(con, source, Scope("acme", both))
    sql = f"select count(*) from {curated.select_sql(source, 'acme')}"
    assert con.execute(sql) == [(3,)]


def test_models_over_every_account_are_read_for_the_run_account_alone() -> None:
    con = DuckDbEngine(duckdb.connect())
    both = ("acme", "globex")
    con.execute(
        "create schema staging; create view staging.ideas as "
        "select 'acme' as account, 'ide_1' as idea_idx "
        "union all select 'globex', 'ide_2'"
    )
    _record_build(con, None, {}, both)
    Scope("globex", both).check_models(con, "here", "feedback_globex")
    relation = Scope("globex", both).relation(con, "staging", "ideas")
    assert con.execute(f"select idea_idx from {relation} as i") == [("ide_2",)]
    assert Scope().relation(con, "staging", "ideas") == '"staging"."ideas"'
    assert Scope("globex", both).model(con, "comments") is None


def test_an_account_the_models_are_not_over_is_refused_not_diffed_with_nothing() -> None:
    """An account never synced when the models over every account were built has no rows
    in them: diffed with that, every curated row of its would look new."""
    con = DuckDbEngine(duckdb.connect())
    con.execute(
        "create schema staging; create view staging.ideas as "
        "select 'acme' as account, 'ide_1' as idea_idx"
    )
    both = ("acme", "globex")
    with pytest.raises(ConfigError, match="built over no"):
        Scope("acme", both).check_models(con, "here", "feedback_acme")  # no build recorded
    _record_build(con, None, {}, ["acme"])
    Scope("acme", both).check_models(con, "here", "feedback_acme")
    with pytest.raises(ConfigError) as refused:
        Scope("globex", both).check_models(con, "here", "feedback_globex")
    assert str(refused.value) == (
        "here: the models over every account are over acme, not account globex's: sync it "
        "first (its models are built after its sync), or run `feedback-sync models` after "
        "it synced"
    )


@pytest.mark.parametrize("quoted", [True, False])
def test_models_of_one_dataset_serve_only_the_account_whose_dataset_they_read(
    quoted: bool,
) -> None:
    con = DuckDbEngine(duckdb.connect())
    three = ("acme", "acme_eu", "globex")
    con.execute("create schema feedback_acme_eu; create table feedback_acme_eu.ideas (idx varchar)")
    source = '"feedback_acme_eu"."ideas"' if quoted else "feedback_acme_eu.ideas"
    con.execute(f"create schema staging; create view staging.ideas as select idx from {source}")
    Scope("acme_eu", three).check_models(con, "here", "feedback_acme_eu")
    for other in ("acme", "globex"):
        with pytest.raises(ConfigError) as refused:
            Scope(other, three).check_models(con, "here", f"feedback_{other}")
        assert str(refused.value).startswith(
            f"here: its models are not account {other}'s (staging.ideas does not read its "
            f"dataset feedback_{other}, and has no column account: built before the accounts "
            "were configured?)"
        )
    # read as they are: the relation is the view itself
    assert Scope("acme_eu", three).relation(con, "staging", "ideas") == '"staging"."ideas"'


@pytest.mark.slow
def test_postgres_reads_each_accounts_copy_and_journals_it_apart(
    project: Path,
    capsys: pytest.CaptureFixture[str],
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On PostgreSQL: models of one dataset serve its account alone (what they read asked
    of the database, whose connection prints a view without its dataset's schema); then,
    over every account, each account's rows of them; the rows read from a curated table;
    each account's journal its own schema of the database."""
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres_dsn)
    con = PostgresReader(postgres_dsn)
    with _server("acme") as acme, _server("globex") as globex, _inspect(acme, globex) as seen:
        urls = {"acme": acme.base_url, "globex": globex.base_url}
        _one_dataset_models_then_accounts(project, capsys, urls, "postgres")
        try:
            con.execute(
                "create schema curated; "
                "create table curated.topics (topic_key text, name text, account text); "
                "insert into curated.topics values ('roadmap', 'Acme roadmap', 'acme'), "
                "('roadmap', 'Globex roadmap', 'globex')"
            )
            code, out, err = _push(project, capsys, "--account", "globex", destination="postgres")
            assert code == 2, out + err
            assert "its models are not account globex's" in err
            code, out, err = _push(project, capsys, "--account", "acme", destination="postgres")
            assert code == 0, out + err
            assert "1 write(s) planned" in out

            _sync(project, capsys, destination="postgres")  # the models over every account
            for h in seen:
                h.mark_requests()
            code, out, err = _push(project, capsys, "--apply", destination="postgres")
            assert code == 0, out + err
            assert [len(writes(h)) for h in seen] == [1, 1]
            assert "Globex roadmap" in _topics(globex) and "Acme roadmap" not in _topics(globex)
            assert "Acme roadmap" in _topics(acme)
            schemas = con.execute(
                "select schema_name from information_schema.schemata "
                "where schema_name like 'push%' order by 1"
            )
            assert [r[0] for r in schemas] == ["push_acme", "push_globex"]
            for name in ("acme", "globex"):
                keys = con.execute(f"select target, key from push_{name}._push_snapshot")
                assert [tuple(r) for r in keys] == [("topics", "roadmap")]
        finally:
            con.close()
