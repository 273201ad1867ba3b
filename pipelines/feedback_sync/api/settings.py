"""The source's settings: names, defaults and the checks that run before any request.

Every setting lives in section ``sources.feedback`` (``.dlt/config.toml``,
``.dlt/secrets.toml``) or in an environment variable ``SOURCES__FEEDBACK__<NAME>``; dlt
resolves them, and ``FeedbackSettings.validate`` rejects what is missing or malformed with a
message that names the setting.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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
    return f"{SECTION.replace('.', '__').upper()}__{setting.upper()}"


def describe(setting: str) -> str:
    """How a user sets ``setting``: both the TOML key and the environment variable."""
    return f"{env_name(setting)} ({setting} in [{SECTION}])"


@dataclass(frozen=True)
class FeedbackSettings:
    """Checked settings of one run of the source."""

    base_url: str
    api_key: str
    auth_method: str = "bearer"
    page_size: int = 100
    max_concurrency: int = 8
    requests_per_second: float | None = None
    integration_types: tuple[str, ...] = ()
    idea_idxs: tuple[str, ...] = ()
    announcement_lookback_days: float = 7.0
    timeout_seconds: float = 30.0
    max_retries: int = 8
    delete_mode: str = "hard"
    # versioned history per entity (``warehouse/history.py``): True, False, or None for the
    # default (ideas and companies on where the warehouse keeps history)
    history_ideas: bool | None = None
    history_companies: bool | None = None
    history_announcements: bool | None = None
    # where the sync's requests are exchanged (``http_helper``): auto, on or off
    http_process: str = "auto"

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
        base_url = _text(raw.get("base_url"), "base_url").rstrip("/")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"{describe('base_url')} must be an http(s) URL such as "
                f"https://feedback.example.com/v1, got {base_url!r}"
            )
        if parts.query or parts.fragment:
            raise ConfigError(f"{describe('base_url')} must not carry a query or fragment")
        # the spec: "{base_url}, the service base address, which ends with the version
        # segment /v1"; a URL without it fails only at the first request, with a bare 404
        version = parts.path.rsplit("/", 1)[-1]
        if not re.fullmatch(r"v\d+", version):
            raise ConfigError(
                f"{describe('base_url')} must end with the API's version segment {API_VERSION}, "
                f"as in {base_url}{API_VERSION}; got {base_url!r}"
            )
        if version != API_VERSION.strip("/"):
            raise ConfigError(
                f"{describe('base_url')} names API version {version}; feedback-sync speaks "
                f"{API_VERSION.strip('/')} ({base_url.rsplit('/', 1)[0]}{API_VERSION}), got "
                f"{base_url!r}"
            )
        insecure_ok = _flag(raw.get("allow_insecure_http", False), "allow_insecure_http")
        if parts.scheme == "http" and not insecure_ok and not _is_loopback(parts.hostname):
            raise ConfigError(
                f"{describe('base_url')} is plain http:// to {parts.hostname}, not this "
                "machine: the API key would cross the network unencrypted. Use https://, or "
                f"set {describe('allow_insecure_http')} to true"
            )
        api_key = _text(raw.get("api_key"), "api_key", secret=True)
        auth_method = _text(raw.get("auth_method", "bearer"), "auth_method").lower()
        if auth_method not in AUTH_METHODS:
            raise ConfigError(
                f"{describe('auth_method')} must be one of {', '.join(AUTH_METHODS)}, "
                f"got {auth_method!r}"
            )
        delete_mode = _text(raw.get("delete_mode", "hard"), "delete_mode").lower()
        if delete_mode not in DELETE_MODES:
            raise ConfigError(
                f"{describe('delete_mode')} must be one of {', '.join(DELETE_MODES)}, "
                f"got {delete_mode!r}"
            )
        http_process = _text(raw.get("http_process", "auto"), "http_process").lower()
        if http_process not in HTTP_PROCESS:
            raise ConfigError(
                f"{describe('http_process')} must be one of {', '.join(HTTP_PROCESS)}, "
                f"got {http_process!r}"
            )
        rps = raw.get("requests_per_second")
        return cls(
            base_url=base_url,
            api_key=api_key,
            auth_method=auth_method,
            page_size=_int(raw.get("page_size", 100), "page_size", 1, MAX_PAGE_SIZE),
            max_concurrency=_int(raw.get("max_concurrency", 8), "max_concurrency", 1, 256),
            requests_per_second=(
                None if rps in (None, 0, "") else _number(rps, "requests_per_second", minimum=0.01)
            ),
            integration_types=_names(raw.get("integration_types"), "integration_types"),
            idea_idxs=_names(raw.get("idea_idxs"), "idea_idxs"),
            announcement_lookback_days=_number(
                raw.get("announcement_lookback_days", 7.0),
                "announcement_lookback_days",
                minimum=0.0,
            ),
            timeout_seconds=_number(
                raw.get("timeout_seconds", 30.0), "timeout_seconds", minimum=0.01
            ),
            max_retries=_int(raw.get("max_retries", 8), "max_retries", 0, 100),
            delete_mode=delete_mode,
            history_ideas=_optional_flag(raw.get("history_ideas"), "history_ideas"),
            history_companies=_optional_flag(raw.get("history_companies"), "history_companies"),
            history_announcements=_optional_flag(
                raw.get("history_announcements"), "history_announcements"
            ),
            http_process=http_process,
        )


def _text(value: Any, name: str, *, secret: bool = False) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        where = ".dlt/secrets.toml" if secret else ".dlt/config.toml"
        raise ConfigError(f"missing setting {describe(name)}: set it in {where} or the environment")
    if not isinstance(value, str):
        raise ConfigError(f"{describe(name)} must be a string, got {type(value).__name__}")
    if secret and (value != value.strip() or any(c in value for c in "\r\n")):
        raise ConfigError(f"{describe(name)} has surrounding whitespace or a line break")
    return value.strip()


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ConfigError(f"{describe(name)} must be true or false, got {value!r}")


def _optional_flag(value: Any, name: str) -> bool | None:
    """A true/false setting whose absence means the default (None)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _flag(value, name)


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


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(
            f"{describe(name)} must be an integer from {low} to {high}, got {value!r}"
        )
    return value


def _number(value: Any, name: str, *, minimum: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not number >= minimum or number == float("inf"):
        raise ConfigError(f"{describe(name)} must be a number >= {minimum:g}, got {value!r}")
    return number


def _names(value: Any, name: str) -> tuple[str, ...]:
    """A list setting: a TOML/JSON list, or a comma-separated string from the environment."""
    if value is None or value == "":
        return ()
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{describe(name)} is not a valid JSON list: {value!r}") from None
    elif isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise ConfigError(f"{describe(name)} must be a list of strings, got {value!r}")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(
                f"{describe(name)} must be a list of non-empty strings, got {value!r}"
            )
        if item.strip() not in names:
            names.append(item.strip())
    return tuple(names)


# stand-ins for a missing or malformed required setting while the others are checked
_STAND_INS = {"base_url": "http://127.0.0.1/v1", "api_key": "stand-in"}


def settings_problems(**raw: Any) -> list[str]:
    """Every missing or malformed setting of ``raw`` at once (``validate`` stops at the
    first): each one found is replaced by its default, or a stand-in, and the rest checked
    again."""
    from feedback_sync.api.config import FeedbackConfiguration

    # every setting validate reads (the spec's fields: allow_insecure_http is one, though
    # the checked settings keep no field of it)
    fields = tuple(FeedbackConfiguration.get_resolvable_fields())
    problems: list[str] = []
    values = dict(raw)
    for _ in range(len(fields) + 1):
        try:
            FeedbackSettings.validate(**values)
            return problems
        except ConfigError as exc:
            message = str(exc)
            problems.append(message)
            named = [(message.find(describe(n)), n) for n in fields if describe(n) in message]
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
    from dlt.common.configuration import resolve_configuration

    from feedback_sync.api.config import FeedbackConfiguration

    config = resolve_configuration(FeedbackConfiguration(), sections=("sources", "feedback"))
    return {name: config[name] for name in config}


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
