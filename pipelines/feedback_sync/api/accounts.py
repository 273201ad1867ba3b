"""Several accounts (boards) in one project: their names, and each one's settings.

An account is a table named after it under the source's section, the dlt way::

    [sources.feedback.accounts.acme]          # .dlt/config.toml
    base_url = "https://acme.example.com/api/v1"
    [sources.feedback.accounts.acme]          # .dlt/secrets.toml
    api_key = "..."

or, configured by variables alone, ``SOURCES__FEEDBACK__ACCOUNT_NAMES='["acme"]'`` and
``SOURCES__FEEDBACK__ACCOUNTS__ACME__BASE_URL`` / ``__API_KEY``. Any other setting of
``[sources.feedback]`` may be given per account; what an account leaves out comes from
``[sources.feedback]`` (dlt looks a key up in the account's table, then in the tables
above it). The address and the key are the exception: with accounts configured they
belong to each account and ``[sources.feedback]`` may not hold them, so an account whose
key is missing is refused rather than sent another account's key.

This module reads the declaration (``settings.SOURCE``) and imports no dlt; where the
names are found (the settings files, the environment) is ``app/accounts.py``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from feedback_sync.api.declaration import Names, Section, setting
from feedback_sync.api.settings import SECTION, SOURCE, FeedbackSettings, section_problems
from feedback_sync.errors import ConfigError

# the table under [sources.feedback] that holds one table per account
TABLE = "accounts"
# lower-case letters, digits and single underscores: the name ends a dataset's name
# (``feedback_acme``) and, upper-cased, sits between double underscores in a variable
NAME = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")
# PostgreSQL cuts identifiers at 63 bytes; dlt's staging dataset adds ``_staging``
MAX_NAME = 32
# the settings an account must give itself: never inherited from [sources.feedback]
OWN = ("base_url", "api_key")


@dataclass(frozen=True, kw_only=True)
class AccountList:
    """The accounts named by a setting (for an environment configured by variables
    alone); accounts configured as tables in the settings files need not be listed."""

    account_names: tuple[str, ...] = setting(
        Names(),
        default=(),
        doc="""The accounts to sync, for settings given by environment variables alone
        (``SOURCES__FEEDBACK__ACCOUNT_NAMES='["acme", "globex"]'``, each then configured by
        ``SOURCES__FEEDBACK__ACCOUNTS__<NAME>__BASE_URL`` and ``__API_KEY``). An account
        configured as a table ``[sources.feedback.accounts.<name>]`` of a settings file
        need not be listed. Unset, with no such table: one account, configured in
        ``[sources.feedback]`` itself.""",
        note="several accounts (or one table [sources.feedback.accounts.NAME] each)",
        example=["acme", "globex"],
    )


ACCOUNT_LIST = Section(SECTION, AccountList)


def check_name(name: Any, where: str) -> str:
    """``name`` if it may name an account; ``where`` says where it was found.

    Raises:
        ConfigError: it may not.
    """
    if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise ConfigError(
            f"{where}: account name {name!r} must be 1 to {MAX_NAME} lower-case letters, digits "
            "and single underscores (not at either end)"
        )
    if name == "staging" or name.endswith("_staging"):
        raise ConfigError(
            f"{where}: account name {name!r} may not be 'staging' or end in '_staging': dlt "
            "keeps its own tables in the dataset <dataset>_staging of each dataset, and "
            f"{name!r} would make one account's dataset another's"
        )
    return name


def section(name: str) -> Section[FeedbackSettings]:
    """The settings of account ``name``: the source's, under its own table."""
    return Section(f"{SECTION}.{TABLE}.{name}", FeedbackSettings, rules=SOURCE.rules)


# PostgreSQL cuts an identifier at 63 bytes, so two longer names could be one schema
MAX_IDENTIFIER = 63


def dataset_of(dataset: str, account: str) -> str:
    """Where ``account``'s tables land: ``<dataset>_<account>``.

    Raises:
        ConfigError: that name and dlt's staging dataset beside it (``..._staging``) would
            be longer than an identifier may be.
    """
    name = f"{dataset}_{account}"
    if len(f"{name}_staging") > MAX_IDENTIFIER:
        raise ConfigError(
            f"the dataset {name!r} of account {account!r} is too long: with dlt's "
            f"'_staging' it must be at most {MAX_IDENTIFIER} characters (PostgreSQL's "
            "limit); shorten --dataset or the account's name"
        )
    return name


def load_account_settings(name: str, api_key: str | None = None) -> FeedbackSettings:
    """The checked settings of account ``name``, as dlt resolves them; ``api_key``, when
    given (a Prefect ``Secret`` block), instead of the one dlt would resolve.

    Raises:
        ConfigError: naming the setting that is missing or malformed, under the account's
            table; or ``base_url`` / ``api_key`` set in ``[sources.feedback]`` itself.
    """
    from feedback_sync.api.config import resolve_raw

    shared = shared_problems()
    if shared:
        raise ConfigError(shared[0])
    account = section(name)
    raw = resolve_raw(account)
    if api_key is not None:
        raw["api_key"] = api_key
    return FeedbackSettings(**account.check(raw), section_path=account.path)


def shared_problems() -> list[str]:
    """``base_url`` or ``api_key`` set in ``[sources.feedback]`` itself, each a problem
    while accounts are configured: an account that gave none would take it."""
    from feedback_sync.api.config import resolve_raw

    shared = resolve_raw(SOURCE)
    return [
        f"{SOURCE.describe(own)} is set, but accounts are configured: each account "
        f"gives its own ({own} in [{SECTION}.{TABLE}.<name>]); remove it"
        for own in OWN
        if shared.get(own) is not None
    ]


def account_problems(name: str) -> list[str]:
    """Every problem of account ``name``'s settings at once (``feedback-sync check``):
    those of ``[sources.feedback]`` that concern every account, then each missing or
    malformed setting of its own, named under its table."""
    from feedback_sync.api.config import resolve_raw

    account = section(name)
    return shared_problems() + section_problems(account, resolve_raw(account))
