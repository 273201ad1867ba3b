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
    # the first line says what runs where; the summary counts from the command's start
    first = "sync: starting a full run into DuckDB data/warehouse.duckdb (dataset feedback)"
    assert done.stderr.splitlines()[0] == first
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


def test_the_first_line_comes_before_the_imports(tmp_path: Path) -> None:
    """Python's own account of its imports (``-X importtime``, on stderr as each import
    ends) puts the sync's first line before dlt's import, the bulk of the start-up. The
    settings point nowhere: the run fails after its imports, which is all this needs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DLT_"))}
    env |= {
        "SOURCES__FEEDBACK__BASE_URL": "http://127.0.0.1:9/v1",
        "SOURCES__FEEDBACK__API_KEY": "a-key-for-nothing",
        "SOURCES__FEEDBACK__MAX_RETRIES": "0",
        "DLT_DATA_DIR": str(tmp_path / "dlt"),
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "feedback_sync.app.cli", "sync"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.splitlines()
    first = [i for i, line in enumerate(lines) if line.startswith("sync: starting ")]
    dlt = [i for i, line in enumerate(lines) if re.fullmatch(r"import time:.*\| +dlt", line)]
    assert first and dlt, done.stderr[-3000:]
    assert first[0] < dlt[0]
    assert lines[first[0]] == (
        "sync: starting an incremental run into DuckDB data/warehouse.duckdb (dataset feedback)"
    )


def test_the_process_start_is_read_from_the_kernel() -> None:
    """The console script's clock starts when the process did, before its first line of
    Python ran (where the kernel says so: Linux)."""
    code = (
        "import time; began = time.perf_counter()\n"
        "from feedback_sync.app.cli import _process_start\n"
        "print(began - _process_start())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0 < float(done.stdout) < 60


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
