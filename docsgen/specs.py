"""Settings as the settings page shows them: one ``Setting`` per setting of a declared
section (``from_section``: ``[sources.feedback]``, ``[push]``, ...), or written in
``other_settings`` for those feedback-sync does not declare.

A declared section (``feedback_sync.api.declaration``) holds each setting's type, default,
description and secret flag.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback_sync.api.declaration import Section

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
