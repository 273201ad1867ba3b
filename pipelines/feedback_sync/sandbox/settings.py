"""The sandbox's switches: every behaviour ``api-contract.md`` names, changeable at run time.

``Settings.update`` takes the JSON the control interface receives and refuses unknown or
ill-typed keys with a message naming them, so a test that mistypes a switch fails loudly
instead of silently testing the default.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

FAULT_KINDS = ("429", "429_bare", "500", "502", "503", "stall", "drop", "truncate")
TIMESTAMP_FORMATS = ("contract", "iso", "plain", "mixed")
LAST_PAGE_AFTER = ("cursor", "null", "repeat")
ANNOUNCEMENT_ORDERS = ("oldest_first", "newest_first")
COMPANY_FIELDS = ("attributes", "top_level")


class SettingsError(ValueError):
    """A switch name or value the sandbox does not know."""


@dataclass(slots=True)
class ScriptedFault:
    """Fail the next ``count`` requests (matching ``path_prefix`` and ``method``) with ``kind``."""

    kind: str
    count: int = 1
    path_prefix: str = "/v1/"
    method: str | None = None


@dataclass(slots=True)
class FaultSettings:
    rate: float = 0.0
    seed: int = 0
    kinds: list[str] = field(default_factory=lambda: list(FAULT_KINDS))
    stall_seconds: float = 30.0
    retry_after_seconds: int = 1
    script: list[ScriptedFault] = field(default_factory=list)


@dataclass(slots=True)
class Settings:
    """Switches; the API key is kept here but never shown by ``public()``."""

    api_key: str
    custom_attributes: bool = True
    ideas_endpoint: bool = True
    rate_limit_per_second: float | None = None
    latency_ms: float = 0.0
    timestamp_format: str = "contract"
    last_page_after: str = "cursor"
    announcement_order: str = "oldest_first"
    company_fields: str = "attributes"
    number_drift: int | None = None
    page_overlap: int = 0
    total_offset: int = 0
    # answers of at least 500 bytes gzip-compressed for a client that accepts it
    gzip: bool = False
    faults: FaultSettings = field(default_factory=FaultSettings)

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        del data["api_key"]
        return data

    def update(self, changes: dict[str, Any]) -> None:
        """Applies a partial update; all or nothing.

        Raises:
            SettingsError: an unknown key or a value of the wrong type or range.
        """
        staged = Settings(**{f.name: getattr(self, f.name) for f in fields(self)})
        for key, value in changes.items():
            if key == "faults":
                staged.faults = _faults(self.faults, value)
            elif key in _SIMPLE:
                setattr(staged, key, _SIMPLE[key](key, value))
            else:
                raise SettingsError(
                    f"unknown setting {key!r}; known: {sorted([*_SIMPLE, 'faults'])}"
                )
        for f in fields(self):
            setattr(self, f.name, getattr(staged, f.name))


def _bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SettingsError(f"{key} must be true or false, got {value!r}")
    return value


def _non_negative(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise SettingsError(f"{key} must be a number >= 0, got {value!r}")
    return float(value)


def _rate_limit(key: str, value: Any) -> float | None:
    if value is None:
        return None
    rate = _non_negative(key, value)
    if rate == 0:
        raise SettingsError(f"{key} must be > 0 (or null for no limit)")
    return rate


def _int(key: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SettingsError(f"{key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _drift_seed(key: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"{key} must be an integer seed (or null for no drift), got {value!r}")
    return value


def _choice(options: tuple[str, ...]) -> Any:
    def check(key: str, value: Any) -> str:
        if value not in options:
            raise SettingsError(f"{key} must be one of {list(options)}, got {value!r}")
        return str(value)

    return check


_SIMPLE: dict[str, Any] = {
    "custom_attributes": _bool,
    "ideas_endpoint": _bool,
    "rate_limit_per_second": _rate_limit,
    "latency_ms": _non_negative,
    "timestamp_format": _choice(TIMESTAMP_FORMATS),
    "last_page_after": _choice(LAST_PAGE_AFTER),
    "announcement_order": _choice(ANNOUNCEMENT_ORDERS),
    "company_fields": _choice(COMPANY_FIELDS),
    "number_drift": _drift_seed,
    "page_overlap": lambda key, value: _int(key, value, 0, 100),
    "total_offset": lambda key, value: _int(key, value, -(10**6), 10**6),
    "gzip": _bool,
}


def _faults(current: FaultSettings, value: Any) -> FaultSettings:
    if not isinstance(value, dict):
        raise SettingsError(f"faults must be an object, got {value!r}")
    new = FaultSettings(
        rate=current.rate,
        seed=current.seed,
        kinds=list(current.kinds),
        stall_seconds=current.stall_seconds,
        retry_after_seconds=current.retry_after_seconds,
        script=list(current.script),
    )
    for key, item in value.items():
        where = f"faults.{key}"
        if key == "rate":
            rate = _non_negative(where, item)
            if rate > 1:
                raise SettingsError(f"{where} must be between 0 and 1, got {item!r}")
            new.rate = rate
        elif key == "seed":
            if isinstance(item, bool) or not isinstance(item, int):
                raise SettingsError(f"{where} must be an integer, got {item!r}")
            new.seed = item
        elif key == "kinds":
            new.kinds = _kinds(where, item)
        elif key == "stall_seconds":
            new.stall_seconds = _non_negative(where, item)
        elif key == "retry_after_seconds":
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise SettingsError(f"{where} must be an integer >= 0, got {item!r}")
            new.retry_after_seconds = item
        elif key == "script":
            new.script = _script(where, item)
        else:
            raise SettingsError(f"unknown setting {where!r}")
    return new


def _kinds(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise SettingsError(f"{where} must be a non-empty list of {list(FAULT_KINDS)}")
    for kind in value:
        if kind not in FAULT_KINDS:
            raise SettingsError(f"{where}: unknown fault {kind!r}; known: {list(FAULT_KINDS)}")
    return [str(kind) for kind in value]


def _script(where: str, value: Any) -> list[ScriptedFault]:
    if not isinstance(value, list):
        raise SettingsError(f"{where} must be a list of {{kind, count, path_prefix, method}}")
    script = []
    for i, entry in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(entry, dict) or entry.get("kind") not in FAULT_KINDS:
            raise SettingsError(f"{here} needs a kind from {list(FAULT_KINDS)}, got {entry!r}")
        unknown = set(entry) - {"kind", "count", "path_prefix", "method"}
        if unknown:
            raise SettingsError(f"{here}: unknown keys {sorted(unknown)}")
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise SettingsError(f"{here}.count must be an integer >= 1, got {count!r}")
        prefix = entry.get("path_prefix", "/v1/")
        method = entry.get("method")
        if not isinstance(prefix, str) or (method is not None and not isinstance(method, str)):
            raise SettingsError(f"{here}: path_prefix and method must be strings")
        script.append(
            ScriptedFault(entry["kind"], count, prefix, method.upper() if method else None)
        )
    return script
