"""The house's shape: the layers import downward only, no import circles, and the wheel
installs one package, ``feedback_sync``, with its SQL project inside."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UV = ROOT / ".tools" / "bin" / "uv"


def test_layers_and_no_import_circles() -> None:
    """import-linter's contracts in pyproject.toml: layers, the sandbox alone, no circles."""
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout, done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [str(UV), "build", "--wheel", "--quiet", "--out-dir", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("feedback_sync-*.whl")
    return zipfile.ZipFile(built)


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
