"""A throwaway local Prefect stack: ``prefect server start`` on a free loopback port, the
``prefect`` CLI, and ``process`` workers, in their own process groups and a home folder of
their own, all stopped by ``close()``.

The end-to-end test and the README's screenshot (``python -m tests.support.screenshot``) use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LocalPrefect:
    def __init__(self, home: Path, extra_env: dict[str, str]) -> None:
        self.home = home
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.env = {
            **os.environ,
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": self.api_url,
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(self.port),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
            "PREFECT_CLI_COLORS": "false",
            "PREFECT_CLI_WRAP_LINES": "false",
            **extra_env,
        }
        self.processes: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []

    def _spawn(
        self, name: str, args: list[str], env: dict[str, str], cwd: Path = ROOT
    ) -> subprocess.Popen[bytes]:
        log = (self.home / f"{name}.log").open("wb")
        process = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.processes.append((process, log))
        return process

    def start_server(self, timeout: float = 90) -> None:
        server = self._spawn("server", [PREFECT, "server", "start"], self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"prefect server exited: {self.log('server')[-2000:]}")
            try:
                if httpx.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(
            f"prefect server not healthy in {timeout}s: {self.log('server')[-2000:]}"
        )

    def cli(self, *args: str, timeout: float = 120, cwd: Path = ROOT) -> str:
        """``prefect ARGS`` against this server, run in ``cwd``; its output (raises when it
        fails)."""
        return self._call([PREFECT, *args], timeout, cwd)

    def python(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
        """``python ARGS`` (this interpreter) against this server, with ``env`` added to its
        environment; its output."""
        return self._call([sys.executable, *args], timeout, env=env)

    def _call(
        self, args: list[str], timeout: float, cwd: Path = ROOT, env: dict[str, str] | None = None
    ) -> str:
        done = subprocess.run(
            args,
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0:
            command = " ".join([Path(args[0]).name, *args[1:]])
            raise AssertionError(f"{command} failed ({done.returncode}):\n{output}")
        return output

    def start_worker(
        self, pool: str, env: dict[str, str], cwd: Path = ROOT
    ) -> subprocess.Popen[bytes]:
        return self._spawn(
            f"worker-{len(self.processes)}",
            [PREFECT, "worker", "start", "--pool", pool, "--type", "process"],
            {**self.env, **env},
            cwd,
        )

    def log(self, name: str) -> str:
        path = self.home / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.home.glob("*.log"))

    def close(self) -> None:
        """SIGTERM to each process group (workers first), SIGKILL what is left after 20 s.

        A worker starts each flow run in a session of its own, so its children's groups
        are signalled too (a run still going when a test fails must not outlive it).
        """
        for process, _ in reversed(self.processes):
            if process.poll() is None:
                for child in _children(process.pid):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        group = os.getpgid(child)
                        if group != process.pid:  # its own session: a flow run
                            os.killpg(group, signal.SIGKILL)
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process, log in reversed(self.processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            log.close()


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux's /proc; none elsewhere)."""
    found: list[int] = []
    for tasks in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            found += [int(p) for p in tasks.read_text().split()]
    return found


def wait_for_runs(api: Any, ids: list[str], timeout: float = 240) -> dict[str, dict[str, Any]]:
    """Polls until every flow run reached a final state; ``{id: flow run}``."""
    deadline = time.monotonic() + timeout
    runs: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        runs = {i: api.get(f"flow_runs/{i}") for i in ids}
        if all(
            r["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED")
            for r in runs.values()
        ):
            return runs
        time.sleep(1)
    states = {i: r["state"]["type"] for i, r in runs.items()}
    raise TimeoutError(f"flow runs not finished in {timeout}s: {states}")
