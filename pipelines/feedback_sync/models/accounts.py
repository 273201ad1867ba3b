"""The models over several accounts: each account's built alone, then unioned.

With accounts configured (``api/accounts.py``), each account's tables are in a dataset of
their own, ``<dataset>_<account>``. A build makes every model once per account, over that
account's tables alone, into the account's schemas ``staging_<account>`` and
``marts_<account>``: exactly the views and tables a project of that one account would have
in ``staging`` and ``marts``, joins and all (no row of one account ever meets another's in
a join, whatever ids the two boards share). ``staging`` and ``marts`` then union them,
each view or table with the column ``account`` first, in the same transaction. So each
account's rows in a union are what that account alone gives, and the data tests run on
each account's marts.

An account that was never synced has no dataset: it is left out, and the build says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from feedback_sync.api.accounts import dataset_of
from feedback_sync.errors import ModelError
from feedback_sync.warehouse.engines import Engine
from feedback_sync.warehouse.target import Target

# the column every view and table of ``staging`` and ``marts`` starts with over accounts
ACCOUNT_COLUMN = "account"


@dataclass(frozen=True)
class Part:
    """One dataset a build reads, and the schemas its models go to: the project's own
    (``staging``, ``marts``), or one account's (``staging_acme``, ``marts_acme``, over the
    dataset ``feedback_acme``)."""

    dataset: str
    account: str | None = None

    def schema(self, layer: str) -> str:
        return layer if self.account is None else f"{layer}_{self.account}"


class ModelsScope(NamedTuple):
    """Where the models over accounts are built: the warehouse the accounts share (its
    dataset the first part of each account's), and every account configured."""

    target: Target
    accounts: tuple[str, ...]


def parts(dataset: str, accounts: Sequence[str]) -> list[Part]:
    """What a build reads: ``dataset`` alone, or each account's dataset."""
    if not accounts:
        return [Part(dataset)]
    return [Part(dataset_of(dataset, account), account) for account in accounts]


def union(
    engine: Engine,
    relations: Sequence[str],
    parts: Sequence[Part],
    kinds: Mapping[str, str],
    mart_rows: dict[str, int],
) -> None:
    """Makes each of ``relations`` (``layer.name``) in its layer's schema as the union of
    the accounts' own, ``account`` first, as a view or a table (``kinds``: per layer); each
    table's rows go into ``mart_rows``.

    Raises:
        ModelError: a model already has a column named ``account``.
    """
    for relation in relations:
        layer, name = relation.split(".", 1)
        first = f'"{parts[0].schema(layer)}"."{name}"'
        columns, _ = engine.query(f"select * from {first} where false")
        if ACCOUNT_COLUMN in columns:
            raise ModelError(
                f"model {relation}: has a column named {ACCOUNT_COLUMN!r}, which the models "
                "over several accounts add first: rename it"
            )
        selects = [
            f"select '{part.account}' as {ACCOUNT_COLUMN}, t.* "
            f'from "{part.schema(layer)}"."{name}" as t'
            for part in parts
        ]
        kind = kinds[layer]
        target = f'"{layer}"."{name}"'
        try:
            engine.create(kind, target, "\nunion all\n".join(selects))
        except engine.errors as exc:
            raise ModelError(f"model {relation} over the accounts: {exc}") from None
        if kind == "table":
            rows = engine.execute(f"select count(*) from {target}")
            mart_rows[name] = int(rows[0][0]) if rows else 0
