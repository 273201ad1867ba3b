"""PostgreSQL reached as ``psql`` would reach it when the connection string has no password:
a server that trusts the login, one that lets the OS account in by peer authentication
over its Unix socket, and one that wants a password that libpq finds itself (``~/.pgpass``,
``PGPASSFILE``, ``PGPASSWORD``); where none is found, one line says how to give it.

Each run gets a HOME of its own and no ``PG*`` variables but the ones a test sets, so no
password of the machine's can stand in for the one under test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from feedback_sync.app.failures import explain, is_transient
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.warehouse.target import make_target

from tests.support import postgres
from tests.support.cli import said_lines
from tests.support.postgres import Server
from tests.sync.harness import Harness

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]
DATASETS = "('feedback', 'staging', 'marts')"


@pytest.fixture(scope="module")
def trust_server(postgres_server: Server) -> Iterator[Server]:
    """A server that lets every login in without a password (its role has none). It asks
    for the worker's server first, so it is skipped or fails as that one is."""
    with postgres.running(auth="trust") as server:
        yield server


@pytest.fixture(scope="module")
def peer_server(postgres_server: Server) -> Iterator[Server]:
    """A server whose Unix socket lets the account running the tests in as its role."""
    with postgres.running(auth="peer") as server:
        yield server


def _database(server: Server, request: pytest.FixtureRequest) -> str:
    """A new empty database named after the test (its name)."""
    name = "p_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:50].lower()
    server.psql(f'drop database if exists "{name}"')
    server.create_database(name)
    return name


def _env(sandbox: RunningSandbox, dsn: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a run: the sandbox, ``dsn``, a HOME of its own, and of libpq's
    variables only ``extra``'s."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "PG", "XDG_"))
    }
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        SOURCES__FEEDBACK__BASE_URL=sandbox.base_url,
        SOURCES__FEEDBACK__API_KEY=sandbox.api_key,
        DESTINATION__POSTGRES__CREDENTIALS=dsn,
        **extra,
    )
    return env


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--destination", "postgres"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _sync(env: dict[str, str], cwd: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return _cli(["sync", "--full", *more, "--pipelines-dir", str(cwd / "pipelines")], env, cwd)


def _pgpass(path: Path, server: Server, database: str) -> Path:
    """A password file for ``database`` on ``server``, owner-only as libpq requires."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{server.host}:{server.port}:{database}:{server.user}:{server.password}\n")
    path.chmod(0o600)
    return path


def _datasets(server: Server, database: str) -> str:
    sql = f"select string_agg(nspname, ',') from pg_namespace where nspname in {DATASETS}"
    return server.psql(sql, database).strip()


@pytest.mark.parametrize(
    ("settings", "password"),
    [
        ({"DESTINATION__POSTGRES__CREDENTIALS": "postgresql://loader@db.example:6432/wh"}, None),
        ({"DESTINATION__POSTGRES__CREDENTIALS": "postgresql://loader:@db.example:6432/wh"}, None),
        (
            {
                "DESTINATION__POSTGRES__CREDENTIALS__HOST": "db.example",
                "DESTINATION__POSTGRES__CREDENTIALS__PORT": "6432",
                "DESTINATION__POSTGRES__CREDENTIALS__USERNAME": "loader",
                "DESTINATION__POSTGRES__CREDENTIALS__DATABASE": "wh",
            },
            None,
        ),
        (
            {"DESTINATION__POSTGRES__CREDENTIALS": "postgresql://loader:s3cret@db.example:6432/wh"},
            "s3cret",
        ),
    ],
    ids=["string", "empty-password", "fields", "with-password"],
)
def test_credentials_without_a_password_resolve_with_no_password_part(
    settings: dict[str, str], password: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What libpq is handed: no password part at all where none was given (neither "None"
    nor an empty one), so libpq looks for it as psql would."""
    for name in list(os.environ):
        if name.startswith("DESTINATION__"):
            monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    destination = make_target(destination="postgres").dlt_destination()
    credentials = destination.config_params["credentials"]
    assert credentials.password == password
    url = credentials.to_native_representation()
    secret = f":{password}" if password else ""
    assert url == f"postgresql://loader{secret}@db.example:6432/wh?connect_timeout=15"
    assert "None" not in url
    shown = f"postgresql://loader{':***' if password else ''}@db.example:6432/wh"
    assert str(credentials) == shown


def test_without_credentials_dlt_still_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No host or database anywhere: dlt's own resolution runs, and its error is the one
    line it was before."""
    for name in list(os.environ):
        if name.startswith("DESTINATION__"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS__USERNAME", "loader")
    target = make_target(destination="postgres", pipelines_dir=tmp_path)
    assert target.dlt_destination() == "postgres"
    with pytest.raises(Exception) as failed:
        target.check_writable()
    message, code = explain(failed.value)
    assert code == 2
    assert message is not None and "the destination is not configured" in message


def test_a_login_without_a_password_is_one_line_saying_how_to_give_one() -> None:
    import psycopg2

    error = psycopg2.OperationalError(
        'connection to server at "10.0.0.5", port 5432 failed: fe_sendauth: no password supplied\n'
    )
    message, code = explain(error)
    assert code == 2 and not is_transient(error)
    assert message is not None and len(message.splitlines()) == 1
    assert message.startswith("the destination's server wants a password and none was given")
    assert '"10.0.0.5", port 5432' in message
    for way in ("DESTINATION__POSTGRES__CREDENTIALS=postgresql://USER:PASSWORD@", "PGPASSWORD"):
        assert way in message
    assert "~/.pgpass (chmod 600; PGPASSFILE names another file)" in message


@pytest.mark.slow
def test_trust_sync_models_and_check_without_a_password(
    harness: Harness, trust_server: Server, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    database = _database(trust_server, request)
    dsn = trust_server.dsn(database)
    assert not trust_server.password and f"//{trust_server.user}@" in dsn  # none to give
    env = _env(harness.server, dsn, tmp_path / "home")
    sync = _sync(env, tmp_path)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "models: built" in sync.stdout
    harness.destination, harness.postgres_dsn = "postgres", dsn
    harness.assert_equals_truth()
    assert _datasets(trust_server, database) == "feedback,staging,marts"
    # the credentials as fields in .dlt/secrets.toml (dlt's table form), no password
    project = tmp_path / "project"
    (project / ".dlt").mkdir(parents=True)
    (project / ".dlt" / "secrets.toml").write_text(
        "[destination.postgres.credentials]\n"
        f'host = "{trust_server.host}"\nport = {trust_server.port}\n'
        f'username = "{trust_server.user}"\ndatabase = "{database}"\n'
    )
    del env["DESTINATION__POSTGRES__CREDENTIALS"]
    check = _cli(["check"], env, project)
    assert check.returncode == 0, check.stdout + check.stderr
    assert (
        f"warehouse  ok      postgres://{trust_server.host}:{trust_server.port}/{database}: "
        "connected; the login may create schemas and tables"
    ) in check.stdout


@pytest.mark.slow
def test_pgpass_in_home_supplies_the_password_the_server_wants(
    harness: Harness,
    postgres_server: Server,
    postgres_dsn: str,
    tmp_path: Path,
) -> None:
    database = postgres_dsn.rsplit("/", 1)[1]
    home = tmp_path / "home"
    pgpass = _pgpass(home / ".pgpass", postgres_server, database)
    env = _env(harness.server, postgres_server.dsn(database, with_password=False), home)
    run = tmp_path / "run"
    run.mkdir()
    sync = _sync(env, run)
    assert sync.returncode == 0, sync.stdout + sync.stderr
    harness.destination, harness.postgres_dsn = "postgres", postgres_dsn
    harness.assert_equals_truth()
    # PGPASSFILE names another file; `check` connects and asks the privileges with it
    elsewhere = _pgpass(tmp_path / "secrets" / "pgpass", postgres_server, database)
    pgpass.unlink()
    check = _cli(["check"], dict(env, PGPASSFILE=str(elsewhere)), run)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "connected; the login may create schemas and tables" in check.stdout
    # libpq alone read the password: it is in no output and no file a run left (dlt's
    # working folder and state, HOME), only in the password file itself
    password = postgres_server.password
    for done in (sync, check):
        assert password not in done.stdout + done.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != elsewhere:
            assert password.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_pgpassword_supplies_the_password_the_server_wants(
    harness: Harness,
    postgres_server: Server,
    postgres_dsn: str,
    tmp_path: Path,
) -> None:
    database = postgres_dsn.rsplit("/", 1)[1]
    dsn = postgres_server.dsn(database, with_password=False)
    env = _env(harness.server, dsn, tmp_path / "home", PGPASSWORD=postgres_server.password)
    sync = _sync(env, tmp_path, "--no-models")
    assert sync.returncode == 0, sync.stdout + sync.stderr
    harness.destination, harness.postgres_dsn = "postgres", postgres_dsn
    harness.assert_equals_truth()
    assert postgres_server.password not in sync.stdout + sync.stderr


@pytest.mark.slow
def test_no_password_anywhere_is_one_line_exit_2_and_nothing_written(
    live_sandbox: RunningSandbox,
    postgres_server: Server,
    postgres_dsn: str,
    tmp_path: Path,
) -> None:
    database = postgres_dsn.rsplit("/", 1)[1]
    dsn = postgres_server.dsn(database, with_password=False)
    env = _env(live_sandbox, dsn, tmp_path / "home")
    sync = _sync(env, tmp_path)
    assert sync.returncode == 2, sync.stdout + sync.stderr
    lines = said_lines(sync.stderr)
    assert len(lines) == 1 and "Traceback" not in sync.stderr, sync.stderr
    assert "the destination's server wants a password and none was given" in lines[0]
    assert "PGPASSWORD" in lines[0] and "~/.pgpass" in lines[0]
    check = _cli(["check"], env, tmp_path)
    assert check.returncode == 2, check.stdout + check.stderr
    assert "warehouse  FAILED  the destination's server wants a password" in check.stdout
    assert _datasets(postgres_server, database) == ""


@pytest.mark.slow
def test_peer_authentication_through_the_unix_socket(
    harness: Harness, peer_server: Server, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    database = _database(peer_server, request)
    dsn = peer_server.socket_dsn(database)
    env = _env(harness.server, dsn, tmp_path / "home")
    sync = _sync(env, tmp_path, "--no-models")
    assert sync.returncode == 0, sync.stdout + sync.stderr
    harness.destination, harness.postgres_dsn = "postgres", dsn
    harness.assert_equals_truth()
