"""The other libraries' private members feedback-sync reads (``feedback_sync.internals``):
each is still there with the shape the package relies on, in a release that was checked;
and no other module of the package reaches one (read with ``ast`` from the source).

When one of these fails after an upgrade: read the library's new code, re-check the use in
``internals``, and add the release to ``internals.CHECKED``."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
from feedback_sync import internals

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pipelines" / "feedback_sync"
LIBRARIES = ("httpx", "dlt", "prefect", "duckdb", "pyarrow", "atexit")
# underscore names that are public (a named tuple's ``_replace``, the documented
# ``os._exit``), or feedback-sync's own, as ``module: names``
NOT_PRIVATE = {"*": {"_replace", "_asdict", "_fields", "_exit"}, "api/http_helper.py": {"_forked"}}


def test_the_installed_releases_are_those_checked() -> None:
    """The locked releases (installed here) and pyproject.toml's lowest bounds."""
    assert version("httpx") in internals.CHECKED["httpx"]
    assert version("dlt") in internals.CHECKED["dlt"]
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in internals.CHECKED["python"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        match = re.match(r"(httpx|dlt)(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)", requirement)
        if match:
            assert match[2] in internals.CHECKED[match[1]], requirement


def test_httpx_picks_a_transport_per_url_as_the_client_relies_on() -> None:
    mounted = httpx.MockTransport(lambda request: httpx.Response(204))
    default = httpx.MockTransport(lambda request: httpx.Response(200))
    with httpx.Client(
        transport=default, mounts={"http://elsewhere": mounted}, trust_env=False
    ) as client:
        pick = internals.transport_for_url(client)
        assert pick is not None
        assert pick(httpx.URL("http://service/v1/ideas")) is default
        assert pick(httpx.URL("http://elsewhere/v1/ideas")) is mounted


def test_httpx_imports_its_command_line_client_only_where_it_is_not_marked_absent() -> None:
    code = (
        "import json, sys\n"
        "from feedback_sync import internals\n"
        "if sys.argv[1] == 'skip':\n"
        "    internals.skip_httpx_cli()\n"
        "import httpx\n"
        "print(json.dumps([internals.HTTPX_CLI_MODULE in sys.modules,\n"
        "                  sys.modules.get(internals.HTTPX_CLI_MODULE) is not None,\n"
        "                  'rich' in sys.modules, callable(httpx.main)]))\n"
    )
    seen = {}
    for how in ("skip", "plain"):
        done = subprocess.run(
            [sys.executable, "-c", code, how], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        seen[how] = json.loads(done.stdout)
    # imported where click, rich and pygments are installed (they are here: Prefect's)
    assert seen["plain"] == [True, True, True, True]
    assert seen["skip"] == [True, False, False, True]  # httpx's own fallback ``main``


def test_a_dlt_load_job_holds_its_table_and_its_clients_schema() -> None:
    """A job run as dlt's loader runs it (``set_run_vars``, then ``run_managed``) shows
    both to its ``run``."""
    from dlt.common.destination.client import RunnableLoadJob

    seen: list[Any] = []

    class Job(RunnableLoadJob):
        def run(self) -> None:
            seen.extend([internals.load_job_schema_name(self), internals.load_job_table(self)])

    class Client:
        schema = type("Schema", (), {"name": "feedback"})()

        def __enter__(self) -> Client:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def prepare_load_job_execution(self, job: Any) -> None:
            return None

    table: Any = {"name": "ideas", "columns": {}}
    job = Job("/tmp/ideas.a1b2c3.0.parquet")
    job.set_run_vars("1700000000.1", Client.schema, table)  # type: ignore[arg-type]
    job.run_managed(Client(), None)  # type: ignore[arg-type]
    assert job.state() == "completed", job.exception()
    assert seen == ["feedback", table]


def test_the_exit_handlers_run_once_when_asked() -> None:
    code = (
        "import atexit, os, sys\n"
        "from feedback_sync import internals\n"
        "atexit.register(print, 'handler ran')\n"
        "internals.run_exit_handlers()\n"
        "print('then', flush=True)\n"
        "sys.exit(0)  # a normal exit after it: the handler is not run again\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["handler ran", "then"]


def _private_reads(path: Path) -> list[str]:
    """Where ``path`` reads another object's underscore member (not its own, not a dunder),
    imports from a private module of a library, or names one in a string."""
    module = path.relative_to(PACKAGE).as_posix()
    allowed = NOT_PRIVATE["*"] | NOT_PRIVATE.get(module, set())
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in allowed:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            names = [alias.name for alias in node.names]
            if parts[0] in LIBRARIES and any(map(_private, parts + names)):
                found.append(f"{module}:{node.lineno} from {node.module} import {names}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1:
                name = node.args[1]
                if isinstance(name, ast.Constant) and _private(str(name.value)):
                    found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            pattern = rf"\b({'|'.join(LIBRARIES)})(\.\w+)*\._[a-z]"
            one_line = len(node.value.strip().splitlines()) <= 1  # not a docstring
            if one_line and re.search(pattern, node.value):
                found.append(f"{module}:{node.lineno} {node.value!r}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_other_module_reads_a_private_member() -> None:
    found = [
        read
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "internals.py"
        for read in _private_reads(path)
    ]
    assert found == []


@pytest.mark.parametrize(
    ("code", "read"),
    [
        ("job._load_table", "job._load_table"),
        ("from prefect.concurrency._asyncio import X", "from prefect.concurrency._asyncio"),
        ("getattr(client, '_transport_for_url')", "getattr(client, '_transport_for_url')"),
        ("NAME = 'httpx._main'", "'httpx._main'"),
    ],
)
def test_the_reader_sees_each_kind_of_private_read(
    tmp_path: Path, code: str, read: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    (tmp_path / "toy.py").write_text(code + "\nself._mine = 1\nparts._replace(a=1)\n")
    (found,) = _private_reads(tmp_path / "toy.py")
    assert found.startswith("toy.py:1 ") and read in found, found
