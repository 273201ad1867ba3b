"""The push targets: ``sql/push/<target>.sql``, each the desired state of one API resource.

A target file opens with a comment block like the models' (``models/project.py``)::

    -- followers: Followers upserted by email, with their companies and attributes.
    -- kind: followers          the API resource it writes (see kinds.KINDS)
    -- key: email               the column that names a record (one row per key, except
                                for followers: one row per follower and company)
    -- mode: upsert             insert | update | upsert
    -- delete: no               no | yes (followers: delete | reassign); deletes only what
                                this target pushed before and no longer wants
    -- nulls: published_at      fields a NULL overwrites (by default a NULL changes nothing)
    -- grain: ...
    -- columns:
    --   email: ...

In the SQL, ``{{ curated('accounts') }}`` reads a curated input (``curated.py``),
``{{ ref('idea_engagement') }}`` a model of ``sql/`` (staging view or mart) and
``{{ var('note_author_email') }}`` a push setting, as a SQL literal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedback_sync.errors import ConfigError
from feedback_sync.models.sqlfile import calls, read_header, substitute
from feedback_sync.package_data import package_path

PUSH_DIR = package_path("sql", "push")
MODES = ("insert", "update", "upsert")
# what a target's SQL calls: a curated input, a model, a push setting
CALLS = ("curated", "ref", "var")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass
class TargetSpec:
    name: str
    path: Path
    sql: str
    kind: str
    key: str
    mode: str = "upsert"
    delete: str | None = None  # None, "yes", or the followers' content option
    nulls: frozenset[str] = frozenset()
    description: str = ""
    grain: str = ""
    columns: dict[str, str] = field(default_factory=dict)
    curated: set[str] = field(default_factory=set)
    refs: set[str] = field(default_factory=set)
    variables: set[str] = field(default_factory=set)


def load_targets(root: Path = PUSH_DIR) -> dict[str, TargetSpec]:
    """Every ``*.sql`` of ``root``, checked; raises ConfigError naming the file."""
    from feedback_sync.push.kinds import KINDS

    targets: dict[str, TargetSpec] = {}
    for path in sorted(root.glob("*.sql")):
        spec = _parse(path)
        if spec.kind not in KINDS:
            raise ConfigError(f"{path}: kind {spec.kind!r} is not one of {', '.join(KINDS)}")
        kind = KINDS[spec.kind]
        if spec.delete is not None and spec.delete not in kind.delete_options:
            raise ConfigError(
                f"{path}: delete {spec.delete!r} is not one of no, "
                f"{', '.join(kind.delete_options)} for kind {spec.kind}"
            )
        targets[spec.name] = spec
    return targets


def _parse(path: Path) -> TargetSpec:
    name = path.stem
    if not _IDENT.match(name):
        raise ConfigError(f"{path}: a target's file name must be lower-case letters, digits, _")
    sql = path.read_text(encoding="utf-8")
    parsed = read_header(sql, name)
    header = parsed.fields if parsed is not None else {}
    for needed in ("kind", "key", "grain"):
        if not header.get(needed):
            raise ConfigError(f"{path}: the header needs '-- {needed}: ...'")
    assert parsed is not None
    mode = header.get("mode", "upsert")
    if mode not in MODES:
        raise ConfigError(f"{path}: mode {mode!r} is not one of {', '.join(MODES)}")
    delete = header.get("delete", "no")
    spec = TargetSpec(
        name=name,
        path=path,
        sql=sql,
        kind=header["kind"],
        key=header["key"],
        mode=mode,
        delete=None if delete in ("no", "") else delete,
        nulls=frozenset(n.strip() for n in header.get("nulls", "").split(",") if n.strip()),
        description=parsed.description,
        grain=header["grain"],
        columns=parsed.columns,
    )
    for kind, target in calls(sql, CALLS):
        {"curated": spec.curated, "ref": spec.refs, "var": spec.variables}[kind].add(target)
    return spec


def literal(value: Any) -> str:
    """A setting as a SQL literal."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def render(
    spec: TargetSpec, curated: dict[str, str], refs: dict[str, str], variables: dict[str, Any]
) -> str:
    def replace(kind: str, name: str) -> str:
        if kind == "curated":
            return curated[name]
        if kind == "ref":
            return refs[name]
        return literal(variables.get(name))

    return substitute(spec.sql, CALLS, replace).strip().rstrip(";")
