"""The command line's edges: its version, and the systems it runs on."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from feedback_sync.app import cli

from tests.sync.harness import Harness

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


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _all_parsers(sub)
    return found


@pytest.mark.parametrize(
    "argv",
    [["push", "--a"], ["push", "--f"], ["push", "--app"], ["sync", "--ful"], ["sync", "--no-m"]],
)
def test_an_abbreviated_option_is_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A prefix of a safety switch (--apply, --force, --full) must not switch it on."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {argv[1]}" in err, err


def test_no_parser_matches_prefixes(capsys: pytest.CaptureFixture[str]) -> None:
    from feedback_sync.flows import alarm

    parsers = _all_parsers(cli.build_parser())
    assert len(parsers) >= 8  # the command and each subcommand
    assert all(p.allow_abbrev is False for p in parsers)
    with pytest.raises(SystemExit) as exited:
        alarm.main(["--wit", "30"])  # the freshness alarm's own command
    assert exited.value.code == 2
    assert "unrecognized arguments: --wit" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("command", [["sync", "--full"], ["push"], ["status"]])
def test_python_dash_m_exits_without_stray_output(
    harness: Harness, tmp_path: Path, command: list[str]
) -> None:
    """``python -m feedback_sync.app.cli`` (for profilers) exits through the normal
    teardown: nothing after the command's own output, DuckDB's leak lines included."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DLT_"))},
        "SOURCES__FEEDBACK__BASE_URL": harness.server.base_url,
        "SOURCES__FEEDBACK__API_KEY": harness.server.api_key,
    }
    argv = [sys.executable, "-m", "feedback_sync.app.cli"]
    if command[0] != "sync":  # push and status need something synced
        setup = [*argv, "sync", "--pipelines-dir", "p"]
        subprocess.run(setup, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    done = subprocess.run(
        [*argv, *command, "--pipelines-dir", "p"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "nanobind" not in done.stderr and "leaked" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["sync", "--ful"],
            "feedback-sync sync: error: unrecognized arguments: --ful (did you mean --full?)",
        ),
        (
            ["push", "--aply"],
            "feedback-sync push: error: unrecognized arguments: --aply (did you mean --apply?)",
        ),
        (
            ["sync", "--dataset", "x", "--destinaton=duckdb"],
            "feedback-sync sync: error: unrecognized arguments: --destinaton=duckdb "
            "(did you mean --destination?)",
        ),
        (["synk"], "(did you mean sync?)"),
    ],
)
def test_a_misspelled_option_names_the_commands_usage_and_the_nearest(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(said), err
    if argv[0] != "synk":  # the command's own usage, not the top level's
        assert err[0].startswith(f"usage: feedback-sync {argv[0]} [-h]"), err
