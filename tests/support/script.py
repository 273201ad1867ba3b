"""A documented shell session run as written: a bash script in its own process group (a
server it starts in the background dies with it), and a free loopback port for it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_script(
    script: str, cwd: Path, env: dict[str, str], timeout: float, *, merged: bool = False
) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``bash -e -c script``; ``merged``: stderr in
    stdout, in the order written. What is left of its process group is killed after."""
    shell = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = shell.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    return shell.returncode, out, err or ""
