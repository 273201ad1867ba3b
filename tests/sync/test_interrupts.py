"""Ctrl-C in any step of a sync ends it with one line that says what is committed and what
finishes the rest (exit 130): no dlt log line, no traceback, and no Ctrl-C forgotten."""

from __future__ import annotations

import logging
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from feedback_sync.app import cli
from feedback_sync.app.interrupts import ctrl_c, interrupted_in
from feedback_sync.errors import Interrupted

from tests.support.cli import CLI, cli_env, said_lines
from tests.sync.harness import Harness


def _interrupt(*args: Any, **kwargs: Any) -> Any:
    """What DuckDB raises when Ctrl-C lands inside one of its statements."""
    raise RuntimeError("Query interrupted")


@pytest.mark.slow
def test_ctrl_c_in_a_load_is_not_forgotten(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlt intercepts the signal during its steps and forgets it when the step ends: the
    run must stop after the load all the same."""
    harness.sync(full=True, models=False)
    harness.mutate(seed=71, counts={"followers": {"create": 2}})
    target = type(harness.target())
    real = target.load

    def load_then_ctrl_c(self: Any, pipeline: Any, **kwargs: Any) -> Any:
        loaded = real(self, pipeline, **kwargs)
        signal.raise_signal(signal.SIGINT)  # after the load's last check for one
        return loaded

    monkeypatch.setattr(target, "load", load_then_ctrl_c)
    with pytest.raises(Interrupted) as caught:
        harness.sync(models=False)
    # the load had finished: its data is committed, and the message says so
    assert str(caught.value) == interrupted_in("loaded") == interrupted_in("reconcile")
    monkeypatch.setattr(target, "load", real)
    harness.sync(models=False)  # the next run finishes and resumes
    harness.assert_equals_truth()


@pytest.mark.slow
def test_ctrl_c_in_the_history_stops_the_run_not_just_the_step(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.sync(full=True, models=False)
    monkeypatch.setattr(type(harness.target()), "record_history", _interrupt)
    with pytest.raises(Interrupted) as caught:
        harness.sync(models=False)
    assert str(caught.value) == interrupted_in("history")
    assert "its data is committed" in str(caught.value)


def test_ctrl_c_in_the_models_says_the_data_is_committed_and_what_builds_them(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feedback_sync.models import project

    monkeypatch.setattr(project, "apply", _interrupt)
    with pytest.raises(Interrupted) as caught:
        harness.sync(full=True)
    said = str(caught.value)
    assert said == interrupted_in("models")
    assert "the data is committed" in said and "feedback-sync models" in said
    harness.assert_equals_truth()  # the load stands


def test_a_ctrl_c_a_step_swallowed_is_seen_as_the_next_step_begins(harness: Harness) -> None:
    """A housekeeping step that keeps going after its own failure cannot hide a Ctrl-C."""
    with ctrl_c() as check:
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # raised where it lands ...
        with pytest.raises(KeyboardInterrupt):
            check()  # ... and again at the next step, had that been swallowed


def test_dlts_notice_of_the_signal_is_left_to_the_one_line() -> None:
    notice = cli._SignalNotice()
    record = logging.LogRecord("dlt", logging.WARNING, "pool_runner.py", 275, "x", (), None)
    record.msg = "Exiting runner due to signal 2"
    assert notice.filter(record) is False
    record.msg = "Exiting runner for another reason"
    assert notice.filter(record) is True


@pytest.mark.slow
def test_ctrl_c_during_a_load_from_the_command_line_is_one_line(
    harness: Harness, tmp_path: Path
) -> None:
    env = cli_env(harness.server, tmp_path)
    process = subprocess.Popen(
        [*CLI, "sync", "--progress", "plain", "--no-models"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if line.startswith("sync: normalizing"):
            process.send_signal(signal.SIGINT)
            break
    rest = process.stderr.read()
    process.stderr.close()
    process.wait(timeout=120)
    lines = said_lines("".join(seen) + rest)
    errors = [line for line in lines if "error:" in line]
    assert process.returncode == 130, lines
    assert errors in (
        [f"feedback-sync sync: error: {interrupted_in('load')}"],
        [f"feedback-sync sync: error: {interrupted_in('reconcile')}"],
    ), lines
    assert not [line for line in lines if "WARNING" in line or "Traceback" in line], lines
