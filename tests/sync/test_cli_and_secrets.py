"""``feedback-sync sync`` / ``status`` as a user runs them, bad settings, and the API key's
absence from everything a run leaves behind."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.errors import ConfigError
from feedback_sync.sandbox.server import RunningSandbox

from tests.push.helpers import accounts, push, write_csv
from tests.support.cli import said_lines
from tests.sync.harness import Harness

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


def _env(server: RunningSandbox | None, tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    if server is not None:
        env["SOURCES__FEEDBACK__BASE_URL"] = server.base_url
        env["SOURCES__FEEDBACK__API_KEY"] = server.api_key
    env["DESTINATION__DUCKDB__CREDENTIALS"] = str(tmp / "warehouse.duckdb")
    return {**env, **extra}


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--pipelines-dir", str(cwd / "pipelines")],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_sync_then_status(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    env = _env(live_sandbox, tmp_path)
    done = _cli(["sync", "--progress-every", "0.05"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "sync into DuckDB" in done.stdout and "requests" in done.stdout
    assert "followers" in done.stdout and "comments__attachments" in done.stdout
    assert "rows fetched" in done.stderr  # progress lines while it ran
    status = _cli(["status"], env, tmp_path)
    assert status.returncode == 0, status.stderr
    assert "resumes after the saved cursor" in status.stdout
    assert "ideas tracked" in status.stdout
    counts = dict(
        duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True)
        .execute("select 'followers', count(*) from feedback.followers")
        .fetchall()
    )
    assert f"{counts['followers']:>10,}".strip() in status.stdout


def test_status_before_any_sync(tmp_path: Path) -> None:
    status = _cli(["status"], _env(None, tmp_path), tmp_path)
    assert status.returncode == 0, status.stderr
    assert "no sync has been committed here yet" in status.stdout


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"SOURCES__FEEDBACK__BASE_URL": ""}, "SOURCES__FEEDBACK__BASE_URL"),
        ({"SOURCES__FEEDBACK__BASE_URL": "ftp://x/v1"}, "SOURCES__FEEDBACK__BASE_URL"),
        ({"SOURCES__FEEDBACK__API_KEY": ""}, "SOURCES__FEEDBACK__API_KEY"),
        ({"SOURCES__FEEDBACK__PAGE_SIZE": "500"}, "SOURCES__FEEDBACK__PAGE_SIZE"),
        ({"SOURCES__FEEDBACK__PAGE_SIZE": "ten"}, "SOURCES__FEEDBACK__PAGE_SIZE"),
        ({"SOURCES__FEEDBACK__AUTH_METHOD": "digest"}, "SOURCES__FEEDBACK__AUTH_METHOD"),
        ({"SOURCES__FEEDBACK__MAX_CONCURRENCY": "0"}, "SOURCES__FEEDBACK__MAX_CONCURRENCY"),
        (
            {"SOURCES__FEEDBACK__REQUESTS_PER_SECOND": "fast"},
            "SOURCES__FEEDBACK__REQUESTS_PER_SECOND",
        ),
        (
            {"SOURCES__FEEDBACK__INTEGRATION_TYPES": '["ok", 3]'},
            "SOURCES__FEEDBACK__INTEGRATION_TYPES",
        ),
        (
            {"SOURCES__FEEDBACK__ANNOUNCEMENT_LOOKBACK_DAYS": "-1"},
            "SOURCES__FEEDBACK__ANNOUNCEMENT_LOOKBACK_DAYS",
        ),
        ({"SOURCES__FEEDBACK__DELETE_MODE": "maybe"}, "SOURCES__FEEDBACK__DELETE_MODE"),
    ],
)
def test_bad_settings_fail_at_start_naming_the_setting(
    live_sandbox: RunningSandbox, tmp_path: Path, extra: dict[str, str], named: str
) -> None:
    env = _env(live_sandbox, tmp_path, **extra)
    done = _cli(["sync"], env, tmp_path)
    assert done.returncode == 2
    assert named in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "warehouse.duckdb").exists()  # nothing written


@pytest.mark.slow
def test_settings_from_config_toml(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / "config.toml").write_text(
        f'[sources.feedback]\nbase_url = "{live_sandbox.base_url}"\npage_size = 9\n'
        'integration_types = ["zendesk", "jira"]\n'
    )
    (tmp_path / ".dlt" / "secrets.toml").write_text(
        f'[sources.feedback]\napi_key = "{live_sandbox.api_key}"\n'
    )
    env = _env(None, tmp_path)
    done = _cli(["sync", "--resources", "integration_links"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    requests = live_sandbox.app.state.log.since(0)
    links = [r for r in requests if r.path == "/v1/integration-links"]
    assert {"type=zendesk", "type=jira"} <= {
        part for r in links for part in r.query.split("&") if part.startswith("type=")
    }
    assert all("limit=9" in r.query for r in links)


@pytest.mark.slow
def test_unknown_resource_and_bad_destination_are_usage_errors(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    env = _env(live_sandbox, tmp_path)
    done = _cli(["sync", "--resources", "followers,polls"], env, tmp_path)
    assert done.returncode == 2 and "'polls'" in done.stderr
    env["DESTINATION__DUCKDB__CREDENTIALS"] = str(tmp_path / "feedback.duckdb")
    done = _cli(["sync"], env, tmp_path)
    assert done.returncode == 2 and "named like the dataset" in done.stderr


def test_wrong_key_exits_1_with_one_readable_line(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    env = _env(live_sandbox, tmp_path, SOURCES__FEEDBACK__API_KEY="not-the-key")
    done = _cli(["sync"], env, tmp_path)
    assert done.returncode == 1
    assert "HTTP 401" in done.stderr and "unauthenticated" in done.stderr
    assert "Traceback" not in done.stderr and "not-the-key" not in done.stderr


@pytest.mark.parametrize(
    ("url", "allowed", "refused"),
    [
        ("http://feedback.example.com/v1", None, True),
        ("http://10.0.0.5:8000/v1", None, True),
        ("http://feedback.example.com/v1", "true", False),
        ("http://127.0.0.1:8000/v1", None, False),
        ("http://localhost:8000/v1", None, False),
        ("http://[::1]:8000/v1", None, False),
        ("https://feedback.example.com/v1", None, False),
    ],
)
def test_plain_http_to_another_machine_is_refused_unless_allowed(
    url: str, allowed: str | None, refused: bool
) -> None:
    extra = {} if allowed is None else {"allow_insecure_http": allowed}
    if not refused:
        assert FeedbackSettings.validate(base_url=url, api_key="k", **extra).base_url == url
        return
    with pytest.raises(ConfigError) as failure:
        FeedbackSettings.validate(base_url=url, api_key="k", **extra)
    message = str(failure.value)
    assert "unencrypted" in message and "SOURCES__FEEDBACK__ALLOW_INSECURE_HTTP" in message


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "https://feedback.example.com",
            "must end with the API's version segment /v1, as in "
            "https://feedback.example.com/v1; got 'https://feedback.example.com'",
        ),
        (
            "https://feedback.example.com/api/",
            "as in https://feedback.example.com/api/v1; got 'https://feedback.example.com/api'",
        ),
        (
            "https://feedback.example.com/v2",
            "names API version v2; feedback-sync speaks v1 (https://feedback.example.com/v1)",
        ),
    ],
)
def test_a_base_url_without_the_version_segment_is_refused(url: str, said: str) -> None:
    """The spec's base address ends with /v1; without it every request would be a 404."""
    with pytest.raises(ConfigError) as failure:
        FeedbackSettings.validate(base_url=url, api_key="k")
    assert str(failure.value).startswith("SOURCES__FEEDBACK__BASE_URL (base_url in ")
    assert said in str(failure.value)


def test_a_base_url_without_the_version_is_one_line_at_the_command(tmp_path: Path) -> None:
    env = _env(
        None,
        tmp_path,
        SOURCES__FEEDBACK__BASE_URL="http://127.0.0.1:9/api",
        SOURCES__FEEDBACK__API_KEY="k",
    )
    done = _cli(["sync"], env, tmp_path)
    assert done.returncode == 2
    assert said_lines(done.stderr) == [
        "feedback-sync sync: error: SOURCES__FEEDBACK__BASE_URL (base_url in "
        "[sources.feedback]) must end with the API's version segment /v1, as in "
        "http://127.0.0.1:9/api/v1; got 'http://127.0.0.1:9/api'"
    ]
    assert not list(tmp_path.rglob("*.lock")) and not (tmp_path / "data").exists()


def test_allow_insecure_http_must_be_a_flag() -> None:
    with pytest.raises(ConfigError, match=r"ALLOW_INSECURE_HTTP.*true or false"):
        FeedbackSettings.validate(
            base_url="http://feedback.example.com/v1", api_key="k", allow_insecure_http="yes"
        )


def test_settings_repr_hides_the_key() -> None:
    settings = FeedbackSettings.validate(base_url="https://x/v1", api_key="hush-123")
    assert "hush-123" not in repr(settings) and "hush-123" not in str(settings)
    with pytest.raises(ConfigError) as failure:
        FeedbackSettings.validate(base_url="https://x/v1", api_key=" hush-123\n")
    assert "hush-123" not in str(failure.value)


@pytest.mark.parametrize("auth_method", ["query", "bearer", "basic"])
@pytest.mark.slow
def test_the_key_is_nowhere_a_run_leaves_anything(
    harness: Harness, caplog: pytest.LogCaptureFixture, tmp_path: Path, auth_method: str
) -> None:
    key = harness.server.api_key
    # query auth puts the key in every URL; faults make the client log retries with URLs
    harness.switches(faults={"rate": 0.1, "seed": 3, "kinds": ["500", "429", "truncate"]})
    with caplog.at_level(logging.DEBUG):
        harness.sync(full=True, auth_method=auth_method)
        harness.sync(auth_method=auth_method, destination="parquet")
        # the push journal lives in the warehouse: its payloads and messages too
        write_csv(tmp_path / "curated" / "accounts.csv", accounts(harness.dump(), n=2))
        pushed = push(harness, tmp_path / "curated", apply=True, auth_method=auth_method)
    assert pushed.writes > 0 and key not in pushed.report()
    assert any("retry" in r.getMessage() for r in caplog.records)
    # the key as sent, and as the basic method's header carries it
    encoded = base64.b64encode(f"{key}:".encode()).decode()
    for secret in (key, encoded):
        assert secret not in caplog.text and secret not in harness.last_output
        for path in harness.tmp.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    if auth_method == "query":
        assert "api_key=***" in caplog.text
    for path in harness.tmp.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    for con in harness.connect():
        tables = con.execute(
            "select table_schema, table_name, column_name from information_schema.columns "
            "where data_type in ('VARCHAR', 'JSON')"
        ).fetchall()
        for schema, table, column in tables:
            hits = con.execute(
                f'select count(*) from "{schema}"."{table}" where "{column}"::varchar like ?',
                [f"%{key}%"],
            ).fetchone()
            assert hits == (0,), f"{schema}.{table}.{column}"


@pytest.mark.slow
def test_a_second_writer_on_the_duckdb_file_fails_clearly(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    env = _env(live_sandbox, tmp_path)
    assert _cli(["sync", "--resources", "topics"], env, tmp_path).returncode == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(60)",
            str(tmp_path / "warehouse.duckdb"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        done = _cli(["sync", "--resources", "topics"], env, tmp_path)
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert done.returncode == 1
    assert "in use by another process" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "duckbd",
            "--destination 'duckbd' is not a destination feedback-sync knows (did you "
            "mean duckdb?); the names are duckdb, parquet, postgres, delta, athena, bigquery, ",
        ),
        (
            "nosuch",
            "--destination 'nosuch' is not a destination feedback-sync knows; the "
            "names are duckdb, parquet, postgres, delta, ",
        ),
        (
            "filesystem",
            "--destination filesystem: dlt's filesystem destination is not a SQL "
            "database, which feedback-sync needs to replace child rows and remove deletes (use "
            "--destination parquet or delta for files)",
        ),
    ],
)
@pytest.mark.parametrize("command", ["sync", "status", "push"])
def test_an_unknown_destination_is_one_line_naming_the_valid_ones(
    live_sandbox: RunningSandbox, tmp_path: Path, command: str, name: str, said: str
) -> None:
    done = _cli([command, "--destination", name], _env(live_sandbox, tmp_path), tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"feedback-sync {command}: error: {said}"), lines
    # refused before anything: no lock file, no working folder, no warehouse
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_refused_connection_fails_fast_with_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    env = _env(None, tmp_path, SOURCES__FEEDBACK__BASE_URL=base, SOURCES__FEEDBACK__API_KEY="k-123")
    done = _cli(["sync", "--progress-every", "3600"], env, tmp_path)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("feedback-sync sync:")]
    assert len(errors) == 1, done.stderr
    assert (
        f"no connection to {base} in 3 attempts (could not connect: connection refused)"
        in (errors[0])
    )
    assert "Traceback" not in done.stderr and "k-123" not in done.stdout + done.stderr
    assert not (tmp_path / "warehouse.duckdb").exists() or _no_data(tmp_path)


@pytest.mark.slow
def test_an_unknown_host_fails_fast_with_one_line(tmp_path: Path) -> None:
    # .invalid never resolves (RFC 6761): a resolver answers at once, with or without network
    base = "https://feedback-api.nosuch.invalid/v1"
    env = _env(None, tmp_path, SOURCES__FEEDBACK__BASE_URL=base, SOURCES__FEEDBACK__API_KEY="k-12")
    done = _cli(["sync", "--progress-every", "3600"], env, tmp_path)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("feedback-sync sync:")]
    assert len(errors) == 1, done.stderr
    assert f"no connection to {base} in 3 attempts" in errors[0]
    assert "the host name does not resolve (DNS)" in errors[0]
    assert "Traceback" not in done.stderr and "k-12" not in done.stdout + done.stderr
    assert not (tmp_path / "warehouse.duckdb").exists() or _no_data(tmp_path)


@pytest.mark.slow
def test_an_address_that_is_not_the_api_fails_fast_with_one_line(tmp_path: Path) -> None:
    """A web server that answers every path with its HTML home page, 200."""
    import http.server
    import threading

    class Home(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = b"<!doctype html><title>Example Inc.</title><h1>Welcome</h1>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test's output stays the sync's

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Home)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        env = _env(None, tmp_path, SOURCES__FEEDBACK__BASE_URL=base, SOURCES__FEEDBACK__API_KEY="k")
        done = _cli(["sync", "--progress-every", "3600"], env, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("feedback-sync sync:")]
    assert len(errors) == 1, done.stderr
    assert f"{base} answered 3 times with HTTP 200" in errors[0] and "(text/html)" in errors[0]
    assert "never with the API's JSON" in errors[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "warehouse.duckdb").exists() or _no_data(tmp_path)


def _no_data(tmp: Path) -> bool:
    import duckdb

    with duckdb.connect(str(tmp / "warehouse.duckdb"), read_only=True) as con:
        tables = con.execute(
            "select count(*) from information_schema.tables where table_schema = 'feedback' "
            "and not starts_with(table_name, '_dlt')"
        ).fetchone()
    return tables == (0,)
