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


EXIT_PROBE = """
import sys, threading, time
from pathlib import Path
from feedback_sync.app import cli

class Noisy:
    def __del__(self):
        print("torn down", flush=True)  # only an interpreter teardown prints this

keep = Noisy()
def late():
    time.sleep(0.5)
    Path("thread-done").write_text("yes")
threading.Thread(target=late).start()  # still running when the command is done
sys.argv = ["feedback-sync", "status", "--pipelines-dir", "p"]
cli.run()
"""


def test_the_command_waits_for_threads_then_exits_without_a_teardown(tmp_path: Path) -> None:
    """Whatever threads are left, the console script ends without the interpreter's
    teardown (where DuckDB's bindings print their leak lines), after the threads that
    are not daemons finished, as a normal exit would wait for them."""
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread-done").read_text() == "yes"
    assert "torn down" not in done.stdout
    assert "no sync has been committed here yet" in done.stdout
