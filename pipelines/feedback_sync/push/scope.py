"""Which account a push run is for: its curated rows, its copy of the service, its journal.

With no accounts configured (``Scope()``), a run reads every curated row, the models as
they are (``staging.*``, ``marts.*``) and the journal in the schema ``push``, as it always
did. With accounts configured, a run is for one account (``api/accounts.py``), and:

- its curated rows are those whose column ``account`` names it (``curated.py``), or every
  row where the column is left out and this is the only account configured;
- its copy of the service is that account's rows of the models over every account
  (``models/accounts.py``): those whose column ``account`` names it (a filter on each
  relation). Models without that column are one dataset's (built before the accounts were
  configured), and serve only the account whose dataset they read (``check_models``:
  another account's copy would make rows look unchanged that are not);
- its journal is the schema ``push_<account>``, beside the accounts' datasets
  (``<dataset>_<account>``), so no query of one account's run can see another's rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from feedback_sync.errors import ConfigError
from feedback_sync.push.journal import SCHEMA
from feedback_sync.warehouse.engines import Engine, has_relation, has_schema

# the curated inputs' column, and the models' column, that names a row's account
ACCOUNT = "account"
# the staging view whose SQL says which dataset one-dataset models read (every build
# makes it; the push reads it for the ideas a note may go on)
_PROBE = ("staging", "ideas")


@dataclass(frozen=True)
class Scope:
    """The account a run pushes (None: no accounts are configured) and every account
    configured (what a curated row may name)."""

    account: str | None = None
    configured: tuple[str, ...] = ()

    def journal_schema(self) -> str:
        return SCHEMA if self.account is None else f"{SCHEMA}_{self.account}"

    def relation(self, con: Engine, schema: str, name: str) -> str:
        """``schema.name`` as this run reads it: its account's rows where it has a column
        ``account``, else as it is. Written to be read ``from <it> as <alias>``."""
        plain = f'"{schema}"."{name}"'
        if self.account is None or ACCOUNT not in _columns(con, schema, name):
            return plain
        return f"(select * from {plain} where {ACCOUNT} = '{self.account}')"

    def model(self, con: Engine, name: str, schema: str = "staging") -> str | None:
        """The relation of the model ``schema.name`` for this run, None where it was not
        built."""
        if not has_relation(con, schema, name):
            return None
        return self.relation(con, schema, name)

    def check_models(self, con: Engine, where: str, dataset: str) -> None:
        """Raises ``ConfigError`` unless ``con`` holds models this run may diff with: any
        built ones with no account; with one, models over every account (a column
        ``account``) or models built over its own ``dataset`` alone."""
        if not has_schema(con, "staging"):
            raise ConfigError(
                f"{where} has no staging models: run `feedback-sync models` (or a sync) first"
            )
        if self.account is None or not has_relation(con, *_PROBE):
            return
        if ACCOUNT in _columns(con, *_PROBE):
            self._check_built_over(con, where)
            return
        if _reads(con, dataset):
            return
        raise ConfigError(
            f"{where}: its models are not account {self.account}'s (staging.ideas does not "
            f"read its dataset {dataset}, and has no column {ACCOUNT}: built before the "
            "accounts were configured?): build the models over every account first "
            "(`feedback-sync models`)"
        )

    def _check_built_over(self, con: Engine, where: str) -> None:
        """Raises ``ConfigError`` unless the models over every account hold this account's
        rows: an account left out of them (never synced when they were built) would be
        diffed with an empty copy, and every row of its would look new."""
        from feedback_sync.models.project import built_accounts

        built = built_accounts(con)
        if built is not None and self.account in built:
            return
        over = f"over {', '.join(built)}" if built else "built over no account"
        raise ConfigError(
            f"{where}: the models over every account are {over}, not account "
            f"{self.account}'s: sync it first (its models are built after its sync), or "
            "run `feedback-sync models` after it synced"
        )


def _columns(con: Engine, schema: str, name: str) -> set[str]:
    rows = con.execute(
        "select column_name from information_schema.columns "
        "where table_schema = ? and table_name = ?",
        [schema, name],
    )
    return {str(column) for (column,) in rows}


def _reads(con: Engine, dataset: str) -> bool:
    """Whether the probe view reads a relation of ``dataset``: as PostgreSQL records what a
    view reads (``view_table_usage``: its printed SQL leaves out the schemas on the search
    path, which a dataset's connection sets to the dataset), else as its SQL names it
    (DuckDB keeps a view's SQL as written, quoted or not)."""
    if has_relation(con, "information_schema", "view_table_usage"):
        rows = con.execute(
            "select table_schema from information_schema.view_table_usage "
            "where view_schema = ? and view_name = ?",
            list(_PROBE),
        )
        return any(schema == dataset for (schema,) in rows)
    rows = con.execute(
        "select view_definition from information_schema.views "
        "where table_schema = ? and table_name = ?",
        list(_PROBE),
    )
    if not rows or not isinstance(rows[0][0], str):
        return False
    named = re.compile(rf'(?<![\w"])"?{re.escape(dataset)}"?\s*\.', re.IGNORECASE)
    return bool(named.search(rows[0][0]))
