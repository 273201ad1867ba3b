"""Running the sandbox on loopback: in the foreground (the CLI) or in a thread (tests)."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from feedback_sync.sandbox.app import SandboxApp
from feedback_sync.sandbox.guard import QuietDrops


def _config(app: SandboxApp, host: str, port: int, log_level: str) -> uvicorn.Config:
    # a decision, not a hidden bug: the "drop" fault raises on purpose to cut the connection,
    # and uvicorn would log each as an application error with a traceback. QuietDrops lets
    # every other error through (sandbox/guard.py)
    errors = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, QuietDrops) for f in errors.filters):  # once per process
        errors.addFilter(QuietDrops())
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="off",
        # no websocket routes: not loading uvicorn's websocket protocol saves 30 ms of start-up
        ws="none",
        # long-lived keep-alive so benchmark and sync clients reuse connections
        timeout_keep_alive=30,
    )


@dataclass
class RunningSandbox:
    """A sandbox serving on loopback; ``base_url`` ends with ``/v1``."""

    app: SandboxApp
    host: str
    port: int

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def api_key(self) -> str:
        return self.app.state.settings.api_key


@contextlib.contextmanager
def serve_in_thread(
    app: SandboxApp, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0
) -> Iterator[RunningSandbox]:
    """Serves ``app`` from a background thread on a free port until the block exits."""
    server = uvicorn.Server(_config(app, host, port, "warning"))
    thread = threading.Thread(target=server.run, name="sandbox-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the sandbox server failed to start (see the log above)")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the sandbox server did not start within {startup_timeout}s")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()
    try:
        yield RunningSandbox(app, host, bound[1])
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0 picks a free one)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve_forever(app: SandboxApp, sock: socket.socket, log_level: str = "warning") -> None:
    """Serves on an already bound socket in the foreground until Ctrl-C or SIGTERM."""
    host, port = sock.getsockname()[:2]
    uvicorn.Server(_config(app, host, port, log_level)).run(sockets=[sock])
