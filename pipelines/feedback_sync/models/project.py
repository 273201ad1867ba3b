"""``feedback-sync models``: the SQL models of ``sql/``, applied in dependency order.

``sql/sources.toml`` declares the loaded tables the models read and the columns they use;
``sql/staging/*.sql`` become views in the schema ``staging`` (renames and casts only) and
``sql/marts/*.sql`` become tables in the schema ``marts``. A model names what it reads with
``{{ source('table') }}`` (a loaded table) and ``{{ ref('model') }}`` (another model); the
refs give the build order.

``source()`` reads only the declared columns (dlt's bookkeeping stays out; a declared
column's type variants ``<col>__v_<type>`` are read back into it); a column that never
arrived reads as a typed NULL, a table that never arrived as an empty relation, and in
soft-delete mode rows marked ``_deleted_at``, and the child rows of such rows, are left out.

Each file opens with a comment block: a one-line description, then ``grain:``, ``key:``
and ``columns:`` (one ``name: meaning`` line each), and for a mart its data tests under
``tests:``. ``models --list`` shows it, and the tests check that the documented columns are
the built ones. The data tests (``datatests.py``: those of the headers, and the queries of
``sql/tests/``) run in the build's transaction; one that fails rolls the build back.

The models are written once, in DuckDB's dialect; on PostgreSQL they are transpiled with
sqlglot (``warehouse/engines/postgres.py``). Everything is built in one transaction of the
warehouse (DuckDB, or PostgreSQL): a model that fails rolls the whole build
back (the previous models stay as they were) and raises ``ModelError`` naming the model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb

from feedback_sync.errors import DataTestsFailed, ModelError, NothingSynced, WarehouseBusy
from feedback_sync.models import datatests
from feedback_sync.models.accounts import Part, parts, union
from feedback_sync.models.datatests import DataTest, Outcome
from feedback_sync.models.settings import MODELS
from feedback_sync.models.sqlfile import calls, read_header, substitute
from feedback_sync.package_data import package_path
from feedback_sync.source.resources import PARENT_KEYS
from feedback_sync.source.screening import spec_fields
from feedback_sync.source.types import DECLARED, VARIANT
from feedback_sync.warehouse import runlock
from feedback_sync.warehouse.engines import Engine
from feedback_sync.warehouse.engines.duckdb import DuckDbEngine
from feedback_sync.warehouse.target import Target

SQL_DIR = package_path("sql")
MARTS_SCHEMA = "marts"
LAYERS = {"staging": "view", MARTS_SCHEMA: "table"}
# the folder of singular data tests, beside the layers
TESTS_FOLDER = "tests"
# what a model's SQL calls: a loaded table, another model
CALLS = ("source", "ref")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# where a build records what it was built from (``build(reuse=True)`` skips a build whose
# inputs are the same) and since when the models stand for the loaded data (``current_at``,
# what the dashboard's "data as of" compares with the last load): written in the same
# transaction as the models, on every engine
BUILD_SCHEMA = "_feedback_sync"
BUILD_TABLE = f'"{BUILD_SCHEMA}"."models_build"'
# a model calling one of these gives another answer for the same inputs: never reused
_VOLATILE = re.compile(
    r"\b(now|today|current_date|current_time|current_timestamp|localtime|localtimestamp|"
    r"get_current_time|get_current_timestamp|random|uuid|gen_random_uuid|setseed)\b",
    re.IGNORECASE,
)


@dataclass
class Model:
    """One SQL file of ``sql/staging`` or ``sql/marts``."""

    name: str
    layer: str
    path: Path
    sql: str
    description: str = ""
    grain: str = ""
    key: list[str] = field(default_factory=list)
    columns: dict[str, str] = field(default_factory=dict)
    refs: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)
    # the header's ``tests:`` lines, ``(kind, arguments)``
    test_lines: list[tuple[str, str]] = field(default_factory=list)

    @property
    def relation(self) -> str:
        return f'"{self.layer}"."{self.name}"'

    def relation_in(self, part: Part) -> str:
        """Where the model is built for ``part``: ``"staging_acme"."ideas"``."""
        return f'"{part.schema(self.layer)}"."{self.name}"'


@dataclass
class Project:
    """The declared sources, the models in the order they are built, and the data tests
    of the marts (their SQL may still call ``ref()`` and ``source()``)."""

    sources: dict[str, dict[str, str]]
    models: list[Model]
    tests: list[DataTest] = field(default_factory=list)

    def model(self, name: str) -> Model:
        for model in self.models:
            if model.name == name:
                return model
        raise KeyError(name)


def sql_dir(chosen: str | Path | None = None) -> Path:
    """The models folder: ``chosen`` (``--sql-dir``), else the setting ``sql_dir`` of
    ``[models]`` (``models/settings.py``), else the one the package ships. A relative path
    is read from the current folder. Its ``push/`` holds the push targets
    (``push.targets``).

    Raises:
        ConfigError: the folder named is malformed or does not exist.
    """
    from feedback_sync.api.config import load

    folder = load(MODELS, {"sql_dir": ("--sql-dir", chosen)}).sql_dir
    return SQL_DIR if folder is None else folder


def load_project(root: Path | None = None) -> Project:
    """Reads ``root`` (default ``sql_dir()``) and orders its models.

    Raises:
        ConfigError: no ``root`` given and the configured folder does not exist.
        ModelError: a bad sources file, an unknown ref or source, a duplicate name, a
            missing doc block, or a cycle; the message names the file.
    """
    root = sql_dir() if root is None else root
    sources_file = root / "sources.toml"
    try:
        raw = tomllib.loads(sources_file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ModelError(f"{sources_file}: {exc}") from None
    sources: dict[str, dict[str, str]] = {}
    for table, columns in raw.items():
        if not isinstance(columns, dict) or not all(isinstance(t, str) for t in columns.values()):
            raise ModelError(f"{sources_file}: [{table}] must map column names to SQL types")
        for name in [table, *columns]:
            if not _IDENT.match(name):
                raise ModelError(f"{sources_file}: {name!r} is not a plain identifier")
        sources[table] = dict(columns)

    found: dict[str, Model] = {}
    for layer in LAYERS:
        for path in sorted((root / layer).glob("*.sql")):
            model = _parse(path, layer)
            if model.name in found:
                raise ModelError(f"{path}: a model named {model.name!r} is also in {layer}")
            found[model.name] = model
    graph: dict[str, set[str]] = {}
    for model in found.values():
        for ref in model.refs:
            if ref not in found:
                raise ModelError(f"{model.path}: ref('{ref}') names no model in {root}")
        for source in model.sources:
            if source not in sources:
                raise ModelError(f"{model.path}: source('{source}') is not in {sources_file}")
        graph[model.name] = model.refs
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise ModelError(f"models refer to each other in a cycle: {cycle}") from None
    project = Project(sources, [found[name] for name in order])
    project.tests = _tests(project, root)
    return project


def _tests(project: Project, root: Path) -> list[DataTest]:
    """The marts' data tests: those their headers declare, then ``tests/*.sql``."""

    def relation(name: str) -> str:
        """A model's relation as a ref, resolved where the test is rendered (the project's
        schemas, or an account's); KeyError where no model has that name."""
        project.model(name)
        return f"{{{{ ref('{name}') }}}}"

    tests: list[DataTest] = []
    names = {m.name for m in project.models}
    marts = {m.name for m in project.models if m.layer == MARTS_SCHEMA}
    for model in project.models:
        if model.layer != MARTS_SCHEMA:
            if model.test_lines:
                raise ModelError(f"{model.path}: data tests are for marts (tests: in a mart)")
            continue
        tests += datatests.generic(
            mart=model.name,
            relation=relation(model.name),
            columns=list(model.columns),
            key=model.key,
            lines=model.test_lines,
            resolve=relation,
            where=str(model.path),
        )
    for path in sorted((root / TESTS_FOLDER).glob("*.sql")):
        sql = path.read_text(encoding="utf-8")
        header = read_header(sql, path.stem)
        mart = header.fields.get("mart", "") if header is not None else ""
        if header is None or not header.description or mart not in marts:
            raise ModelError(
                f"{path}: a data test opens with '-- {path.stem}: what must hold' and "
                f"'-- mart: <the mart it guards>' (one of {', '.join(sorted(marts))})"
            )
        for kind, target in calls(sql, CALLS):
            if kind == "ref" and target not in names:
                raise ModelError(f"{path}: ref('{target}') names no model in {root}")
            if kind == "source" and target not in project.sources:
                raise ModelError(f"{path}: source('{target}') is not declared")
        body = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
        tests.append(DataTest(mart, path.stem, body.strip()))
    return tests


def _parse(path: Path, layer: str) -> Model:
    name = path.stem
    if not _IDENT.match(name):
        raise ModelError(f"{path}: a model's file name must be a plain identifier")
    sql = path.read_text(encoding="utf-8")
    model = Model(name, layer, path, sql)
    header = read_header(sql, name)
    if header is None:
        raise ModelError(f"{path}: opens without its doc comment (description, grain, columns)")
    model.description = header.description
    model.grain = header.fields.get("grain", "")
    model.key = [k.strip() for k in header.fields.get("key", "").split(",") if k.strip()]
    model.columns = header.columns
    model.test_lines = header.tests
    if not model.grain or not model.columns:
        raise ModelError(f"{path}: the doc comment needs 'grain:' and 'columns:'")
    for kind, target in calls(sql, CALLS):
        (model.sources if kind == "source" else model.refs).add(target)
    return model


def source_sql(
    table: str, declared: dict[str, str], dataset: str, existing: dict[str, set[str]]
) -> str:
    """The relation ``source('table')`` stands for: the declared columns of what landed.

    A declared column reads as one value of its declared type, whatever type the column
    was stored with, with its type variants (``<col>__v_<type>``: values that arrived with
    another type) read back into it where they convert (text ``"2500"`` into a double);
    ``<col>__as_sent`` holds, as text, every value that arrived with another type (a word in
    a number column stays visible there), and is NULL for values that fitted.
    Soft-deleted rows are left out, and so are the child rows of a soft-deleted parent.
    """
    present = existing.get(table)
    if present is None:
        columns = ", ".join(
            f'cast(null as {t}) as "{c}", cast(null as varchar) as "{c}__as_sent"'
            for c, t in declared.items()
        )
        return f"(select {columns} where false)"
    parts = []
    for column, kind in declared.items():
        variants = sorted(c for c in present if c.startswith(f"{column}__v_"))
        options = [f'cast(t."{column}" as {kind})'] if column in present else []
        options += [f'try_cast(t."{v}" as {kind})' for v in variants]
        value = f"coalesce({', '.join(options)})" if options else f"cast(null as {kind})"
        sent = [f'cast(t."{v}" as varchar)' for v in variants]
        as_sent = f"coalesce({', '.join(sent)})" if sent else "cast(null as varchar)"
        parts.append(f'{value} as "{column}", {as_sent} as "{column}__as_sent"')
    where = []
    if "_deleted_at" in present:
        where.append("t._deleted_at is null")
    root = table.split("__", 1)[0]
    key = PARENT_KEYS.get(root)
    if root != table and key in present and "_deleted_at" in existing.get(root, set()):
        where.append(
            f'not exists (select 1 from "{dataset}"."{root}" as p '
            f'where p.idx = t."{key}" and p._deleted_at is not null)'
        )
    condition = f" where {' and '.join(where)}" if where else ""
    return f'(select {", ".join(parts)} from "{dataset}"."{table}" as t{condition})'


TYPE_DRIFT = "type_drift"
CUSTOM_FIELDS = "custom_fields"
# the staging views every build makes from the loaded tables' columns, beside the models of
# the SQL folder (so a build makes two more relations than the folder has models)
GENERATED_VIEWS = (TYPE_DRIFT, CUSTOM_FIELDS)
_BOOKKEEPING = ("_dlt_", "_deleted_at")
# DuckDB's type of a stored column -> the sync's kind (source/types.py)
_KIND_OF_TYPE = {
    "VARCHAR": "text",
    "JSON": "json",
    "BIGINT": "bigint",
    "DOUBLE": "double",
    "BOOLEAN": "bool",
    "TIMESTAMP WITH TIME ZONE": "timestamp",
}


def _row_key(table: str, columns: Iterable[str]) -> str | None:
    """SQL for a row's key in ``table``: its ``idx``, or ``<parent idx>/<position>``."""
    present = set(columns)
    root = table.split("__", 1)[0]
    parent = PARENT_KEYS.get(root)
    if table == root and "idx" in present:
        return 't."idx"'
    if parent in present and "_dlt_list_idx" in present:
        return f't."{parent}" || \'/\' || cast(t."_dlt_list_idx" as varchar)'
    return None


def _load_id(columns: Iterable[str]) -> str:
    return 't."_dlt_load_id"' if "_dlt_load_id" in columns else "cast(null as varchar)"


def type_drift_sql(dataset: str, existing: dict[str, set[str]]) -> str:
    """``staging.type_drift``: one row per value that arrived with a type other than its
    column's (and so sits in a ``<column>__v_<type>`` variant), in every loaded table."""
    selects = []
    for table in sorted(existing):
        columns = existing[table]
        row_key = _row_key(table, columns)
        if row_key is None:
            continue
        for variant in sorted(c for c in columns if VARIANT in c):
            column, sent_type = variant.rsplit(VARIANT, 1)
            selects.append(
                f"select '{table}' as table_name, {row_key} as row_key, "
                f"'{column}' as column_name, '{sent_type}' as sent_type, "
                f'cast(t."{variant}" as varchar) as value_as_sent, {_load_id(columns)} '
                f'as load_id from "{dataset}"."{table}" as t where t."{variant}" is not null'
            )
    names = ("table_name", "row_key", "column_name", "sent_type", "value_as_sent", "load_id")
    return _union_or_empty(selects, names)


def custom_fields_sql(dataset: str, types: dict[str, dict[str, str]]) -> str:
    """``staging.custom_fields``: one row per value of a field the spec does not declare
    (a company's top-level ``plan`` or ``seats``, a field the API adds), in every table the
    sync loads: ``field_name`` (the column's name), ``value_type`` (the kind it was stored
    as, its variant's for a value that drifted) and ``value`` (as text; JSON as its text).

    ``types`` is ``{table: {column: DuckDB type}}`` of the dataset."""
    selects = []
    for table in sorted(set(types) & set(DECLARED)):
        columns = types[table]
        row_key = _row_key(table, columns)
        if row_key is None:
            continue
        for column in sorted(columns):
            field_name = column.split(VARIANT, 1)[0]
            if field_name in DECLARED[table] or field_name.startswith(_BOOKKEEPING):
                continue
            if field_name in spec_fields(table):
                continue  # a spec field sent with another shape: staging.type_drift has it
            if VARIANT in column:
                kind = column.rsplit(VARIANT, 1)[1]
            else:
                stored = columns[column]
                kind = _KIND_OF_TYPE.get(stored, "decimal" if "DECIMAL" in stored else "text")
            selects.append(
                f"select '{table}' as table_name, {row_key} as row_key, "
                f"'{field_name}' as field_name, '{kind}' as value_type, "
                f'cast(t."{column}" as varchar) as value, {_load_id(columns)} as load_id '
                f'from "{dataset}"."{table}" as t where t."{column}" is not null'
            )
    names = ("table_name", "row_key", "field_name", "value_type", "value", "load_id")
    return _union_or_empty(selects, names)


def _union_or_empty(selects: list[str], names: Iterable[str]) -> str:
    if selects:
        return "\nunion all\n".join(selects)
    nulls = ", ".join(f"cast(null as varchar) as {name}" for name in names)
    return f"select {nulls} where false"


def render(model: Model, project: Project, part: Part, existing: dict[str, set[str]]) -> str:
    """The model's SQL with ``source()`` and ``ref()`` replaced by relations."""
    return render_sql(model.sql, project, part, existing)


def render_sql(sql: str, project: Project, part: Part, existing: dict[str, set[str]]) -> str:
    """``sql`` with ``source()`` (``part``'s loaded tables) and ``ref()`` (the models built
    for ``part``) replaced by relations."""

    def replace(kind: str, name: str) -> str:
        if kind == "ref":
            return project.model(name).relation_in(part)
        return source_sql(name, project.sources[name], part.dataset, existing)

    return substitute(sql, CALLS, replace)


@dataclass
class BuildResult:
    """What ``build`` made: rows per mart, and the models built."""

    built: list[str] = field(default_factory=list)
    mart_rows: dict[str, int] = field(default_factory=dict)
    missing_sources: list[str] = field(default_factory=list)
    # when the build that is still current was made, where this one was skipped because
    # nothing the models read had changed since (``build(reuse=True)``); None: built now
    reused_from: Any = None
    # the data tests' results (all passed: a failure raises DataTestsFailed); for a reused
    # build, those of the build it reuses (same models, tests and rows: same results)
    tests: list[Outcome] = field(default_factory=list)
    # with accounts configured: the accounts the models are over, and those configured
    # but not synced yet (none of their rows are in the models)
    accounts: list[str] = field(default_factory=list)
    unsynced: list[str] = field(default_factory=list)

    def summary(self) -> str:
        marts = ", ".join(f"{name} {rows:,}" for name, rows in self.mart_rows.items())
        # the same count as ``check`` and ``models --list``: the SQL folder's models, then
        # the views a build makes of the loaded columns
        generated = [f"staging.{name}" for name in GENERATED_VIEWS]
        own = len([name for name in self.built if name not in generated])
        counted = f"{own} models and the {len(generated)} generated views ({', '.join(generated)})"
        if self.accounts:
            counted += f" over {_accounts(self.accounts)}"
        if self.reused_from is not None:
            line = (
                f"models: {counted} up to date, nothing they read changed since their build "
                f"at {self.reused_from}; mart rows: {marts}"
            )
        else:
            line = f"models: built {counted}; mart rows: {marts}"
        if self.missing_sources:
            line += f"; read as empty (not loaded): {', '.join(self.missing_sources)}"
        if self.unsynced:
            line += f"; not in them, never synced: {_accounts(self.unsynced)}"
        if self.tests:
            line += "\n" + datatests.summary(self.tests)
        return line

    def tests_per_mart(self) -> dict[str, dict[str, Any]]:
        """Per mart: tests passed, and the names of those that failed."""
        out: dict[str, dict[str, Any]] = {}
        for outcome in self.tests:
            mart = out.setdefault(outcome.mart, {"passed": 0, "failed": []})
            if outcome.passed:
                mart["passed"] += 1
            else:
                mart["failed"].append(outcome.name)
        return out


def _accounts(names: Sequence[str]) -> str:
    word = "account" if len(names) == 1 else "accounts"
    return f"{len(names)} {word} ({', '.join(names)})"


@dataclass
class _Rendered:
    """What a build makes for one part: its models' SQL, its generated views' and its data
    tests', relations resolved."""

    part: Part
    existing: dict[str, set[str]]
    models: list[tuple[Model, str]]
    views: list[tuple[str, str]]
    tests: list[DataTest]


def _render_part(engine: Engine, project: Project, part: Part) -> _Rendered:
    types = engine.column_types(part.dataset)
    existing = {table: set(columns) for table, columns in types.items()}
    models = [
        (model, render(model, project, part, existing).strip().rstrip(";"))
        for model in project.models
    ]
    views = [
        (TYPE_DRIFT, type_drift_sql(part.dataset, existing)),
        (CUSTOM_FIELDS, custom_fields_sql(part.dataset, types)),
    ]
    assert tuple(name for name, _ in views) == GENERATED_VIEWS
    # an account's tests are named with it: "... [acme]"
    named = "" if part.account is None else f" [{part.account}]"
    tests = [
        DataTest(t.mart, t.name + named, render_sql(t.sql, project, part, existing))
        for t in project.tests
    ]
    return _Rendered(part, existing, models, views, tests)


def build(
    con: Engine | duckdb.DuckDBPyConnection,
    dataset: str,
    project: Project | None = None,
    reuse: bool = False,
    accounts: Sequence[str] = (),
) -> BuildResult:
    """Builds every model on ``con`` (an engine, or a DuckDB connection) in one transaction.

    With ``accounts``, each account's models are built over its dataset
    (``<dataset>_<account>``) into its own schemas (``staging_<account>``,
    ``marts_<account>``: what that account alone gives), and ``staging`` and ``marts`` union
    them, each with the column ``account`` first (``models/accounts.py``).

    With ``reuse``, on DuckDB, a build is skipped when nothing the models read changed since
    the last one: the same rendered SQL, and the same rows in every ``source()`` relation
    (counted and hashed, order aside). Models that call a clock or a random function are
    always built.

    Then the marts' data tests run in the same transaction (each account's on its marts).

    Raises:
        DataTestsFailed: a data test found rows that break it; nothing of this build is
            kept.
        ModelError: names the model that failed and carries the database's message; nothing
            of this build is kept.
    """
    engine: Engine = DuckDbEngine(con) if isinstance(con, duckdb.DuckDBPyConnection) else con
    project = project or load_project()
    chosen = parts(dataset, accounts)
    rendered = [_render_part(engine, project, part) for part in chosen]
    result = BuildResult(accounts=list(accounts))
    result.missing_sources = _missing_sources(project, rendered)
    tests = [test for one in rendered for test in one.tests]
    fingerprint = None
    statements = [sql for one in rendered for _, sql in one.models] + [t.sql for t in tests]
    if engine.hashes_rows and not any(_volatile(sql) for sql in statements):
        fingerprint = _fingerprint(engine, project, rendered)
    if reuse and fingerprint is not None and _reusable(engine, project, chosen, fingerprint):
        return _reused(engine, project, tests, result)
    schemas = list(LAYERS) + [part.schema(layer) for part in chosen for layer in LAYERS]
    with engine.build(list(dict.fromkeys(schemas))):
        for one in rendered:
            _create(engine, one, result)
        if accounts:
            union(engine, _relations(project), chosen, LAYERS, result.mart_rows)
        result.built = _relations(project)
        result.tests = datatests.run(engine, tests)
        if not all(o.passed for o in result.tests):
            raise DataTestsFailed(result.tests)  # rolls the build back
        _record_build(engine, fingerprint, result.mart_rows, accounts)
    return result


def _relations(project: Project) -> list[str]:
    """What every build makes, as ``layer.name``: the models, then the generated views."""
    return [f"{m.layer}.{m.name}" for m in project.models] + [
        f"staging.{name}" for name in GENERATED_VIEWS
    ]


def _missing_sources(project: Project, rendered: list[_Rendered]) -> list[str]:
    """The declared sources a part lacks (``account: table`` where there are accounts)."""
    missing = []
    for one in rendered:
        named = "" if one.part.account is None else f"{one.part.account}: "
        missing += [named + t for t in sorted(project.sources) if t not in one.existing]
    return missing


def _reusable(engine: Engine, project: Project, parts: list[Part], fingerprint: str) -> bool:
    stored = _last_build(engine)
    return stored is not None and stored[0] == fingerprint and _all_there(engine, project, parts)


def _reused(
    engine: Engine, project: Project, tests: list[DataTest], result: BuildResult
) -> BuildResult:
    """The result of a build skipped: the last build's, which stands for the data now."""
    stored = _last_build(engine)
    assert stored is not None
    result.built = _relations(project)
    result.mart_rows = json.loads(stored[2])
    result.reused_from = stored[1]
    result.tests = [Outcome(t.mart, t.name, 0) for t in tests]
    # the models stand for what is loaded now, as the build did
    engine.execute(f"update {BUILD_TABLE} set current_at = ?", [datetime.now(UTC)])
    return result


def _create(engine: Engine, rendered: _Rendered, result: BuildResult) -> None:
    """Makes every model of one part, then its generated views, inside the build's
    transaction; the project's own marts' row counts go into ``result.mart_rows``.

    Raises:
        ModelError: names the model that failed and carries the database's message.
    """
    part = rendered.part
    for model, sql in rendered.models:
        kind = LAYERS[model.layer]
        relation = model.relation_in(part)
        try:
            engine.create(kind, relation, sql)
        except engine.errors as exc:
            raise ModelError(
                f"model {part.schema(model.layer)}.{model.name} ({model.path.name}): {exc}"
            ) from None
        if kind == "table" and part.account is None:
            rows = engine.execute(f"select count(*) from {relation}")
            result.mart_rows[model.name] = int(rows[0][0]) if rows else 0
    for name, sql in rendered.views:
        engine.create("view", f'"{part.schema("staging")}"."{name}"', sql)


def _volatile(sql: str) -> bool:
    """Whether ``sql`` calls a clock or a random function: its words outside comments (a
    model's header saying "its name now" reads nothing). Quoted text counts: ``'now'`` is a
    clock where it is cast to a time."""
    from sqlglot.errors import TokenError
    from sqlglot.tokens import Tokenizer

    try:
        tokens = Tokenizer().tokenize(sql)  # comments are not tokens
    except TokenError:  # what it cannot read is searched whole
        return bool(_VOLATILE.search(sql))
    return any(_VOLATILE.search(token.text) for token in tokens)


def _record_build(
    engine: Engine, fingerprint: str | None, mart_rows: dict[str, int], accounts: Sequence[str]
) -> None:
    """The build's record, made anew (an earlier version's lacks ``current_at``). The time
    is this machine's, as dlt's ``_dlt_loads.inserted_at`` is the loader's. ``accounts``:
    those the models are over (a JSON list; empty for one dataset's)."""
    now = datetime.now(UTC)
    engine.execute(f'create schema if not exists "{BUILD_SCHEMA}"')
    engine.execute(f"drop table if exists {BUILD_TABLE}")
    engine.execute(
        f"create table {BUILD_TABLE} (fingerprint varchar, built_at timestamptz, "
        "current_at timestamptz, mart_rows varchar, accounts varchar)"
    )
    engine.execute(
        f"insert into {BUILD_TABLE} values (?, ?, ?, ?, ?)",
        [fingerprint, now, now, json.dumps(mart_rows), json.dumps(list(accounts))],
    )


def built_accounts(engine: Engine) -> list[str] | None:
    """The accounts the models of ``engine`` are over, as their last build recorded them
    (empty: one dataset's); None where no build recorded them (none yet, or an earlier
    version's)."""
    if "accounts" not in _build_columns(engine):
        return None
    rows = engine.execute(f"select accounts from {BUILD_TABLE}")
    if not rows or not isinstance(rows[0][0], str):
        return None
    return [str(name) for name in json.loads(rows[0][0])]


def _fingerprint(engine: Engine, project: Project, rendered: list[_Rendered]) -> str:
    """What a build reads, as one digest: every part's models', views' and data tests' SQL
    as rendered (so the columns and types that landed, and the schemas built), and the rows
    of every ``source()`` relation: their count and the sum of their rows' hashes."""
    digest = hashlib.sha256()
    for one in rendered:
        texts = [sql for _, sql in one.models] + [sql for _, sql in one.views]
        for text in texts + [f"{t.mart}\0{t.name}\0{t.sql}" for t in one.tests]:
            digest.update(text.encode())
            digest.update(b"\0")
        counts = " union all ".join(
            f"select '{name}', count(*), cast(coalesce(sum(hash(s)), 0) as varchar) "
            f"from {source_sql(name, declared, one.part.dataset, one.existing)} as s"
            for name, declared in sorted(project.sources.items())
        )
        for row in engine.execute(counts) if counts else ():
            digest.update(repr(tuple(row)).encode())
    return digest.hexdigest()


def _all_there(engine: Engine, project: Project, parts: list[Part]) -> bool:
    """Whether every model's view or table exists, for every part and for the union over
    the accounts (none was dropped since the build)."""
    schemas = set(LAYERS) | {part.schema(layer) for part in parts for layer in LAYERS}
    there = {
        (str(schema), str(name))
        for schema, name in engine.execute(
            "select table_schema, table_name from information_schema.tables "
            f"where table_schema in ({', '.join('?' for _ in schemas)})",
            sorted(schemas),
        )
    }
    wanted = {(m.layer, m.name) for m in project.models}
    wanted |= {(part.schema(m.layer), m.name) for part in parts for m in project.models}
    return wanted <= there


def _build_columns(engine: Engine) -> set[str]:
    """The columns of the build record (none where no build recorded one)."""
    rows = engine.execute(
        "select column_name from information_schema.columns "
        "where table_schema = ? and table_name = ?",
        [BUILD_SCHEMA, "models_build"],
    )
    return {str(name) for (name,) in rows}


def _last_build(engine: Engine) -> tuple[str, Any, str] | None:
    """``(fingerprint, built_at, mart_rows)`` of the last build, where it recorded them the
    way this version does (an earlier version's record is not reused: the build makes it
    anew)."""
    if "accounts" not in _build_columns(engine):
        return None
    rows = engine.execute(f"select fingerprint, built_at, mart_rows from {BUILD_TABLE}")
    return (str(rows[0][0]), rows[0][1], str(rows[0][2])) if rows else None


def current_since(engine: Engine) -> datetime | None:
    """Since when the models stand for the loaded data: the time of the build that made
    them, or of the later sync that found nothing they read changed (UTC). None where no
    build recorded it (an earlier version's)."""
    if "current_at" not in _build_columns(engine):
        return None
    rows = engine.execute(f"select current_at from {BUILD_TABLE}")
    stamp = rows[0][0] if rows else None
    if not isinstance(stamp, datetime):
        return None
    return stamp.astimezone(UTC) if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def describe(project: Project) -> str:
    """The ``models --list`` text: every model, its grain, key and columns."""
    lines: list[str] = []
    for layer in LAYERS:
        models = [m for m in project.models if m.layer == layer]
        kind = "views" if LAYERS[layer] == "view" else "tables"
        lines.append(f"{layer} ({kind}, schema {layer}), in build order:")
        for model in models:
            deps = sorted(model.refs) + [f"source {s}" for s in sorted(model.sources)]
            lines.append(f"  {layer}.{model.name}: {model.description}")
            lines.append(f"    grain: {model.grain}")
            if model.key:
                lines.append(f"    key: {', '.join(model.key)}")
            lines.append(f"    reads: {', '.join(deps)}")
            if layer == "marts":
                for column, meaning in model.columns.items():
                    lines.append(f"    - {column}: {meaning}")
                tests = [t.name for t in project.tests if t.mart == model.name]
                if tests:
                    lines.append(f"    data tests: {'; '.join(tests)}")
            else:
                lines.append(f"    columns: {', '.join(model.columns)}")
        if layer == "staging":
            lines.append(
                f"  and, made by every build from the loaded tables' columns: "
                f"{', '.join(f'staging.{name}' for name in GENERATED_VIEWS)}"
            )
        lines.append("")
    lines.append(
        f"{len(project.models)} models, and the {len(GENERATED_VIEWS)} generated views every "
        "build adds"
    )
    return "\n".join(lines).rstrip()


def apply(
    target: Target,
    project: Project | None = None,
    lock_wait: float = 0.0,
    reuse: bool = False,
    accounts: Sequence[str] = (),
) -> BuildResult:
    """Builds the models for ``target``, over what the target makes of its loaded tables
    (views of Parquet files, Delta snapshots: ``Target.prepare_models``) and leaving what it
    keeps beside them (the marts as Parquet files: ``Target.after_models``).

    With ``accounts`` (the configured ones), the models are over each account's dataset
    of ``target`` that was synced (``models/accounts.py``); those never synced are named in
    the result.

    With ``reuse`` (a sync's build), a build whose inputs did not change is skipped
    (``build``). Holds ``target``'s run lock (a sync that builds its models holds it
    already).

    Raises:
        ModelError: the target keeps no models, nothing was synced there yet, or a model
            failed (named, with the database's message).
        WarehouseBusy: another run holds the warehouse (nothing was done).
    """
    with _accounts_held(target, accounts), runlock.hold(target, "models", lock_wait):
        return _apply(target, project, reuse, accounts)


@contextlib.contextmanager
def _accounts_held(target: Target, accounts: Sequence[str]) -> Iterator[None]:
    """Holds the run locks of each account whose writes the file's turns do not keep out
    of a build (PostgreSQL, Delta, Parquet: no file shared with ``target``), taken at once
    or not at all, so that a build never reads an account's sync half done (its load
    landed, its deletes and history not yet). Taken before ``target``'s, and never waited
    for: a sync holds its own account's while it builds, so waiting could go round in a
    circle.

    Raises:
        WarehouseBusy: an account's sync is running; the models are left as they were.
    """
    shared = target.writer_file()
    with contextlib.ExitStack() as held:
        for account in accounts:
            own = target.for_account(account)
            if shared is not None and own.writer_file() == shared:
                continue  # the file's turns keep a build out of its writes
            try:
                held.enter_context(runlock.hold_run(own, "models"))
            except WarehouseBusy:
                raise WarehouseBusy(
                    f"the models over every account were not rebuilt: account {account} is "
                    "being synced right now (its writes are not all in yet); a sync that "
                    "builds them rebuilds them, or run `feedback-sync models` after it"
                ) from None
        yield


def _apply(
    target: Target, project: Project | None, reuse: bool, accounts: Sequence[str]
) -> BuildResult:
    project = project or load_project()
    with target.open_models(building=True) as (engine, where):
        try:
            synced = _prepare(target, engine, accounts)
            result = build(engine, target.dataset, project, reuse=reuse, accounts=synced)
            result.unsynced = [account for account in accounts if account not in synced]
            target.after_models(
                engine, MARTS_SCHEMA, result.mart_rows, reused=result.reused_from is not None
            )
            return result
        except duckdb.Error as exc:  # a model's own failure is named by build()
            raise ModelError(f"{where}: {exc}") from None


def _prepare(target: Target, engine: Engine, accounts: Sequence[str]) -> list[str]:
    """Makes the loaded tables readable to the models (each account's, where there are
    accounts); the accounts synced, whose tables the models read.

    Raises:
        ModelError: nothing was synced yet (no account at all, where there are accounts).
    """
    if not accounts:
        target.prepare_models(engine)
        return []
    synced = []
    for account in accounts:
        own = target.for_account(account)
        try:
            own.prepare_models(engine)
        except NothingSynced:
            continue  # the result names it; a table that cannot be read fails the build
        if _has_tables(engine, own.dataset):  # its columns are read once, by the build
            synced.append(account)
    if not synced:
        raise NothingSynced(
            f"no account is synced into {target.describe()} yet "
            f"({', '.join(accounts)}): run a sync first"
        )
    return synced


def _has_tables(engine: Engine, schema: str) -> bool:
    """Whether ``schema`` holds a table or a view (a dataset a sync loaded into)."""
    sql = "select 1 from information_schema.tables where table_schema = ? limit 1"
    return bool(engine.execute(sql, [schema]))
