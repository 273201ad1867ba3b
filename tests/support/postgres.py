"""A throwaway PostgreSQL server for the tests and benchmarks of the PostgreSQL target.

The sandbox stands in for the feedback service; this stands in for a team's warehouse
server. ``running()`` makes a cluster with ``initdb`` in a new temporary folder, starts it on
a free loopback port with password (SCRAM) authentication, yields its address, and stops
and removes it afterwards. ``running(auth="trust")`` lets every login in without a password
(the role has none), and ``running(auth="peer")`` lets the account the tests run as in
through the server's Unix socket as the role, by peer authentication (TCP still wants the
password). PostgreSQL refuses to run as root, so as root (CI) the server runs as the
unprivileged user ``postgres`` (made by Debian's package), or ``nobody``.

The binaries come from ``FEEDBACK_SYNC_PG_BIN`` (a folder holding ``initdb`` and
``pg_ctl``), else the newest ``/usr/lib/postgresql/<version>/bin`` (Debian's layout), else
``PATH``. ``./run test`` installs Debian's ``postgresql`` when none is found and it can.

``python -m tests.support.postgres`` starts one and prints its address until interrupted.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

ROLE = "feedback"
START_TIMEOUT_S = 60
# a test server: durability is not what is tested, speed is (the benchmark turns it back on)
FAST_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")
# how the server authenticates: "password" (SCRAM; the role has a password), "trust" (no
# password asked; the role has none), "peer" (the Unix socket lets the account running the
# tests in as the role, through a pg_ident map; TCP wants the password)
Auth = Literal["password", "trust", "peer"]


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or the server would not start."""


@dataclass(frozen=True)
class Server:
    """A running server: a role ``feedback`` owning database ``postgres``, with a password
    (``password``, empty where the server trusts every login)."""

    host: str
    port: int
    user: str
    password: str
    folder: Path

    def dsn(self, database: str = "postgres", *, with_password: bool = True) -> str:
        """The address, with the password in it unless ``with_password`` is False (dlt's
        ``DESTINATION__POSTGRES__CREDENTIALS``)."""
        secret = f":{self.password}" if with_password and self.password else ""
        return f"postgresql://{self.user}{secret}@{self.host}:{self.port}/{database}"

    def socket_dsn(self, database: str = "postgres") -> str:
        """The address through the server's Unix socket, no password: libpq's URI takes a
        socket folder as the host, percent-encoded."""
        return f"postgresql://{self.user}@{quote(str(self.folder), safe='')}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its address."""
        self.psql(f'create database "{name}"')
        return self.dsn(name)

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Runs ``sql`` with the server's own ``psql`` (tab-separated rows, no header)."""
        psql = _tool("psql")
        env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"}
        if self.password:
            env["PGPASSWORD"] = self.password
        command = [str(psql), "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1"]
        command += ["-h", self.host, "-p", str(self.port), "-U", self.user, "-d", database]
        done = subprocess.run(
            [*command, "-c", sql],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql {sql!r}: {done.stderr.strip()}")
        return done.stdout


def bin_dir() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    configured = os.environ.get("FEEDBACK_SYNC_PG_BIN")
    if configured:
        return Path(configured) if (Path(configured) / "initdb").exists() else None
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def _tool(name: str) -> Path:
    folder = bin_dir()
    if folder is not None and (folder / name).exists():
        return folder / name
    found = shutil.which(name)
    if found is None:
        raise PostgresUnavailable(f"{name} not found (install Debian's postgresql)")
    return Path(found)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run_as() -> pwd.struct_passwd | None:
    """The unprivileged account the server runs as when we are root; None otherwise."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable("running as root and no 'postgres' or 'nobody' account to run as")


@contextlib.contextmanager
def running(*, durable: bool = False, auth: Auth = "password") -> Iterator[Server]:
    """A started server, stopped and removed on exit.

    Args:
        durable: keep PostgreSQL's default durability (fsync); off by default for tests.
        auth: how logins are authenticated (``Auth``).

    Raises:
        PostgresUnavailable: no binaries, or the server did not start (its log is quoted).
    """
    folder_bin = bin_dir()
    if folder_bin is None:
        raise PostgresUnavailable(
            "no PostgreSQL server here (initdb not found in /usr/lib/postgresql/*/bin or on "
            "PATH; ./run test installs Debian's postgresql as root, or set FEEDBACK_SYNC_PG_BIN)"
        )
    account = _run_as()
    folder = Path(tempfile.mkdtemp(prefix="feedback-sync-pg-"))
    data = folder / "data"
    password = "" if auth == "trust" else secrets.token_urlsafe(18)
    pwfile = folder / "pw"
    pwfile.write_text(password + "\n")
    pwfile.chmod(0o600)
    if account is not None:
        for path in (folder, pwfile):
            os.chown(path, account.pw_uid, account.pw_gid)
    started = False
    try:
        initdb = [str(folder_bin / "initdb"), "-D", str(data), "-U", ROLE]
        if auth == "trust":
            initdb += ["-A", "trust"]
        else:
            initdb += ["--pwfile", str(pwfile), "-A", "scram-sha-256"]
        initdb += ["-E", "UTF8", "--locale=C", "--no-sync"]
        done = _run(initdb, account)
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {done.stderr.strip()}")
        pwfile.unlink()
        if auth == "peer":
            _allow_peer(data)
        settings = ["listen_addresses=127.0.0.1", f"unix_socket_directories={folder}"]
        settings += [] if durable else list(FAST_SETTINGS)
        log = folder / "server.log"
        for attempt in range(3):
            port = _free_port()
            options = " ".join(f"-c {s}" for s in [*settings, f"port={port}"])
            start = [str(folder_bin / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options]
            done = _run([*start, "-w", "-t", str(START_TIMEOUT_S), "start"], account)
            if done.returncode == 0:
                started = True
                break
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else done.stderr
            if "could not bind" not in tail or attempt == 2:
                raise PostgresUnavailable(f"PostgreSQL did not start: {tail.strip()}")
        yield Server("127.0.0.1", port, ROLE, password, folder)
    finally:
        if started:
            stop = [str(folder_bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
            _run(stop, account)
        shutil.rmtree(folder, ignore_errors=True)


def _allow_peer(data: Path) -> None:
    """The socket lets in the account running the tests (its name, as the server sees the
    peer's) as the role ``ROLE``; TCP keeps SCRAM. The files stay the server account's."""
    me = pwd.getpwuid(os.geteuid()).pw_name
    with (data / "pg_ident.conf").open("a") as ident:
        ident.write(f"tests {me} {ROLE}\n")
    (data / "pg_hba.conf").write_text(
        "local all all peer map=tests\nhost all all 127.0.0.1/32 scram-sha-256\n"
    )


def _run(command: list[str], account: pwd.struct_passwd | None) -> subprocess.CompletedProcess[str]:
    """Runs a server tool, as ``account`` when given (PostgreSQL refuses root)."""
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    if account is None:
        return subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    return subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=[],
    )


def main() -> None:
    """Starts a server and prints its address until Ctrl-C."""
    with running() as server:
        print(f"PostgreSQL on {server.host}:{server.port}; user {server.user}")
        print(f"DESTINATION__POSTGRES__CREDENTIALS={server.dsn()}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()
