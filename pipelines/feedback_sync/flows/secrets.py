"""Where a flow run's API key comes from: a Prefect ``Secret`` block, else the environment.

The block's name is configuration (``api_key_secret_block`` in ``[flows]`` of
``.dlt/config.toml``, or ``FLOWS__API_KEY_SECRET_BLOCK``; declared in ``app/settings.py``,
default ``feedback-api-key``).
When no block of that name exists, the key is resolved the dlt way
(``SOURCES__FEEDBACK__API_KEY`` or ``.dlt/secrets.toml``). It is never a flow parameter:
Prefect stores and shows parameters.
"""

from __future__ import annotations

from typing import Any

from feedback_sync.api.config import load
from feedback_sync.app.settings import FLOWS
from feedback_sync.errors import ConfigError
from feedback_sync.redaction import SCRUBBER


def block_name() -> str:
    """The name of the ``Secret`` block that holds the key (``[flows]``).

    Raises:
        ConfigError: a setting of ``[flows]`` is malformed.
    """
    return load(FLOWS).api_key_secret_block


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
