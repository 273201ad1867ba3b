"""dlt's anonymous usage telemetry: off unless the user turns it on.

dlt sends it unless a setting says otherwise (``[runtime] dlthub_telemetry``), and its
thread then outlives a command. feedback-sync's entry points (the command line, the
flows) turn it off for their process, unless the user chose: an environment variable
(``RUNTIME__DLTHUB_TELEMETRY``, or the same under a pipeline's name) or any settings file
dlt reads that names ``dlthub_telemetry`` (``.dlt/config.toml`` of the project folder,
``~/.dlt/config.toml``...), whatever its value. dlt reads the setting when its first
pipeline is made, so this works as long as it runs before that.
"""

from __future__ import annotations

import os

from feedback_sync.warehouse.target import dlt_settings_mention

SETTING = "dlthub_telemetry"
ENV = "RUNTIME__DLTHUB_TELEMETRY"


def telemetry_off_unless_chosen() -> bool:
    """Turns dlt's telemetry off for this process unless the user set it; True when it
    did."""
    if any(name.endswith(ENV) for name in os.environ) or dlt_settings_mention(SETTING):
        return False
    os.environ[ENV] = "false"
    return True
