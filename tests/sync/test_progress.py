"""Progress on stderr: a live display on a terminal, plain lines in pipes and logs."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from feedback_sync.package_data import package_path
from feedback_sync.progress import Figures, Progress
from feedback_sync.sandbox.server import RunningSandbox

from tests.support.cli import CLI, cli_env
from tests.sync.harness import Harness

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(server: RunningSandbox, folder: Path) -> dict[str, str]:
    return cli_env(server, folder, COLUMNS="120", TERM="xterm-256color")


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """Runs the command with stderr on a pseudo-terminal; (exit code, stdout, what the
    terminal received)."""
    main, side = pty.openpty()
    process = subprocess.Popen(
        [*CLI, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=side, text=True
    )
    os.close(side)
    seen = bytearray()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    os.close(main)
    out, _ = process.communicate(timeout=60)
    return process.returncode, out, seen.decode("utf-8", "replace")


@pytest.mark.slow
def test_a_terminal_gets_the_live_display(live_sandbox: RunningSandbox, tmp_path: Path) -> None:
    env = _env(live_sandbox, tmp_path)
    # a slower server, so that the display redraws during the fetch
    control = live_sandbox.base_url.removesuffix("/v1") + "/_sandbox/settings"
    httpx.post(control, json={"latency_ms": 30}, timeout=30).raise_for_status()
    code, out, terminal = _on_a_terminal(["sync", "--full"], tmp_path, env)
    httpx.post(control, json={"latency_ms": 0}, timeout=30).raise_for_status()
    assert code == 0, terminal
    assert out.startswith("full sync into DuckDB")  # the summary on stdout, as ever
    text = ANSI.sub("", terminal)
    assert "\x1b[" in terminal  # drawn with cursor movements, not printed line by line
    for stage in ("extract", "load", "models"):
        assert f"sync: {stage}" in text, stage  # the display's title names the stage
    assert re.search(r"followers +\d+ +[\d,]+", text), text[-2000:]
    assert "rows fetched" in text and "requests" in text
    # the run's own lines are printed above the display
    assert "sync: full run of" in text and "sync: building the SQL models ..." in text
    assert "rows fetched: " not in text  # no plain lines on a terminal

    shutil.copytree(package_path("examples", "curated"), tmp_path / "data" / "curated")
    code, out, terminal = _on_a_terminal(["push", "--apply"], tmp_path, env)
    assert code == 0, terminal
    assert out.startswith("push applied in")  # the report alone on stdout
    text = ANSI.sub("", terminal)
    assert "push: planning followers ..." in text and "push: sending followers" in text
    assert "push: sending followers" in text and "rows sent" in text


def test_pipes_get_plain_lines_naming_the_stage(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    done = subprocess.run(
        [*CLI, "sync", "--full", "--progress-every", "0.05"],
        cwd=tmp_path,
        env=_env(live_sandbox, tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stderr  # no terminal codes in a pipe
    # the summary counts from the command's start
    assert re.match(r"full sync into .* finished in [\d.]+s \(start [\d.]+s, fetch ", done.stdout)
    lines = [line for line in done.stderr.splitlines() if "rows fetched:" in line]
    assert lines, done.stderr
    stages = {line.split()[2] for line in lines}
    assert stages & {"extract", "normalize", "load", "models"}, lines
    off = subprocess.run(
        [*CLI, "sync", "--progress", "off", "--progress-every", "0.05"],
        cwd=tmp_path,
        env=_env(live_sandbox, tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert off.returncode == 0 and "rows fetched:" not in off.stderr


def test_the_process_start_is_read_from_the_kernel() -> None:
    """The console script's clock starts when the process did, before its first line of
    Python ran (where the kernel says so: Linux), and not long before: a process's age,
    not the machine's."""
    code = (
        "import time; began = time.perf_counter()\n"
        "from feedback_sync.app.process import process_start\n"
        "print(began - process_start())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0 < float(done.stdout) < 5


def test_the_plain_line_carries_the_figures() -> None:
    out = io.StringIO()
    progress = Progress("sync", out, mode="plain", every=3600, rows="rows fetched")
    with progress:
        progress.stage("extract")
        progress.watch(
            lambda: Figures(
                requests=12, retries=1, requests_by={"followers": 12}, rows_by={"followers": 1200}
            )
        )
        line = progress.line()
        progress.say("sync: a line of the run")
    assert re.fullmatch(
        r"sync: +\d+\.\ds  extract  12 requests \(1 retried\); rows fetched: followers 1,200", line
    ), line
    assert out.getvalue() == "sync: a line of the run\n"


def test_done_out_of_total_and_the_time_left_once_it_can_be_told() -> None:
    figures = Figures(
        requests=40,
        rows_by={"followers": 500, "comments": 300},
        done_by={"followers": 500, "comments": 300},
        total_by={"followers": 2000, "comments": 2000},
    )
    assert figures.rows_text("followers") == "500/2,000"
    assert figures.share_done() == 0.2
    # a resource whose total is not known: no share, and its rows alone
    unknown = Figures(rows_by={"followers": 5, "links": 7}, total_by={"followers": 10})
    assert unknown.share_done() is None and unknown.rows_text("links") == "7"
    progress = Progress("sync", io.StringIO(), mode="plain", every=3600, rows="rows fetched")
    with progress:
        progress.watch(lambda: figures)
        assert progress.left(figures) == ""  # too soon to tell
        progress._watched -= 10  # ten seconds for a fifth: forty to go
        assert progress.left(figures) == "  about 40s left"
        assert "about 40s left; rows fetched: followers 500/2,000, comments 300/2,000" in (
            progress.line()
        )
        progress._watched -= 290  # five minutes for a fifth
        assert progress.left(figures) == "  about 20m00s left"


@pytest.mark.slow
def test_a_first_run_says_it_reads_everything(harness: Harness) -> None:
    harness.sync(models=False)
    assert "sync: first run (nothing synced here yet: it reads everything) of" in (
        harness.last_output
    )
    harness.sync(models=False)
    assert "sync: incremental run of" in harness.last_output
    harness.sync(full=True, models=False)
    assert "sync: full run of" in harness.last_output
