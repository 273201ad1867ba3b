"""An error nobody foresaw, kept for a person to read: one line on the terminal, the full
trace in a file.

``failures.explain`` turns every failure feedback-sync knows into one line. Anything else is
a bug here or a case not handled yet, and its traceback is what a maintainer needs, but it
is not for a user's terminal or a cron mail. ``write_trace`` saves it, scrubbed of secrets,
under ``$XDG_STATE_HOME/feedback-sync/errors/`` (``~/.local/state/...`` when that is not
set; ``FEEDBACK_SYNC_ERROR_DIR`` chooses another folder; the system's temporary folder
where none of these can be written), and the command line prints that file's path.

What is scrubbed: the API key and any secret a run registered (``redaction.SCRUBBER``),
``api_key=`` in a URL, a password in a URL's user part, and the values of the settings and
environment variables whose names say they hold a secret (a key, password, token, secret or
credentials; in ``secrets.toml``, where dlt users also keep a host or a database name, only
those, so the trace keeps its paths and names readable).
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from feedback_sync import __version__
from feedback_sync.redaction import SCRUBBER

ERROR_DIR_VARIABLE = "FEEDBACK_SYNC_ERROR_DIR"
# settings and environment variables whose values are secrets, by a part of their name
_SECRET_NAMES = ("KEY", "PASSWORD", "SECRET", "TOKEN", "CREDENTIALS")
_SHORTEST_SECRET = 4  # shorter strings would blank out ordinary words of the trace


def error_dir() -> Path:
    """Where the traces are written (the folder may not exist yet)."""
    chosen = os.environ.get(ERROR_DIR_VARIABLE)
    if chosen:
        return Path(chosen)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "feedback-sync" / "errors"


def write_trace(command: str, exc: BaseException) -> Path:
    """Writes ``exc``'s trace (scrubbed) and returns the file's path."""
    for secret in _known_secrets():
        SCRUBBER.register(secret)
    text = "".join(
        [
            f"feedback-sync {__version__}, Python {sys.version.split()[0]}, {sys.platform}\n",
            f"command: {' '.join(sys.argv[1:]) or command}\n",
            f"at: {datetime.now(UTC).isoformat(timespec='seconds')}\n\n",
            *traceback.format_exception(exc),
        ]
    )
    text = SCRUBBER.scrub(text)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"{stamp}-{command}-{os.getpid()}.txt"
    for folder in (error_dir(), Path(tempfile.gettempdir()) / "feedback-sync-errors"):
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = folder / name
            # owner-only: a trace may quote data the run read
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            return path
        except OSError:
            continue
    raise OSError("no folder for the trace could be written")


def _known_secrets() -> Iterator[str]:
    for name, value in os.environ.items():
        if _secret_name(name) and len(value) >= _SHORTEST_SECRET:
            yield value
    from feedback_sync.app.settings_files import settings_files

    for path in settings_files():
        if path.name != "secrets.toml":
            continue
        try:
            with path.open("rb") as fh:
                yield from _strings(tomllib.load(fh), secret=False)
        except (OSError, ValueError):
            continue


def _secret_name(name: str) -> bool:
    return any(part in name.upper() for part in _SECRET_NAMES)


def _strings(value: Any, *, secret: bool) -> Iterator[str]:
    """The strings whose own key says it holds a secret (``api_key``, ``password``, a
    ``credentials`` string); a ``host`` or ``database`` beside a password is no secret."""
    if isinstance(value, str):
        if secret and len(value) >= _SHORTEST_SECRET:
            yield value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, secret=_secret_name(str(name)))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, secret=secret)
