"""Data tests of the marts (dbt's data tests): what must hold of their rows, run in the
build's own transaction after every model is made. A test that finds rows breaking it
fails the build, names itself, and the transaction rolls back, so the previous models stay.

Two kinds, both written in the models' folder:

- **generic tests**, one line each under ``tests:`` in a mart's header::

      -- tests:
      --   not_null: status_idx, ideas
      --   unique: month, category_idx            (the key's is implied by ``key:``)
      --   relationships: status_idx -> statuses.status_idx
      --   accepted_range: share_of_spend 0..1    (a bound may be left out: ``ideas 0..``)
      --   expression: announced_ideas <= ideas   (true on every row; NULL counts as true)

  ``relationships`` names a model and its column; NULLs are not checked. An ``expression``
  may read another model with ``{{ ref('model') }}`` (a subquery).
- **singular tests**, ``tests/<name>.sql`` beside ``staging/`` and ``marts/``: a query
  returning the rows that break a rule (none when it holds), over ``{{ ref('model') }}``
  and ``{{ source('table') }}``. Its header says what must hold and, under ``mart:``, the
  mart it guards, which it is reported under::

      -- announcement_months_count_each_post_once: every published post counts once
      -- mart: announcement_months
      select ...

Every test is a query of breaking rows (``DataTest.sql``); ``run`` counts them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from feedback_sync.errors import ModelError
from feedback_sync.models.sqlfile import calls

if TYPE_CHECKING:
    from feedback_sync.warehouse.engines import Engine

KINDS = ("not_null", "unique", "relationships", "accepted_range", "expression")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RELATIONSHIP = re.compile(r"^(\w+)\s*->\s*(\w+)\.(\w+)$")
_NUMBER = r"-?\d+(?:\.\d+)?"
_RANGE = re.compile(rf"^(\w+)\s+({_NUMBER})?\s*\.\.\s*({_NUMBER})?$")


@dataclass(frozen=True)
class DataTest:
    """One data test: the mart it is reported under, its name, and the SQL (DuckDB's
    dialect, relations resolved) of the rows that break it."""

    mart: str
    name: str
    sql: str


@dataclass(frozen=True)
class Outcome:
    """A test's result: how many rows broke it (0: passed)."""

    mart: str
    name: str
    failures: int

    @property
    def passed(self) -> bool:
        """No row broke it."""
        return self.failures == 0

    def line(self) -> str:
        """What failed, where, and how often: one line of the build's error."""
        rows = "1 row breaks it" if self.failures == 1 else f"{self.failures:,} rows break it"
        return f"marts.{self.mart}: {self.name}: {rows}"


def generic(
    mart: str,
    relation: str,
    columns: Sequence[str],
    key: Sequence[str],
    lines: Sequence[tuple[str, str]],
    resolve: Callable[[str], str],
    where: str,
) -> list[DataTest]:
    """The tests a mart's header declares (``lines``: ``(kind, arguments)``), and the
    uniqueness of its ``key``. ``resolve`` gives a model's relation by name (raising
    ``KeyError`` for none); ``where`` names the file in messages.

    Raises:
        ModelError: an unknown kind, a malformed line, or a column or model that is not
            there; the message names the file and the line.
    """
    header = _Header(mart, relation, frozenset(columns), resolve, where)
    tests: list[DataTest] = []
    if key:
        tests.append(_unique(mart, relation, [header.column(k, "key") for k in key], key))
    for kind, arguments in lines:
        line = f"{kind}: {arguments}"
        read = _READERS.get(kind)
        if read is None:
            raise header.error(line, f"unknown test {kind!r} (the kinds: {', '.join(KINDS)})")
        tests += read(header, arguments, line)
    return tests


@dataclass(frozen=True)
class _Header:
    """A mart's header as its test lines are read: what a line may name, and where it is."""

    mart: str
    relation: str
    columns: frozenset[str]
    resolve: Callable[[str], str]
    where: str

    def error(self, line: str, why: str) -> ModelError:
        """What is wrong with ``line``, naming the file."""
        return ModelError(f"{self.where}: tests: {line}: {why}")

    def column(self, name: str, line: str) -> str:
        """``name`` quoted, once it is known to be a column of the mart."""
        if name not in self.columns:
            raise self.error(line, f"{name!r} is not a column of {self.mart}")
        return f'"{name}"'

    def test(self, name: str, where: str) -> DataTest:
        """The test called ``name`` whose breaking rows are the mart's rows ``where``."""
        return DataTest(self.mart, name, f"select * from {self.relation} where {where}")


def _not_null(header: _Header, arguments: str, line: str) -> list[DataTest]:
    return [
        header.test(f"{name} not null", f"{header.column(name, line)} is null")
        for name in _names(arguments, line, header.where)
    ]


def _unique_line(header: _Header, arguments: str, line: str) -> list[DataTest]:
    names = _names(arguments, line, header.where)
    quoted = [header.column(n, line) for n in names]
    return [_unique(header.mart, header.relation, quoted, names)]


def _relationships(header: _Header, arguments: str, line: str) -> list[DataTest]:
    found = _RELATIONSHIP.match(arguments)
    if not found:
        raise header.error(line, "write it as column -> model.column")
    name, model, parent = found.groups()
    quoted = header.column(name, line)
    try:
        other = header.resolve(model)
    except KeyError:
        raise header.error(line, f"no model named {model!r}") from None
    return [
        DataTest(
            header.mart,
            f"{name} -> {model}.{parent}",
            f"select * from {header.relation} as t where t.{quoted} is not null and not exists "
            f'(select 1 from {other} as p where p."{parent}" = t.{quoted})',
        )
    ]


def _accepted_range(header: _Header, arguments: str, line: str) -> list[DataTest]:
    found = _RANGE.match(arguments)
    if not found or (found.group(2) is None and found.group(3) is None):
        raise header.error(line, "write it as column min..max")
    name, low, high = found.groups()
    quoted = header.column(name, line)
    outside = [f"{quoted} < {low}"] if low is not None else []
    outside += [f"{quoted} > {high}"] if high is not None else []
    return [header.test(f"{name} in {low or ''}..{high or ''}", " or ".join(outside))]


def _expression(header: _Header, arguments: str, line: str) -> list[DataTest]:
    if not arguments:
        raise header.error(line, "an expression is needed")
    for call, name in calls(arguments, ("ref", "source")):
        try:
            if call != "ref":
                raise KeyError(name)
            header.resolve(name)
        except KeyError:
            raise header.error(
                line, f"{call}('{name}'): an expression reads other models with ref('model')"
            ) from None
    return [header.test(arguments, f"not ({arguments})")]


# how each kind of line becomes its tests, in the order of KINDS
_READERS: dict[str, Callable[[_Header, str, str], list[DataTest]]] = {
    "not_null": _not_null,
    "unique": _unique_line,
    "relationships": _relationships,
    "accepted_range": _accepted_range,
    "expression": _expression,
}
assert tuple(_READERS) == KINDS


def _unique(mart: str, relation: str, quoted: list[str], names: Sequence[str]) -> DataTest:
    group = ", ".join(quoted)
    return DataTest(
        mart,
        f"{', '.join(names)} unique",
        f"select {group} from {relation} group by {group} having count(*) > 1",
    )


def _names(arguments: str, line: str, where: str) -> list[str]:
    names = [n.strip() for n in arguments.split(",") if n.strip()]
    if not names or not all(_IDENT.match(n) for n in names):
        raise ModelError(f"{where}: tests: {line}: list column names, separated by commas")
    return names


def run(engine: Engine, tests: Sequence[DataTest]) -> list[Outcome]:
    """Each test's count of breaking rows, on ``engine`` (inside the build's transaction).

    Raises:
        ModelError: a test's SQL failed; names the test and carries the database's message.
    """
    outcomes = []
    for test in tests:
        sql = engine.translate(f"select count(*) from ({test.sql}) as breaking")
        try:
            rows = engine.execute(sql)
        except engine.errors as exc:
            raise ModelError(f"data test marts.{test.mart}: {test.name}: {exc}") from None
        outcomes.append(Outcome(test.mart, test.name, int(rows[0][0]) if rows else 0))
    return outcomes


def summary(outcomes: Sequence[Outcome]) -> str:
    """``data tests: 41 passed (activity_by_month 3, ...)``, failures named."""
    per_mart: dict[str, int] = {}
    for outcome in outcomes:
        per_mart[outcome.mart] = per_mart.get(outcome.mart, 0) + 1
    marts = ", ".join(f"{mart} {n}" for mart, n in sorted(per_mart.items()))
    failed = [o for o in outcomes if not o.passed]
    if not failed:
        return f"data tests: {len(outcomes)} passed ({marts})"
    return f"data tests: {len(failed)} of {len(outcomes)} failed: " + "; ".join(
        o.line() for o in failed
    )
