"""What the tests of several accounts share: a project's settings files written and read
again by dlt in this process, and three accounts configured against sandbox servers
(``tests/sync/conftest.py`` makes the fixtures of them)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

from dlt.common.configuration.container import Container
from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread

from tests.sync.harness import Harness

# the key of the account whose server is never started (``configure_three``)
INITECH_KEY = "initech-key-9999"


def write_settings(project: Path, config: str, secrets: str = "") -> None:
    """The project's settings files; dlt reads them again (it keeps what it read)."""
    (project / ".dlt" / "config.toml").write_text(config, encoding="utf-8")
    (project / ".dlt" / "secrets.toml").write_text(secrets, encoding="utf-8")
    Container()[PluggableRunContext].reload(str(project))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def servers() -> Iterator[tuple[RunningSandbox, RunningSandbox]]:
    """Two sandbox servers, each with data and a key of its own (acme's, globex's)."""
    with (
        serve_in_thread(create_app("tiny", 1, api_key="acme-key-1234")) as acme,
        serve_in_thread(create_app("tiny", 2, api_key="globex-key-5678")) as globex,
    ):
        yield acme, globex


def configure_three(project: Path, acme: RunningSandbox, globex: RunningSandbox, port: int) -> None:
    """Accounts acme and globex on their servers, and initech on ``port``, where nothing
    listens until a test serves it."""
    write_settings(
        project,
        "[sources.feedback]\npage_size = 7\n"
        f'[sources.feedback.accounts.acme]\nbase_url = "{acme.base_url}"\n'
        f'[sources.feedback.accounts.globex]\nbase_url = "{globex.base_url}"\n'
        f'[sources.feedback.accounts.initech]\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        "max_retries = 1\ntimeout_seconds = 2\n",
        f'[sources.feedback.accounts.acme]\napi_key = "{acme.api_key}"\n'
        f'[sources.feedback.accounts.globex]\napi_key = "{globex.api_key}"\n'
        f'[sources.feedback.accounts.initech]\napi_key = "{INITECH_KEY}"\n',
    )


def configure_two(project: Path, acme: RunningSandbox, globex: RunningSandbox) -> None:
    """Accounts acme and globex on their servers, with their keys."""
    write_settings(
        project,
        f'[sources.feedback.accounts.acme]\nbase_url = "{acme.base_url}"\n'
        f'[sources.feedback.accounts.globex]\nbase_url = "{globex.base_url}"\n',
        f'[sources.feedback.accounts.acme]\napi_key = "{acme.api_key}"\n'
        f'[sources.feedback.accounts.globex]\napi_key = "{globex.api_key}"\n',
    )


def assert_account_equals_truth(project: Path, server: RunningSandbox, account: str) -> None:
    """The account's dataset of the project's DuckDB file holds exactly ``server``'s data."""
    check = Harness(server, project / "data")
    check.dataset = f"feedback_{account}"
    try:
        check.assert_equals_truth()
    finally:
        check.close()
