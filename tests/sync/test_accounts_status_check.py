"""``status`` and ``check`` with several accounts: each account's section or lines, named;
a bad account named and the others still checked; nothing of a project without accounts
changed (``test_check.py``, ``test_json_output.py``). The fixtures ``project`` and
``three`` are in ``conftest.py``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from feedback_sync.app.cli import main
from feedback_sync.sandbox.server import RunningSandbox

from tests.sync.accounts import INITECH_KEY, write_settings

LINE = re.compile(r"check: (\w+(?: \[\w+\])?) +(ok|FAILED) +(.*)")
ACCOUNTS = ("acme", "globex", "initech")
STATUS_FIELDS = ["target", "pipeline", "committed", "last_load", "loads", "resources", "tables"]
WRONG_KEY = "not-globex-key-4711"


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _lines(out: str) -> dict[str, tuple[str, str]]:
    """check label (``api [acme]``) -> (ok | FAILED, what it said), in the order printed."""
    found = {}
    for line in out.splitlines():
        if line.startswith("check: "):
            matched = LINE.fullmatch(line)
            assert matched, line
            found[matched[1]] = (matched[2], matched[3])
    return found


def _labels(*accounts: str) -> list[str]:
    per_account = [f"{check} [{a}]" for a in accounts for check in ("settings", "api", "history")]
    return ["settings", *per_account, "warehouse", "models", "push"]


def _served(server: RunningSandbox) -> list[tuple[str, int]]:
    """The API requests ``server`` answered: (path, status)."""
    log = httpx.get(f"{server.root_url}/_sandbox/requests").json()["requests"]
    return [(e["path"], e["status"]) for e in log if e["path"].startswith("/v1/")]


def _wrong_key_for_globex(project: Path) -> None:
    config = (project / ".dlt" / "config.toml").read_text()
    secrets = (project / ".dlt" / "secrets.toml").read_text()
    write_settings(project, config, secrets.replace("globex-key-5678", WRONG_KEY))


def test_check_has_lines_per_account_and_names_the_bad_ones(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    """acme is good, globex's key is wrong, initech's server is down: every account is
    checked, each line names its account, and the run exits 1."""
    _wrong_key_for_globex(project)
    code, out, err = _check(capsys)
    assert code == 1, out + err
    lines = _lines(out)
    assert list(lines) == _labels(*ACCOUNTS)
    failed = {label for label, (state, _) in lines.items() if state == "FAILED"}
    assert failed == {"api [globex]", "api [initech]"}, out
    assert lines["api [acme]"][1].endswith("with the key accepted")
    assert lines["settings [acme]"][1] == f"{three[0].base_url} (bearer authentication)"
    said = lines["api [globex]"][1]
    assert said.startswith("the API refused the key (HTTP 401")
    assert "[sources.feedback.accounts.globex]" in said
    assert "SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__API_KEY" in said
    said = lines["api [initech]"][1]
    assert said.startswith("no connection to http://127.0.0.1:") and "connection refused" in said
    assert "SOURCES__FEEDBACK__ACCOUNTS__INITECH__BASE_URL" in said
    assert "SOURCES__FEEDBACK__BASE_URL" not in said  # no setting of a project of one
    assert lines["settings"][1].endswith(
        "3 accounts checked, each on its own lines: " + ", ".join(ACCOUNTS)
    )
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith("2 of 13 checks failed (api [globex], api [initech]) in ")
    )
    for key in (three[0].api_key, three[1].api_key, WRONG_KEY, INITECH_KEY):
        assert key not in out + err
    # each account asked its own server, once
    assert _served(three[0]) == [("/v1/statuses", 200)]
    assert _served(three[1]) == [("/v1/statuses", 401)]


def test_check_json_names_each_check_and_its_account(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _check(capsys, "--json")
    assert code == 1
    document: dict[str, Any] = json.loads(out)
    assert document["exit_code"] == 1 and document["ok"] is False
    assert document["error"] == "1 of 13 checks failed (api [initech])"
    checks = document["checks"]
    assert all(list(c) == ["name", "ok", "detail", "bad_configuration", "account"] for c in checks)
    named = [c["name"] if c["account"] is None else f"{c['name']} [{c['account']}]" for c in checks]
    assert named == _labels(*ACCOUNTS)
    assert [c["account"] for c in checks if not c["ok"]] == ["initech"]


def test_check_account_picks_some(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _check(capsys, "--account", "globex", "--account", "acme")
    assert code == 0, out + err
    assert list(_lines(out)) == _labels("acme", "globex")  # in the order configured
    assert out.strip().splitlines()[-1].startswith("all 10 checks passed in ")
    code, out, err = _check(capsys, "--account", "hooli")
    assert code == 2 and out == ""
    assert err.strip() == (
        "feedback-sync check: error: --account hooli: no such account; configured: "
        "acme, globex, initech"
    )


def test_check_names_each_account_setting_and_still_checks_the_others(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    """globex has no key and initech a malformed page size: both are named under their
    account's table (exit 2), and acme is still asked."""
    config = (project / ".dlt" / "config.toml").read_text()
    secrets = (project / ".dlt" / "secrets.toml").read_text()
    kept = "\n".join(line for line in secrets.splitlines() if "globex-key" not in line)
    write_settings(project, config + 'page_size = "lots"\n', kept)  # initech's table is last
    code, out, err = _check(capsys)
    assert code == 2, out + err
    lines = _lines(out)
    assert lines["settings [globex]"] == (
        "FAILED",
        "missing setting SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__API_KEY (api_key in "
        "[sources.feedback.accounts.globex]): set it in .dlt/secrets.toml or the environment",
    )
    assert lines["api [globex]"] == ("FAILED", "not asked: the settings are not valid")
    state, said = lines["settings [initech]"]
    assert state == "FAILED"
    assert said.startswith(
        "SOURCES__FEEDBACK__ACCOUNTS__INITECH__PAGE_SIZE (page_size in "
        "[sources.feedback.accounts.initech]) must be an integer"
    )
    assert lines["api [acme]"][0] == lines["settings"][0] == lines["warehouse"][0] == "ok"


def test_check_refuses_a_shared_key_for_every_account_and_sends_it_nowhere(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    config = (project / ".dlt" / "config.toml").read_text()
    secrets = (project / ".dlt" / "secrets.toml").read_text()
    write_settings(project, config, secrets + '[sources.feedback]\napi_key = "shared-key-2468"\n')
    code, out, err = _check(capsys)
    assert code == 2
    lines = _lines(out)
    for account in ACCOUNTS:
        state, said = lines[f"settings [{account}]"]
        assert state == "FAILED"
        assert said.startswith("SOURCES__FEEDBACK__API_KEY (api_key in [sources.feedback]) is set")
        assert lines[f"api [{account}]"] == ("FAILED", "not asked: the settings are not valid")
    assert _served(three[0]) == _served(three[1]) == []
    assert "shared-key-2468" not in out + err


def test_status_account_without_accounts_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(project, "")
    assert main(["status", "--account", "acme"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == (
        "feedback-sync status: error: --account acme: no accounts are configured (one table "
        "per account under [sources.feedback.accounts], or SOURCES__FEEDBACK__ACCOUNT_NAMES)"
    )


def test_status_of_accounts_still_reads_without_dlt(project: Path) -> None:
    """``status`` finds the accounts in the settings files with the standard library and
    reads each dataset's DuckDB tables without dlt, as it does for one account."""
    write_settings(project, "[sources.feedback.accounts.acme]\n[sources.feedback.accounts.bo]\n")
    probe = (
        "import sys\nfrom feedback_sync.app.cli import main\ncode = main(['status'])\n"
        "print(code, 'dlt' in sys.modules, 'httpx' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "0 False False"
    assert [line.split(":")[0] for line in lines[:-1] if line] == ["account acme", "account bo"]


def _landed(project: Path, dataset: str) -> dict[str, int]:
    """The rows of each table of ``dataset``, counted here."""
    with duckdb.connect(str(project / "data" / "warehouse.duckdb"), read_only=True) as con:
        tables = con.execute(
            "select table_name from information_schema.tables where table_schema = ? "
            "and table_name not like '\\_dlt%' escape '\\'",
            [dataset],
        ).fetchall()
        return {
            table: con.execute(f'select count(*) from "{dataset}"."{table}"').fetchone()[0]  # type: ignore[index]
            for (table,) in tables
        }


def _table_rows(section: list[str]) -> dict[str, int]:
    """The table of rows of one account's section of the text."""
    start = next(i for i, line in enumerate(section) if line.split() == ["table", "rows"])
    return {
        line.split()[0]: int(line.split()[1].replace(",", ""))
        for line in section[start + 1 :]
        if line.strip()
    }


def _sections(out: str) -> dict[str, list[str]]:
    """account -> the lines of its section, from the line naming it."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("account "):
            found[line.split()[1].rstrip(":")] = [line]
        elif line.strip():
            list(found.values())[-1].append(line)
    return found


@pytest.mark.slow
def test_status_shows_each_account_synced_and_the_one_never_synced(
    project: Path, three: tuple[RunningSandbox, RunningSandbox], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            *("sync", "--no-models", "--pipelines-dir", str(project / "pipelines")),
            *("--account", "acme", "--account", "globex", "--progress", "off"),
        ]
    )
    assert code == 0, capsys.readouterr()
    capsys.readouterr()
    landed = {account: _landed(project, f"feedback_{account}") for account in ("acme", "globex")}
    assert landed["acme"]["ideas"] > 0 and landed["acme"] != landed["globex"]

    assert main(["status"]) == 0
    out = capsys.readouterr().out
    sections = _sections(out)
    assert list(sections) == list(ACCOUNTS)
    for account in ("acme", "globex"):
        heading = sections[account][0]
        assert heading.startswith(f"account {account}: DuckDB data/warehouse.duckdb ")
        assert f"(dataset feedback_{account})" in heading
        assert sections[account][1].endswith("(1 loads in all)")
        assert _table_rows(sections[account]) == landed[account]
    assert sections["initech"] == [
        "account initech: never synced: no sync has been committed in DuckDB "
        "data/warehouse.duckdb (dataset feedback_initech); its first run reads everything"
    ]

    assert main(["status", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert list(document) == [
        "format",
        "version",
        "command",
        "ok",
        "exit_code",
        "error",
        "accounts",
    ]
    assert list(document["accounts"]) == list(ACCOUNTS)
    for account, status in document["accounts"].items():
        assert list(status) == STATUS_FIELDS
        assert status["target"].endswith(f"(dataset feedback_{account})")
    for account in ("acme", "globex"):
        status = document["accounts"][account]
        assert status["committed"] is True and status["loads"] == 1
        assert status["tables"] == landed[account]
        assert status["resources"]["followers"]["cursor_saved"] is True
    never = document["accounts"]["initech"]
    assert (never["committed"], never["resources"], never["tables"]) == (False, None, {})

    assert main(["status", "--account", "globex", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["accounts"]) == ["globex"]
