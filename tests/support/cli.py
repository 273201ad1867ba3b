"""The installed ``feedback-sync`` command, and the environment a test runs it in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from feedback_sync.app.cli import STARTING_LINE
from feedback_sync.sandbox.server import RunningSandbox

CLI = [str(Path(sys.executable).with_name("feedback-sync"))]
# the settings a developer's shell may hold, which a test's run must not see
SETTINGS_PREFIXES = ("SOURCES__", "DESTINATION__", "DLT_", "PUSH__", "MODELS__")


def cli_env(server: RunningSandbox, folder: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the user's settings, pointed at ``server``, with
    dlt's working folder in ``folder`` (root's default, /var/dlt, is shared by the tests
    running at once)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    return clean | {
        "SOURCES__FEEDBACK__BASE_URL": server.base_url,
        "SOURCES__FEEDBACK__API_KEY": server.api_key,
        "PUSH__NOTE_AUTHOR_EMAIL": "feedback-bot@example.net",
        "DLT_DATA_DIR": str(folder / "dlt"),
        **extra,
    }


def said_lines(stderr: str) -> list[str]:
    """``stderr``'s lines without the sync's first line, which says only that the run
    started (it comes before the settings are read): what a failure said, in full."""
    lines = stderr.strip().splitlines()
    return lines[1:] if lines[:1] == [STARTING_LINE] else lines
