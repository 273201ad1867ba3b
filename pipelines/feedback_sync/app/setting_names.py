"""Every setting name feedback-sync reads, by section, and the check that refuses any other
key in the sections it owns.

dlt resolves a setting by looking its name up; a key nobody looks up is never read, so a
misspelled one (``requests_per_secnd``) is a silence: the run goes on with the default.
In the sections feedback-sync owns (``OWNED``), every key of ``.dlt/config.toml`` and
``.dlt/secrets.toml`` (the files dlt reads, ``settings_files``) and every environment
variable of their form (``SOURCES__FEEDBACK__REQUESTS_PER_SECND``) must be a name some
part of it reads; any other is one line that names the file or variable, the key and the
nearest known name. dlt's own sections (``[runtime]``, ``[destination.*]``, ``[load]``,
...) and other sources' (``[sources.other]``) are left alone.

The names of each section are its declaration's (``DECLARED``: ``api/settings.py``,
``models/settings.py``, ``push/settings.py``, ``app/settings.py``), none of which imports
dlt (0.9 s that ``status`` does not otherwise spend). ``[history]`` is owned with no key of
its own: the history settings are ``history_*`` of ``[sources.feedback]``, and a key there
is refused with that name.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback_sync.api.accounts import ACCOUNT_LIST, TABLE
from feedback_sync.api.declaration import Section
from feedback_sync.api.settings import SOURCE
from feedback_sync.app.settings import FLOWS, REPORT
from feedback_sync.models.settings import MODELS
from feedback_sync.push.settings import PUSH

# every section feedback-sync declares, in the order the settings reference shows them
DECLARED: tuple[Section[Any], ...] = (SOURCE, ACCOUNT_LIST, PUSH, MODELS, REPORT, FLOWS)
# owned, without a key of its own
_KEYLESS = ("history",)
OWNED = (*dict.fromkeys(section.path for section in DECLARED), *_KEYLESS)


@dataclass(frozen=True)
class Unknown:
    """A key no part of feedback-sync reads, where it was found, and the nearest name."""

    where: str  # the file, or "environment"
    section: str
    key: str
    nearest: tuple[str, str] | None  # (section, name)

    def message(self) -> str:
        if self.where == "environment":
            said = f"the environment variable {_env(self.section, self.key)}"
            hint = f"; did you mean {_env(*self.nearest)}?" if self.nearest else ""
        else:
            said = f"{self.where}: [{self.section}] {self.key}"
            hint = ""
            if self.nearest is not None:
                section, name = self.nearest
                hint = (
                    f"; did you mean {name}?"
                    if section == self.section
                    else f"; did you mean {name} in [{section}]?"
                )
        return f"{said} is not a feedback-sync setting{hint}"


def _env(section: str, key: str) -> str:
    return "__".join([*section.split("."), key]).upper()


def known_names(section: str) -> frozenset[str]:
    """The setting names of one owned section."""
    if section in _KEYLESS:
        return frozenset()
    return frozenset(name for d in DECLARED if d.path == section for name in d.names())


def unknown_settings(files: Iterable[Path], environ: Mapping[str, str]) -> list[Unknown]:
    """Every key of an owned section that no part of feedback-sync reads, files first (in
    the order given), then the environment."""
    names = {section: known_names(section) for section in OWNED}
    found: list[Unknown] = []
    for path in files:
        try:
            with path.open("rb") as f:
                document = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue  # settings_files.check_settings_files says what is wrong with it
        for section in OWNED:
            table: Any = document
            for part in section.split("."):
                table = table.get(part) if isinstance(table, dict) else None
            if not isinstance(table, dict):
                continue
            for key in table:
                if section == SOURCE.path and key == TABLE and isinstance(table[key], dict):
                    found += _unknown_in_accounts(str(path), table[key], names)
                elif key not in names[section]:
                    found.append(Unknown(str(path), section, key, _nearest(section, key, names)))
    prefixes = {_env(section, ""): section for section in OWNED}
    for variable in sorted(environ):
        for prefix, section in prefixes.items():
            if variable.startswith(prefix) and len(variable) > len(prefix):
                key = variable[len(prefix) :].lower()
                if section == SOURCE.path and key.startswith(f"{TABLE}__"):
                    # SOURCES__FEEDBACK__ACCOUNTS__<NAME>__<KEY>: an account's own setting
                    account, _, own = key[len(TABLE) + 2 :].partition("__")
                    found += _unknown_in_accounts("environment", {account: {own: None}}, names)
                elif key not in names[section]:
                    nearest = _nearest(section, key, names)
                    found.append(Unknown("environment", section, key, nearest))
    return found


def _unknown_in_accounts(
    where: str, accounts: Mapping[str, Any], names: Mapping[str, frozenset[str]]
) -> list[Unknown]:
    """The keys of each account's table that are not settings of one account."""
    found = []
    own = names[SOURCE.path] - set(ACCOUNT_LIST.names())
    for account, table in accounts.items():
        for key in table if isinstance(table, dict) else ():
            if key not in own:
                section = f"{SOURCE.path}.{TABLE}.{account}"
                nearest = _nearest(SOURCE.path, key, names)
                if nearest is not None and nearest[0] == SOURCE.path:
                    nearest = (section, nearest[1])  # the account's table takes the same names
                found.append(Unknown(where, section, key, nearest))
    return found


def _nearest(section: str, key: str, names: Mapping[str, frozenset[str]]) -> tuple[str, str] | None:
    """The closest name in ``section``, else in any owned section (``[history] ideas`` ->
    ``history_ideas`` of ``[sources.feedback]``)."""
    close = difflib.get_close_matches(key, sorted(names[section]), n=1, cutoff=0.6)
    if close:
        return section, close[0]
    everywhere = {f"{other}|{name}": name for other in OWNED for name in names[other]}
    for candidate in (key, f"{section.rsplit('.', 1)[-1]}_{key}"):
        close = difflib.get_close_matches(candidate, sorted(everywhere.values()), n=1, cutoff=0.75)
        if close:
            other = next(k for k, v in sorted(everywhere.items()) if v == close[0])
            return other.split("|", 1)[0], close[0]
    return None


def check_names(files: Iterable[Path], environ: Mapping[str, str] | None = None) -> None:
    """Raises ConfigError for the first key of an owned section that is not a setting."""
    from feedback_sync.errors import ConfigError

    found = unknown_settings(files, os.environ if environ is None else environ)
    if found:
        more = (
            f" (and {len(found) - 1} more: feedback-sync check lists them)"
            if len(found) > 1
            else ""
        )
        raise ConfigError(found[0].message() + more)
