"""The form every SQL file of the project shares, models (``sql/staging``, ``sql/marts``)
and push targets (``sql/push``) alike.

A file opens with a comment block::

    -- <name>: one line that says what it is
    --   carried on here               indented: the description (or a header line) goes on
    -- grain: one row per ...          header lines: ``word: value``
    -- key: ...
    -- columns:
    --   <column>: what it means        indented: one line per column,
    --     carried on here                 indented further: the meaning goes on
    -- tests:                           (models only, optional)
    --   <kind>: <arguments>            indented: one data test per line

and calls ``{{ function('name') }}`` in its SQL (``source``, ``ref``; ``curated``, ``var``),
which the caller replaces with relations or literals.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# a header line's text starts right after "-- "; a column line is indented further
_HEADER_INDENT = 1
_COLUMN_INDENT = 3


@dataclass
class Header:
    """A file's comment block."""

    description: str
    fields: dict[str, str] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)
    # the ``tests:`` block: ``(kind, arguments)`` per line, in order (a kind may repeat)
    tests: list[tuple[str, str]] = field(default_factory=list)


def read_header(sql: str, name: str) -> Header | None:
    """The comment block that opens ``sql`` (the file ``name``), or None when it has none."""
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:])
    if not lines:
        return None
    first = lines[0].strip()
    header = Header(first.split(":", 1)[1].strip() if first.startswith(f"{name}:") else first)
    section = ""  # "columns" or "tests" while in that block
    for raw in lines[1:]:
        text = raw.strip()
        if not text:
            continue
        indent = len(raw) - len(raw.lstrip())
        word, colon, rest = text.partition(":")
        word = word.strip()
        if indent <= _HEADER_INDENT:
            section = word if word in ("columns", "tests") and not rest.strip() else ""
            if colon and not section:
                header.fields[word] = rest.strip()
        elif section == "columns" and colon and indent <= _COLUMN_INDENT and _IDENT.match(word):
            header.columns[word] = rest.strip()
        elif section == "columns" and header.columns:
            last = next(reversed(header.columns))
            header.columns[last] += " " + text
        elif section == "tests" and colon and indent <= _COLUMN_INDENT:
            header.tests.append((word, rest.strip()))
        elif section == "tests" and header.tests:
            kind, arguments = header.tests[-1]
            header.tests[-1] = (kind, f"{arguments} {text}")
        elif not section and header.fields:
            last = next(reversed(header.fields))
            header.fields[last] += " " + text
        elif not section:
            header.description += " " + text
    return header


def _calls(functions: Iterable[str]) -> re.Pattern[str]:
    names = "|".join(re.escape(f) for f in functions)
    return re.compile(r"\{\{\s*(" + names + r")\(\s*'([A-Za-z0-9_]+)'\s*\)\s*\}\}")


def calls(sql: str, functions: Iterable[str]) -> list[tuple[str, str]]:
    """Every ``{{ function('name') }}`` of ``functions`` in ``sql``, as ``(function, name)``."""
    return _calls(functions).findall(sql)


def substitute(sql: str, functions: Iterable[str], replace: Callable[[str, str], str]) -> str:
    """``sql`` with each call of ``functions`` replaced by ``replace(function, name)``."""
    return _calls(functions).sub(lambda m: replace(m.group(1), m.group(2)), sql)
