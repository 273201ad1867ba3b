"""Which accounts a flow run syncs, in a project of several (``api/accounts.py``).

A run of ``feedback-sync`` syncs one account, named by its parameter ``account``, into the
dataset ``<dataset>_<account>``; with accounts configured and none named it is refused,
pointing to the fan-out flow ``feedback-sync-accounts`` (``fanout.py``), which starts one
run per account. A project with no accounts runs as before, with no ``account``.
"""

from __future__ import annotations

from feedback_sync.api.accounts import ACCOUNT_LIST, TABLE, check_name
from feedback_sync.api.settings import SECTION
from feedback_sync.errors import ConfigError

# the fan-out flow's name (fanout.py)
FANOUT = "feedback-sync-accounts"

# why a run of one account builds no models: the staging views and marts are over every
# account, built once by the fan-out after its accounts' runs (``fanout.models_over_accounts``)
MODELS_NOT_BUILT = (
    f"a run of one account leaves the staging views and marts over every account to the "
    f"flow {FANOUT}, which builds them once after its accounts' runs"
)

_HOW = f"one table per account under [{SECTION}.{TABLE}], or {ACCOUNT_LIST.env('account_names')}"


def configured() -> tuple[str, ...]:
    """Every account the project configures (its settings files and environment).

    Raises:
        ConfigError: a name that may not name an account, where it was found.
    """
    from feedback_sync.app.accounts import configured_accounts_now

    return configured_accounts_now()


def run_account(account: str | None) -> str | None:
    """The account a run of ``feedback-sync`` syncs: ``account``, checked; None in a
    project of one account.

    Raises:
        ConfigError: an account named where none are configured, or one not configured, or
            none named where accounts are configured.
    """
    names = configured()
    if account is None:
        if names:
            raise ConfigError(
                f"accounts are configured ({', '.join(names)}): give the parameter account, "
                f"or run the flow {FANOUT}, which starts one run per account"
            )
        return None
    check_name(account, "the parameter account")
    if not names:
        raise ConfigError(
            f"the parameter account is {account!r}, but no accounts are configured ({_HOW})"
        )
    if account not in names:
        raise ConfigError(
            f"the parameter account: no account {account!r} is configured; "
            f"configured: {', '.join(names)}"
        )
    return account


def fanout_accounts(asked: list[str] | None) -> tuple[str, ...]:
    """The accounts a fan-out run syncs: those ``asked`` (in the order configured), else
    every one configured.

    Raises:
        ConfigError: no accounts configured, an empty list, or a name not configured.
    """
    names = configured()
    if not names:
        raise ConfigError(
            f"no accounts are configured ({_HOW}); the flow feedback-sync syncs the one "
            "account of [sources.feedback]"
        )
    if asked is None:
        return names
    if not asked:
        raise ConfigError("the parameter accounts is empty: leave it unset for every account")
    unknown = [name for name in asked if name not in names]
    if unknown:
        raise ConfigError(
            f"the parameter accounts: {', '.join(map(repr, unknown))} not configured; "
            f"configured: {', '.join(names)}"
        )
    return tuple(name for name in names if name in asked)
