"""Versioned history of the rows that change: ideas, companies and announcements.

The loaded tables hold the service's current state, one live row per key. After each load
this step compares that state with the newest version kept in a history table and keeps
a version per change, as validity ranges (type 2 of the slowly changing dimensions):

- ``ideas_history``: ``idea_idx``; ``name``, ``status_idx``, ``topic_idxs`` (a JSON array,
  in the order the API listed them);
- ``companies_history``: ``company_id``; every field the API sends of a company (``name``,
  ``monthly_spend``, ``attributes`` with ``plan`` and the custom fields, any other), taken
  from the copy under the most recently updated follower (a company is listed under each
  of its followers);
- ``announcements_history``: ``announcement_idx``; ``is_published``, ``published_at``.

Each row is one version: those fields, ``valid_from``, ``valid_to`` (NULL while current)
and ``is_current``. ``history_checks`` says in which month each history table was last compared
with the service (``checked_month``). A version starts when a tracked field differs from the current
version's (an ``updated_at`` bump alone, say a comment on an idea, makes none), at the
``updated_at`` the row carried when it was read with the new value: the latest moment the
change can have happened (the read before is the earliest). Where that ``updated_at`` is
missing or not after the current version's start (a server that did not move it), the run's
time is used instead, so ranges never overlap. Rows a full read no longer finds (deleted at
the source) have their current version closed at the run's time; a normal run closes only
what it read completely (``complete``), never a row it did not read.

dlt's own ``scd2`` merge strategy starts every version at the load's time; a version here
starts at the row's own ``updated_at``, so this step keeps the same shape (one row per
version, valid from, valid to) with its own SQL, in one transaction per run, after dlt's
load and the deletes. It compares the rows loaded since the newest load it last compared
(``_Compared``: ``_feedback_sync.history_compared``, moved in the same transaction), so it
converges: a run killed before it (or in it: the transaction rolls back) leaves the next
run to compare those rows again and record the same versions, no duplicate, no gap. Every
row is compared without a record, and for companies after a full read of followers: a
company's current state is its newest copy, and removing copies (``reconcile``, which then
drops the companies' record) can move it with no row of the company loaded. Rows gone are
found among every current key (``_Current.keys``), whichever rows were compared. Fields
that appear later (a new custom field of a company) become new columns of the history
table.

DuckDB (and the Parquet target's working DuckDB file) and PostgreSQL run it; Delta tables
and other dlt destinations keep no history (``Target.history_sql``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from feedback_sync.errors import ConfigError
from feedback_sync.source.resources import RESOURCES
from feedback_sync.warehouse.base import (
    INTERNAL_SCHEMA,
    connected,
    create_internal_schema,
    internal_table,
)
from feedback_sync.warehouse.history_sql import Columns, HistorySql

HISTORY_SETTINGS = {
    "ideas": "history_ideas",
    "companies": "history_companies",
    "announcements": "history_announcements",
}
# on unless a setting says otherwise, where the warehouse keeps history
ON_BY_DEFAULT = frozenset({"ideas", "companies"})
# the validity columns every history table ends with
VALIDITY = ("valid_from", "valid_to", "is_current")
# a company's copy: the columns of followers__companies that are not the company's fields
_COPY_COLUMNS = frozenset({"follower_idx", "id", "_dlt_list_idx"})


@dataclass(frozen=True)
class Entity:
    """One history table: what it keeps and where the current state is read."""

    name: str  # the setting's name (``history_<name>``)
    table: str  # the history table
    key: str  # its key column
    resource: str  # the resource whose complete read may close versions
    reads: tuple[str, ...]  # the loaded tables its versions are read from (lineage)


def _declared_by(name: str) -> str:
    """The resource whose declaration keeps the history ``name`` (``Resource.history``)."""
    (resource,) = [r.name for r in RESOURCES if name in r.history]
    return resource


ENTITIES = {
    "ideas": Entity(
        "ideas", "ideas_history", "idea_idx", _declared_by("ideas"), ("ideas", "ideas__topics")
    ),
    "companies": Entity(
        "companies",
        "companies_history",
        "company_id",
        _declared_by("companies"),
        ("followers__companies", "followers"),
    ),
    "announcements": Entity(
        "announcements",
        "announcements_history",
        "announcement_idx",
        _declared_by("announcements"),
        ("announcements",),
    ),
}
# a history table -> the loaded tables it is read from
READS = {entity.table: entity.reads for entity in ENTITIES.values()}
# the month (UTC) of the sync that last compared each history table with the service:
# ``table_name``, ``checked_month``. A month, not a time: the models are rebuilt only when
# what they read changed, and a time would change on every run; the spend-by-month mart
# needs no more than which months have ended
CHECKS_TABLE = "history_checks"
HISTORY_TABLES = frozenset(entity.table for entity in ENTITIES.values()) | {CHECKS_TABLE}
# per history table, the newest load compared with it: ``dataset_name``, ``table_name``,
# ``load_id`` (``_Compared``); a later run compares only the rows loaded after it
COMPARED_TABLE = "history_compared"
# a dlt load id (a Unix time); another value in the record is not trusted (every row is
# compared), and so the one value put in a statement's text is digits and a point
_LOAD_ID = re.compile(r"[0-9]{1,20}(\.[0-9]{1,20})?")
# compared whole after a full read of their resource: a company's current state comes from
# the newest of its copies, and a read that removed followers or copies (a full one) can
# move it without loading any row of the company
COMPARE_ALL = frozenset({"companies"})


def chosen(choices: dict[str, bool | None], keeps: bool, where: str) -> tuple[str, ...]:
    """The entities whose history this run keeps: each setting's choice (None: on for
    ideas and companies), on a warehouse that keeps history (``keeps``).

    Raises:
        ConfigError: a history setting is on where the warehouse (``where``) keeps none.
    """
    from feedback_sync.api.settings import describe

    kept = []
    for name, setting in HISTORY_SETTINGS.items():
        choice = choices.get(name)
        if not keeps:
            if choice:
                raise ConfigError(
                    f"{describe(setting)} is on, but {where} keeps no history (DuckDB, Parquet "
                    "and PostgreSQL do); set it to false"
                )
            continue
        if choice or (choice is None and name in ON_BY_DEFAULT):
            kept.append(name)
    return tuple(kept)


@dataclass
class Recorded:
    """What one run's step did to one history table."""

    opened: int = 0  # versions begun (a changed or new row)
    closed: int = 0  # versions ended (by a change, or a row gone at the source)
    rows: int = 0  # the table's versions afterwards


def _stamp_and_where(
    sql: HistorySql, alias: str, columns: Columns, soft: bool, key: str = "idx"
) -> tuple[str, str]:
    """The row's ``updated_at`` (a typed NULL where it has none) and the filter of the rows
    that count: a key, and in soft mode not marked deleted."""
    stamp = (
        f"{alias}.{sql.col('updated_at')}"
        if "updated_at" in columns
        else sql.typed_null(sql.timestamp_type)
    )
    where = f"{alias}.{sql.col(key)} is not null"
    if soft and "_deleted_at" in columns:
        where += f" and {alias}.{sql.col('_deleted_at')} is null"
    return stamp, where


@dataclass
class _Current:
    """The current state of one entity as a query: key, fields, ``stamp`` (the row's
    ``updated_at``), and the fields' types; ``keys``, a query of every current key (the
    rows gone are those without one), whichever rows ``sql`` is limited to."""

    sql: str
    fields: Columns
    key_type: str
    keys: str


def _ideas(sql: HistorySql, soft: bool, since: str | None) -> _Current | None:
    ideas = sql.columns("ideas")
    if "idx" not in ideas:
        return None
    fields: Columns = {}
    picks = []
    for name in ("name", "status_idx"):
        kind = ideas.get(name, sql.text_type)
        fields[name] = kind
        picks.append(f"i.{sql.col(name)}" if name in ideas else sql.typed_null(kind))
    changed = _since(sql, "ideas", "idx", since)
    topics = sql.columns("ideas__topics")
    if {"idea_idx", "topic_idx"} <= set(topics):
        agg = sql.json_list(sql.col("topic_idx"), sql.col("_dlt_list_idx"))
        only = f" where {sql.col('idea_idx')} in ({changed})" if changed else ""
        topic_join = (
            f"left join (select {sql.col('idea_idx')} as idea_idx, {agg} as topic_idxs "
            f"from {sql.table('ideas__topics')}{only} group by {sql.col('idea_idx')}) t "
            f"on t.idea_idx = i.{sql.col('idx')}"
        )
        topic_value = f"coalesce(t.topic_idxs, {sql.empty_json_list()})"
    else:
        topic_join, topic_value = "", sql.empty_json_list()
    fields["topic_idxs"] = sql.json_type
    stamp, where = _stamp_and_where(sql, "i", ideas, soft)
    keys = f"select i.{sql.col('idx')} as {sql.col('idea_idx')} from {sql.table('ideas')} i "
    keys += f"where {where}"
    if changed:
        where += f" and i.{sql.col('idx')} in ({changed})"
    query = (
        f"select i.{sql.col('idx')} as {sql.col('idea_idx')}, "
        + ", ".join(f"{pick} as {sql.col(name)}" for pick, name in zip(picks, fields, strict=False))
        + f", {topic_value} as {sql.col('topic_idxs')}, {stamp} as stamp "
        f"from {sql.table('ideas')} i {topic_join} where {where}"
    )
    return _Current(query, fields, ideas["idx"], keys)


def _companies(sql: HistorySql, soft: bool, since: str | None) -> _Current | None:
    copies = sql.columns("followers__companies")
    followers = sql.columns("followers")
    if not {"id", "follower_idx"} <= set(copies) or "idx" not in followers:
        return None
    fields = {
        name: kind
        for name, kind in copies.items()
        if name not in _COPY_COLUMNS and not name.startswith("_dlt")
    }
    stamp = (
        "f." + sql.col("updated_at")
        if "updated_at" in followers
        else sql.typed_null(sql.timestamp_type)
    )
    where = f"c.{sql.col('id')} is not null"
    if soft and "_deleted_at" in followers:
        where += f" and f.{sql.col('_deleted_at')} is null"
    joined = (
        f"from {sql.table('followers__companies')} c join {sql.table('followers')} f "
        f"on f.{sql.col('idx')} = c.{sql.col('follower_idx')}"
    )
    keys = f"select distinct c.{sql.col('id')} as {sql.col('company_id')} {joined} where {where}"
    changed = _since(sql, "followers__companies", "id", since)
    if changed:
        # every copy of a company that has a copy loaded since: the newest may be another
        where += f" and c.{sql.col('id')} in ({changed})"
    picked = ", ".join(f"c.{sql.col(name)} as {sql.col(name)}" for name in fields)
    outer = ", ".join(sql.col(name) for name in fields)
    # the copy under the follower updated last (then the highest follower idx: one copy)
    query = (
        f"select {sql.col('company_id')}, {outer}{', ' if outer else ''}stamp from ("
        f"select c.{sql.col('id')} as {sql.col('company_id')}, {picked}{', ' if picked else ''}"
        f"{stamp} as stamp, row_number() over (partition by c.{sql.col('id')} order by "
        f"{stamp} desc nulls last, c.{sql.col('follower_idx')} desc) as copy_rank "
        f"{joined} where {where}"
        ") as copies where copy_rank = 1"
    )
    return _Current(query, fields, copies["id"], keys)


def _announcements(sql: HistorySql, soft: bool, since: str | None) -> _Current | None:
    posts = sql.columns("announcements")
    if "idx" not in posts:
        return None
    wanted = {"is_published": sql.boolean_type, "published_at": sql.timestamp_type}
    fields = {name: posts.get(name, kind) for name, kind in wanted.items()}
    picks = [
        f"a.{sql.col(name)}" if name in posts else sql.typed_null(kind)
        for name, kind in fields.items()
    ]
    stamp, where = _stamp_and_where(sql, "a", posts, soft)
    keys = f"select a.{sql.col('idx')} as {sql.col('announcement_idx')} "
    keys += f"from {sql.table('announcements')} a where {where}"
    changed = _since(sql, "announcements", "idx", since)
    if changed:
        where += f" and a.{sql.col('idx')} in ({changed})"
    query = (
        f"select a.{sql.col('idx')} as {sql.col('announcement_idx')}, "
        + ", ".join(f"{pick} as {sql.col(name)}" for pick, name in zip(picks, fields, strict=False))
        + f", {stamp} as stamp from {sql.table('announcements')} a where {where}"
    )
    return _Current(query, fields, posts["idx"], keys)


def _since(sql: HistorySql, table: str, key: str, since: str | None) -> str | None:
    """A query of the ``key`` values of ``table``'s rows loaded after ``since`` (a load
    id), or None to compare every row."""
    if since is None:
        return None
    return (
        f"select {sql.col(key)} from {sql.table(table)} where {sql.col('_dlt_load_id')} > '{since}'"
    )


_CURRENT: dict[str, Callable[[HistorySql, bool, str | None], _Current | None]] = {
    "ideas": _ideas,
    "companies": _companies,
    "announcements": _announcements,
}


def record(
    pipeline: Any,
    dialect: type[HistorySql],
    entities: Iterable[str],
    complete: Iterable[str],
    run_at: datetime,
    soft: bool,
) -> dict[str, Recorded]:
    """Brings the history tables of ``entities`` up to the current state; what each did.

    ``complete``: the resources read from start to end in the load just made (their rows
    not found are gone at the source); ``run_at``: the run's time, for versions whose row
    carries no usable ``updated_at`` and for rows gone.
    """
    done = set(complete)
    recorded: dict[str, Recorded] = {}
    with connected(pipeline) as client:
        sql = dialect(client)
        compared = _Compared(pipeline, sql)
        with client.begin_transaction():
            newest = compared.newest_load()
            before = compared.read()
            for name in entities:
                entity = ENTITIES[name]
                closes_gone = entity.resource in done
                # the rows loaded since the last comparison, unless every row must be:
                # nothing compared yet, or a full read of the resource (``COMPARE_ALL``)
                existing = sql.columns(entity.table)
                since = before.get(entity.table)
                if (closes_gone and name in COMPARE_ALL) or not existing:
                    since = None
                current = _CURRENT[name](sql, soft, since)
                if current is None:
                    continue  # nothing of it loaded yet
                recorded[entity.table] = _record_one(
                    sql,
                    entity,
                    current,
                    existing=existing,
                    closes_gone=closes_gone,
                    run_at=run_at,
                    partial=since is not None,
                )
            if recorded:
                _checked(sql, list(recorded), run_at)
                compared.write(list(recorded), newest)
    return recorded


class _Compared:
    """Per history table, the newest load whose rows it was compared with, and how many
    loads had completed then (``COMPARED_TABLE``, beside the dataset:
    ``base.INTERNAL_SCHEMA``).

    A record holds only while no load with an id at or below its own has completed since
    (dlt's load ids are the extracting machine's clock: one whose clock is behind, or that
    synced the same dataset from elsewhere, can commit a lower one later): then fewer loads
    lie at or below the recorded id than were counted, and every row is compared."""

    def __init__(self, pipeline: Any, sql: HistorySql) -> None:
        self.pipeline = pipeline
        self.sql = sql
        self.client = sql.client
        self.table = internal_table(pipeline, sql.client, COMPARED_TABLE)
        self.loads = sql.table("_dlt_loads")

    def newest_load(self) -> tuple[str, int] | None:
        """The newest completed load and how many have completed (None: no usable id)."""
        rows = self.client.execute_sql(
            f"select max(load_id), count(*) from {self.loads} where status = 0"
        )
        newest, count = rows[0] if rows else (None, 0)
        if isinstance(newest, str) and _LOAD_ID.fullmatch(newest):
            return newest, int(count)
        return None

    def read(self) -> dict[str, str]:
        """History table -> the load it was last compared up to, where that still holds."""
        if "loads" not in _compared_columns(self.client):
            return {}
        rows = self.client.execute_sql(
            f"select table_name, load_id, loads from {self.table} where dataset_name = %s",
            self.client.dataset_name,
        )
        held: dict[str, str] = {}
        for table, load, counted in rows or ():
            if not (isinstance(load, str) and _LOAD_ID.fullmatch(load)):
                continue
            since = self.client.execute_sql(
                f"select count(*) from {self.loads} where status = 0 and load_id <= %s", load
            )
            if since and int(since[0][0]) == counted:
                held[str(table)] = load
        return held

    def write(self, tables: list[str], newest: tuple[str, int] | None) -> None:
        """Every row of ``tables`` has been compared, up to the load ``newest``."""
        create_internal_schema(self.pipeline, self.client)
        columns = _compared_columns(self.client)
        if columns and "loads" not in columns:  # as a development version made it
            self.client.execute_sql(f"drop table {self.table}")
        self.client.execute_sql(
            f"create table if not exists {self.table} (dataset_name text not null, "
            "table_name text not null, load_id text not null, loads bigint not null)"
        )
        for table in tables:
            self.client.execute_sql(
                f"delete from {self.table} where dataset_name = %s and table_name = %s",
                self.client.dataset_name,
                table,
            )
            if newest is not None:
                self.client.execute_sql(
                    f"insert into {self.table} values (%s, %s, %s, %s)",
                    self.client.dataset_name,
                    table,
                    *newest,
                )


def _compared_columns(client: Any) -> set[str]:
    """The columns of ``COMPARED_TABLE`` (none: no record yet)."""
    rows = client.execute_sql(
        "select column_name from information_schema.columns "
        "where table_schema = %s and table_name = %s",
        INTERNAL_SCHEMA,
        COMPARED_TABLE,
    )
    return {str(name) for (name,) in rows or ()}


def forget_compared(pipeline: Any, client: Any, table: str) -> None:
    """The next comparison of history ``table`` reads every row: rows it reads were removed
    without a load (``reconcile.replace_children``), so the rows loaded since do not tell
    every key whose current state moved. Runs in the caller's transaction."""
    if _compared_columns(client):
        client.execute_sql(
            f"delete from {internal_table(pipeline, client, COMPARED_TABLE)} "
            "where dataset_name = %s and table_name = %s",
            client.dataset_name,
            table,
        )


def _checked(sql: HistorySql, tables: list[str], run_at: datetime) -> None:
    """Notes that ``tables`` were compared with the service in ``run_at``'s month."""
    checks = sql.table(CHECKS_TABLE)
    name, month = sql.col("table_name"), sql.col("checked_month")
    text = sql.text_type
    sql.client.execute_sql(
        f"create table if not exists {checks} ({name} {text} not null, {month} date not null)"
    )
    first_day = run_at.astimezone(UTC).date().replace(day=1)
    for table in tables:
        # written only when the month moved on: an unchanged row keeps the models' inputs
        # unchanged
        sql.client.execute_sql(
            f"delete from {checks} where {name} = %s and {month} <> %s", table, first_day
        )
        sql.client.execute_sql(
            f"insert into {checks} ({name}, {month}) select %s, %s where not exists "
            f"(select 1 from {checks} where {name} = %s)",
            table,
            first_day,
            table,
        )


def _record_one(
    sql: HistorySql,
    entity: Entity,
    current: _Current,
    *,
    existing: Columns,
    closes_gone: bool,
    run_at: datetime,
    partial: bool = False,
) -> Recorded:
    """Brings one history table (its columns now: ``existing``, none before it is made) up
    to ``current``; ``partial``: ``current.sql`` holds only the rows loaded since the last
    comparison (the others are as then)."""
    history = sql.table(entity.table)
    key = sql.col(entity.key)
    if not existing:
        definitions = [f"{key} {current.key_type} not null"]
        definitions += [f"{sql.col(n)} {kind}" for n, kind in current.fields.items()]
        definitions += [
            f"{sql.col('valid_from')} {sql.timestamp_type} not null",
            f"{sql.col('valid_to')} {sql.timestamp_type}",
            f"{sql.col('is_current')} {sql.boolean_type} not null",
        ]
        sql.client.execute_sql(f"create table {history} ({', '.join(definitions)})")
        existing = {entity.key: current.key_type, **current.fields}
    for name, kind in current.fields.items():
        if name not in existing:  # a field the API sends now that it did not before
            sql.client.execute_sql(f"alter table {history} add column {sql.col(name)} {kind}")
    # fields the history has that the current state no longer sends read as NULL there
    gone_fields = [
        n for n in existing if n not in current.fields and n != entity.key and n not in VALIDITY
    ]
    fields = list(current.fields) + gone_fields
    staged = sql.stage(current.sql)
    cur = staged
    if gone_fields:
        extra = ", ".join(f"{sql.typed_null(existing[n])} as {sql.col(n)}" for n in gone_fields)
        cur = f"select c.*, {extra} from ({staged}) c"
    before = _counts(sql, history)
    kinds = {**existing, **current.fields}
    differs = " or ".join(sql.differs(n, kinds[n]) for n in fields)
    valid_from, valid_to, is_current = (sql.col(n) for n in VALIDITY)
    # a change: the current version ends where the new one begins (its row's updated_at,
    # when that is after the version's start; else the run's time)
    sql.client.execute_sql(
        f"update {history} as h set {valid_to} = case when c.stamp > h.{valid_from} "
        f"then c.stamp else greatest(%s, h.{valid_from}) end, {is_current} = false "
        f"from ({cur}) as c where h.{key} = c.{key} and h.{is_current} and ({differs or 'false'})",
        run_at,
    )
    if closes_gone:
        present = current.keys if partial else staged
        sql.client.execute_sql(
            f"update {history} set {valid_to} = greatest(%s, {valid_from}), {is_current} = false "
            f"where {is_current} and {key} not in (select {key} from ({present}) as c)",
            run_at,
        )
    columns = ", ".join(sql.col(n) for n in fields)
    picked = ", ".join(f"c.{sql.col(n)}" for n in fields)
    # the versions of the keys compared, not the whole history's
    only = f" where {key} in (select {key} from ({staged}) as k)" if partial else ""
    # a new version (a changed row's, whose current version ended just above, or a new
    # row's) starts at its updated_at unless an earlier version ends after that
    sql.client.execute_sql(
        f"insert into {history} ({key}, {columns}, {valid_from}, {valid_to}, {is_current}) "
        f"select c.{key}, {picked}, case when e.last_edge is null then coalesce(c.stamp, %s) "
        "when c.stamp >= e.last_edge then c.stamp else greatest(%s, e.last_edge) end, "
        f"null, true from ({cur}) as c left join (select {key}, "
        f"max(coalesce({valid_to}, {valid_from})) as last_edge, "
        f"bool_or({is_current}) as has_current from {history}{only} group by {key}) as e "
        f"on e.{key} = c.{key} where e.has_current is not true",
        run_at,
        run_at,
    )
    sql.unstage()
    after = _counts(sql, history)
    opened = after[0] - before[0]
    return Recorded(opened=opened, closed=before[1] + opened - after[1], rows=after[0])


def _counts(sql: HistorySql, history: str) -> tuple[int, int]:
    """(versions, current versions) of a history table."""
    is_current = sql.col("is_current")
    rows = sql.client.execute_sql(
        f"select count(*), count(*) filter (where {is_current}) from {history}"
    )
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)
