"""The SQL models' folder a user chose, checked (light: the command line reads it before
its imports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feedback_sync.errors import ConfigError


def models_folder(setting: str, chosen: Any) -> Path:
    """The SQL models' folder ``setting`` (``--sql-dir``, or the setting that named it)
    chose: a path to a folder there is.

    Raises:
        ConfigError: not a path, or no such folder.
    """
    if not isinstance(chosen, str | Path) or not str(chosen).strip():
        raise ConfigError(f"{setting} must be a folder path, got {chosen!r}")
    root = Path(chosen).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{setting} {root}: no such folder (the SQL models' folder)")
    return root
