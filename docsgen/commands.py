"""``docs/reference/commands.md``: every subcommand of ``feedback-sync`` from its parser.

The parser is the command line's own (``feedback_sync.app.cli.build_parser``), built in an
empty environment so that a default read from the environment (the sandbox's key) does not
end up in the page. The usage lines are formatted at a fixed width, not the terminal's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator

from docsgen.markdown import anchor, code, prose, table

USAGE_WIDTH = 88


@contextlib.contextmanager
def _empty_environment() -> Iterator[None]:
    """No environment variables while inside (restored after)."""
    saved = dict(os.environ)
    os.environ.clear()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def build() -> argparse.ArgumentParser:
    """``feedback-sync``'s parser, as built where no environment variable is set."""
    from feedback_sync.app.cli import build_parser

    build_parser()  # its imports happen here, with the environment they expect
    with _empty_environment():
        return build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    raise ValueError(f"{parser.prog} has no subcommands")


def _shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments that ``--help`` lists, without ``--help`` itself."""
    return [
        action
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        and not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
    ]


def usage(parser: argparse.ArgumentParser) -> str:
    """The parser's usage line(s), wrapped at ``USAGE_WIDTH`` whatever the terminal."""
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _metavar(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if isinstance(action.metavar, str):
        return action.metavar
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _argument(action: argparse.Action) -> str:
    """How the argument is written: ``--wait SECONDS``, ``[FOLDER]``."""
    metavar = _metavar(action)
    if not action.option_strings:
        return code(f"[{metavar}]" if action.nargs == "?" else metavar)
    return ", ".join(code(f"{option} {metavar}".strip()) for option in action.option_strings)


def _default(action: argparse.Action) -> str:
    if isinstance(action, argparse._VersionAction):
        return ""
    if action.nargs == 0 and isinstance(action.default, bool):
        return "on" if action.default else "off"
    if action.default is None or action.default == argparse.SUPPRESS:
        return ""
    return code(str(action.default))


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "default": action.default}
    if isinstance(action, argparse._VersionAction):
        text = "print the version and exit"
    if action.choices is not None and isinstance(action.metavar, str):
        text += f" (one of: {', '.join(str(c) for c in action.choices)})"
    return prose(text)


def arguments_table(parser: argparse.ArgumentParser) -> str:
    """The parser's arguments: how each is written, its default and its help."""
    rows = [(_argument(a), _default(a), _help(a)) for a in _shown(parser)]
    return table(("Argument", "Default", "What it does"), rows)


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The page's body for ``parser`` (default: ``feedback-sync``'s)."""
    parser = build() if parser is None else parser
    subcommands = _subcommands(parser)
    helps = {choice.dest: choice.help or "" for choice in subcommands._choices_actions}
    parts = [
        "Every command also takes `-h` / `--help`. The exit codes are listed in "
        "[Exit codes](exit-codes.md).",
        table(
            ("Command", "What it does"),
            (
                (f"[{code(name)}](#{anchor(name)})", prose(helps.get(name, "")))
                for name in subcommands.choices
            ),
        ),
        "## Global options",
        prose(parser.description or ""),
        f"```text\n{usage(parser)}\n```",
        f"Global options come before the command: {code(parser.prog + ' --project-dir DIR sync')}.",
        arguments_table(parser),
    ]
    for name, sub in subcommands.choices.items():
        parts.append(f"## {name}")
        parts.append(prose(sub.description or helps.get(name, "")))
        parts.append(f"```text\n{usage(sub)}\n```")
        if _shown(sub):
            parts.append(arguments_table(sub))
    return "\n\n".join(part for part in parts if part)
