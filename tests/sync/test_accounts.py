"""Several accounts in one project: configured the dlt way, each synced into a dataset of
its own by a process of its own, a failed one never stopping the others. The fixtures
``project`` and ``three`` are in ``conftest.py``."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from feedback_sync.api.accounts import load_account_settings
from feedback_sync.app.accounts import configured_accounts
from feedback_sync.app.cli import main
from feedback_sync.errors import ConfigError
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread

from tests.sync.accounts import (
    assert_account_equals_truth,
    configure_three,
    free_port,
    servers,
    write_settings,
)


def _files(project: Path) -> list[Path]:
    return [project / ".dlt" / "config.toml", project / ".dlt" / "secrets.toml"]


# --- configuration -------------------------------------------------------------------


def test_accounts_are_the_tables_of_both_files_then_the_listed_names(project: Path) -> None:
    write_settings(
        project,
        '[sources.feedback.accounts.acme]\nbase_url = "http://127.0.0.1:1/v1"\n'
        '[sources.feedback]\naccount_names = ["initech"]\n',
        '[sources.feedback.accounts.globex]\napi_key = "k"\n'
        '[sources.feedback.accounts.acme]\napi_key = "k"\n',
    )
    assert configured_accounts(_files(project), {}) == ("acme", "globex", "initech")
    environ = {"SOURCES__FEEDBACK__ACCOUNT_NAMES": '["hooli"]'}
    assert configured_accounts(_files(project), environ) == ("acme", "globex", "hooli")
    assert configured_accounts([], {}) == ()


@pytest.mark.parametrize("name", ["Acme", "a-b", "a__b", "_a", "a" * 33, "ümlaut"])
def test_a_bad_account_name_is_one_line_exit_2(
    project: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(project, f'[sources.feedback.accounts."{name}"]\nbase_url = "http://x/v1"\n')
    assert main(["sync", "--no-models"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"account name {name!r} must be 1 to 32 lower-case letters" in err[0]
    assert "config.toml" in err[0]


@pytest.mark.parametrize("name", ["staging", "acme_staging"])
def test_an_account_named_like_dlts_staging_dataset_is_refused(
    project: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``acme_staging`` would land in ``feedback_acme_staging``: dlt's own dataset of
    account acme, which its merges truncate."""
    write_settings(project, f'[sources.feedback.accounts.{name}]\nbase_url = "http://x/v1"\n')
    assert main(["sync", "--no-models"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"account name {name!r} may not be 'staging' or end in '_staging'" in err[0]


@pytest.mark.parametrize("dataset", ["staging", "marts", "push", "curated", "_feedback_sync"])
def test_a_dataset_named_like_a_schema_of_the_models_is_refused(
    project: Path, dataset: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sync", "--dataset", dataset]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--dataset may not be {dataset!r}" in err[0], err


def test_the_reserved_datasets_are_the_schemas_kept_beside_them() -> None:
    from feedback_sync.models.project import BUILD_SCHEMA, LAYERS
    from feedback_sync.push.curated import SCHEMA as CURATED
    from feedback_sync.push.journal import SCHEMA as JOURNAL
    from feedback_sync.warehouse.target import RESERVED_DATASETS

    assert set(RESERVED_DATASETS) == {*LAYERS, CURATED, JOURNAL, BUILD_SCHEMA}


def test_an_accounts_dataset_longer_than_an_identifier_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "a" * 32
    write_settings(project, f'[sources.feedback.accounts.{name}]\nbase_url = "http://x/v1"\n')
    assert main(["sync", "--no-models", "--dataset", "d" * 30]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"the dataset '{'d' * 30}_{name}' of account '{name}' is too long" in err[0]


def test_a_variable_for_an_account_not_configured_is_refused(project: Path) -> None:
    environ = {
        "SOURCES__FEEDBACK__ACCOUNT_NAMES": '["acme"]',
        "SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__BASE_URL": "http://x/v1",
    }
    with pytest.raises(ConfigError, match="names account 'globex', which is not configured"):
        configured_accounts([], environ)


def test_an_account_takes_what_it_leaves_out_from_the_source_section(project: Path) -> None:
    write_settings(
        project,
        "[sources.feedback]\npage_size = 33\n"
        '[sources.feedback.accounts.acme]\nbase_url = "http://127.0.0.1:1/v1"\n'
        '[sources.feedback.accounts.globex]\nbase_url = "http://127.0.0.1:2/v1"\n'
        "page_size = 12\n",
        '[sources.feedback.accounts.acme]\napi_key = "key-a"\n'
        '[sources.feedback.accounts.globex]\napi_key = "key-g"\n',
    )
    acme, globex = load_account_settings("acme"), load_account_settings("globex")
    assert (acme.base_url, acme.api_key, acme.page_size) == ("http://127.0.0.1:1/v1", "key-a", 33)
    assert (globex.base_url, globex.api_key, globex.page_size) == (
        "http://127.0.0.1:2/v1",
        "key-g",
        12,
    )


def test_an_account_never_takes_another_key(project: Path) -> None:
    """A key in [sources.feedback] would be sent to every account that has none: refused."""
    write_settings(
        project, '[sources.feedback.accounts.acme]\nbase_url = "http://127.0.0.1:1/v1"\n'
    )
    with pytest.raises(ConfigError, match=r"missing setting SOURCES__FEEDBACK__ACCOUNTS__ACME"):
        load_account_settings("acme")
    write_settings(
        project,
        '[sources.feedback.accounts.acme]\nbase_url = "http://127.0.0.1:1/v1"\n',
        '[sources.feedback]\napi_key = "shared"\n',
    )
    with pytest.raises(ConfigError, match=r"SOURCES__FEEDBACK__API_KEY .* is set, but accounts"):
        load_account_settings("acme")


def test_an_unknown_key_in_an_account_names_the_account_and_the_nearest(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(
        project,
        '[sources.feedback.accounts.acme]\nbase_url = "http://x/v1"\npage_sise = 5\n',
    )
    assert main(["sync", "--no-models"]) == 2
    err = capsys.readouterr().err
    assert "[sources.feedback.accounts.acme] page_sise is not a feedback-sync setting" in err
    assert "did you mean page_size?" in err


def test_account_without_accounts_and_an_unknown_account_are_usage_errors(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(project, "")
    assert main(["sync", "--account", "acme"]) == 2
    assert "--account acme: no accounts are configured" in capsys.readouterr().err
    write_settings(project, '[sources.feedback.accounts.acme]\nbase_url = "http://x/v1"\n')
    assert main(["sync", "--account", "globex"]) == 2
    assert "--account globex: no such account; configured: acme" in capsys.readouterr().err


# --- syncing several accounts ---------------------------------------------------------


def _sync(project: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    code = main(
        ["sync", "--no-models", "--pipelines-dir", str(project / "pipelines"), "--json", *extra]
    )
    out, err = capsys.readouterr()
    document = json.loads(out)
    return code, {**document, "_stderr": err}


@pytest.mark.slow
def test_a_failed_account_never_stops_the_others_and_a_rerun_lands_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    with servers() as (acme, globex):
        configure_three(project, acme, globex, port)
        code, document = _sync(project, capsys, "--parallel", "3")
        assert code == 1
        runs = document["accounts"]
        assert list(runs) == ["acme", "globex", "initech"]
        assert runs["acme"]["ok"] and runs["globex"]["ok"]
        assert not runs["initech"]["ok"] and runs["initech"]["exit_code"] != 0
        assert "initech" in document["error"]
        assert runs["initech"]["error"], runs["initech"]
        # the advice names the account's own variable, not the one-account project's
        assert "(SOURCES__FEEDBACK__ACCOUNTS__INITECH__BASE_URL)" in runs["initech"]["error"]
        # each healthy account landed exactly its own server's data, in its own dataset
        assert_account_equals_truth(project, acme, "acme")
        assert_account_equals_truth(project, globex, "globex")
        # the progress of each account is relayed, named; no key of one in another's lines
        err = document["_stderr"]
        assert "[acme] " in err and "[globex] " in err and "[initech] " in err
        for line in err.splitlines():
            for key in ("acme-key-1234", "globex-key-5678", "initech-key-9999"):
                assert key not in line
        first_requests = {name: runs[name]["requests"] for name in ("acme", "globex")}

        # the third account's server comes back; the rerun lands it, and the others make a
        # normal sync (a fraction of their first run's requests)
        with serve_in_thread(create_app("tiny", 3, api_key="initech-key-9999"), port=port) as back:
            code, document = _sync(project, capsys)
            assert code == 0, document["accounts"]
            runs = document["accounts"]
            assert all(run["ok"] for run in runs.values())
            for name in ("acme", "globex"):
                assert not runs[name]["result"]["full"]
                assert runs[name]["requests"] < first_requests[name] / 2
            assert_account_equals_truth(project, back, "initech")
            assert_account_equals_truth(project, acme, "acme")
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        schemas = {
            row[0]
            for row in con.execute("select schema_name from information_schema.schemata").fetchall()
        }
    assert {"feedback_acme", "feedback_globex", "feedback_initech"} <= schemas
    assert "feedback" not in schemas


def _text_sync(
    project: Path, capsys: pytest.CaptureFixture[str], *accounts: str
) -> tuple[int, str]:
    """A sync of ``accounts`` as a person runs it: its exit code and its text."""
    picked = [arg for name in accounts for arg in ("--account", name)]
    code = main(
        [
            *("sync", "--no-models", "--pipelines-dir", str(project / "pipelines")),
            *(*picked, "--progress", "off"),
        ]
    )
    return code, capsys.readouterr().out


@pytest.mark.slow
def test_one_account_chosen_runs_in_this_process_with_a_readable_summary(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _text_sync(project, capsys, "globex")
    assert code == 0
    assert "dataset feedback_globex" in out
    assert_account_equals_truth(project, three[1], "globex")
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        count = con.execute(
            "select count(*) from information_schema.schemata "
            "where schema_name like 'feedback_%' and schema_name not like '%staging'"
        ).fetchone()
    assert count == (1,)


@pytest.mark.slow
def test_the_text_summary_has_one_line_per_account(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _text_sync(project, capsys, "acme", "initech")
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[0].startswith("sync of 2 accounts into DuckDB")
    assert lines[1].split()[:2] == ["acme", "ok"]
    assert lines[2].split()[:2] == ["initech", "failed"]
    assert lines[3].startswith("1 of 2 accounts synced in ")
    assert "failed: initech" in lines[3]


def test_each_account_has_its_own_dataset_identity_and_parquet_folder(tmp_path: Path) -> None:
    from feedback_sync.warehouse.target import make_target

    duck = make_target("duckdb", duckdb_path=tmp_path / "w.duckdb")
    acme, globex = duck.for_account("acme"), duck.for_account("globex")
    assert (acme.dataset, globex.dataset) == ("feedback_acme", "feedback_globex")
    assert acme.writer_file() == globex.writer_file() == tmp_path / "w.duckdb"
    assert len({duck.identity(), acme.identity(), globex.identity()}) == 3
    parquet = make_target("parquet", parquet_dir=tmp_path / "pq").for_account("acme")
    assert parquet.dataset == "feedback_acme"
    assert parquet.parquet_dir == tmp_path / "pq" / "acme"  # type: ignore[attr-defined]
    assert (
        parquet.writer_file() != make_target("parquet", parquet_dir=tmp_path / "pq").writer_file()
    )
