from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import RunningSandbox
from tests.sync.harness import Harness


@pytest.fixture
def harness(live_sandbox: RunningSandbox, tmp_path: Path) -> Iterator[Harness]:
    h = Harness(live_sandbox, tmp_path)
    try:
        yield h
    finally:
        h.close()
