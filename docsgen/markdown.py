"""Markdown for the generated pages: text from the code escaped, code spans, tables.

Text taken from the code (a docstring, an option's help, a SQL header) is written as it
reads, with its code spans (``single`` or ``double`` backticks) kept and everything else
escaped, so that a ``*``, a ``_`` or an ``<angle>`` in it is shown, not interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_ESCAPED = re.compile(r"([\\`*_\[\]|])")
# a part of a name: letters and digits, or a placeholder (``<key>``)
_WORD = r"(?:[a-z0-9]|<[a-z]+>)+"
# what reads as code in text that has no code spans (an option's help): shown as code
_CODE_LIKE = re.compile(
    r"(?<![\w`/-])("
    r"--[a-z][a-z0-9-]*"  # an option
    r"|\$?[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+(?:_+\*)?"  # an environment variable
    r"|\.dlt/[\w.]+"  # a settings file
    rf"|{_WORD}(?:\.{_WORD})*(?:_+{_WORD})+(?:[._]+{_WORD})*"  # a snake_case name
    r"|\[[a-z_]+(?:\.[a-z_]+)*\]"  # a settings section
    r")(?![\w-])"
)


def _escape(text: str) -> str:
    """Plain text as Markdown that shows it as it is (no emphasis, links, HTML or cell
    breaks); names, options and variables in it as code."""
    out: list[str] = []
    position = 0
    for name in _CODE_LIKE.finditer(text):
        out.append(_plain(text[position : name.start()]))
        out.append(code(name.group(1)))
        position = name.end()
    out.append(_plain(text[position:]))
    return "".join(out)


def _plain(text: str) -> str:
    text = _ESCAPED.sub(r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    """``text`` as one code span (longer fences when it holds a backtick itself)."""
    fence = "`"
    while fence in text:
        fence += "`"
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def prose(text: str) -> str:
    """Text from the code as one Markdown paragraph: white space folded, code spans kept,
    the rest escaped."""
    text = " ".join(text.split())
    out: list[str] = []
    position = 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_escape(text[position : span.start()]))
        out.append(code(span.group(2).strip()))
        position = span.end()
    out.append(_escape(text[position:]))
    return "".join(out)


def codes(names: Iterable[str]) -> str:
    """Names as code spans, comma-separated."""
    return ", ".join(code(name) for name in names)


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table; the cells are Markdown already (``prose``, ``code``)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def anchor(name: str) -> str:
    """The anchor Zensical gives a heading that is ``name`` alone (a table's or a model's
    name: lower case, ``_`` kept)."""
    return re.sub(r"[^\w-]", "", name.lower())
