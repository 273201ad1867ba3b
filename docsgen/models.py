"""``docs/reference/models.md``: the staging views and marts, from the comment header each
SQL file opens with, as ``feedback_sync.models.project`` reads it (the same parser as
``feedback-sync models --list``), and the data tests that guard each mart."""

from __future__ import annotations

from pathlib import Path

from docsgen.markdown import anchor, code, codes, prose, table

LAYER_TITLES = {
    "staging": (
        "Staging views",
        "One view per loaded table (and per history table) in the schema `staging`: "
        "renames and casts only. Keys end in `_idx`, times in `_at` (UTC), booleans start "
        "with `is_`, and a list position is `position`.",
    ),
    "marts": (
        "Marts",
        "Tables in the schema `marts`, built from the staging views after every sync "
        "(unless `--no-models`) and by `feedback-sync models`, in one transaction: a "
        "failing model or data test leaves the previous build as it was.",
    ),
}


def _reads(refs: set[str], sources: set[str]) -> str:
    models = [f"[{code(r)}](#{anchor(r)})" for r in sorted(refs)]
    tables = [f"[{code(s)}](tables.md#{anchor(s)})" for s in sorted(sources)]
    return ", ".join(models + tables)


def _singular_tests(root: Path) -> dict[str, str]:
    """The description of each singular data test (``tests/<name>.sql``), by name."""
    from feedback_sync.models.sqlfile import read_header

    out = {}
    for path in sorted((root / "tests").glob("*.sql")):
        header = read_header(path.read_text(encoding="utf-8"), path.stem)
        out[path.stem] = header.description if header is not None else ""
    return out


def _derived_views() -> list[str]:
    """The two staging views the build writes from what landed rather than from a SQL file
    (``type_drift``, ``custom_fields``): their docstrings, and their columns as an empty
    warehouse gives them."""
    import inspect

    import duckdb
    from feedback_sync.models.project import (
        CUSTOM_FIELDS,
        TYPE_DRIFT,
        custom_fields_sql,
        type_drift_sql,
    )

    parts = [
        "## Views of what landed {#derived}",
        "Two more staging views are written by each build from the columns the warehouse "
        "holds (so they follow custom fields and drifted types as they appear), not from "
        "a SQL file:",
    ]
    for name, function in ((TYPE_DRIFT, type_drift_sql), (CUSTOM_FIELDS, custom_fields_sql)):
        with duckdb.connect() as con:
            columns = [c[0] for c in con.execute(function("feedback", {})).description or ()]
        about = (inspect.getdoc(function) or "").split("\n\n", 1)[0]
        about = about.split(":", 1)[1].strip() if about.startswith("``staging.") else about
        parts += [
            f"### {name}",
            prose(about[:1].upper() + about[1:]),
            f"- Columns: {codes(columns)}",
        ]
    return parts


def render(root: Path | None = None) -> str:
    """The page's body for the SQL folder ``root`` (default: the one the package ships)."""
    from feedback_sync.models.project import LAYERS, SQL_DIR, load_project

    root = SQL_DIR if root is None else root
    project = load_project(root)
    singular = _singular_tests(root)
    parts = [
        "Query them in the warehouse as `staging.<view>` and `marts.<mart>` (for Parquet "
        "and Delta targets, in their `models.duckdb` file). Your own models: copy the SQL "
        "folder and point `--sql-dir` or `sql_dir` in [`[models]`](settings.md#models) at "
        "the copy.",
        "With [several accounts](../how-to/accounts.md#models) configured, every view and "
        "mart below starts with a column `account` (the account's name) before the columns "
        "listed, and holds every account's rows; each account's own, without that column, "
        "are in `staging_<account>` and `marts_<account>`. A key below is then a key within "
        "one account.",
    ]
    for layer in LAYERS:
        title, about = LAYER_TITLES[layer]
        models = sorted((m for m in project.models if m.layer == layer), key=lambda m: m.name)
        parts += [
            f"## {title} {{#{layer}}}",
            about,
            table(
                ("Name", "What it holds"),
                ((f"[{code(m.name)}](#{anchor(m.name)})", prose(m.description)) for m in models),
            ),
        ]
        for model in models:
            facts = [
                f"- Grain: {prose(model.grain)}",
                f"- Key: {codes(model.key)}" if model.key else "- Key: none",
                f"- Reads: {_reads(model.refs, model.sources)}",
            ]
            parts += [
                f"### {model.name}",
                prose(model.description),
                "\n".join(facts),
                table(
                    ("Column", "Meaning"),
                    ((code(c), prose(meaning)) for c, meaning in model.columns.items()),
                ),
            ]
            tests = [t for t in project.tests if t.mart == model.name]
            if tests:
                lines = [
                    f"- {code(t.name)}: {prose(singular[t.name])}"
                    if t.name in singular
                    else f"- {code(t.name)}"
                    for t in tests
                ]
                parts += ["Data tests (each must find no row breaking it):", "\n".join(lines)]
    return "\n\n".join(parts + _derived_views())
