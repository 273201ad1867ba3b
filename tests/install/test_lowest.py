"""The lower bounds in the package's metadata are true: every direct dependency resolved at
the lowest version it allows (``uv pip compile --resolution lowest-direct``; what they pull
in at its newest), in a fresh environment, passes the fast tests (``-m "not slow"``).

uv.lock keeps the rest of the suite exact; this run shows what a user installing beside
older releases gets. It runs inside the suite (``./run test``), with its own temporary
folder so the two runs never clean up each other's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.wheel import UV

ROOT = Path(__file__).resolve().parents[2]
# as in pyproject.toml [tool.uv]: prefect asks for a certifi newer than some indexes hold
OVERRIDE = "certifi>=2020\n"


def _lower_bounds() -> dict[str, str]:
    """Each direct dependency's lower bound, as pyproject.toml states it (extras included)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    bounds: dict[str, str] = {}
    for requirement in requirements:
        match = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([^,;\s]+)", requirement)
        assert match, f"{requirement}: every dependency states a lower bound"
        name = re.sub(r"[-_.]+", "-", match[1]).lower()
        bounds[name] = match[2]
    return bounds


@pytest.mark.slow
def test_the_lowest_allowed_versions_pass_the_fast_tests(tmp_path: Path) -> None:
    override = tmp_path / "override.txt"
    override.write_text(OVERRIDE)
    resolved = tmp_path / "lowest.txt"
    subprocess.run(
        [
            str(UV),
            "pip",
            "compile",
            "pyproject.toml",
            "--all-extras",
            "--group",
            "dev",
            "--resolution",
            "lowest-direct",
            "--python",
            sys.executable,
            "--overrides",
            str(override),
            "--quiet",
            "-o",
            str(resolved),
        ],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    pinned = dict(re.findall(r"^([a-z0-9-]+)==(\S+)", resolved.read_text(), flags=re.MULTILINE))
    bounds = _lower_bounds()
    assert {name: pinned.get(name) for name in bounds} == bounds

    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    subprocess.run([str(UV), "venv", "--quiet", "-p", sys.executable, str(venv)], check=True)
    subprocess.run(
        [str(UV), "pip", "sync", "--quiet", "--python", str(python), str(resolved)],
        check=True,
        timeout=900,
    )
    subprocess.run(
        [str(UV), "pip", "install", "--quiet", "--python", str(python), "--no-deps", "-e", "."],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST_"))}
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-m",
            "not slow",
            "-n",
            "2",
            "--dist",
            "loadfile",
            "-q",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "tests"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    summary = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    assert done.returncode == 0, f"{summary}\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert re.search(r"\d+ passed", summary[0]) and "failed" not in summary[0], summary
