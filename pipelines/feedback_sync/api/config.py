"""dlt's configuration spec of a declared section (``settings.SOURCE``, ``push.settings.PUSH``,
...), made from its declaration: dlt resolves the raw values with it (``resolve_raw``), and
the section's checks take them from there (``load``, ``FeedbackSettings.validate``).

Fields are loosely typed on purpose: dlt hands over what the user wrote and the declaration's
checks name the setting in their messages. A field with a default is ``Any`` (the TOML
value, or the environment's text, as written); one without is ``Optional[str]``, as
``Optional`` or dlt would call it required, and dlt turns a TOML value into text for it (a
list as JSON, which ``Names`` reads). A secret is ``TSecretStrValue``, so dlt reads it from
secret providers and masks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional, TypeVar

from dlt.common.configuration import configspec, resolve_configuration
from dlt.common.configuration.specs import BaseConfiguration
from dlt.common.typing import TSecretStrValue

from feedback_sync.api.declaration import Section, Setting

T = TypeVar("T")


def _hint(setting: Setting) -> Any:
    """The annotation dlt resolves ``setting`` with (dlt inspects it at runtime: ``Optional``
    rather than ``X | None``)."""
    if setting.secret:
        return Optional[TSecretStrValue]  # noqa: UP045
    if setting.required or setting.default is None:
        return Optional[str]  # noqa: UP045
    return Any


_SPECS: dict[tuple[str, type], type[BaseConfiguration]] = {}


def spec_of(section: Section[Any]) -> type[BaseConfiguration]:
    """The dlt configuration spec of ``section``: one field per setting (made once per
    section path and declaration: two declarations may share a table, as the source's
    settings and its account list do)."""
    key = (section.path, section.checked)
    if key not in _SPECS:
        name = "".join(part.title() for part in section.path.split(".")) + section.checked.__name__
        namespace: dict[str, Any] = {
            "__module__": __name__,
            "__qualname__": name,
            "__annotations__": {s.name: _hint(s) for s in section.settings},
        }
        namespace.update({s.name: None if s.required else s.default for s in section.settings})
        _SPECS[key] = configspec(type(name, (BaseConfiguration,), namespace))
    return _SPECS[key]


def resolve_raw(section: Section[Any]) -> dict[str, Any]:
    """``section`` as dlt resolves it (environment, then ``.dlt/secrets.toml`` and
    ``.dlt/config.toml``), unchecked."""
    config = resolve_configuration(spec_of(section)(), sections=tuple(section.path.split(".")))
    return {name: config[name] for name in config}


def load(section: Section[T], given: Mapping[str, tuple[str, Any]] | None = None) -> T:
    """``section``'s checked settings, as dlt resolves them. A value in ``given`` (setting
    -> (the option that gave it, such as ``--samples``; its value, None when not given))
    wins over the settings: it is checked first by the setting's kind, named as given.

    Raises:
        ConfigError: naming the first value given, or setting, that is missing or
            malformed.
    """
    raw = resolve_raw(section)
    for name, (said, value) in (given or {}).items():
        if value is not None:
            raw[name] = section.given(name, value, said)
    return section.made(raw)
