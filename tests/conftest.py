from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# dlt's anonymous telemetry stays off in tests (and in the subprocesses they start)
os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"

from sandbox.server import RunningSandbox
from tests.sync.harness import Harness

pytest_plugins = ["sandbox.testing"]


@pytest.fixture
def harness(live_sandbox: RunningSandbox, tmp_path: Path) -> Iterator[Harness]:
    """A live tiny sandbox and a warehouse under ``tmp_path`` (tests/sync/harness.py)."""
    h = Harness(live_sandbox, tmp_path)
    try:
        yield h
    finally:
        h.close()
