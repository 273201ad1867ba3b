"""The settings files a command will read, checked before it reads any.

dlt reads ``config.toml`` and ``secrets.toml`` from the project's ``.dlt/`` (the current
folder's, or ``DLT_PROJECT_DIR``'s) and from its global folder, and a file that does not
parse fails deep inside the first setting it looks up, as an 88-line traceback; ``status``,
which reads no setting through dlt, would not notice at all. Every command parses those
files first, with the standard library's TOML reader, and a broken one is one line that
names the file, the line and what is wrong (exit 2, nothing done). So is a key that is
not a setting in a section feedback-sync owns (``setting_names``).

The global folder is found as dlt 1.31 finds it (``dlt.common.runtime.run_context``:
``/var/dlt`` for root, else ``~/.dlt``, else ``$XDG_DATA_HOME/dlt`` when ``~/.dlt`` does
not exist); importing dlt to ask would cost a command like ``status`` half a second.
``failures.explain`` also names dlt's own read error, should the two ever disagree.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from feedback_sync.errors import ConfigError

FILES = ("config.toml", "secrets.toml")


def _global_dir() -> Path:
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/dlt")
    home = Path.home()
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and not (home / ".dlt").is_dir():
        return Path(xdg) / "dlt"
    return home / ".dlt"


def settings_files() -> list[Path]:
    """The settings files dlt would read, project first, that exist."""
    project = Path(os.environ.get("DLT_PROJECT_DIR", ".")) / ".dlt"
    found: list[Path] = []
    for folder in (project, _global_dir()):
        for name in FILES:
            path = folder / name
            if path.is_file() and path not in found:
                found.append(path)
    return found


def check_settings_files(*, names: bool = True) -> None:
    """Raises ConfigError naming the first settings file that does not parse, then (with
    ``names``) the first key of a section feedback-sync owns that is not one of its
    settings, in those files or the environment (``setting_names``)."""
    files = settings_files()
    for path in files:
        try:
            with path.open("rb") as f:
                tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            # tomllib's words end with the place: "Invalid value (at line 3, column 12)"
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{path} cannot be read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path} is not valid TOML: it is not UTF-8 text") from None
    if names:
        from feedback_sync.app.setting_names import check_names

        check_names(files)
