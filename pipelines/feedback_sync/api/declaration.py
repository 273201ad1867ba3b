"""How a setting is declared, once: its name, type, default, range, description and whether
it is a secret, and the check that turns what dlt resolved into a checked value.

A section (``[sources.feedback]``, ``[push]``, ``[models]``, ...) is a frozen dataclass
whose fields are made by ``setting``: the annotation is the checked value's type, the
``Kind`` its check and range; a check across settings is a ``Rule`` of the ``Section``, run
after the setting it follows. ``Section`` reads the fields into the section's setting list,
which everything else reads: validation (``Section.check``), the dlt configuration spec
(``api/config.py``), the settings reference and ``init``'s template (``docsgen/``), and the
unknown-key check (``app/setting_names.py``). This module imports no dlt: ``status`` reads
the names from it.

Every message names the setting the way a user sets it, ``SOURCES__FEEDBACK__PAGE_SIZE
(page_size in [sources.feedback])``, from the section's path: the same setting list checked
under another path names that path. A value given another way, as a command's option
(``--samples``), is checked by the setting's own kind and named as given
(``Section.given``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from feedback_sync.errors import ConfigError


class _Required:
    """The default of a setting that has none."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class Kind:
    """What values a setting accepts, and what it makes of them."""

    def check(self, value: Any, said: str, secret: bool) -> Any:
        """The checked value of ``value``; ``said`` names the setting in messages.

        Raises:
            ConfigError: ``value`` is missing or malformed.
        """
        raise NotImplementedError


@dataclass(frozen=True)
class Text(Kind):
    """Non-blank text, stripped; a secret must carry no surrounding whitespace at all."""

    def check(self, value: Any, said: str, secret: bool) -> str:
        if value is None or (isinstance(value, str) and not value.strip()):
            where = ".dlt/secrets.toml" if secret else ".dlt/config.toml"
            raise ConfigError(f"missing setting {said}: set it in {where} or the environment")
        if not isinstance(value, str):
            raise ConfigError(f"{said} must be a string, got {type(value).__name__}")
        if secret and (value != value.strip() or any(c in value for c in "\r\n")):
            raise ConfigError(f"{said} has surrounding whitespace or a line break")
        return value.strip()


@dataclass(frozen=True)
class Choice(Kind):
    """One of ``options``, in any case."""

    options: tuple[str, ...]

    def check(self, value: Any, said: str, secret: bool) -> str:
        chosen = Text().check(value, said, secret).lower()
        if chosen not in self.options:
            raise ConfigError(f"{said} must be one of {', '.join(self.options)}, got {chosen!r}")
        return chosen


@dataclass(frozen=True)
class Integer(Kind):
    """An integer from ``low`` to ``high`` (None: no upper bound); digits in a string
    count."""

    low: int
    high: int | None

    def check(self, value: Any, said: str, secret: bool) -> int:
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        in_range = (
            isinstance(value, int)
            and self.low <= value
            and (self.high is None or value <= self.high)
        )
        if isinstance(value, bool) or not in_range:
            bounds = f">= {self.low}" if self.high is None else f"from {self.low} to {self.high}"
            raise ConfigError(f"{said} must be an integer {bounds}, got {value!r}")
        return int(value)


@dataclass(frozen=True)
class Number(Kind):
    """A finite number of at least ``minimum`` and, where given, at most ``maximum``; with
    ``optional``, unset, 0 or empty mean none (None)."""

    minimum: float
    optional: bool = False
    maximum: float | None = None

    def check(self, value: Any, said: str, secret: bool) -> float | None:
        if self.optional and value in (None, 0, ""):
            return None
        number = _number(value)
        above = self.maximum is not None and number > self.maximum
        if not number >= self.minimum or number == float("inf") or above:
            bounds = (
                f">= {self.minimum:g}"
                if self.maximum is None
                else f"from {self.minimum:g} to {self.maximum:g}"
            )
            raise ConfigError(f"{said} must be a number {bounds}, got {value!r}")
        return number


def _number(value: Any) -> float:
    """``value`` as a float; NaN for what is not a number (a flag is not one either)."""
    if isinstance(value, bool):
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


@dataclass(frozen=True)
class Numbers(Kind):
    """A non-empty list of finite numbers of at least ``minimum``, read as ``Names`` reads
    its list (a TOML list, its JSON text, or comma-separated text); one number is a list of
    one."""

    minimum: float

    def check(self, value: Any, said: str, secret: bool) -> tuple[float, ...]:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]
        items = _items(value, said) if value is not None else None
        numbers = [_number(item) for item in items or ()]
        if not numbers or not all(self.minimum <= n < float("inf") for n in numbers):
            raise ConfigError(
                f"{said} must be a list of numbers >= {self.minimum:g}, got {value!r}"
            )
        return tuple(numbers)


@dataclass(frozen=True)
class Flag(Kind):
    """True or false (``true``, ``false``, ``1``, ``0`` as text); with ``optional``, unset
    or blank mean the default (None)."""

    optional: bool = False

    def check(self, value: Any, said: str, secret: bool) -> bool | None:
        if self.optional and (value is None or (isinstance(value, str) and not value.strip())):
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
            return value.strip().lower() in ("true", "1")
        raise ConfigError(f"{said} must be true or false, got {value!r}")


@dataclass(frozen=True)
class Names(Kind):
    """A list of non-empty strings, stripped and without repeats: a TOML list, its JSON text,
    or comma-separated text from the environment. Unset: none."""

    def check(self, value: Any, said: str, secret: bool) -> tuple[str, ...]:
        if value is None or value == "":
            return ()
        items = _items(value, said)
        if items is None:
            raise ConfigError(f"{said} must be a list of strings, got {value!r}")
        names: list[str] = []
        for item in items:
            if not isinstance(item, str) or not item.strip():
                raise ConfigError(f"{said} must be a list of non-empty strings, got {items!r}")
            if item.strip() not in names:
                names.append(item.strip())
        return tuple(names)


def _items(value: Any, said: str) -> Sequence[Any] | None:
    """The items of a list setting: a TOML list as it is, text starting with ``[`` as JSON,
    other text split at commas and stripped; None for what is no list.

    Raises:
        ConfigError: the text starts with ``[`` but is no valid JSON.
    """
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{said} is not a valid JSON list: {value!r}") from None
    elif isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return None
    return value


@dataclass(frozen=True)
class Folder(Kind):
    """A folder's path, stripped and with ``~`` expanded; with ``existing`` (what the
    folder holds, for the message) it must be there; with ``optional``, unset means none
    (None)."""

    existing: str = ""
    optional: bool = False

    def check(self, value: Any, said: str, secret: bool) -> Path | None:
        if self.optional and value is None:
            return None
        if not isinstance(value, str | Path) or not str(value).strip():
            raise ConfigError(f"{said} must be a folder path, got {value!r}")
        folder = Path(str(value).strip()).expanduser()
        if self.existing and not folder.is_dir():
            raise ConfigError(f"{said} {folder}: no such folder ({self.existing})")
        return folder


@dataclass(frozen=True)
class Email(Kind):
    """An email address (text with an ``@``), stripped; with ``optional``, unset means none
    (None)."""

    optional: bool = False

    def check(self, value: Any, said: str, secret: bool) -> str | None:
        if self.optional and value is None:
            return None
        if not isinstance(value, str) or "@" not in value:
            raise ConfigError(f"{said} must be an email, got {value!r}")
        return value.strip()


def setting(
    kind: Kind,
    *,
    doc: str,
    default: Any = REQUIRED,
    secret: bool = False,
    note: str = "",
    example: Any = None,
    unset: str = "",
) -> Any:
    """A field of a section's dataclass that declares a setting.

    Args:
        kind: its check and range.
        doc: what it does (the settings reference shows it).
        default: the value when unset, as a user would write it (the kind checks it like
            any other; None: not set); ``REQUIRED`` for none.
        secret: dlt reads it as a secret (``.dlt/secrets.toml``), and it is never shown.
        note: one line for ``init``'s template.
        example: a value ``init``'s template shows, commented out, instead of the default.
        unset: what the default None stands for, where that is a value of its own (the
            settings reference shows it as the default).
    """
    declared = _Declared(kind, inspect.cleandoc(doc), secret, note, example, unset)
    metadata = {_KEY: declared}
    if default is REQUIRED:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


_KEY = "feedback_sync.setting"


@dataclass(frozen=True)
class _Declared:
    kind: Kind
    doc: str
    secret: bool
    note: str
    example: Any
    unset: str


@dataclass(frozen=True)
class Setting:
    """One declared setting, as its section's dataclass field says."""

    name: str
    type: Any  # the checked value's type (the field's annotation)
    kind: Kind
    default: Any  # REQUIRED for none
    doc: str
    secret: bool = False
    note: str = ""
    example: Any = None
    unset: str = ""  # what the default None stands for, if anything

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


# a check across settings, run after one of them: the values checked so far, the section
Rule = Callable[[Mapping[str, Any], "Section[Any]"], None]

T = TypeVar("T")


@dataclass(frozen=True)
class Section(Generic[T]):
    """A TOML table of settings (``path``, such as ``sources.feedback``), declared by the
    dataclass ``checked``; ``rules`` run after the setting they are keyed by is checked."""

    path: str
    checked: type[T]
    rules: Mapping[str, Rule] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def settings(self) -> tuple[Setting, ...]:
        """The section's settings, in the order they are checked."""
        checked: Any = self.checked  # a dataclass, as ``setting`` made its fields
        hints = typing.get_type_hints(checked)
        found = []
        for f in dataclasses.fields(checked):
            declared = f.metadata.get(_KEY)
            if isinstance(declared, _Declared):
                default = REQUIRED if f.default is dataclasses.MISSING else f.default
                found.append(
                    Setting(
                        name=f.name,
                        type=hints[f.name],
                        kind=declared.kind,
                        default=default,
                        doc=declared.doc,
                        secret=declared.secret,
                        note=declared.note,
                        example=declared.example,
                        unset=declared.unset,
                    )
                )
        return tuple(found)

    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.settings)

    def env(self, name: str) -> str:
        """``page_size`` -> ``SOURCES__FEEDBACK__PAGE_SIZE``."""
        return f"{self.path.replace('.', '__').upper()}__{name.upper()}"

    def describe(self, name: str) -> str:
        """How a user sets ``name``: both the environment variable and the TOML key."""
        return f"{self.env(name)} ({name} in [{self.path}])"

    def check(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Each setting's checked value, from ``raw`` (as dlt resolved it; an absent key
        takes the default), in declaration order.

        Raises:
            ConfigError: naming the first setting that is missing or malformed.
        """
        values: dict[str, Any] = {}
        for s in self.settings:
            value = raw.get(s.name, None if s.required else s.default)
            values[s.name] = s.kind.check(value, self.describe(s.name), s.secret)
            rule = self.rules.get(s.name)
            if rule is not None:
                rule(values, self)
        return values

    def made(self, raw: Mapping[str, Any]) -> T:
        """The section's dataclass of the values ``check`` makes of ``raw``.

        Raises:
            ConfigError: naming the first setting that is missing or malformed.
        """
        return self.checked(**self.check(raw))

    def given(self, name: str, value: Any, said: str) -> Any:
        """``value`` given for setting ``name`` another way than the settings (a command's
        option, ``said``: ``--samples``), checked by the setting's kind and named as given.

        Raises:
            ConfigError: ``value`` is malformed, in the words of the setting's kind.
        """
        (declared,) = (s for s in self.settings if s.name == name)
        return declared.kind.check(value, said, declared.secret)
