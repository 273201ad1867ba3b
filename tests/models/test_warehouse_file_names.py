"""Any warehouse file name works (issue 34).

DuckDB names a file's catalog after the file, so in ``marts.duckdb`` the name ``marts.x`` is
ambiguous between that catalog and the schema ``marts`` (DuckDB's Binder Error); the same
goes for ``staging``, the push journal's ``push``, the push's ``curated`` and the build and
appends record's ``_feedback_sync``. Each such name runs a sync, the models, the report and
a push of the shipped examples (a preview, then ``--apply``) through the command line, on
the same sandbox data as a run into ``warehouse.duckdb``, and must give the same staging
views, marts, report and push journal; the file opened directly afterwards (and a renamed
copy of it) reads them all. A name that cannot work is refused in one line.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from feedback_sync.app.cli import main
from feedback_sync.models.project import BUILD_SCHEMA, CUSTOM_FIELDS, TYPE_DRIFT, load_project
from feedback_sync.package_data import package_path
from feedback_sync.push.journal import SCHEMA as JOURNAL_SCHEMA
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread
from feedback_sync.sandbox.testing import TEST_API_KEY

from tests.support.cli import said_lines
from tests.support.pages import comparable

PROJECT = load_project()
STAGING = sorted(m.name for m in PROJECT.models if m.layer == "staging")
EXTRA_VIEWS = (TYPE_DRIFT, CUSTOM_FIELDS)  # staging views the build makes beside the models
MARTS = sorted(m.name for m in PROJECT.models if m.layer == "marts")
# the journal's columns two runs of the same data agree on, in an order of their own: not
# when a row was written, nor the idx the service gave an object the push created (in the
# order its writes arrived), which the notes' payloads carry too (their author's)
JOURNAL = {
    "_push_runs": "applied, forced, targets, status, creates, updates, deletes, unchanged, "
    "invalid, rejected, held, message from {} order by started_at",
    "_push_rows": "target, key, action, state, http_status, message from {} order by all",
    "_push_snapshot": "target, key, deleted from {} order by all",
}


@dataclass
class Outcome:
    """What one run left: every staging view's, mart's and journal table's rows, the
    report, and the plan the push previewed."""

    relations: dict[str, list[tuple[Any, ...]]]
    report: str
    plan: str


@pytest.fixture(scope="module")
def sandbox() -> Iterator[RunningSandbox]:
    """One live tiny sandbox for the module; each run resets it to the same seeded data."""
    with serve_in_thread(create_app("tiny", 1, api_key=TEST_API_KEY)) as running:
        yield running


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _pointed_at(folder: Path, file: Path, sandbox: RunningSandbox) -> Iterator[None]:
    """The command line run from ``folder`` against ``sandbox``, into the DuckDB ``file``."""
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith(("SOURCES__", "DESTINATION__", "PUSH__", "MODELS__")):
                mp.delenv(key)
        mp.setenv("SOURCES__FEEDBACK__BASE_URL", sandbox.base_url)
        mp.setenv("SOURCES__FEEDBACK__API_KEY", TEST_API_KEY)
        mp.setenv("PUSH__NOTE_AUTHOR_EMAIL", "feedback-bot@example.net")
        mp.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(file))
        mp.chdir(folder)
        yield


def _run(sandbox: RunningSandbox, folder: Path, name: str, curated_tables: bool = False) -> Outcome:
    """Sync, models, status, report, push and push --apply into ``folder/name``, each
    answering 0; what the file holds afterwards, read by opening it directly.
    ``curated_tables``: the push reads the shipped examples as tables of the schema
    ``curated`` in the file, not as files."""
    httpx.post(f"{sandbox.root_url}/_sandbox/reset", json={}, timeout=60).raise_for_status()
    file = folder / name
    if curated_tables:
        _curated_tables(file)
    else:
        shutil.copytree(package_path("examples", "curated"), folder / "data" / "curated")
    outputs = {}
    with _pointed_at(folder, file, sandbox):
        pipelines = ("--pipelines-dir", str(folder / "pipelines"))
        for command in (
            ["sync", "--full"],
            # a second run finds the sync's own schema made (``_feedback_sync``: ambiguous
            # with a file of that name, where not qualified by the file's catalog)
            ["sync"],
            ["models"],
            ["status"],
            ["report", "--output", "report.html"],
            ["push"],
            ["push", "--apply"],
        ):
            code, out, err = _cli(*command, *pipelines)
            assert code == 0, f"{name}: {' '.join(command)} answered {code}:\n{out}\n{err}"
            outputs[" ".join(command)] = out
    report = comparable((folder / "report.html").read_text(encoding="utf-8"))
    relations = _read(file)
    # a renamed copy reads the same: the views keep no catalog name in their SQL
    copy = folder / "renamed.duckdb"
    shutil.copy(file, copy)
    assert _read(copy) == relations, f"{name}: its renamed copy reads otherwise"
    # the preview's table of what each target would do (its first line names the file, the
    # run and its time; the samples after the table pick among equals in no fixed order)
    lines = outputs["push"].splitlines()[1:]
    plan = "\n".join(itertools.takewhile(lambda line: line.startswith("  "), lines))
    return Outcome(relations, report, plan)


def _curated_tables(file: Path) -> None:
    """The shipped examples as tables ``curated.<name>`` of ``file``, every column text as
    the push reads a CSV file's declared columns, written as a user would: with the
    catalog in front where the file is named like the schema."""
    schema = '"curated"."curated"' if file.name.split(".")[0] == "curated" else '"curated"'
    with duckdb.connect(str(file)) as con:
        con.execute('create schema "curated"')
        for csv in sorted(package_path("examples", "curated").glob("*.csv")):
            path = str(csv).replace("'", "''")
            con.execute(
                f'create table {schema}."{csv.stem}" as '
                f"select * from read_csv('{path}', header = true, all_varchar = true)"
            )


def _read(file: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every staging view, mart and journal table of ``file``, opened as a user would: a
    schema named like the file is read with the catalog in front (``marts.marts.x``), as
    DuckDB's message asks, any other as ``schema.relation``."""
    catalog = file.name.split(".")[0]
    wanted = [("staging", n, "* from {} order by all") for n in STAGING]
    # their load_id: when a row was loaded
    wanted += [("staging", n, "* exclude (load_id) from {} order by all") for n in EXTRA_VIEWS]
    wanted += [("marts", n, "* from {} order by all") for n in MARTS]
    wanted += [(JOURNAL_SCHEMA, n, select) for n, select in JOURNAL.items()]
    out = {}
    with duckdb.connect(str(file), read_only=True) as con:
        for schema, name, select in wanted:
            qualified = f'"{schema}"."{name}"'
            if schema == catalog:
                qualified = f'"{catalog}".{qualified}'
            out[f"{schema}.{name}"] = con.execute(f"select {select.format(qualified)}").fetchall()
    return out


@pytest.fixture(scope="module")
def baseline(sandbox: RunningSandbox, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The same commands into a file named like no schema."""
    return _run(sandbox, tmp_path_factory.mktemp("baseline"), "warehouse.duckdb")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "marts.duckdb",
        "staging.duckdb",
        f"{JOURNAL_SCHEMA}.duckdb",
        "curated.duckdb",  # the push's curated inputs, as tables of this schema
        f"{BUILD_SCHEMA}.duckdb",  # the models' build record, the sync's appends record
    ],
)
def test_a_file_named_like_a_schema_builds_reports_and_pushes(
    name: str, sandbox: RunningSandbox, baseline: Outcome, tmp_path: Path
) -> None:
    # in curated.duckdb the push reads its curated inputs from tables of the file
    outcome = _run(sandbox, tmp_path, name, curated_tables=name == "curated.duckdb")
    assert baseline.relations["marts.idea_engagement"], "the baseline built no marts"
    assert baseline.relations["push._push_snapshot"], "the baseline's push wrote nothing"
    for relation, rows in baseline.relations.items():
        assert outcome.relations[relation] == rows, f"{name}: {relation} differs"
    assert outcome.report == baseline.report
    assert outcome.plan == baseline.plan


@pytest.mark.parametrize(
    ("name", "dataset", "said"),
    [
        ("feedback.duckdb", "feedback", "named like the dataset 'feedback'"),
        ("Feedback.v2.duckdb", "feedback", "named like the dataset 'feedback'"),
        ("sales.duckdb", "sales", "named like the dataset 'sales'"),
        (
            "feedback_staging.duckdb",
            "feedback",
            "named like dlt's staging dataset 'feedback_staging'",
        ),
        ("information_schema.duckdb", "feedback", "named like DuckDB's information_schema"),
    ],
)
def test_a_name_no_run_can_use_is_refused_in_one_line(
    name: str, dataset: str, said: str, tmp_path: Path
) -> None:
    """dlt's load writes ``<dataset>.<table>`` and reads ``information_schema``, and the
    staging views keep ``<dataset>.<table>`` in their SQL: with such a name neither works."""
    file = tmp_path / name
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOURCES__FEEDBACK__BASE_URL", "http://127.0.0.1:9/v1")
        mp.setenv("SOURCES__FEEDBACK__API_KEY", TEST_API_KEY)
        mp.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(file))
        mp.chdir(tmp_path)
        for command in (["sync"], ["models"], ["report"], ["push"], ["status"]):
            code, _, err = _cli(*command, "--dataset", dataset)
            assert code == 2, f"{command}: {err}"
            assert len(said_lines(err)) == 1 and said in err and str(file) in err, err
    assert not file.exists()


def test_the_models_file_beside_parquet_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Parquet target builds its models in ``<folder>/models.duckdb``, a name of its
    own: the dataset ``models`` would be ambiguous there."""
    monkeypatch.setenv("SOURCES__FEEDBACK__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", TEST_API_KEY)
    monkeypatch.chdir(tmp_path)
    for command in ("sync", "models", "push"):
        code, _, err = _cli(command, "--destination", "parquet", "--dataset", "models")
        assert code == 2 and len(said_lines(err)) == 1, err
        models_file = Path("data", "parquet", "models.duckdb")
        assert f"{models_file} is named like the dataset 'models'" in err
        assert "pass another --dataset" in err and "rename" not in err
    assert not (tmp_path / models_file).exists()
