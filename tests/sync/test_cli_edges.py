"""The command line's edges: its version, and the systems it runs on."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from feedback_sync.app import cli

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_one_in_pyproject() -> None:
    written = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    done = subprocess.run(
        [sys.executable, "-m", "feedback_sync.app.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"feedback-sync {written}"


def test_a_system_without_posix_file_locks_is_told_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "_posix", lambda: False)
    assert cli.main(["status"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Linux and macOS (POSIX) only" in err[0], err
