"""``--json`` on status, sync, push and check: one document on stdout, keys pinned, the
same facts as the text, progress and errors on stderr; and an unexpected error as one line
with its trace in a file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from feedback_sync import __version__
from feedback_sync.app import cli
from feedback_sync.models.project import load_project
from feedback_sync.package_data import package_path
from feedback_sync.sandbox.server import RunningSandbox

from tests.support.cli import CLI, cli_env

ENVELOPE = ["format", "version", "command", "ok", "exit_code", "error"]
SYNC_KEYS = [
    *ENVELOPE,
    "target",
    "full",
    "seconds",
    "phases",
    "requests",
    "retries",
    "requests_by_resource",
    "delete_mode",
    "load_id",
    "recovered_packages",
    "tables",
    "history",
    "rejected_items",
    "resources_read_completely",
    "unchanged_rows",
    "ideas_endpoint",
    "skipped_ideas",
    "parquet_files_written",
    "models",
]
STATUS_KEYS = [*ENVELOPE, "target", "pipeline", "committed", "last_load", "loads", "resources"]
STATUS_KEYS += ["tables"]
PUSH_KEYS = [
    *ENVELOPE,
    "applied",
    "where",
    "run_id",
    "seconds",
    "reads",
    "writes",
    "retries",
    "planned_writes",
    "totals",
    "targets",
    "skipped",
    "custom_attributes_disabled",
]
PUSH_TARGET_KEYS = ["name", "mode", "counts", "refused", "notes", "recovered", "samples"]
PUSH_TARGET_KEYS += ["more_changes", "problems", "more_problems"]
SAMPLE_KEYS = ["action", "key", "label", "idx", "outcome", "changes", "request"]
ACTIONS = ["create", "update", "delete", "unchanged", "invalid", "rejected", "held"]
CHECK_KEYS = [*ENVELOPE, "seconds", "checks"]


def _json(cwd: Path, env: dict[str, str], *args: str, code: int = 0) -> dict[str, Any]:
    done = subprocess.run(
        [*CLI, *args, "--json"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == code, done.stdout + done.stderr
    document: dict[str, Any] = json.loads(done.stdout)  # the whole of stdout, nothing else
    assert document["format"] == 1 and document["version"] == __version__
    assert document["command"] == args[0]
    assert document["exit_code"] == code and document["ok"] is (code == 0)
    return document


@pytest.mark.slow
def test_sync_status_push_and_check_documents(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    env = cli_env(live_sandbox, tmp_path)
    dump = httpx.get(live_sandbox.base_url.removesuffix("/v1") + "/_sandbox/dump").json()

    check = _json(tmp_path, env, "check")
    assert list(check) == CHECK_KEYS and check["error"] is None
    assert [c["name"] for c in check["checks"]] == [
        "settings",
        "api",
        "history",
        "warehouse",
        "models",
        "push",
    ]
    assert all(list(c) == ["name", "ok", "detail", "bad_configuration"] for c in check["checks"])
    assert all(c["ok"] for c in check["checks"])

    synced = _json(tmp_path, env, "sync", "--full")
    assert list(synced) == SYNC_KEYS
    assert synced["full"] is True and synced["error"] is None
    assert list(synced["phases"])[:3] == ["start", "fetch", "load"]
    assert synced["requests"] == sum(synced["requests_by_resource"].values()) > 0
    followers = synced["tables"]["followers"]
    assert list(followers) == ["rows_before", "loaded", "added", "updated", "removed", "rows"]
    assert followers["rows"] == followers["loaded"] == len(dump["followers"])
    assert (followers["rows_before"], followers["updated"]) == (0, 0)
    assert followers["added"] == followers["loaded"]
    assert synced["tables"]["topics"]["rows"] == len(dump["topics"])
    # the first sync began one version per idea
    assert synced["history"]["ideas_history"] == {
        "versions_begun": len(dump["ideas"]),
        "versions_ended": 0,
    }
    assert list(synced["models"]) == [
        "built",
        "mart_rows",
        "reused_from",
        "missing_sources",
        "tests",
        "accounts",
        "unsynced_accounts",
    ]
    # a project of one account: its models are over no accounts
    assert synced["models"]["accounts"] == synced["models"]["unsynced_accounts"] == []
    with duckdb.connect(str(tmp_path / "data" / "warehouse.duckdb"), read_only=True) as con:
        for mart, rows in synced["models"]["mart_rows"].items():
            ((count,),) = con.execute(f"select count(*) from marts.{mart}").fetchall()
            assert count == rows, mart
    # every mart's data tests, all passed, as many as the project declares
    tests = synced["models"]["tests"]
    assert set(tests) == set(synced["models"]["mart_rows"])
    assert all(t["failed"] == [] and t["passed"] > 0 for t in tests.values())
    assert sum(t["passed"] for t in tests.values()) == len(load_project().tests)

    status = _json(tmp_path, env, "status")
    assert list(status) == STATUS_KEYS
    assert status["committed"] is True and status["loads"] == 1
    assert status["tables"]["followers"] == len(dump["followers"])
    assert set(synced["requests_by_resource"]) <= set(status["resources"])
    text = subprocess.run(
        [*CLI, "status"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    ).stdout
    for table, rows in status["tables"].items():  # the text's table says the same
        assert f"  {table} " in text and f"{rows:,}" in text, table
    for resource, facts in status["resources"].items():
        assert facts["resumes"] in text, resource
    assert status["resources"]["followers"]["reading"] == "cursor"
    assert status["resources"]["followers"]["cursor_saved"] is True
    assert status["resources"]["announcements"]["published_high_water"]

    shutil.copytree(package_path("examples", "curated"), tmp_path / "data" / "curated")
    preview = _json(tmp_path, env, "push")
    assert list(preview) == PUSH_KEYS and preview["applied"] is False
    assert list(preview["totals"]) == ACTIONS
    by_name = {t["name"]: t for t in preview["targets"]}
    assert all(list(t) == PUSH_TARGET_KEYS for t in by_name.values())
    follower_target = by_name["followers"]
    assert (
        preview["planned_writes"]
        == sum(
            t["counts"][a]
            for t in preview["targets"]
            for a in ("create", "update", "delete")
            if not t["refused"]
        )
        > 0
    )
    sample = follower_target["samples"][0]
    assert list(sample) == SAMPLE_KEYS
    assert sample["request"]["method"] in ("POST", "PUT", "PATCH", "DELETE")
    assert sample["request"]["path"].startswith("/")

    applied = _json(tmp_path, env, "push", "--apply")
    assert applied["applied"] is True and applied["writes"] > 0
    after = httpx.get(live_sandbox.base_url.removesuffix("/v1") + "/_sandbox/dump").json()
    assert "noahchen2@acme.test" in {f["email"] for f in after["followers"]}
    again = _json(tmp_path, env, "push")
    assert again["planned_writes"] == 0


def test_a_refused_run_writes_the_envelope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad arguments and bad settings: the one line on stderr, the envelope on stdout."""
    assert cli.main(["status", "--json", "--wait", "5"]) == 2  # status has no --wait
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert list(document) == ENVELOPE
    assert document["command"] == "status" and document["exit_code"] == 2
    assert document["error"] == "unrecognized arguments: --wait 5"
    assert "unrecognized arguments: --wait 5" in err

    assert cli.main(["push", "--json", "--destination", "duckbd"]) == 2
    out, err = capsys.readouterr()
    document = json.loads(out)
    assert document["ok"] is False and "duckdb" in document["error"]
    assert err.count("\n") == 1 and document["error"] in err


def test_an_unexpected_error_is_one_line_and_a_trace_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FEEDBACK_SYNC_ERROR_DIR", str(tmp_path / "errors"))
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", "sk-live-0123456789")

    def broken(args: Any) -> int:
        raise RuntimeError(
            "nobody foresaw this: postgresql://loader:hunter22@db/x key sk-live-0123456789"
        )

    monkeypatch.setattr(cli, "_run_status", broken)
    assert cli.main(["status", "--json"]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1, err  # one line, no traceback
    assert err.startswith("feedback-sync status: error: unexpected RuntimeError: nobody")
    assert "hunter22" not in err and "sk-live-0123456789" not in err
    (trace,) = (tmp_path / "errors").iterdir()
    assert str(trace) in err
    assert json.loads(out)["error"] == err.removeprefix("feedback-sync status: error: ").strip()
    text = trace.read_text()
    assert "Traceback (most recent call last)" in text and "in broken" in text
    assert f"feedback-sync {__version__}" in text
    assert "hunter22" not in text and "sk-live-0123456789" not in text
    assert oct(trace.stat().st_mode & 0o777) == "0o600"


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """``status --json | true``: the pipe closes before the document is written; the
    command stops with the shell's SIGPIPE code, and no traceback."""
    process = subprocess.Popen(
        [*CLI, "status", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if not k.startswith("DESTINATION__")},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before anything was written
    err = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 141, err
    assert err == ""
