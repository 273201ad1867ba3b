"""Settings as the settings page shows them: one ``Setting`` per setting of a declared
section (``from_section``: ``[sources.feedback]``) or per field of a dlt configuration spec
(``from_spec``: ``[push]``).

A declared section (``feedback_sync.api.declaration``) holds each setting's type, default,
description and secret flag. A spec (``@configspec``) holds the raw values dlt resolves, its
defaults and which field is a secret; the docstring under each field says what it does
(``fielddocs``). The checked settings class beside it (``PushSettings``) gives each value's
real type, and a field it has no default for is required.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback_sync.api.declaration import Section

from docsgen.fielddocs import field_docs
from docsgen.markdown import code


@dataclass(frozen=True)
class Setting:
    """One setting as the settings page shows it. ``section`` is its TOML table (empty for
    an environment variable alone); ``default`` and ``description`` are Markdown."""

    section: str
    key: str
    type: str
    default: str
    description: str
    secret: bool = False

    @property
    def env(self) -> str:
        """Its environment variable: dlt's naming, section and key joined by ``__``."""
        if not self.section:
            return self.key
        return "__".join([*self.section.split("."), self.key]).upper()


def type_name(hint: Any) -> str:
    """A type as a reader of the settings page calls it."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [type_name(a) for a in typing.get_args(hint) if a is not type(None)]
        return " or ".join(dict.fromkeys(kinds))
    if typing.get_origin(hint) in (tuple, list):
        inner = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return f"list of {type_name(inner[0])}" if inner else "list"
    names = {bool: "true or false", int: "integer", float: "number", str: "text", Path: "path"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def default_text(value: Any) -> str:
    """A default as the page shows it (TOML's spelling, as code); ``""`` for none."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, tuple | list):
        return code("[" + ", ".join(str(v) for v in value) + "]")
    return code(str(value))


def from_section(section: Section[Any]) -> list[Setting]:
    """The settings of a declared ``section``, in their order."""
    return [
        Setting(
            section=section.path,
            key=s.name,
            type=type_name(s.type),
            default="required" if s.required else default_text(s.default) or s.unset,
            description=s.doc,
            secret=s.secret,
        )
        for s in section.settings
    ]


def from_spec(section: str, spec: type, checked: type) -> list[Setting]:
    """The settings of ``spec`` (a dlt configspec resolved under ``section``), typed by
    ``checked``. Raises ValueError naming a field without a docstring."""
    from dlt.common.configuration.specs.base_configuration import is_secret_hint

    hints: dict[str, Any] = spec.get_resolvable_fields()  # type: ignore[attr-defined]
    docs = field_docs(spec)
    missing = [name for name in hints if name not in docs]
    if missing:
        raise ValueError(
            f"{spec.__module__}.{spec.__qualname__}: fields without a docstring under them "
            f"(the settings reference is made from it): {', '.join(missing)}"
        )
    spec_fields = {f.name: f for f in dataclasses.fields(spec)}
    checked_fields = {f.name: f for f in dataclasses.fields(checked)}
    checked_types = typing.get_type_hints(checked)
    settings = []
    for name, hint in hints.items():
        default = spec_fields[name].default
        known = checked_fields.get(name)
        required = known is not None and known.default is dataclasses.MISSING
        kind = checked_types[name] if known is not None else type(default)
        settings.append(
            Setting(
                section=section,
                key=name,
                type=type_name(kind),
                default="required" if required else default_text(default),
                description=docs[name],
                secret=is_secret_hint(hint),
            )
        )
    return settings
