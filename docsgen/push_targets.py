"""``docs/reference/push-targets.md``: the push targets and their curated inputs.

Each target is a file of ``sql/push/`` read by ``feedback_sync.push.targets`` (its header:
kind, key, mode, deletes, columns); the API calls it makes are those its kind
(``push/kinds/``) builds, asked of the kind itself with a stand-in record; the curated
inputs are ``sql/push/curated.toml`` as ``feedback_sync.push.curated`` reads it.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, cast

from docsgen.markdown import anchor, code, codes, prose, table

# what each mode of a target's header lets it send (push/plan.py)
MODE_MEANINGS = {
    "insert": "creates what the service lacks, never updates",
    "update": "updates what the service holds, never creates",
    "upsert": "creates what the service lacks and updates what differs",
}
_IDX = "IDX"


class _Fields(dict[Any, Any]):
    """A stand-in record's fields: every field has a value."""

    def __missing__(self, key: Any) -> str:
        return "x"


class _Context:
    """A stand-in planning context: every follower exists."""

    def parent_idx(self, key: str) -> str:
        return "flw"


def calls(kind: Any, mode: str, delete: str | None) -> list[tuple[str, str]]:
    """``(what, "METHOD /path")`` of each request the kind sends for a target of ``mode``
    that may ``delete`` (its option, or None)."""
    from feedback_sync.push.kinds.base import Context, Held, Record

    record = Record("key", "key", fields=_Fields(), extra=_Fields())
    context = cast(Context, _Context())
    requests = []
    if mode != "update":
        requests.append(("create", kind.create(record, context)))
    if mode != "insert":
        requests.append(("update", kind.update(record, Held(_IDX, _Fields()), {}, context)))
    if delete is not None:
        requests.append(("delete", kind.delete(_IDX, delete)))
    out = []
    for what, request in requests:
        path = "/" + request.path.replace(_IDX, "{idx}")
        if request.params:
            path += "?" + "&".join(f"{k}={v}" for k, v in request.params.items())
        out.append((what, f"{request.method} {path}"))
    return out


def _about(kind: Any) -> str:
    """How the kind matches and writes records: the docstring of its class, or of the
    nearest class it inherits one from (not ``Kind``'s, which says what every kind is)."""
    from feedback_sync.push.kinds.base import Kind

    for cls in type(kind).__mro__:
        if cls is Kind:
            break
        if cls.__doc__:
            return inspect.cleandoc(cls.__doc__)
    raise ValueError(f"{type(kind).__qualname__}: no docstring says how it writes records")


def _target(spec: Any, kind: Any) -> list[str]:
    requests = calls(kind, spec.mode, spec.delete)
    reads = [f"[{code('curated.' + c)}](#curated-{anchor(c)})" for c in sorted(spec.curated)]
    reads += [f"[{code(r)}](models.md#{anchor(r)})" for r in sorted(spec.refs)]
    reads += [f"[{code(v)}](settings.md#push)" for v in sorted(spec.variables)]
    facts = [
        f"- Kind: {code(kind.name)}, the API resource {code(kind.resource)}. "
        + prose(_about(kind)),
        f"- Grain: {prose(spec.grain)}; key: {code(spec.key)}",
        f"- Mode: {code(spec.mode)}: {MODE_MEANINGS[spec.mode]}",
        "- API calls: " + ", ".join(f"{code(call)} ({what})" for what, call in requests),
        "- Deletes: "
        + (
            f"yes ({code(spec.delete)}): what this target pushed before and no longer wants"
            if spec.delete
            else "no"
        ),
        "- A NULL clears: "
        + (codes(sorted(spec.nulls)) if spec.nulls else "nothing (a NULL changes nothing)"),
        "- Reads: " + (", ".join(reads) or "nothing"),
    ]
    return [
        f"### {spec.name}",
        prose(spec.description),
        "\n".join(facts),
        table(("Column", "Meaning"), ((code(c), prose(m)) for c, m in spec.columns.items())),
    ]


def _curated(root: Path) -> list[str]:
    from feedback_sync.push.curated import SCHEMA, load_declarations
    from feedback_sync.push.scope import ACCOUNT

    parts = [
        "## Curated inputs {#curated-inputs}",
        "A target reads a curated input with `{{ curated('name') }}`: the file "
        "`<curated_dir>/name.csv` or `name.parquet` beside DuckDB, Parquet and Delta "
        f"targets ([`curated_dir`](settings.md#push)), else the table {code(SCHEMA + '.name')} "
        "of the warehouse (the only place on PostgreSQL). A declared column that is absent "
        "reads as NULL; a column that is neither declared nor packed is an error naming it. "
        f"Any input may also have a column {code(ACCOUNT)}: with accounts configured, the "
        "account each row belongs to ([Many accounts]"
        "(../how-to/accounts.md#push-to-each-account)).",
    ]
    for name, declared in load_declarations(root / "curated.toml").items():
        rows = [(code(c), "yes" if c in declared.required else "") for c in declared.columns]
        rows += [
            (code(f"{prefix}<key>"), f"packed into {code(packed)}, a JSON object by key")
            for packed, prefix in declared.packs.items()
        ]
        parts += [
            f"### {SCHEMA}.{name} {{#curated-{anchor(name)}}}",
            table(("Column", "Required"), rows),
        ]
    return parts


def render(root: Path | None = None) -> str:
    """The page's body for the push folder ``root`` (default: the one the package ships)."""
    from feedback_sync.push.kinds import KINDS
    from feedback_sync.push.targets import MODES, PUSH_DIR, load_targets

    if set(MODES) != set(MODE_MEANINGS):
        raise ValueError(f"docsgen.push_targets.MODE_MEANINGS does not cover {MODES}")
    root = PUSH_DIR if root is None else root
    specs = sorted(load_targets(root).values(), key=lambda s: (KINDS[s.kind].order, s.name))
    summary = [
        (
            f"[{code(s.name)}](#{anchor(s.name)})",
            prose(s.description),
            ", ".join(code(c) for _, c in calls(KINDS[s.kind], s.mode, s.delete)),
        )
        for s in specs
    ]
    parts = [
        "`push` compares each target's rows (what the service should hold) with the "
        "service and sends only the difference; nothing is sent without `--apply`. The "
        "targets run in the order below, parents first. Paths are relative to the "
        "service's `base_url`. How to feed them your own data: "
        "[Push your own tables](../how-to/push-your-data.md).",
        "## Targets {#targets}",
        table(("Target", "What it writes", "API calls"), summary),
    ]
    for spec in specs:
        parts += _target(spec, KINDS[spec.kind])
    parts += _curated(root)
    return "\n\n".join(parts)
