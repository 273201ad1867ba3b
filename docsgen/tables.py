"""``docs/reference/tables.md``: the tables a sync and a push write, from the code that
declares them.

- the loaded tables: the source's registry (``source/resources.py``: one root table per
  resource, a child table per list) with the declared types (``source/types.py``), and the
  table of rejected items (``source/screening.py``);
- the history tables: ``warehouse/history.py``, their columns as ``sql/sources.toml``
  declares them for the models;
- the push journal: its DDL (``push/journal.py``), the comment above each table saying
  what one row is;
- the bookkeeping tables of dlt and feedback-sync, by the names the code gives them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from docsgen.markdown import anchor, code, codes, prose, table

# what each kind of column the loader declares holds (source/types.py, KINDS)
KIND_MEANINGS = {
    "text": "text (`VARCHAR`)",
    "bigint": "a 64-bit integer",
    "double": "a double-precision number",
    "bool": "true or false",
    "timestamp": "a timestamp with time zone, in UTC",
    "json": "a JSON object or list, stored as its text",
    "decimal": "an integer beyond 64 bits, exactly (`DECIMAL(38, 0)`)",
}


def _columns(columns: Mapping[str, str], notes: Mapping[str, str] | None = None) -> str:
    notes = notes or {}
    if notes:
        rows = [(code(c), code(t), notes.get(c, "")) for c, t in columns.items()]
        return table(("Column", "Type", "Holds"), rows)
    return table(("Column", "Type"), [(code(c), code(t)) for c, t in columns.items()])


def _child_row(field: str, sent_as: str, keys_as_rows: bool, parent: str) -> str:
    """What one row of a child table is, from how the shaping makes it."""
    if keys_as_rows:
        return f"one key of the {code(sent_as)} object of a row of {code(parent)}"
    if sent_as != field:
        return f"one idx of the {code(sent_as)} list of a row of {code(parent)}"
    return f"one item of the {code(field)} list of a row of {code(parent)}"


def loaded() -> list[str]:
    """The loaded tables: a summary, then each table's columns."""
    from feedback_sync.source.resources import KEY, LIST_INDEX, READINGS, RESOURCES
    from feedback_sync.source.types import KINDS, VARIANT

    missing = [kind for kind in KINDS if kind not in KIND_MEANINGS]
    if missing:
        raise ValueError(f"docsgen.tables.KIND_MEANINGS does not say what {missing} hold")
    summary: list[tuple[str, ...]] = []
    sections: list[str] = []
    for resource in RESOURCES:
        tables = resource.tables()
        read = code(resource.reading)
        summary.append(
            (f"[{code(resource.name)}](#{anchor(resource.name)})", prose(resource.row), read)
        )
        sections += [
            f"### {resource.name}",
            f"One row is {prose(resource.row)}. Key: {code(KEY)}.",
            _columns(tables[resource.name]),
        ]
        for field in resource.children:
            name = f"{resource.name}__{field}"
            sent_as = resource.shaped_from.get(field, field)
            row = _child_row(field, sent_as, sent_as in resource.keys_as_rows, resource.name)
            key = (resource.parent_key, LIST_INDEX)
            parent = f"{code(resource.parent_key)} → {code(resource.name + '.' + KEY)}"
            summary.append((f"[{code(name)}](#{anchor(name)})", row, read))
            notes = {
                resource.parent_key: f"the parent row's {code(KEY)}",
                LIST_INDEX: "the item's position in the list, from 0",
            }
            sections += [
                f"### {name}",
                f"One row is {row}. Key: {codes(key)}. Parent: {parent}.",
                _columns(tables[name], notes),
            ]
    kinds = table(("Type", "Holds"), [(code(k), KIND_MEANINGS[k]) for k in KINDS])
    readings = table(("Read", "How"), [(code(r), prose(how)) for r, how in READINGS.items()])
    return [
        "## Loaded tables {#loaded}",
        "One root table per resource of the API, keyed by the item's "
        f"{code(KEY)} (the service's id of an item, such as `ide_05df114570` for an idea; "
        "a column that points at another item ends in `_idx`), and one child table per list "
        "in it, named "
        "`<table>__<field>`; when a parent row comes again, its child rows are replaced "
        "whole. Every row also carries `_dlt_load_id`, the load that last "
        'wrote it; with `delete_mode = "soft"` the root tables have `_deleted_at` too '
        "(see [Settings](settings.md#sources-feedback)). A field the API sends beyond "
        "these (a custom field) becomes a column typed by its first value, and a value "
        f"of another type than its column's lands in `<column>{VARIANT}<type>`: "
        "[Column types and drift](../explanation/type-drift.md). What each run reads: "
        "[Incremental reads and deletes](../explanation/incremental.md).",
        table(("Table", "One row is", "Read"), summary),
        "How a run reads each resource:",
        readings,
        "The column types:",
        kinds,
        *sections,
    ]


def rejected() -> list[str]:
    """The table of API items that could not land as rows."""
    from feedback_sync.source.screening import REJECTED_KEY, REJECTED_TABLE
    from feedback_sync.source.types import DECLARED

    return [
        f"## {REJECTED_TABLE}",
        "One row is a distinct item of the API that could not land as a row (not an "
        "object, no `idx`, or two keys that become one column), whole, as its JSON text, "
        f"with the reason; a later run that meets it again moves its load id. Key: "
        f"{codes(REJECTED_KEY)}. See [Column types and drift](../explanation/type-drift.md).",
        _columns(DECLARED[REJECTED_TABLE]),
    ]


def history(sql_root: Path) -> list[str]:
    """The history tables, their columns as ``sources.toml`` declares them."""
    from feedback_sync.models.project import load_project
    from feedback_sync.warehouse.history import (
        CHECKS_TABLE,
        ENTITIES,
        HISTORY_SETTINGS,
        ON_BY_DEFAULT,
        VALIDITY,
    )

    declared = load_project(sql_root).sources
    summary = []
    sections = []
    for name, entity in ENTITIES.items():
        setting = HISTORY_SETTINGS[name]
        default = "on" if name in ON_BY_DEFAULT else "off"
        summary.append(
            (
                f"[{code(entity.table)}](#{anchor(entity.table)})",
                f"a version of one {code(entity.key)}",
                f"[{code(setting)}](settings.md#sources-feedback), {default} by default",
            )
        )
        sections += [
            f"### {entity.table}",
            f"One row is a version of one {code(entity.key)}, read from "
            f"{codes(entity.reads)}: valid from {code(VALIDITY[0])} until "
            f"{code(VALIDITY[1])} (NULL while current). Key: "
            f"{codes((entity.key, VALIDITY[0]))}.",
            _columns(declared[entity.table]),
        ]
    sections += [
        f"### {CHECKS_TABLE}",
        "One row is a history table and the month (UTC) of the sync that last compared it "
        "with the service.",
        _columns(declared[CHECKS_TABLE]),
    ]
    return [
        "## History tables {#history}",
        "Each sync on DuckDB, Parquet or PostgreSQL also keeps a version per change of the "
        "rows that change, in the dataset beside the loaded tables; Delta tables and other "
        "destinations keep none. When a version starts and ends: [History of ideas and "
        "companies](../explanation/history.md). A field the API starts sending (a new "
        "custom field of a company) becomes a new column.",
        table(("Table", "One row is", "Setting"), summary),
        *sections,
    ]


_JOURNAL_TABLE = re.compile(r"((?:^--[^\n]*\n)*)create table if not exists \S+?\.(\w+)", re.M)


def journal() -> list[str]:
    """The push journal's tables: each made from its DDL in an empty DuckDB database (the
    column types as DuckDB names them), with the comment above it saying what a row is."""
    import duckdb
    from feedback_sync.push.journal import DDL, SCHEMA

    con = duckdb.connect()
    try:
        con.execute(DDL)
        rows = con.execute(
            "select table_name, column_name, lower(data_type) from information_schema.columns "
            "where table_schema = ? order by table_name, ordinal_position",
            [SCHEMA],
        ).fetchall()
    finally:
        con.close()
    columns: dict[str, dict[str, str]] = {}
    for name, column, kind in rows:
        columns.setdefault(name, {})[column] = kind
    sections = []
    for comment, name in _JOURNAL_TABLE.findall(DDL):
        what = " ".join(line.removeprefix("--").strip() for line in comment.splitlines())
        if not what:
            raise ValueError(f"push/journal.py: no comment above {name} says what a row is")
        sections += [
            f"### {SCHEMA}.{name}",
            prose(what[0].upper() + what[1:]) + ".",
            _columns(columns[name]),
        ]
    if set(columns) != {name for _, name in _JOURNAL_TABLE.findall(DDL)}:
        raise ValueError("push/journal.py: a table of the DDL was not read")
    return [
        "## The push journal {#push-journal}",
        f"`push` records every run and every write in the schema {code(SCHEMA)} of the "
        "warehouse (for Parquet and Delta, in their models.duckdb file, where the models are). "
        "With accounts configured, each account's journal is a schema of its own, "
        f"{code(SCHEMA + '_<account>')}, with the same tables "
        "([Many accounts](../how-to/accounts.md#push-to-each-account)). "
        "How it uses them after a crash: "
        "[Failures, crashes and reruns](../explanation/failures.md).",
        *sections,
    ]


def others() -> list[str]:
    """The tables neither loaded nor kept for the user, by the names the code gives them."""
    from feedback_sync.models.project import BUILD_TABLE, LAYERS
    from feedback_sync.push.curated import SCHEMA as CURATED
    from feedback_sync.warehouse.appends import SCHEMA, TABLE
    from feedback_sync.warehouse.target import DEFAULT_DATASET

    build = BUILD_TABLE.replace('"', "")
    layers = " and ".join(f"[{code(layer)}](models.md)" for layer in LAYERS)
    items = [
        f"{layers}: the models' views and tables, rebuilt by every sync and "
        "`feedback-sync models`; with accounts configured, each account's own are in "
        "`staging_<account>` and `marts_<account>`, and those of `staging` and `marts` "
        "union them with the column `account` first.",
        f"[{code(CURATED)}](push-targets.md#curated-inputs): your curated inputs for the "
        "push, when they are tables rather than files.",
        f"{code(SCHEMA + '.' + TABLE)}: what a load that appended to tables new to the "
        "warehouse still owes (empty between runs).",
        f"{code(build)}: when the models were last built, and from what (a sync skips a "
        "build whose inputs did not change).",
        "`_dlt_loads`, `_dlt_pipeline_state` and `_dlt_version` in the dataset, and the "
        f"dataset {code(DEFAULT_DATASET + '_staging')}: dlt's own (its loads, its state, its "
        "schemas, and the tables it merges through).",
    ]
    return ["## Other schemas and tables {#other}", "\n".join(f"- {i}" for i in items)]


def render(sql_root: Path | None = None) -> str:
    """The page's body; ``sql_root``: the SQL folder (default: the one the package ships)."""
    from feedback_sync.models.project import SQL_DIR
    from feedback_sync.warehouse.target import DEFAULT_DATASET

    intro = (
        "A sync loads into one dataset (a schema; `--dataset`, default "
        f"{code(DEFAULT_DATASET)}). With [accounts configured](../how-to/accounts.md), "
        f"each account's tables are these, in a dataset of its own, "
        f"{code(DEFAULT_DATASET + '_<account>')}. Every timestamp is UTC."
    )
    parts = [
        intro,
        *loaded(),
        *rejected(),
        *history(SQL_DIR if sql_root is None else sql_root),
        *journal(),
        *others(),
    ]
    return "\n\n".join(parts)
