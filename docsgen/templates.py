"""``init``'s templates (``app/templates/config.toml`` and ``secrets.toml``): the table of
each declared section, written from its declaration.

In each template, the lines after a declared section's header (``[sources.feedback]``,
``[push]``, ...; a comment may follow it on its line), up to the first blank line, are the
generator's: one line per setting (the secrets in ``secrets.toml``, the others in
``config.toml``), with the setting's note. A setting with an example is shown commented out
with it; a required secret as ``""`` to fill in; any other with its default. A template
without a section's header has no line of it (``secrets.toml`` holds only the sections with
a secret). The rest of each template is written by hand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback_sync.api.declaration import Section, Setting

# where a setting's note starts on its line (the hand-written lines follow it)
NOTE_COLUMN = 36


@dataclass(frozen=True)
class Template:
    """A template file under the repository and whether it holds the secrets."""

    path: str
    secrets: bool

    def file(self, root: Path) -> Path:
        return root / self.path


TEMPLATES = (
    Template("pipelines/feedback_sync/app/templates/config.toml", secrets=False),
    Template("pipelines/feedback_sync/app/templates/secrets.toml", secrets=True),
)


def _sections() -> tuple[Section[Any], ...]:
    from feedback_sync.app.setting_names import DECLARED

    return DECLARED


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    return str(value)


def line(setting: Setting) -> str:
    """One setting's line in its template.

    Raises:
        ValueError: the setting has neither a default nor an example to show.
    """
    if setting.default is None and setting.example is None:
        raise ValueError(f"{setting.name} needs an example for init's template (no default)")
    if setting.secret and setting.required:
        text = f'{setting.name} = ""'
    elif setting.example is not None:
        text = f"# {setting.name} = {toml_value(setting.example)}"
    else:
        text = f"{setting.name} = {toml_value(setting.default)}"
    return f"{text.ljust(NOTE_COLUMN - 2)}  # {setting.note}" if setting.note else text


def rewrite(text: str, section: Section[Any], secrets: bool) -> str:
    """``text`` with the lines of ``section``'s table made from its declaration, and from
    that of every other declared section of the same table (``[sources.feedback]``'s
    account list).

    Raises:
        ValueError: the template has no header ``[<section>]`` and the section has lines
            for it.
    """
    lines = text.split("\n")
    header = f"[{section.path}]"
    declared = _sections()
    same = [o for o in declared if o.path == section.path] if section in declared else [section]
    made = [line(s) for other in same for s in other.settings if s.secret == secrets]
    found = [i for i, held in enumerate(lines) if held.split("#", 1)[0].strip() == header]
    if not found:
        if made:
            raise ValueError(f"the template has no line {header}")
        return text
    start = found[0] + 1
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    return "\n".join([*lines[:start], *made, *lines[end:]])


def render(template: Template, root: Path) -> str:
    """The template's text as it should be: the committed file, its tables rewritten."""
    text = template.file(root).read_text(encoding="utf-8")
    for section in {section.path: section for section in _sections()}.values():
        text = rewrite(text, section, template.secrets)
    return text


def stale(root: Path) -> list[Template]:
    """The templates under ``root`` whose tables differ from the declarations (a root
    without a template has none to rewrite)."""
    return [
        t
        for t in TEMPLATES
        if t.file(root).is_file() and t.file(root).read_text(encoding="utf-8") != render(t, root)
    ]


def write(root: Path) -> list[Template]:
    """Rewrites the stale templates under ``root``; those written."""
    written = stale(root)
    for template in written:
        template.file(root).write_text(render(template, root), encoding="utf-8")
    return written
