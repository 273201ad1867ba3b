"""dlt's anonymous usage telemetry: off unless the user turns it on.

dlt sends it unless a setting says otherwise (``[runtime] dlthub_telemetry``), and its
thread then outlives a command. feedback-sync's entry points (the command line, the
flows) turn it off for their process, unless the user chose: an environment variable
(``RUNTIME__DLTHUB_TELEMETRY``, or the same under a pipeline's name) or any settings file
dlt reads that names ``dlthub_telemetry`` (``.dlt/config.toml`` of the project folder,
``~/.dlt/config.toml``...), whatever its value. (A comment that names it is no choice:
the ``config.toml`` that ``init`` writes has one.) dlt reads the setting when its first
pipeline is made, so this works as long as it runs before that.
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

from feedback_sync.app.settings_files import settings_files

SETTING = "dlthub_telemetry"
ENV = "RUNTIME__DLTHUB_TELEMETRY"


def telemetry_off_unless_chosen() -> bool:
    """Turns dlt's telemetry off for this process unless the user set it; True when it
    did."""
    if any(name.endswith(ENV) for name in os.environ) or _set_in_settings():
        return False
    os.environ[ENV] = "false"
    return True


def _set_in_settings() -> bool:
    """Whether a settings file sets the key, in any table. Parsed, not searched: the
    config.toml ``feedback-sync init`` writes names it in a comment, which sets nothing
    (a text search took that for a choice, and left the telemetry on)."""
    for path in settings_files():
        try:
            with path.open("rb") as fh:
                if _has_key(tomllib.load(fh)):
                    return True
        except (OSError, ValueError):
            return True  # unreadable here: let dlt read it and decide
    return False


def _has_key(table: dict[str, Any]) -> bool:
    return any(
        name == SETTING or (isinstance(value, dict) and _has_key(value))
        for name, value in table.items()
    )
