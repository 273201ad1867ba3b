"""The house's shape: the layers import downward only, no import circles, and the wheel
installs one package, ``feedback_sync``, with its SQL project inside."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.wheel import build_wheel

ROOT = Path(__file__).resolve().parent.parent


def test_layers_and_no_import_circles() -> None:
    """import-linter's contracts in pyproject.toml: layers, the sandbox alone, no circles."""
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout, done.stdout


@pytest.mark.slow
def test_importing_the_package_changes_no_logging() -> None:
    """Every module imported, no logger has a filter and the root logger no handler: log
    filters are installed by the entry points (the command line, the flows, a client)."""
    code = """
import importlib, json, logging, pkgutil
import feedback_sync
names = [m.name for m in pkgutil.walk_packages(feedback_sync.__path__, "feedback_sync.")]
for name in names:
    importlib.import_module(name)
# Prefect configures logging of its own as it is imported; what counts here is ours
loggers = [logging.root, *(logging.getLogger(n) for n in logging.root.manager.loggerDict)]
ours = sorted(
    f"{logger.name}: {type(thing).__module__}.{type(thing).__name__}"
    for logger in loggers
    for thing in [*logger.filters, *logger.handlers]
    if type(thing).__module__.startswith("feedback_sync")
)
print(json.dumps({"modules": len(names), "ours": ours}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["modules"] > 60
    assert found["ours"] == []


def test_the_entry_points_install_the_secret_filter() -> None:
    """``feedback-sync`` (even ``--help``-less argument errors) and a client install it."""
    code = """
import json, logging
from feedback_sync.app.cli import main
from feedback_sync.redaction import SCRUBBER
try:
    main(["status", "--wait", "-1"])
except SystemExit:
    pass
print(json.dumps(SCRUBBER in logging.getLogger("httpx").filters))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) is True


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return zipfile.ZipFile(build_wheel(tmp_path_factory.mktemp("wheel")))


def test_the_wheel_installs_one_package(wheel: zipfile.ZipFile) -> None:
    tops = {
        name.split("/", 1)[0]
        for name in wheel.namelist()
        if not name.split("/", 1)[0].endswith((".dist-info", ".data"))
    }
    assert tops == {"feedback_sync"}


def test_the_wheel_holds_the_sql_project_and_the_examples(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = {
        f"feedback_sync/{path.relative_to(ROOT).as_posix()}"
        for folder in ("sql", "examples")
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
    }
    assert expected, "the repository's sql/ and examples/ are empty"
    assert expected <= names, sorted(expected - names)
    # and nothing only the tests use (their launchers, browser driver and Azurite lock)
    support = {path.read_bytes() for path in (ROOT / "tests" / "support").rglob("*.py")}
    shipped = [n for n in names if n.endswith(".py") and wheel.read(n) in support]
    assert shipped == []
    assert not [n for n in names if "azurite" in n]


def test_the_package_description_is_the_readmes_opening(wheel: zipfile.ZipFile) -> None:
    """What a package index shows: the README up to its marker, which says what the product
    is before anything else and holds no links (a relative one leads nowhere there)."""
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    headers, _, description = wheel.read(metadata).decode().partition("\n\n")
    assert "Description-Content-Type: text/markdown" in headers
    readme = (ROOT / "README.md").read_text()
    opening = readme[: readme.index("<!-- The package's description")]
    assert description.strip() == opening.strip()
    assert description.startswith("# feedback-sync\n\nfeedback-sync moves")
    assert "pip install feedback-sync" in description
    assert not re.search(
        r"\]\(|<a |https?://(?!feedback\.example\.com|127\.0\.0\.1:8765/)", description
    )
    assert "./run" not in description  # the checkout's commands stay in the README


def test_no_code_uses_duckdbs_module_level_connection() -> None:
    """``duckdb.sql``/``execute``/``query`` run on one connection the whole process shares: a
    result left half-read there (a ``fetchone()``) makes the next user fail with "connection
    has an unfinished result", in a user's notebook as in a test worker. Every query opens
    a connection of its own."""
    pattern = re.compile(r"\bduckdb\.(sql|execute|query|sql_query)\(")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("pipelines", "flows", "tests", "bench", "reliability", "docsgen")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "node_modules" not in path.parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line) and "re.compile" not in line
    ]
    assert found == []
