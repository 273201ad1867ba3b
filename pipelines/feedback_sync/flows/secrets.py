"""Where a flow run's API key comes from: a Prefect ``Secret`` block, else the environment.

The block's name is configuration (``api_key_secret_block`` in ``[flows]`` of
``.dlt/config.toml``, or ``FLOWS__API_KEY_SECRET_BLOCK``; default ``feedback-api-key``).
When no block of that name exists, the key is resolved the dlt way
(``SOURCES__FEEDBACK__API_KEY`` or ``.dlt/secrets.toml``). It is never a flow parameter:
Prefect stores and shows parameters.
"""

from __future__ import annotations

from typing import Any

import dlt

from feedback_sync.errors import ConfigError
from feedback_sync.redaction import SCRUBBER

BLOCK_SETTING = "flows.api_key_secret_block"
DEFAULT_BLOCK = "feedback-api-key"


def block_name() -> str:
    name: Any = dlt.config.get(BLOCK_SETTING)
    if name is None or name == "":
        return DEFAULT_BLOCK
    if not isinstance(name, str):
        raise ConfigError(
            f"FLOWS__API_KEY_SECRET_BLOCK (api_key_secret_block in [flows]) must be a block "
            f"name, got {type(name).__name__}"
        )
    return name.strip()


def api_key() -> tuple[str | None, str]:
    """``(key, where it came from)``; the key is None when no block holds it, and the sync
    then resolves it from the environment or ``.dlt/secrets.toml``.

    Raises:
        ConfigError: the block exists but does not hold a string.
    """
    from prefect.blocks.system import Secret

    name = block_name()
    try:
        block: Any = Secret.load(name)
    except ValueError:  # Prefect's answer for "no block document of that name"
        return None, "the environment (SOURCES__FEEDBACK__API_KEY or .dlt/secrets.toml)"
    value = block.get()
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"the Prefect Secret block {name!r} must hold the API key as text")
    SCRUBBER.register(value)
    return value, f"the Prefect Secret block {name!r}"
