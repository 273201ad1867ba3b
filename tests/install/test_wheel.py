"""The built wheel, installed the way a user installs it (a fresh environment, the lock's
versions as constraints), works from a folder outside the checkout on every other
supported Python: sync against the sandbox, models, report, push preview, status.

The interpreters come from ``./run test`` (``FEEDBACK_SYNC_PYTHONS``, found on PATH or
under pyenv); a supported Python that is missing fails its test rather than skipping it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.wheel import UV, build_wheel
from tests.sync.harness import Harness

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.12", "3.13")
# prefect 3.9 asks for a certifi newer than the lock's (which resolves it with this
# override, pyproject.toml [tool.uv]); the smoke installs no prefect, so certifi is free
OVERRIDE = "certifi>=2020\n"
EXPORT = ["--no-emit-project", "--format", "requirements-txt", "--quiet"]


def _found() -> dict[str, str]:
    pairs = [p.split("=", 1) for p in os.environ.get("FEEDBACK_SYNC_PYTHONS", "").split()]
    return {version: path for version, path in pairs}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The wheel, and the lock's versions as a constraints file."""
    out = tmp_path_factory.mktemp("dist")
    wheel = build_wheel(out)
    exported = subprocess.run(
        [str(UV), "export", "--frozen", "--no-hashes", "--all-extras", "--no-dev", *EXPORT],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    constraints = out / "constraints.txt"
    constraints.write_text(
        "\n".join(line for line in exported.splitlines() if not line.startswith("certifi=="))
    )
    return wheel, constraints


def _run(exe: Path, args: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [str(exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{' '.join(args)}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture
def sandbox_of() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("version", PYTHONS)
def test_the_wheel_works_outside_the_checkout(
    version: str,
    built: tuple[Path, Path],
    tmp_path: Path,
    sandbox_of: list[subprocess.Popen[bytes]],
) -> None:
    python = _found().get(version)
    if python is None:
        pytest.fail(
            f"Python {version} was not found (./run test looks on PATH and under pyenv; "
            f"install it, or set FEEDBACK_SYNC_PYTHONS='{version}=/path/to/python{version}')"
        )
    wheel, constraints = built
    venv = tmp_path / "venv"
    override = tmp_path / "override.txt"
    override.write_text(OVERRIDE)
    subprocess.run([str(UV), "venv", "--quiet", "-p", python, str(venv)], check=True, timeout=120)
    subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            *(["-c", str(constraints), "--override", str(override), f"{wheel}[sandbox]"]),
        ],
        check=True,
        timeout=900,
    )
    exe = venv / "bin" / "feedback-sync"
    check = [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version_info[:2])"]
    assert subprocess.run(check, capture_output=True, text=True, check=True).stdout.strip() == (
        str(tuple(int(n) for n in version.split(".")))
    )

    folder = tmp_path / "elsewhere"  # no checkout, no .dlt: what a user has
    folder.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "PUSH__", "DLT_", "RUNTIME__"))
    }
    ready = tmp_path / "ready.json"
    server = subprocess.Popen(
        [str(exe), "sandbox", "--port", "0", "--scale", "tiny", "--ready-file", str(ready)],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sandbox_of.append(server)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert server.poll() is None and time.monotonic() < deadline, "the sandbox did not start"
        time.sleep(0.1)
    time.sleep(0.2)  # the file is written whole before it is renamed into place
    info = json.loads(ready.read_text())
    env |= {
        "SOURCES__FEEDBACK__BASE_URL": info["base_url"],
        "SOURCES__FEEDBACK__API_KEY": info["api_key"],
        "PUSH__NOTE_AUTHOR_EMAIL": "feedback-bot@example.net",
    }

    said = _run(exe, ["sync", "--full"], folder, env)
    assert "full sync into DuckDB data/warehouse.duckdb" in said and "models: built" in said
    assert "models: built" in _run(exe, ["models"], folder, env)
    assert "report: data/report.html" in _run(exe, ["report"], folder, env)
    # the curated examples that ship in the package, where the push looks for them
    examples = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from feedback_sync.package_data import "
            "package_path; print(package_path('examples', 'curated'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    shutil.copytree(examples, folder / "data" / "curated")
    preview = _run(exe, ["push"], folder, env)
    assert "push preview (dry run, nothing sent)" in preview and "Run with --apply" in preview
    assert "push applied in" in _run(exe, ["push", "--apply"], folder, env)
    dump = json.loads(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sys, urllib.request; "
                "sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())",
                info["base_url"].removesuffix("/v1") + "/_sandbox/dump",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    )
    emails = {f["email"] for f in dump["followers"]}
    assert "noahchen2@acme.test" in emails  # the first curated account, pushed
    again = _run(exe, ["push"], folder, env)  # applied once: nothing left to send
    assert "0 write(s) planned" in again, again
    status = _run(exe, ["status"], folder, env)
    assert "(1 loads in all)" in status, status
    demo = _run(exe, ["demo"], folder, env)  # its own server and warehouse, data/demo.duckdb
    assert "feedback-sync models --list" in demo and "./run" not in demo, demo[-3000:]
    assert (folder / "data" / "demo.duckdb").exists()
    assert not (folder / ".dlt").exists()
    assert sys.version_info[:2] == (3, 11)  # the suite itself stays on the locked 3.11


@pytest.mark.slow
def test_uv_tool_install_gives_a_working_command(built: tuple[Path, Path], tmp_path: Path) -> None:
    """``uv tool install`` (pipx's way: a command in its own environment) of the base
    wheel: the command runs from anywhere and reads the package's own SQL project."""
    wheel, constraints = built
    override = tmp_path / "override.txt"
    override.write_text(OVERRIDE)
    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
    }
    pins = ["-c", str(constraints), "--overrides", str(override)]
    subprocess.run(
        [str(UV), "tool", "install", "--quiet", "-p", sys.executable, *pins, str(wheel)],
        env=env,
        check=True,
        timeout=900,
    )
    exe = tmp_path / "bin" / "feedback-sync"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = _run(exe, ["models", "--list"], elsewhere, env)
    assert "marts.status_summary" in listed


@pytest.mark.slow
def test_pipx_install_gives_a_working_command(
    built: tuple[Path, Path], tmp_path: Path, harness: Harness
) -> None:
    """pipx (pip underneath, in an environment of its own) installs the base wheel; the
    command syncs the suite's sandbox into DuckDB from a folder of its own."""
    wheel, constraints = built
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "PUSH__", "DLT_", "PIP_", "PIPX_"))
    }
    env |= {
        "PIPX_HOME": str(tmp_path / "pipx"),
        "PIPX_BIN_DIR": str(tmp_path / "bin"),
        "PIPX_MAN_DIR": str(tmp_path / "man"),
    }
    subprocess.run(
        [
            str(Path(sys.executable).with_name("pipx")),
            "install",
            "--quiet",
            "--python",
            sys.executable,
            "--pip-args",
            f"--constraint {constraints}",
            str(wheel),
        ],
        env=env,
        check=True,
        timeout=900,
    )
    exe = tmp_path / "bin" / "feedback-sync"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _run(exe, ["--version"], elsewhere, env).strip() == f"feedback-sync {_version()}"
    env |= {
        "SOURCES__FEEDBACK__BASE_URL": harness.server.base_url,
        "SOURCES__FEEDBACK__API_KEY": harness.server.api_key,
    }
    # a project started the documented way: init, check, sync
    assert "wrote .dlt/secrets.toml" in _run(exe, ["init"], elsewhere, env)
    assert "all 6 checks passed" in _run(exe, ["check"], elsewhere, env)
    said = _run(exe, ["sync"], elsewhere, env)
    assert "models: built" in said, said
    followers = len(harness.dump()["followers"])
    status = _run(exe, ["status"], elsewhere, env)
    assert re.search(rf"^  followers +{followers:,}$", status, re.MULTILINE), status


def _version() -> str:
    import tomllib

    version: str = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    return version
