"""The command line answers ``--help`` and bad arguments without importing the heavy
libraries (dlt, DuckDB, Arrow, httpx, Prefect...): each command imports what it needs when
it runs. Asserted on the modules a fresh interpreter holds afterwards, not on time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from feedback_sync.app.cli import STARTING_LINE
from feedback_sync.app.status import render

from tests.support.cli import said_lines
from tests.sync.harness import Harness

HEAVY = (
    "dlt",
    "duckdb",
    "pyarrow",
    "httpx",
    "pendulum",
    "prefect",
    "deltalake",
    "psycopg2",
    "sqlglot",
    "starlette",
    "feedback_sync.source.source",
    "feedback_sync.app.sync",
)
PROBE = """
import json, sys
from feedback_sync.app.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = sorted(m for m in sys.modules if m in {heavy!r} or m.split('.')[0] in {roots!r})
print(json.dumps({{"code": code, "heavy": heavy}}))
"""


def _environment(extra: dict[str, str] | None) -> dict[str, str]:
    """This process's environment without dlt's destination settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESTINATION__")}
    return {**env, "PYTHONPATH": str(Path.cwd()), **(extra or {})}


def _probe(
    argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> dict[str, object]:
    roots = [m for m in HEAVY if "." not in m]
    code = PROBE.format(heavy=list(HEAVY), roots=roots)
    done = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=_environment(env),
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["sync", "--help"], 0),
        (["push", "--help"], 0),
        (["sandbox", "--help"], 0),
        (["sync", "--no-such-flag"], 2),
        (["sync", "--dataset", "not a name"], 2),
        (["sync", "--wait", "-1"], 2),
        (["sync", "--resources", "no_such_resource"], 2),
        (["sync", "--sql-dir", "no-such-folder"], 2),
        (["no-such-command"], 2),
    ],
)
def test_help_and_bad_arguments_import_nothing_heavy(argv: list[str], code: int) -> None:
    result = _probe(argv)
    assert result["code"] == code, result
    heavy = sorted({str(m).split(".")[0] for m in result["heavy"]})
    assert heavy == [], f"{argv} imported {heavy}"


def test_the_probe_sees_a_command_that_does_import_dlt(tmp_path: Path) -> None:
    """The probe can fail: a sync with valid arguments imports dlt (and then refuses the
    setting dlt read: a base URL without the API's version)."""
    env = {"SOURCES__FEEDBACK__BASE_URL": "http://127.0.0.1:9/api"}
    result = _probe(["sync"], env=env, cwd=tmp_path)
    assert result["code"] == 2 and "dlt" in result["heavy"], result


def test_the_source_keeps_its_section(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moved out of the package's ``__init__``, the source still has section ``feedback``:
    its settings (``sources.feedback``) and the state earlier runs saved under
    ``sources/feedback`` stay where they were."""
    monkeypatch.setenv("SOURCES__FEEDBACK__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", "not-used")
    from feedback_sync.source import feedback

    source = feedback(full=True)
    assert (source.section, source.name) == ("feedback", "feedback")


@pytest.mark.parametrize("destination", ["duckdb", "parquet"])
@pytest.mark.slow
def test_status_reads_the_warehouse_without_dlt(harness: Harness, destination: str) -> None:
    """``status`` on DuckDB and Parquet reads dlt's tables with DuckDB alone, and says what
    dlt itself reads from them: the same report, line for line."""
    harness.sync(destination=destination, models=False)
    harness.sync(destination=destination, models=False)  # two loads, saved cursors
    target = harness.target(destination)
    quick = render(target, target.committed())
    assert quick == render(target, target.read_committed_with_dlt())
    assert "resumes after the saved cursor" in quick and "2 loads in all" in quick
    where = (
        ["--destination", "parquet", "--parquet-dir", str(harness.tmp / "parquet")]
        if destination == "parquet"
        else []
    )
    env = {"DESTINATION__DUCKDB__CREDENTIALS": str(harness.tmp / "warehouse.duckdb")}
    result = _probe(["status", *where], env=env, cwd=harness.tmp)
    assert result["code"] == 0, result
    assert "duckdb" in result["heavy"] and "dlt" not in result["heavy"], result


@pytest.mark.slow
def test_status_asks_dlt_where_its_settings_name_the_file(harness: Harness) -> None:
    """A DuckDB file named only in ``.dlt/config.toml`` is dlt's to resolve: ``status``
    imports dlt and reports that file, not the default one."""
    harness.sync(models=False)
    settings = harness.tmp / ".dlt"
    settings.mkdir()
    path = str(harness.tmp / "warehouse.duckdb").replace("\\", "\\\\")
    (settings / "config.toml").write_text(f'[destination.duckdb]\ncredentials = "{path}"\n')
    result = _probe(["status"], cwd=harness.tmp)
    assert result["code"] == 0 and "dlt" in result["heavy"], result
    done = subprocess.run(
        [sys.executable, "-m", "feedback_sync.app.cli", "status"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_environment(None),
        cwd=harness.tmp,
    )
    assert done.returncode == 0, done.stderr
    assert f"DuckDB {harness.tmp / 'warehouse.duckdb'}" in done.stdout
    assert "1 loads in all" in done.stdout


def test_the_sandbox_command_imports_only_the_server() -> None:
    """What ``feedback-sync sandbox`` imports before it listens: the server, the seeding,
    none of the sync's libraries, and no Markdown renderer (loaded on the first
    announcement served)."""
    code = (
        "import json, sys\n"
        "from feedback_sync.app.cli import build_parser\n"
        "build_parser()\n"
        "from feedback_sync.sandbox.app import create_app\n"
        "from feedback_sync.sandbox.server import bind, serve_forever\n"
        "create_app('tiny', 1)\n"
        f"roots = {sorted({m for m in HEAVY if '.' not in m} - {'starlette'})!r}\n"
        f"modules = {sorted(m for m in HEAVY if '.' in m)!r}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "set(roots + ['markdown_it']) | set(modules) & set(sys.modules))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


@pytest.mark.parametrize(
    ("argv", "code", "said"),
    [
        (["status"], 0, "no sync has been committed here yet"),
        (["sync", "--dataset", "not a name"], 2, "--dataset must be letters"),
    ],
)
def test_the_command_ends_without_the_teardown_but_with_its_exit_work(
    tmp_path: Path, argv: list[str], code: int, said: str
) -> None:
    """``feedback-sync`` (``cli.run``) ends the process once the command is done: with the
    command's exit code, its output flushed and the exit handlers run, and nothing after."""
    program = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('exit handler ran'))\n"
        f"sys.argv = ['feedback-sync', *{argv!r}]\n"
        "from feedback_sync.app.cli import run\n"
        "run()\n"
        "print('after run')\n"
    )
    env = _environment({"DESTINATION__DUCKDB__CREDENTIALS": str(tmp_path / "w.duckdb")})
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == code, done.stderr
    assert said in done.stdout + done.stderr
    assert "exit handler ran" in done.stdout and "after run" not in done.stdout


COLLECTOR_PROBE = """
import atexit, gc, json, os, sys
collections = {{"before": 0, "during": 0, "after": 0}}
seen = {{}}

class WatchArrow:
    # what pyarrow finds in the environment when it is first imported
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow" and "pool_asked" not in seen:
            seen["pool_asked"] = os.environ.get("ARROW_DEFAULT_MEMORY_POOL")
        return None

sys.meta_path.insert(0, WatchArrow())

def note(phase, info):
    if phase != "start":
        return
    sync = sys.modules.get("feedback_sync.app.sync")
    if sync is not None and hasattr(sync, "run_sync"):
        collections["after"] += 1
    elif "dlt" in sys.modules:
        collections["during"] += 1  # while the command's heavy imports ran
    else:
        collections["before"] += 1

gc.callbacks.append(note)
unfreeze = gc.unfreeze
def unfreezing():
    # python -m unfreezes before its teardown: what was frozen until then
    seen["frozen_before_exit"] = gc.get_freeze_count()
    unfreeze()
gc.unfreeze = unfreezing
def report():
    import pyarrow
    print(json.dumps({{
        "collections": collections,
        "frozen": seen.pop("frozen_before_exit", gc.get_freeze_count()),
        "frozen_at_exit": gc.get_freeze_count(),
        "threshold": gc.get_threshold(), "enabled": gc.isenabled(),
        "arrow_pool": pyarrow.default_memory_pool().backend_name, **seen,
        "httpx_cli": sorted(m for m in ("rich", "click", "pygments") if m in sys.modules)}}))

atexit.register(report)
sys.argv = ["feedback-sync", "sync"]
if "{entry}" == "module":  # python -m feedback_sync.app.cli
    import runpy
    runpy.run_module("feedback_sync.app.cli", run_name="__main__", alter_sys=True)
from feedback_sync.app import cli
sys.exit(cli.{entry}())  # run() ends the process itself
"""


@pytest.mark.parametrize(
    ("entry", "chosen_pool"),
    [("run", None), ("run", "mimalloc"), ("module", None), ("main", None)],
)
def test_the_console_script_imports_without_the_collector_and_with_the_system_allocator(
    tmp_path: Path, entry: str, chosen_pool: str | None
) -> None:
    """``feedback-sync`` (``cli.run``) runs a command's heavy imports with the garbage
    collector off, freezes the objects they made (never scanned again), collects after
    ``GC_GENERATION0_THRESHOLD`` new objects, and gives Arrow the system allocator unless
    the user chose one, and skips httpx's command-line client; so does ``python -m
    feedback_sync.app.cli``; ``main``, which tests call in their own process, leaves the process
    as it found it. The command here stops on a missing setting, after its imports."""
    from feedback_sync.app.process import ARROW_POOL, GC_GENERATION0_THRESHOLD

    env = {
        k: v
        for k, v in _environment(None).items()
        if not k.startswith(("SOURCES__", "FEEDBACK_SYNC", "ARROW_DEFAULT_MEMORY_POOL"))
    }
    if chosen_pool:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen_pool

    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR_PROBE.format(entry=entry)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "base_url" in done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["enabled"] is True
    if entry in ("run", "module"):
        assert seen["collections"]["during"] == 0
        assert seen["frozen"] > 10_000  # dlt's, Arrow's, DuckDB's and httpx's objects
        # python -m exits through the teardown, which must be able to free them
        assert seen["frozen_at_exit"] == (0 if entry == "module" else seen["frozen"])
        assert seen["threshold"][0] == GC_GENERATION0_THRESHOLD
        # set before pyarrow was imported, and the pool it made
        assert seen["pool_asked"] == (chosen_pool or ARROW_POOL)
        assert seen["arrow_pool"] == (chosen_pool or ARROW_POOL)
        assert seen["httpx_cli"] == []  # httpx's command-line client is not imported
    else:
        assert seen["collections"]["during"] > 0
        assert seen["frozen"] == 0
        assert seen["threshold"][0] == 700  # Python's default
        assert seen["pool_asked"] is None
        pyarrows_own = subprocess.run(
            [
                sys.executable,
                "-c",
                "import pyarrow; print(pyarrow.default_memory_pool().backend_name)",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        ).stdout.strip()
        assert seen["arrow_pool"] == pyarrows_own
        assert seen["httpx_cli"] == ["click", "pygments", "rich"]  # as httpx imports it


@pytest.mark.slow
def test_a_load_into_a_duckdb_file_shows_its_credentials_without_sqlalchemy(
    tmp_path: Path,
) -> None:
    """dlt prints a load's credentials (``str()``) at every load; its own rendering imports
    SQLAlchemy for a file path. A real load through the warehouse's pipeline shows the same
    text as dlt's without it, lands its rows in the file, and still takes dlt's other
    credential settings from dlt's providers."""
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    path = tmp_path / "warehouse.duckdb"
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from feedback_sync.warehouse.target import make_target\n"
        f"target = make_target(duckdb_path=Path({str(path)!r}), "
        f"pipelines_dir=Path({str(tmp_path / 'pipelines')!r}))\n"
        "pipeline = target.pipeline()\n"
        "info = pipeline.run([{'id': 1}, {'id': 2}], table_name='things')\n"
        "credentials = pipeline.destination_client().config.credentials\n"
        "print(json.dumps([info.destination_displayable_credentials, credentials.pragmas,\n"
        "                  credentials.global_config, 'sqlalchemy' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_environment(
            {
                "PYTHONPATH": str(Path.cwd()),
                "DESTINATION__DUCKDB__CREDENTIALS__PRAGMAS": '["enable_progress_bar"]',
                "FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT": "300MB",
            }
        ),
    )
    assert done.returncode == 0, done.stderr
    dlt_own = DuckDbCredentials()
    dlt_own.database = str(path)
    shown, pragmas, global_config, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown == str(dlt_own)
    assert pragmas == ["enable_progress_bar"]
    assert global_config == {"memory_limit": "300MB"}
    assert imported is False
    with duckdb.connect(str(path), read_only=True) as db:
        assert db.sql("select id from feedback.things order by id").fetchall() == [(1,), (2,)]


def test_each_pipeline_takes_the_duckdb_settings_of_its_own_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs in one process (a Prefect worker, a test session) each read the DuckDB
    settings as they are when they start, dlt's pipeline-scoped ones included: the
    credentials handed to dlt are made anew, in the pipeline's config section."""
    from feedback_sync.warehouse.target import make_target

    seen = []
    for limit, pragma in (("300MB", "enable_progress_bar"), ("400MB", "enable_profiling")):
        monkeypatch.setenv("FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT", limit)
        # scoped to the pipeline's name, as dlt's own settings may be
        monkeypatch.setenv(
            "FEEDBACK_SYNC__DESTINATION__DUCKDB__CREDENTIALS__PRAGMAS", f'["{pragma}"]'
        )
        target = make_target(duckdb_path=tmp_path / "w.duckdb", pipelines_dir=tmp_path / "p")
        assert target.pipeline_name == "feedback_sync"
        credentials = target.pipeline().destination_client().config.credentials  # type: ignore[attr-defined]
        seen.append((credentials.global_config["memory_limit"], credentials.pragmas))
    assert seen == [("300MB", ["enable_progress_bar"]), ("400MB", ["enable_profiling"])]


FIRST_LINE_PROBE = """
import io, json, sys
from feedback_sync.app.cli import main

class Watched(io.StringIO):
    first = None
    def write(self, text):
        if Watched.first is None:  # what had been imported when the first line came
            Watched.first = (text, "dlt" in sys.modules)
        return super().write(text)

sys.stderr = Watched()
code = main(sys.argv[1:])
print(json.dumps({"code": code, "first": Watched.first, "said": sys.stderr.getvalue()}))
"""


def test_a_sync_says_it_started_before_its_imports(tmp_path: Path) -> None:
    """The sync's first line comes before dlt's import (half a second or more): a person
    sees the run begin at once. A setting found bad after it is still one error line."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_LINE_PROBE, "sync"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_environment({"SOURCES__FEEDBACK__BASE_URL": "http://127.0.0.1:9/api"}),
        cwd=tmp_path,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 2, result
    assert result["first"] == [STARTING_LINE, False], result
    (error,) = said_lines(result["said"])
    assert error.startswith("feedback-sync sync: error: SOURCES__FEEDBACK__BASE_URL"), error
