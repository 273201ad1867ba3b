"""The settings of the dashboard (``[report]``) and of the Prefect flows (``[flows]``),
declared once (``api/declaration.py``): ``REPORT__*`` and ``FLOWS__*`` variables, or those
sections of ``.dlt/config.toml``.

They are declared here rather than beside their readers because the unknown-key check
(``setting_names``), which every command runs before its imports, and the settings
reference read the declarations without importing the readers: ``app/report/``'s package
imports dlt and the warehouse as it loads, and ``flows/``'s imports Prefect. The flows
may import ``app`` and ``app`` may not import ``flows``, so the ``[flows]`` declaration
lives here, in the layer below its reader (``flows/sync.py``, ``flows/secrets.py``). This
module imports no dlt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from feedback_sync.api.declaration import Integer, Kind, Numbers, Section, setting
from feedback_sync.errors import ConfigError

_CURRENCY = re.compile(r"^[^\x00-\x1f\x7f]{1,16}$")


@dataclass(frozen=True)
class _Currency(Kind):
    """A currency's code or symbol: 1 to 16 characters without control characters,
    stripped; unset: none (None)."""

    def check(self, value: Any, said: str, secret: bool) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not _CURRENCY.match(value.strip()):
            raise ConfigError(
                f"{said} must be a currency's code or symbol of 1 to 16 characters "
                f"(EUR, USD, £), got {value!r}"
            )
        return value.strip()


@dataclass(frozen=True, kw_only=True)
class ReportSettings:
    """Checked settings of the dashboard: each field declares one setting of ``[report]``."""

    currency: str | None = setting(
        _Currency(),
        default=None,
        doc="""The currency of the monthly spend the API sends, named on the dashboard
        (``EUR``, ``USD``, ...; the API names none). Unset: the page says "the account's
        currency"; ``--currency`` wins.""",
        note="the unit of the monthly spend the API sends (it names none)",
        example="EUR",
    )


REPORT = Section("report", ReportSettings)


@dataclass(frozen=True)
class _BlockName(Kind):
    """A Prefect block's name: non-blank text, stripped."""

    def check(self, value: Any, said: str, secret: bool) -> str:
        if not isinstance(value, str):
            raise ConfigError(f"{said} must be a block name, got {type(value).__name__}")
        if not value.strip():
            raise ConfigError(f"{said} must be a block name, got {value!r}")
        return value.strip()


@dataclass(frozen=True, kw_only=True)
class FlowsSettings:
    """Checked settings of the Prefect flows: each field declares one setting of
    ``[flows]``."""

    api_key_secret_block: str = setting(
        _BlockName(),
        default="feedback-api-key",
        doc="""The Prefect ``Secret`` block the flows read the API key from. When no block
        of that name exists, the key is resolved as the command line does. With several
        accounts, each account's run reads the block of this name followed by
        ``-<account>`` (``feedback-api-key-acme``; underscores in the account's name become
        dashes), else the key in the account's own table, never this block.""",
        note="the Secret block holding the API key",
    )
    sync_retries: int = setting(
        Integer(0, None),
        default=2,
        doc="""How many times the sync flow retries its sync task after a failure that may
        pass: the network or the service in trouble, a destination job that may be retried,
        another run holding the warehouse.""",
        note="retries of the sync task after a failure that may pass",
    )
    sync_retry_delay_seconds: tuple[float, ...] = setting(
        Numbers(0.0),
        default=(30, 120),
        doc="""The waits before those retries, in seconds (a TOML list, or comma-separated
        in the environment: ``30,120``); the last one is repeated for further retries.""",
        note="the waits before those retries, in seconds",
    )


FLOWS = Section("flows", FlowsSettings)
