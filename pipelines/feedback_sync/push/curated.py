"""The curated inputs: tables in the warehouse schema ``curated``, or files in a folder.

``sql/push/curated.toml`` declares each curated table the push models read: its columns,
which are required, and which column prefixes pack into a JSON object (``attr__segment``
becomes the follower attribute ``segment``). ``{{ curated('accounts') }}`` in a push model
reads, in this order:

1. ``<curated_dir>/accounts.csv`` or ``accounts.parquet`` (DuckDB, Parquet and Delta targets;
   both at once is an error). In a CSV file the declared columns are read as text, exactly
   as written (the push converts them per field, so "00123" stays "00123" and "2500.50"
   stays exact); extra columns take the type DuckDB detects for the whole column;
2. the table or view ``curated.accounts`` of the warehouse (the only place on PostgreSQL).

A declared column that is absent reads as NULL (a required one is an error), a column
that is neither declared nor packed is an error naming it (a typo must not be dropped
silently), and the packs read as ``{}`` when no column has their prefix.

Every input may also have a column ``account``: the account a row belongs to, with accounts
configured (``scope.py``). ``check_accounts`` holds it to them: required with more than one
account, every row naming one that is configured; refused with none configured. A run for
one account reads that account's rows (``select_sql``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from feedback_sync.errors import ConfigError
from feedback_sync.push.scope import ACCOUNT, Scope
from feedback_sync.warehouse.engines import Engine, columns_of, has_relation

SCHEMA = "curated"


@dataclass(frozen=True)
class CuratedTable:
    name: str
    columns: tuple[str, ...]
    required: tuple[str, ...] = ()
    # packed column -> prefix of the columns it gathers
    packs: dict[str, str] = field(default_factory=dict)


def load_declarations(path: Path) -> dict[str, CuratedTable]:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    tables: dict[str, CuratedTable] = {}
    for name, spec in raw.items():
        columns = spec.get("columns") if isinstance(spec, dict) else None
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise ConfigError(f'{path}: [{name}] needs columns = ["..."]')
        required = spec.get("required", [])
        packs = spec.get("packs", {})
        missing = [c for c in required if c not in columns]
        if missing:
            raise ConfigError(f"{path}: [{name}] requires undeclared columns {missing}")
        tables[name] = CuratedTable(name, tuple(columns), tuple(required), dict(packs))
    return tables


@dataclass(frozen=True)
class Source:
    """Where one curated table was found, and its columns."""

    table: CuratedTable
    relation: str  # SQL that reads it
    where: str  # how messages name it
    columns: tuple[str, ...]


def find(con: Engine, table: CuratedTable, folder: Path | None) -> Source | None:
    """The curated table's source, or None when there is neither a file nor a table."""
    if folder is not None:
        files = [
            f
            for f in (folder / f"{table.name}.csv", folder / f"{table.name}.parquet")
            if f.exists()
        ]
        if len(files) > 1:
            raise ConfigError(
                f"curated.{table.name}: both {files[0]} and {files[1]} exist; keep one"
            )
        if files:
            return _file_source(con, table, files[0])
    if not has_relation(con, SCHEMA, table.name):
        return None
    relation = f'"{SCHEMA}"."{table.name}"'
    return _checked(con, table, relation, f"the warehouse table {SCHEMA}.{table.name}")


def _file_source(con: Engine, table: CuratedTable, file: Path) -> Source:
    """A file beside a DuckDB or Parquet target, read by DuckDB."""
    path = str(file.resolve()).replace("'", "''")
    if file.suffix == ".parquet":
        return _checked(con, table, f"read_parquet('{path}')", str(file))
    try:
        header = columns_of(con, f"read_csv('{path}')")
    except con.errors as exc:
        raise ConfigError(f"cannot read {file}: {exc}") from None
    text = ", ".join(f"'{c}': 'VARCHAR'" for c in header if c in table.columns)
    relation = f"read_csv('{path}', header = true" + (f", types = {{{text}}})" if text else ")")
    return _checked(con, table, relation, str(file))


def _checked(con: Engine, table: CuratedTable, relation: str, where: str) -> Source:
    try:
        columns = tuple(columns_of(con, relation))
    except con.errors as exc:
        raise ConfigError(f"cannot read {where}: {exc}") from None
    missing = [c for c in table.required if c not in columns]
    if missing:
        raise ConfigError(f"{where}: required column(s) {', '.join(missing)} missing")
    unknown = [
        c
        for c in columns
        if c not in table.columns
        and c != ACCOUNT
        and not any(c.startswith(p) for p in table.packs.values())
    ]
    if unknown:
        prefixes = ", ".join(f"{p}<name> ({pack})" for pack, p in table.packs.items())
        raise ConfigError(
            f"{where}: unknown column(s) {', '.join(repr(c) for c in unknown)}; the columns "
            f"are {', '.join(table.columns)}"
            + (f", and extra fields are named {prefixes}" if prefixes else "")
        )
    return Source(table, relation, where, columns)


def check_accounts(con: Engine, source: Source, scope: Scope) -> None:
    """Holds the input's column ``account`` to the accounts configured: with none, the
    column is refused; with more than one, it is required; where it is there, every row
    names an account that is configured.

    Raises:
        ConfigError: one line naming the input, and the first row that is wrong.
    """
    where, configured = source.where, scope.configured
    if ACCOUNT not in source.columns:
        if len(configured) > 1:
            raise ConfigError(
                f"{where}: no column {ACCOUNT}; with several accounts configured "
                f"({', '.join(configured)}) each row names the account it belongs to"
            )
        return
    if not configured:
        raise ConfigError(
            f"{where}: a column {ACCOUNT}, but no accounts are configured (one table "
            "[sources.feedback.accounts.<name>] each); remove the column or configure them"
        )
    wrong = _wrong_account(con, source, configured)
    if wrong is None:
        return
    row, key, account, count = wrong
    named = f"row {row}" + (f" ({source.table.required[0]} {key!r})" if key is not None else "")
    more = f" (and {count - 1:,} more row(s))" if count > 1 else ""
    if account is None:
        raise ConfigError(
            f"{where}: {named} has no {ACCOUNT}{more}; every row names one of "
            f"{', '.join(configured)}"
        )
    raise ConfigError(
        f"{where}: {named} names account {account!r}, which is not configured{more}; the "
        f"accounts are {', '.join(configured)}"
    )


def _wrong_account(
    con: Engine, source: Source, configured: tuple[str, ...]
) -> tuple[int, str | None, str | None, int] | None:
    """``(row number, its key, its account, how many rows are wrong)`` of the first row
    (in the input's order) whose account is empty or not configured, None when none is."""
    key = source.table.required[0] if source.table.required else None
    key_sql = f'cast(c."{key}" as varchar)' if key is not None else "null"
    names = ", ".join(f"'{name}'" for name in configured)
    sql = (
        "select n, k, a, count(*) over () as wrong from ("
        f"select row_number() over () as n, {key_sql} as k, "
        f"nullif(trim(cast(c.\"{ACCOUNT}\" as varchar)), '') as a "
        f"from {source.relation} as c) as r "
        f"where a is null or a not in ({names}) order by n limit 1"
    )
    try:
        _, rows = con.query(con.translate(sql))
    except con.errors as exc:
        raise ConfigError(f"cannot read {source.where}: {exc}") from None
    if not rows:
        return None
    row, found, account, count = rows[0]
    return int(row), found, account, int(count)


def select_sql(source: Source, account: str | None = None) -> str:
    """The relation ``curated('name')`` stands for: declared columns (NULL when absent) and
    the packs as JSON objects; with ``account``, that account's rows (all of them where the
    input has no column ``account``: ``check_accounts`` allowed that for one account
    alone)."""
    parts = []
    for column in source.table.columns:
        if column in source.columns:
            parts.append(f'c."{column}"')
        else:
            parts.append(f'cast(null as varchar) as "{column}"')
    for pack, prefix in source.table.packs.items():
        members = [c for c in source.columns if c.startswith(prefix) and len(c) > len(prefix)]
        if members:
            fields = ", ".join(
                '"{}" := c."{}"'.format(c[len(prefix) :].replace('"', '""'), c.replace('"', '""'))
                for c in members
            )
            parts.append(f'to_json(struct_pack({fields})) as "{pack}"')
        else:
            parts.append(f"'{{}}'::json as \"{pack}\"")
    mine = ""
    if account is not None and ACCOUNT in source.columns:
        mine = f" where trim(cast(c.\"{ACCOUNT}\" as varchar)) = '{account}'"
    return f"(select {', '.join(parts)} from {source.relation} as c{mine})"
