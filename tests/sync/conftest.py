"""Fixtures of the tests of several accounts (``tests/sync/accounts.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from dlt.common.configuration.container import Container
from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext
from feedback_sync.sandbox.server import RunningSandbox

from tests.sync.accounts import configure_three, free_port, servers


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty project folder, the current one, with no source setting in the
    environment (the children inherit it); dlt's settings read from it in this process
    too, and from where they were read before once the test ends."""
    for name in list(os.environ):
        if name.startswith(("SOURCES__", "PUSH__")):
            monkeypatch.delenv(name)
    (tmp_path / ".dlt").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLT_PROJECT_DIR", str(tmp_path))
    run_context = Container()[PluggableRunContext]
    before = run_context.context.run_dir
    yield tmp_path
    run_context.reload(before)


@pytest.fixture
def three(project: Path) -> Iterator[tuple[RunningSandbox, RunningSandbox]]:
    """Three accounts configured: acme and globex served, initech's server down."""
    with servers() as (acme, globex):
        configure_three(project, acme, globex, free_port())
        yield acme, globex
