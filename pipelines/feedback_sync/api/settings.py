"""The source's settings, declared once: ``FeedbackSettings`` names each setting of section
``sources.feedback`` with its type, default, range and description (``declaration``), and
checks the values dlt resolved before any request.

Every setting lives in section ``sources.feedback`` (``.dlt/config.toml``,
``.dlt/secrets.toml``) or in an environment variable ``SOURCES__FEEDBACK__<NAME>``; dlt
resolves them (``api/config.py`` makes its spec from ``SOURCE``), and
``FeedbackSettings.validate`` rejects what is missing or malformed with a message that names
the setting. The order of the fields is the order they are checked in, so the first problem
reported stays the same. This module imports no dlt.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from feedback_sync.api.declaration import (
    Choice,
    Flag,
    Integer,
    Kind,
    Names,
    Number,
    Section,
    Text,
    setting,
)
from feedback_sync.errors import ConfigError

SECTION = "sources.feedback"
AUTH_METHODS = ("bearer", "basic", "query")
DELETE_MODES = ("hard", "soft")
HTTP_PROCESS = ("auto", "on", "off")
MAX_PAGE_SIZE = 100
# the version of the API this product speaks: the last segment of every base URL
API_VERSION = "/v1"


def env_name(setting: str) -> str:
    """``page_size`` -> ``SOURCES__FEEDBACK__PAGE_SIZE``."""
    return SOURCE.env(setting)


def describe(setting: str) -> str:
    """How a user sets ``setting``: both the TOML key and the environment variable."""
    return SOURCE.describe(setting)


@dataclass(frozen=True)
class _BaseUrl(Kind):
    """An http(s) URL without query or fragment, ending in the API's version segment."""

    def check(self, value: Any, said: str, secret: bool) -> str:
        base_url = Text().check(value, said, secret).rstrip("/")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"{said} must be an http(s) URL such as https://feedback.example.com/v1, "
                f"got {base_url!r}"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"{said} must not carry a query or fragment")
        # the spec: "{base_url}, the service base address, which ends with the version
        # segment /v1"; a URL without it fails only at the first request, with a bare 404
        version = parts.path.rsplit("/", 1)[-1]
        if not re.fullmatch(r"v\d+", version):
            raise ConfigError(
                f"{said} must end with the API's version segment {API_VERSION}, "
                f"as in {base_url}{API_VERSION}; got {base_url!r}"
            )
        if version != API_VERSION.strip("/"):
            raise ConfigError(
                f"{said} names API version {version}; feedback-sync speaks "
                f"{API_VERSION.strip('/')} ({base_url.rsplit('/', 1)[0]}{API_VERSION}), got "
                f"{base_url!r}"
            )
        return base_url


def _encrypted_unless_allowed(values: Mapping[str, Any], section: Section[Any]) -> None:
    """Plain http:// only to this machine, unless ``allow_insecure_http`` says otherwise."""
    parts = urlsplit(values["base_url"])
    if (
        parts.scheme == "http"
        and not values["allow_insecure_http"]
        and not _is_loopback(parts.hostname)
    ):
        raise ConfigError(
            f"{section.describe('base_url')} is plain http:// to {parts.hostname}, not this "
            "machine: the API key would cross the network unencrypted. Use https://, or "
            f"set {section.describe('allow_insecure_http')} to true"
        )


@dataclass(frozen=True, kw_only=True)
class FeedbackSettings:
    """Checked settings of one run of the source: each field declares one setting of
    ``[sources.feedback]``."""

    base_url: str = setting(
        _BaseUrl(),
        doc="""The service's address, ending in the API's version segment ``/v1`` (another
        ending is refused at start). Plain ``http://`` only to this machine (``localhost``,
        ``127.x``, ``::1``) unless ``allow_insecure_http`` is set.""",
        note="required: the service's address, ending in /v1",
        example="https://feedback.example.com/v1",
    )
    allow_insecure_http: bool = setting(
        Flag(),
        default=False,
        doc="""Lets ``base_url`` be plain ``http://`` to another machine (the key then
        crosses the network unencrypted).""",
        note="let base_url be plain http:// to another machine (key unencrypted)",
        example=True,
    )
    api_key: str = setting(
        Text(),
        secret=True,
        doc="""The company's API key. Keep it in ``.dlt/secrets.toml`` or the environment,
        never in a committed file.""",
        note="required: the company's API key",
    )
    auth_method: str = setting(
        Choice(AUTH_METHODS),
        default="bearer",
        doc="""How the key is sent: ``bearer`` (an ``Authorization: Bearer`` header),
        ``basic`` (HTTP basic auth with the key as user name and an empty password) or
        ``query`` (``?api_key=`` in every URL: avoid it, URLs end up in proxy logs).""",
        note="bearer | basic | query (query puts the key in URLs: avoid)",
    )
    delete_mode: str = setting(
        Choice(DELETE_MODES),
        default="hard",
        doc="""What a ``--full`` run does with rows deleted at the source: ``hard`` removes
        them, ``soft`` keeps them with ``_deleted_at`` set.""",
        note="--full: hard deletes rows gone at the source; soft sets _deleted_at",
    )
    # where the sync's requests are exchanged (``http_helper``)
    http_process: str = setting(
        Choice(HTTP_PROCESS),
        default="auto",
        doc="""Where a sync sends its requests from: ``on``, a helper process, so speaking
        HTTP and reading answers run on another core than parsing and writing the rows;
        ``off``, the sync's own process; ``auto`` (the default), ``on`` where the process
        may use two CPUs or more (its affinity, and a container's CPU quota) on Linux or
        macOS. Where the environment names a proxy for the service, requests go from the
        sync's process.""",
        note="send the sync's requests from a helper process: auto | on | off",
    )
    page_size: int = setting(
        Integer(1, MAX_PAGE_SIZE),
        default=100,
        doc="Rows asked for per request, 1 to 100.",
        note="1..100 rows per request",
    )
    max_concurrency: int = setting(
        Integer(1, 256),
        default=8,
        doc="""Requests in flight at once, across every resource and the per-idea fan-out
        (1 to 256).""",
        note="requests in flight at once, across all resources",
    )
    requests_per_second: float | None = setting(
        Number(0.01, optional=True),
        default=None,
        doc="""A client-side rate limit. Unset (or 0): none of its own; a service that
        states its limit (``X-RateLimit-Limit``) is asked at 80% of it either way, or at
        this rate when it is lower.""",
        note="client-side rate limit (unset: none)",
        example=10,
    )
    integration_types: tuple[str, ...] = setting(
        Names(),
        default=None,
        doc="""Integration types whose links are listed by type on every run (a TOML list,
        or comma-separated in the environment: ``zendesk,jira``). Unset: the types the last
        full run saw, and links of a new type wait for the next ``--full``.""",
        note="list links by type (cheap, complete per type)",
        example=["zendesk", "intercom"],
    )
    idea_idxs: tuple[str, ...] = setting(
        Names(),
        default=None,
        doc="""Extra ideas to read comments and links of when the service has no ``/ideas``
        list (a list, like ``integration_types``).""",
        note="extra ideas to poll when the service has no /ideas",
        example=["ide_..."],
    )
    announcement_lookback_days: float = setting(
        Number(0.0),
        default=7,
        doc="""How far before the newest published post seen a normal run re-reads posts,
        in days (0 or more).""",
        note="re-read posts published this long before the newest seen",
    )
    timeout_seconds: float = setting(
        Number(0.01),
        default=30,
        doc="The time allowed for each request, in seconds.",
        note="per request",
    )
    max_retries: int = setting(
        Integer(0, 100),
        default=8,
        doc="""Retries per request after a 429, a 5xx, a timeout, a dropped connection or a
        body that is not the expected JSON (0 to 100), with exponential backoff.""",
        note="retries of 429 / 5xx / timeouts / dropped connections",
    )
    # versioned history per entity (``warehouse/history.py``): True, False, or None for the
    # default (ideas and companies on where the warehouse keeps history)
    history_ideas: bool | None = setting(
        Flag(optional=True),
        default=None,
        doc="""Keep the versioned history of ideas (``ideas_history``). Unset: on where the
        warehouse keeps history (DuckDB, Parquet, PostgreSQL); on elsewhere is an error.""",
        note="keep ideas_history (unset: on where the warehouse keeps history)",
        example=True,
    )
    history_companies: bool | None = setting(
        Flag(optional=True),
        default=None,
        doc="""Keep the versioned history of companies (``companies_history``). Unset: on
        where the warehouse keeps history.""",
        note="keep companies_history (unset: the same)",
        example=True,
    )
    history_announcements: bool | None = setting(
        Flag(optional=True),
        default=None,
        doc="""Keep the versioned history of announcements (``announcements_history``).
        Unset: off.""",
        note="keep announcements_history (unset: off)",
        example=True,
    )

    # where these settings were read (not a setting): ``[sources.feedback]``, or an
    # account's table (``api/accounts.py``), whose variables a message names
    section_path: str = field(default=SECTION, repr=False)

    def variable(self, name: str) -> str:
        """The environment variable that sets ``name`` where these settings were read
        (``SOURCES__FEEDBACK__ACCOUNTS__ACME__BASE_URL`` for account acme's)."""
        return Section(self.section_path, FeedbackSettings).env(name)

    def history_choices(self) -> dict[str, bool | None]:
        """Each history setting's choice, by entity (None: not set)."""
        return {
            "ideas": self.history_ideas,
            "companies": self.history_companies,
            "announcements": self.history_announcements,
        }

    def __repr__(self) -> str:
        # the key never reaches a log line or a traceback through repr
        return (
            f"FeedbackSettings(base_url={self.base_url!r}, api_key='***', "
            f"auth_method={self.auth_method!r}, page_size={self.page_size})"
        )

    @classmethod
    def validate(cls, **raw: Any) -> FeedbackSettings:
        """Checks raw values (as dlt resolved them) and returns the settings.

        Raises:
            ConfigError: naming the first setting that is missing or malformed.
        """
        return cls(**SOURCE.check(raw))


SOURCE = Section(
    SECTION, FeedbackSettings, rules={"allow_insecure_http": _encrypted_unless_allowed}
)


def _is_loopback(host: str | None) -> bool:
    """This machine: ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host is None:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# stand-ins for a missing or malformed required setting while the others are checked
_STAND_INS = {"base_url": "http://127.0.0.1/v1", "api_key": "stand-in"}


def settings_problems(**raw: Any) -> list[str]:
    """Every missing or malformed setting of ``raw`` at once (``validate`` stops at the
    first)."""
    return section_problems(SOURCE, raw)


def section_problems(section: Section[FeedbackSettings], raw: Mapping[str, Any]) -> list[str]:
    """Every missing or malformed setting of ``raw``, as ``section`` names them (the
    source's, or one account's: ``accounts.section``): each one found is replaced by its
    default, or a stand-in, and the rest checked again."""
    fields = section.names()
    problems: list[str] = []
    values = dict(raw)
    for _ in range(len(fields) + 1):
        try:
            section.check(values)
            return problems
        except ConfigError as exc:
            message = str(exc)
            problems.append(message)
            named = [
                (message.find(section.describe(n)), n)
                for n in fields
                if section.describe(n) in message
            ]
            if not named:
                return problems
            name = min(named)[1]
            if name in _STAND_INS and values.get(name) != _STAND_INS[name]:
                values[name] = _STAND_INS[name]
            elif name in values:
                del values[name]
            else:
                return problems
    return problems


def load_raw() -> dict[str, Any]:
    """``sources.feedback`` as dlt resolves it (environment, then ``.dlt/secrets.toml`` and
    ``.dlt/config.toml``), unchecked."""
    from feedback_sync.api.config import resolve_raw

    return resolve_raw(SOURCE)


def load_settings(api_key: str | None = None) -> FeedbackSettings:
    """Resolves ``sources.feedback`` through dlt's providers (environment, then
    ``.dlt/secrets.toml`` and ``.dlt/config.toml``) and validates it.

    ``api_key``, when given (say, from a Prefect ``Secret`` block), is used instead of the
    key dlt would resolve.

    Raises:
        ConfigError: naming the setting that is missing or malformed.
    """
    raw = load_raw()
    if api_key is not None:
        raw["api_key"] = api_key
    return FeedbackSettings.validate(**raw)
