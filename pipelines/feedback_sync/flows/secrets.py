"""Where a flow run's API key comes from: a Prefect ``Secret`` block, else the environment.

The block's name is configuration (``api_key_secret_block`` in ``[flows]`` of
``.dlt/config.toml``, or ``FLOWS__API_KEY_SECRET_BLOCK``; declared in ``app/settings.py``,
default ``feedback-api-key``). An account's run (``[sources.feedback.accounts.<name>]``)
reads the block of that name followed by ``-<account>`` (``feedback-api-key-acme``; a
block's name takes no underscore, so an account's become dashes) and never the shared one,
so no account is sent another's key.
When no block of that name exists, the key is resolved the dlt way
(``SOURCES__FEEDBACK__API_KEY`` or ``.dlt/secrets.toml``; an account's in its own table).
It is never a flow parameter: Prefect stores and shows parameters.
"""

from __future__ import annotations

from typing import Any

from feedback_sync.api.accounts import TABLE, section
from feedback_sync.api.config import load
from feedback_sync.api.settings import SECTION
from feedback_sync.app.settings import FLOWS
from feedback_sync.errors import ConfigError
from feedback_sync.redaction import SCRUBBER


def block_name(account: str | None = None) -> str:
    """The name of the ``Secret`` block that holds the key (``[flows]``), or ``account``'s.

    Raises:
        ConfigError: a setting of ``[flows]`` is malformed.
    """
    name = load(FLOWS).api_key_secret_block
    return name if account is None else f"{name}-{account.replace('_', '-')}"


def api_key(account: str | None = None) -> tuple[str | None, str]:
    """``(key, where it came from)`` of the project's one account, or of ``account``; the
    key is None when no block holds it, and the sync then resolves it from the environment
    or ``.dlt/secrets.toml``.

    Raises:
        ConfigError: the block exists but does not hold a string.
    """
    from prefect.blocks.system import Secret

    name = block_name(account)
    try:
        block: Any = Secret.load(name)
    except ValueError:  # Prefect's answer for "no block document of that name"
        if account is None:
            return None, "the environment (SOURCES__FEEDBACK__API_KEY or .dlt/secrets.toml)"
        return None, (
            f"[{SECTION}.{TABLE}.{account}] (.dlt/secrets.toml or "
            f"{section(account).env('api_key')}): no Prefect Secret block {name!r}"
        )
    value = block.get()
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"the Prefect Secret block {name!r} must hold the API key as text")
    SCRUBBER.register(value)
    return value, f"the Prefect Secret block {name!r}"
