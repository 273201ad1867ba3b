"""Which accounts a project configures, and which of them a command runs.

The names are the tables under ``[sources.feedback.accounts]`` of the settings files dlt
reads (``settings_files``), in the order first found, then those ``account_names`` lists
(``SOURCES__FEEDBACK__ACCOUNT_NAMES`` or the key in ``[sources.feedback]``). dlt finds a
key by its name and cannot list the tables of a section (it answers with the first file's
table alone), so the files are read here with the standard library, as the unknown-key
check reads them. A variable ``SOURCES__FEEDBACK__ACCOUNTS__<NAME>__...`` for an account
not configured is refused: it would be silently ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from feedback_sync.api.accounts import ACCOUNT_LIST, TABLE, check_name
from feedback_sync.api.settings import SECTION
from feedback_sync.errors import ConfigError

_PREFIX = f"{SECTION.replace('.', '__').upper()}__{TABLE.upper()}__"


def _tables(path: Path) -> list[tuple[str, Any]]:
    """The account tables of one settings file (name, table), and its ``account_names``
    entry as ``("", value)``; nothing from a file that does not parse
    (``settings_files.check_settings_files`` says what is wrong with it)."""
    try:
        with path.open("rb") as f:
            document: Any = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    for part in SECTION.split("."):
        document = document.get(part) if isinstance(document, dict) else None
    if not isinstance(document, dict):
        return []
    found: list[tuple[str, Any]] = []
    accounts = document.get(TABLE)
    if accounts is not None and not isinstance(accounts, dict):
        raise ConfigError(f"{path}: [{SECTION}] {TABLE} must be a table of one table per account")
    for name, table in (accounts or {}).items():
        where = f"{path}: [{SECTION}.{TABLE}.{name}]"
        check_name(name, where)
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table of the account's settings")
        found.append((name, table))
    if "account_names" in document:
        found.append(("", document["account_names"]))
    return found


def configured_accounts(
    files: Iterable[Path], environ: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Every account configured, in the order first found; () for a project of one
    account configured in ``[sources.feedback]`` itself.

    Raises:
        ConfigError: a name that may not name an account, where it was found.
    """
    environ = os.environ if environ is None else environ
    names: list[str] = []
    listed: list[tuple[str, Any]] = []
    for path in files:
        for name, table in _tables(path):
            if name and name not in names:
                names.append(name)
            elif not name:
                listed.append((f"{path}: [{SECTION}] account_names", table))
    variable = ACCOUNT_LIST.env("account_names")
    if variable in environ:
        listed.insert(0, (f"the environment variable {variable}", environ[variable]))
    for where, value in listed[:1]:  # the environment wins over the files, as dlt's lookup
        for name in ACCOUNT_LIST.settings[0].kind.check(value, where, False):
            check_name(name, where)
            if name not in names:
                names.append(name)
    for key in sorted(environ):
        if key.startswith(_PREFIX) and "__" in key[len(_PREFIX) :]:
            name = key[len(_PREFIX) :].split("__", 1)[0].lower()
            if name not in names:
                raise ConfigError(
                    f"the environment variable {key} names account {name!r}, which is not "
                    f"configured: list it in {variable} (a JSON list) or give it a table "
                    f"[{SECTION}.{TABLE}.{name}]"
                )
    return tuple(names)


def chosen_accounts(configured: Sequence[str], asked: Sequence[str] | None) -> tuple[str, ...]:
    """The accounts a command runs: those ``--account`` names (each once, in the order
    configured), else every one configured.

    Raises:
        ConfigError: an asked name that is not configured, or ``--account`` in a project
            without accounts.
    """
    if not asked:
        return tuple(configured)
    if not configured:
        raise ConfigError(
            f"--account {asked[0]}: no accounts are configured (one table per account under "
            f"[{SECTION}.{TABLE}], or {ACCOUNT_LIST.env('account_names')})"
        )
    unknown = [name for name in asked if name not in configured]
    if unknown:
        raise ConfigError(
            f"--account {unknown[0]}: no such account; configured: {', '.join(configured)}"
        )
    return tuple(name for name in configured if name in asked)


def configured_accounts_now() -> tuple[str, ...]:
    """Every account the project configures, read from the settings files dlt reads
    (``settings_files``) and the environment of this process.

    Raises:
        ConfigError: a name that may not name an account, where it was found.
    """
    from feedback_sync.app.settings_files import settings_files

    return configured_accounts(settings_files())
