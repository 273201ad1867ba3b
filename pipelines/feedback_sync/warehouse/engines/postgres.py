"""The PostgreSQL engine the models run on.

The models of ``sql/`` are written once, in DuckDB's dialect. On PostgreSQL each rendered
statement is transpiled with sqlglot, and the few DuckDB constructs sqlglot has no
PostgreSQL spelling for are rewritten on the parsed tree first (``_for_postgres``):

- ``map_from_entries(list(struct_pack(k := key, v := value) ...))`` (a MAP column) becomes
  ``jsonb_object_agg(key, value)``, and an empty ``map()`` an empty ``jsonb`` object: a
  mart's MAP column is a JSON object on PostgreSQL, with the same keys and values;
- ``try_cast(x as T)`` becomes ``feedback_sync_try_<T>(x::text)``, a function made in the
  ``staging`` schema that returns NULL where the cast fails (PostgreSQL has no try_cast);
- a subquery in ``FROM`` without an alias (``source()`` gives one) gets one;
- ``round(x, n)`` rounds ``x`` as ``numeric`` and gives back a double, as DuckDB does for the
  doubles the models round (PostgreSQL has no ``round(double precision, int)``);
- ``to_json(struct_pack(k := v, ...))`` (the push's packed curated columns) becomes
  ``json_build_object('k', v, ...)``;
- ``format('... {} ... {:,.2f} ...', a, b)`` (the push's note text) becomes the same text
  joined with ``||``, a ``{:,.Nf}`` placeholder as ``to_char`` of the value as ``numeric``
  with a comma every three digits. Other placeholders have no rewrite and fail, named.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from feedback_sync.errors import DependentViewError
from feedback_sync.warehouse.engines import Engine, catalog

# what PostgreSQL's information_schema calls a type -> DuckDB's name for it (the models'
# catalog code speaks DuckDB's names)
_PG_TYPES = {
    "text": "VARCHAR",
    "character varying": "VARCHAR",
    "jsonb": "JSON",
    "json": "JSON",
    "bigint": "BIGINT",
    "integer": "INTEGER",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp with time zone": "TIMESTAMP WITH TIME ZONE",
    "timestamp without time zone": "TIMESTAMP",
    "date": "DATE",
    "numeric": "DECIMAL",
}
TRY_CAST_PREFIX = "feedback_sync_try_"


class PostgresEngine(Engine):
    """A psycopg2 connection (dlt's, from the pipeline's credentials), autocommitting.

    ``json`` and ``jsonb`` values come back as their text, as DuckDB gives a JSON value (the
    push parses them where it reads them). Parameters are written ``?``, as for DuckDB.
    """

    def __init__(self, con: Any) -> None:
        import psycopg2
        import psycopg2.extras

        self.con = con
        for register in (
            psycopg2.extras.register_default_json,
            psycopg2.extras.register_default_jsonb,
        ):
            register(con, loads=_text)
        self.hashes_rows = False
        self.errors: tuple[type[Exception], ...] = (
            psycopg2.Error,
            sqlglot.errors.SqlglotError,
            ValueError,
        )
        self.functions_schema = "staging"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.query(sql, params)[1]

    def query(
        self, sql: str, params: Sequence[Any] = ()
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        if params:
            # psycopg2's placeholders are %s, so a literal % is written %%
            sql = sql.replace("%", "%%").replace("?", "%s")
        with self.con.cursor() as cursor:
            cursor.execute(sql, list(params) or None)
            if cursor.description is None:
                return [], []
            names = [d[0] for d in cursor.description]
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return names, rows

    def translate(self, sql: str) -> str:
        return to_postgres(sql, self.functions_schema)

    def column_types(self, schema: str) -> dict[str, dict[str, str]]:
        return {
            table: {column: _PG_TYPES.get(kind, kind.upper()) for column, kind in columns.items()}
            for table, columns in catalog(self, schema).items()
        }

    @contextlib.contextmanager
    def build(self, schemas: Sequence[str]) -> Iterator[None]:
        """One transaction; the model schemas are made anew (PostgreSQL's ``create or
        replace view`` cannot change a view's columns, and it has no such verb for tables).

        What others built on the models survives the rebuild: views (and materialized
        views) in other schemas that read them are dropped with the schemas and made again
        from their definitions, and the privileges granted on the schemas, their default
        privileges and the privileges on each model and each such view are granted again.
        A view that no longer compiles against the new models fails the build by name, and
        the transaction leaves everything as it was. Objects placed inside the model
        schemas themselves are the models' own: they are not kept.
        """
        self.execute("begin")
        try:
            kept = _Kept.read(self, schemas)
            for schema in schemas:
                self.execute(f'drop schema if exists "{schema}" cascade')
                self.execute(f'create schema "{schema}"')
            kept.restore_schemas(self)
            # try_cast's stand-ins live in the first schema (staging), made anew with it
            self.functions_schema = schemas[0]
            self._try_cast_functions(self.functions_schema)
            yield
            kept.restore_relations(self)
            self.execute("commit")
        except BaseException:
            with contextlib.suppress(Exception):
                self.execute("rollback")
            raise

    def create(self, kind: str, relation: str, sql: str) -> None:
        self.execute(f"create {kind} {relation} as\n{to_postgres(sql, self.functions_schema)}")

    def _try_cast_functions(self, schema: str) -> None:
        for sql_type in ("bigint", "double precision", "boolean", "timestamptz", "json", "text"):
            name = f'"{schema}"."{try_cast_function(sql_type)}"'
            self.execute(
                f"create function {name}(value text) returns {sql_type} language plpgsql "
                f"immutable as $$ begin return value::{sql_type}; "
                "exception when others then return null; end $$"
            )


def _text(value: str) -> str:
    return value


def _ident(*names: str) -> str:
    return ".".join('"' + n.replace('"', '""') + '"' for n in names)


def _grantee(role: str) -> str:
    return "public" if role == "public" else _ident(role)


# privileges others hold: (schema, relation or "", privilege, grantee, grantable)
_RELATION_GRANTS = """
select n.nspname, c.relname, a.privilege_type, coalesce(r.rolname, 'public'), a.is_grantable
from pg_class c join pg_namespace n on n.oid = c.relnamespace
cross join lateral aclexplode(c.relacl) a left join pg_roles r on r.oid = a.grantee
where a.grantee <> c.relowner and {where}
"""
_SCHEMA_GRANTS = """
select n.nspname, '', a.privilege_type, coalesce(r.rolname, 'public'), a.is_grantable
from pg_namespace n cross join lateral aclexplode(n.nspacl) a
left join pg_roles r on r.oid = a.grantee
where a.grantee <> n.nspowner and n.nspname = any(?::text[])
"""
# default privileges in the model schemas: (schema, owner role, object type, privilege,
# grantee, grantable)
_DEFAULT_GRANTS = """
select n.nspname, o.rolname, d.defaclobjtype, a.privilege_type,
       coalesce(r.rolname, 'public'), a.is_grantable
from pg_default_acl d join pg_namespace n on n.oid = d.defaclnamespace
join pg_roles o on o.oid = d.defaclrole
cross join lateral aclexplode(d.defaclacl) a left join pg_roles r on r.oid = a.grantee
where n.nspname = any(?::text[])
"""
# views outside the model schemas that read them, directly or through one another, with
# their depth (0: reads a model); made again shallowest first
_DEPENDENT_VIEWS = """
with recursive model as (
    select c.oid from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = any(?::text[])
), dependent(oid, depth) as (
    select distinct r.ev_class, 0 from pg_depend d join pg_rewrite r on r.oid = d.objid
    where d.refobjid in (select oid from model) and r.ev_class not in (select oid from model)
    union
    select r.ev_class, dependent.depth + 1 from dependent
    join pg_depend d on d.refobjid = dependent.oid join pg_rewrite r on r.oid = d.objid
    where r.ev_class <> dependent.oid and dependent.depth < 50
)
select n.nspname, c.relname, c.relkind, pg_get_viewdef(c.oid), max(dependent.depth)
from dependent join pg_class c on c.oid = dependent.oid
join pg_namespace n on n.oid = c.relnamespace
group by n.nspname, c.relname, c.relkind, c.oid
order by max(dependent.depth), n.nspname, c.relname
"""
_DEFAULT_KINDS = {"r": "tables", "S": "sequences", "f": "functions", "T": "types", "n": "schemas"}


@dataclass
class _Kept:
    """What others built on the PostgreSQL models, read before the model schemas are
    dropped and made again after (``PostgresEngine.build``)."""

    schema_grants: list[tuple[Any, ...]]
    default_grants: list[tuple[Any, ...]]
    views: list[tuple[Any, ...]]
    relation_grants: list[tuple[Any, ...]]

    @classmethod
    def read(cls, engine: PostgresEngine, schemas: Sequence[str]) -> _Kept:
        names = list(schemas)
        views = engine.execute(_DEPENDENT_VIEWS, [names])
        view_names = [f"{v[0]}.{v[1]}" for v in views]
        relation_grants = engine.execute(
            _RELATION_GRANTS.format(
                where="(n.nspname = any(?::text[]) "
                "or n.nspname || '.' || c.relname = any(?::text[]))"
            ),
            [names, view_names],
        )
        return cls(
            schema_grants=engine.execute(_SCHEMA_GRANTS, [names]),
            default_grants=engine.execute(_DEFAULT_GRANTS, [names]),
            views=views,
            relation_grants=relation_grants,
        )

    def restore_schemas(self, engine: PostgresEngine) -> None:
        """The schemas' own privileges and default privileges (before the models are made,
        so the defaults apply to them as before)."""
        for schema, _, privilege, grantee, grantable in self.schema_grants:
            option = " with grant option" if grantable else ""
            engine.execute(
                f"grant {privilege} on schema {_ident(schema)} to {_grantee(grantee)}{option}"
            )
        for schema, owner, kind, privilege, grantee, grantable in self.default_grants:
            option = " with grant option" if grantable else ""
            engine.execute(
                f"alter default privileges for role {_ident(owner)} in schema {_ident(schema)} "
                f"grant {privilege} on {_DEFAULT_KINDS[kind]} to {_grantee(grantee)}{option}"
            )

    def restore_relations(self, engine: PostgresEngine) -> None:
        """Dependent views made again, then every privilege on a relation that exists again.

        Raises:
            DependentViewError: a dependent view no longer compiles against the new models.
        """
        for schema, name, kind, definition, _ in self.views:
            verb = "materialized view" if kind == "m" else "view"
            try:
                engine.execute(f"create {verb} {_ident(schema, name)} as {definition}")
            except engine.errors as exc:
                raise DependentViewError(
                    f"the {verb} {schema}.{name}, which reads the models, no longer compiles "
                    f"against them ({str(exc).strip().splitlines()[0]}); nothing was changed: "
                    "fix or drop that view, then build again"
                ) from None
        existing = {
            (schema, name)
            for schema, name in engine.execute(
                "select n.nspname, c.relname from pg_class c "
                "join pg_namespace n on n.oid = c.relnamespace"
            )
        }
        for schema, name, privilege, grantee, grantable in self.relation_grants:
            if (schema, name) not in existing:
                continue  # a model this release no longer makes
            option = " with grant option" if grantable else ""
            engine.execute(
                f"grant {privilege} on {_ident(schema, name)} to {_grantee(grantee)}{option}"
            )


def try_cast_function(sql_type: str) -> str:
    """The name of the function that stands for ``try_cast(x as sql_type)`` on PostgreSQL."""
    return TRY_CAST_PREFIX + sql_type.lower().replace(" ", "_")


def to_postgres(sql: str, functions_schema: str) -> str:
    """``sql`` (DuckDB's dialect) in PostgreSQL's, by sqlglot and the rewrites above."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    tree = tree.transform(lambda node: _for_postgres(node, functions_schema))
    # PostgreSQL (before 16) wants an alias on every subquery in FROM; DuckDB does not
    for n, subquery in enumerate(tree.find_all(exp.Subquery)):
        if not subquery.alias and isinstance(subquery.parent, exp.From | exp.Join):
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"_subquery_{n}")))
    return tree.sql(dialect="postgres")


def _for_postgres(node: exp.Expression, functions_schema: str) -> exp.Expression:
    if isinstance(node, exp.MapFromEntries):
        return _object_agg(node)
    empty_map = isinstance(node, exp.Cast) and isinstance(node.this, exp.Map)
    if empty_map and not any(node.this.args.values()):
        return exp.cast(exp.Literal.string("{}"), exp.DataType.build("jsonb"))
    if isinstance(node, exp.TryCast):
        sql_type = node.to.sql(dialect="postgres").lower()
        if sql_type == "varchar":
            sql_type = "text"
        function = exp.func(
            try_cast_function(sql_type), exp.cast(node.this, exp.DataType.build("text"))
        )
        return exp.Dot(this=exp.to_identifier(functions_schema, quoted=True), expression=function)
    if isinstance(node, exp.Round) and node.args.get("decimals") is not None:
        as_numeric = exp.cast(node.this, exp.DataType.build("numeric"))
        rounded = exp.Round(this=as_numeric, decimals=node.args["decimals"])
        return exp.cast(rounded, exp.DataType.build("double precision", dialect="postgres"))
    if isinstance(node, exp.JSONFormat | exp.Anonymous) and _is_to_json_of_struct(node):
        return _json_object(node)
    if isinstance(node, exp.Format) or (
        isinstance(node, exp.Anonymous) and str(node.this).lower() == "format"
    ):
        return _format(node)
    return node


def _is_to_json_of_struct(node: exp.Expression) -> bool:
    if isinstance(node, exp.Anonymous):
        if str(node.this).lower() != "to_json" or len(node.expressions) != 1:
            return False
        inner = node.expressions[0]
    else:
        inner = node.this
    return isinstance(inner, exp.Struct)


def _json_object(node: exp.Expression) -> exp.Expression:
    """``to_json(struct_pack(k := v, ...))`` -> ``json_build_object('k', v, ...)``."""
    struct = node.expressions[0] if isinstance(node, exp.Anonymous) else node.this
    arguments: list[exp.Expression] = []
    for entry in struct.expressions:
        if isinstance(entry, exp.PropertyEQ):
            key, value = entry.this.name, entry.expression
        elif isinstance(entry, exp.Alias):
            key, value = entry.alias, entry.this
        else:
            raise ValueError(f"no PostgreSQL spelling for {node.sql(dialect='duckdb')}")
        arguments += [exp.Literal.string(key), value]
    return exp.Anonymous(this="json_build_object", expressions=arguments)


# the format placeholders with a PostgreSQL spelling: {} and {:,.Nf} / {:.Nf}
_PLACEHOLDER = re.compile(r"\{(?::(,?)\.(\d+)f)?\}")


def _format(node: exp.Expression) -> exp.Expression:
    """DuckDB's ``format(text, args...)`` as text joined with ``||``."""
    arguments = (
        list(node.expressions)
        if isinstance(node, exp.Anonymous)
        else [node.this, *node.expressions]
    )
    template, values = arguments[0], arguments[1:]
    if not isinstance(template, exp.Literal) or not template.is_string:
        raise ValueError(f"no PostgreSQL spelling for {node.sql(dialect='duckdb')}")
    text = template.this
    parts: list[exp.Expression] = []
    position = 0
    for n, match in enumerate(_PLACEHOLDER.finditer(text)):
        if n >= len(values):
            raise ValueError(f"{node.sql(dialect='duckdb')}: more placeholders than values")
        outside = text[position : match.start()]
        if "{" in outside or "}" in outside:
            raise ValueError(f"no PostgreSQL spelling for the format {text!r}")
        if outside:
            parts.append(exp.Literal.string(outside))
        value = values[n]
        if match.group(2) is None:
            parts.append(exp.cast(value, exp.DataType.build("text")))
        else:
            digits = int(match.group(2))
            whole = "999," * 5 + "990" if match.group(1) else "9" * 17 + "0"
            picture = "FM" + whole + ("." + "0" * digits if digits else "")
            as_numeric = exp.cast(value, exp.DataType.build("numeric"))
            parts.append(
                exp.Anonymous(this="to_char", expressions=[as_numeric, exp.Literal.string(picture)])
            )
        position = match.end()
    rest = text[position:]
    if "{" in rest or "}" in rest:
        raise ValueError(f"no PostgreSQL spelling for the format {text!r}")
    if rest:
        parts.append(exp.Literal.string(rest))
    if not parts:
        return exp.Literal.string("")
    joined = parts[0]
    for part in parts[1:]:
        joined = exp.DPipe(this=joined, expression=part)
    return exp.Paren(this=joined)


def _object_agg(node: exp.MapFromEntries) -> exp.Expression:
    """``map_from_entries(list(struct_pack(k := a, v := b) [order by ...]) [filter (...)])``
    -> ``jsonb_object_agg(a, b) [filter (...)]``."""
    inner = node.this
    condition = None
    if isinstance(inner, exp.Filter):
        inner, condition = inner.this, inner.expression
    if isinstance(inner, exp.ArrayAgg):
        entry = inner.this.this if isinstance(inner.this, exp.Order) else inner.this
        if isinstance(entry, exp.Struct) and len(entry.expressions) == 2:
            key, value = (
                e.expression if isinstance(e, exp.PropertyEQ) else e for e in entry.expressions
            )
            agg = exp.Anonymous(this="jsonb_object_agg", expressions=[key, value])
            return exp.Filter(this=agg, expression=condition) if condition is not None else agg
    raise ValueError(f"no PostgreSQL spelling for {node.sql(dialect='duckdb')}")
