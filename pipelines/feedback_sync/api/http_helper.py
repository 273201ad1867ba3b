"""HTTP exchanges in a helper process, so they run on another core than the rows.

A full sync is bound by its process's CPU, one core at a time (Python's GIL): for each of
its requests the client writes the request, reads the answer and parses HTTP (httpx,
httpcore, h11: a third of the sync's CPU at ``large``), then parses the JSON and builds the
rows. ``HelperTransport`` is an httpx transport that hands each exchange to a helper
process running httpx's own transport, and gets back the status, the headers and the whole
body (decompressed), so the protocol's work runs beside the rows' work instead of taking
turns with it. Everything else stays in the sync's process: retries, the rate limit,
error classification, JSON.

How the two talk: one control socket, over which the sync's process passes the helper one
end of a fresh socket pair (``SCM_RIGHTS``, POSIX only) for each request it has in flight
at once, up to ``max_concurrency``; each pair then carries one exchange at a time, as a
connection of a pool would: a length-prefixed pickle of the request, then one of the
answer. The helper serves each pair from a thread of its own, through one httpx transport
(one connection pool to the service, as the client had). It says it is ready on the
control socket before any request is handed to it.

What a user can rely on:

- answers are the ones httpx would have given in process: the same status and headers
  but ``Content-Encoding`` and ``Content-Length`` (the body arrives decoded, so they no
  longer describe it), the same body, the same exception classes for failures (a
  transport's, a body that does not decode), with the cause under a failed connection
  (DNS, refused, TLS) that ``client._why_unconnected`` names;
- the helper ends when its client closes, when the transport is garbage-collected, and
  when the sync's process ends however it ends (its sockets close: the helper reads the
  end and exits). It runs in a session of its own, so Ctrl-C at a terminal reaches the
  sync, which closes the client; a process forked from the sync's closes its inherited
  sockets to the helper;
- when the helper cannot start (not ready within ``READY_SECONDS``), or ends early,
  requests go from the sync's own process (in-process httpx, as with ``http_process =
  off``), with a warning; an exchange that was in flight when it ended fails as a dropped
  connection would, and is retried (the client warns of that retry too);
- an exchange that gets no answer from the helper within the sum of the request's
  timeouts and a minute fails the same way (a helper that hangs cannot stall a run);
- the helper writes nothing: its output goes nowhere, so no message of it (or key) can
  reach a terminal or a log.

Proxies from the environment are not the helper's: httpx honours them only for the
transports it makes itself, so where the environment names a proxy for the service's
scheme (``proxied``) the client does not use the helper at all.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import pickle
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import httpx

log = logging.getLogger("feedback_sync")

# a frame: its length (4 bytes, network order), then a pickle
_LENGTH = struct.Struct("!I")
# pickle protocol 5 writes a body's bytes in one piece
_PROTOCOL = 5
# seconds a helper has to say it is ready (a Python start and httpx's import: about 0.1 s)
READY_SECONDS = 15.0
# seconds the helper has to exit after the client closes before it is killed
_EXIT_WAIT = 5.0
# beyond the sum of a request's timeouts, how long an exchange may wait for the helper
_ANSWER_MARGIN = 60.0
# the answer headers that describe the body as sent, not as handed over (decoded)
_BODY_HEADERS = (b"content-encoding", b"content-length")
# frames at most this long go in one write with their length; longer ones in two
_ONE_WRITE = 1 << 16


def available() -> str | None:
    """None where the helper can run; else why not (for a message)."""
    if not hasattr(socket, "send_fds") or not hasattr(socket, "AF_UNIX"):
        return "this system cannot pass sockets between processes (Linux and macOS can)"
    if not sys.executable or getattr(sys, "frozen", False):
        return "this Python cannot start another of itself (no sys.executable, or frozen)"
    if not Path(__file__).is_file():
        return f"the helper's code is not a file ({__file__})"
    return None


def wants_helper(setting: str) -> bool:
    """Whether the ``http_process`` setting (checked: ``auto``, ``on``, ``off``) asks for
    the helper here: ``auto`` where it can run and this process may use two CPUs or more
    (on one, the two processes would only take turns)."""
    if setting == "off":
        return False
    if setting == "on":
        return True
    return available() is None and usable_cpus() >= 2


def proxied(url: str) -> bool:
    """Whether the environment names a proxy for ``url``'s scheme (``HTTPS_PROXY``,
    ``ALL_PROXY``, ...; ``NO_PROXY`` not consulted). httpx honours those only for the
    transports it makes itself, so a sync behind one sends from its own process."""
    import urllib.request

    proxies = urllib.request.getproxies()
    return bool(proxies.get(httpx.URL(url).scheme) or proxies.get("all"))


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity where the OS says (else every CPU),
    capped by a container's CPU quota (cgroup v2 ``cpu.max``, or v1's CFS quota) rounded
    up: a container given one CPU's time on a many-core machine counts one."""
    affinity = getattr(os, "sched_getaffinity", None)
    count = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    quota = cgroup_cpus()
    return count if quota is None else min(count, quota)


# where Linux states a cgroup's CPU quota: v2's "quota period" (or "max"), v1's two files
CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (
    Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
    Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
)


def cgroup_cpus() -> int | None:
    """The cgroup's CPU quota in CPUs, rounded up; None where none is set or readable."""
    try:
        quota, period = CGROUP_V2.read_text().split()[:2]
    except (OSError, ValueError):
        try:
            quota, period = (path.read_text().strip() for path in CGROUP_V1)
        except (OSError, ValueError):
            return None
    try:
        share = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None  # "max" (v2) or a garbled file
    if share <= 0:
        return None  # -1 (v1): no quota
    return max(1, math.ceil(share))


class HelperGone(Exception):
    """The helper process ended (or never answered): the exchange did not complete."""


class HelperTransport(httpx.BaseTransport):
    """An httpx transport whose exchanges run in a helper process (the module's doc).

    ``start`` returns None where the helper cannot be started; the caller then uses
    httpx's own transport. ``exchanges`` counts the answers the helper gave.
    """

    def __init__(
        self, process: subprocess.Popen[bytes], control: socket.socket, limits: httpx.Limits
    ) -> None:
        self._process = process
        self._control = control
        self._limits = limits
        self._lock = threading.Lock()
        self._idle: list[socket.socket] = []
        self._open: set[socket.socket] = set()
        self._fallback: httpx.HTTPTransport | None = None
        self._closed = False
        self.exchanges = 0
        # a client dropped without close (a library user's pipeline): the helper still ends
        self._finalizer = weakref.finalize(
            self,
            _shut_down,
            process,
            control,
            channels=self._open,
            idle=self._idle,
            lock=self._lock,
        )
        _LIVE.add(self)

    @classmethod
    def start(cls, limits: httpx.Limits) -> HelperTransport | None:
        """The helper started ahead (``prestart``), or one started now, once it said it is
        ready; None (and a warning) where it cannot be started."""
        why = available()
        if why is not None:
            log.warning("requests go from this process: %s", why)
            return None
        started = _take_early()
        try:
            if started is None:
                started = _spawn()
            process, control = started
            _send(control, (limits.max_connections, limits.max_keepalive_connections))
            control.settimeout(READY_SECONDS)
            if _receive(control) != "ready":
                raise HelperGone
            control.settimeout(None)
        except (OSError, HelperGone, pickle.UnpicklingError) as exc:
            if started is not None:
                _shut_down(started[0], started[1], set(), [], threading.Lock())
            reason = "not ready in time" if isinstance(exc, TimeoutError) else type(exc).__name__
            log.warning("requests go from this process: the HTTP helper did not start (%s)", reason)
            return None
        return cls(process, control, limits)

    @property
    def pid(self) -> int:
        return self._process.pid

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout")
        frame = (
            request.method,
            str(request.url),
            request.headers.raw,
            request.read() if request.method not in ("GET", "HEAD") else b"",
            timeout,
        )
        reply = self._call(frame, timeout, request)
        if reply is None:  # the helper is gone: the request goes from this process
            return self._in_process().handle_request(request)
        if reply[0] == "error":
            raise _rebuilt(reply, request)
        _, status, headers, extensions, body = reply
        return httpx.Response(
            status, headers=headers, content=body, extensions=extensions, request=request
        )

    def get(
        self, url: str, headers: list[tuple[bytes, bytes]], timeout: dict[str, Any] | None
    ) -> tuple[httpx.Response, bytes]:
        """A GET of ``url`` with ``headers`` exactly (httpx's ``Request.headers.raw`` of a
        request to the same host) and the body: ``handle_request`` without building an
        httpx request first (the client's path for the sync's reads; ``client._exchange``)."""
        reply = self._call(("GET", url, headers, b"", timeout), timeout, None)
        if reply is not None and reply[0] == "answer":
            _, status, answer_headers, extensions, body = reply
            return httpx.Response(status, headers=answer_headers, extensions=extensions), body
        request = httpx.Request("GET", url, headers=headers, extensions={"timeout": timeout or {}})
        if reply is not None:
            raise _rebuilt(reply, request)
        response = self._in_process().handle_request(request)
        try:
            return response, response.read()
        finally:
            response.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            fallback, self._fallback = self._fallback, None
        self._finalizer()
        _LIVE.discard(self)
        if fallback is not None:
            fallback.close()

    def _call(
        self,
        frame: tuple[Any, ...],
        timeout: dict[str, Any] | None,
        request: httpx.Request | None,
    ) -> tuple[Any, ...] | None:
        """The helper's reply to ``frame``; None when the request never reached it (the
        helper is gone: send it from this process instead).

        Raises:
            httpx.RemoteProtocolError: the helper ended, or gave no answer in time, after
                the request reached it.
            RuntimeError: the transport was closed.
        """
        channel = self._channel()
        if channel is None:
            return None
        deadline = _answer_deadline(timeout)
        if channel.gettimeout() != deadline:
            channel.settimeout(deadline)
        try:
            _send(channel, frame)
        except OSError:
            # nothing reached the helper: the request has not left, it goes from here
            self._gone(channel)
            return None
        try:
            reply: tuple[Any, ...] = _receive(channel)
        except (OSError, HelperGone, pickle.UnpicklingError):
            self._gone(channel)
            raise httpx.RemoteProtocolError(
                "the HTTP helper process ended, or gave no answer in time",
                request=request or httpx.Request(frame[0], frame[1]),
            ) from None
        with self._lock:
            if self._closed:
                channel.close()
                self._open.discard(channel)
            else:
                self._idle.append(channel)
                self.exchanges += 1
        return reply

    def _channel(self) -> socket.socket | None:
        """An idle socket pair to the helper, or a new one; None once it is gone.

        Raises:
            RuntimeError: the transport was closed (as httpx's own pool says).
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the HTTP helper was closed")
            if self._fallback is not None:
                return None
            if self._idle:
                return self._idle.pop()
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                with theirs:
                    socket.send_fds(self._control, [b"c"], [theirs.fileno()])
            except OSError:
                mine.close()
                self._fallback_locked()
                return None
            self._open.add(mine)
            return mine

    def _gone(self, channel: socket.socket) -> None:
        with self._lock:
            channel.close()
            self._open.discard(channel)
            if not self._closed:
                self._fallback_locked()

    def _fallback_locked(self) -> None:
        if self._fallback is not None:
            return
        self._fallback = httpx.HTTPTransport(limits=self._limits)
        code = self._process.poll()
        log.warning(
            "the HTTP helper process ended (%s); requests go from this process for the rest "
            "of the run",
            "still running, its socket failed" if code is None else f"exit code {code}",
        )

    def _in_process(self) -> httpx.HTTPTransport:
        with self._lock:
            if self._closed:
                raise RuntimeError("the HTTP helper was closed")
            if self._fallback is None:
                self._fallback = httpx.HTTPTransport(limits=self._limits)
            return self._fallback

    def _forked(self) -> None:
        """In a process forked from this one: its copies of the sockets go (the helper is
        the parent's), so the helper ends with the parent, not with the last copy."""
        self._finalizer.detach()
        for sock in (self._control, *self._open):
            with contextlib.suppress(OSError):
                sock.close()
        self._closed = True


def _answer_deadline(timeout: dict[str, Any] | None) -> float:
    steps = [v for v in (timeout or {}).values() if isinstance(v, int | float)]
    return sum(steps) + _ANSWER_MARGIN


def _shut_down(
    process: subprocess.Popen[bytes],
    control: socket.socket,
    channels: set[socket.socket],
    idle: list[socket.socket],
    lock: threading.Lock,
) -> None:
    """Ends the helper: the sockets to it are shut (a thread reading one wakes; it closes
    its own), the idle ones closed, then the control socket, which makes the helper exit;
    it is waited for (killed after ``_EXIT_WAIT`` seconds)."""
    with lock:
        for channel in channels:
            with contextlib.suppress(OSError):
                channel.shutdown(socket.SHUT_RDWR)
        for channel in idle:
            channel.close()
            channels.discard(channel)
        idle.clear()
    control.close()
    try:
        process.wait(_EXIT_WAIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# every live transport, so a forked child can let go of their sockets
_LIVE: weakref.WeakSet[HelperTransport] = weakref.WeakSet()

_Started = tuple[subprocess.Popen[bytes], socket.socket]
# the helper ``prestart`` started, until a client takes it (or the process ends)
_early: _Started | None = None
_early_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _early
    for transport in list(_LIVE):
        transport._forked()
    if _early is not None:
        with contextlib.suppress(OSError):
            _early[1].close()
        _early = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def prestart(setting: str) -> None:
    """Starts the helper before the client that will use it exists: the command line calls
    this before its imports, so the helper's own start (about 0.1 s: Python and httpx)
    runs beside them instead of delaying the first request. Only where ``setting`` (the
    ``http_process`` setting as the environment gives it, unchecked) may want it: ``auto``
    or ``on``; a TOML file that says ``off`` is read later, and the helper is then let go.
    Quiet: a helper that cannot start here is tried again, with its warning, when the
    client starts. One no client takes ends with the process."""
    global _early
    setting = setting.strip().lower()
    if setting not in ("auto", "on") or available() is not None or not wants_helper(setting):
        return
    with _early_lock:
        if _early is not None:
            return
        try:
            _early = _spawn()
        except OSError:
            return


def let_go() -> None:
    """Ends a helper ``prestart`` started that no client took (the run does not want it)."""
    started = _take_early()
    if started is not None:
        _shut_down(started[0], started[1], set(), [], threading.Lock())


atexit.register(let_go)


def _take_early() -> _Started | None:
    global _early
    with _early_lock:
        started, _early = _early, None
    if started is not None and started[0].poll() is not None:
        # it ended on its own: start another
        _shut_down(started[0], started[1], set(), [], threading.Lock())
        return None
    return started


def _spawn() -> _Started:
    """A new helper process and the control socket to it. ``-P``: the helper's imports
    come from the installed packages, never from a module of the working folder; its own
    session: a terminal's Ctrl-C goes to the sync alone.

    Raises:
        OSError: no socket pair, or the process did not start.
    """
    from feedback_sync.internals import HTTPX_CLI_MODULE

    boot = _BOOT.format(httpx_cli=HTTPX_CLI_MODULE)
    control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-P", "-c", boot, __file__, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                close_fds=True,
                start_new_session=True,
            )
    except (OSError, ValueError, TypeError) as exc:
        control.close()
        raise OSError(f"the helper did not start: {type(exc).__name__}") from None
    return process, control


# --- the wire: length-prefixed pickles (both ends are this module, of one install) ---


def _send(sock: socket.socket, message: Any) -> None:
    data = pickle.dumps(message, protocol=_PROTOCOL)
    if len(data) <= _ONE_WRITE:
        sock.sendall(_LENGTH.pack(len(data)) + data)
    else:  # a body: not copied once more to put its length in front
        sock.sendall(_LENGTH.pack(len(data)))
        sock.sendall(data)


def _receive(sock: socket.socket) -> Any:
    (size,) = _LENGTH.unpack(_read(sock, _LENGTH.size))
    return pickle.loads(_read(sock, size))


def _read(sock: socket.socket, size: int) -> bytearray:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise HelperGone
        got += n
    return buffer


# --- failures: the class httpx raised, and the cause ``client._why_unconnected`` reads ---


def _failure(exc: Exception) -> tuple[str, str, str, str, str | None]:
    """An error frame: httpx's own failures with their message, anything else by its class
    only (its message might quote a URL, and with it a key sent as a parameter)."""
    if not isinstance(exc, httpx.HTTPError):
        return ("error", "RuntimeError", f"the HTTP helper failed ({type(exc).__name__})", "", None)
    cause: BaseException | None = exc
    kind, reason = "", None
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            kind = "dns"
            break
        if isinstance(cause, ConnectionRefusedError):
            kind = "refused"
            break
        if isinstance(cause, ssl.SSLError):
            kind, reason = "tls", cause.reason or type(cause).__name__
            break
        cause = cause.__cause__ or cause.__context__
    return ("error", type(exc).__name__, str(exc), kind, reason)


def _rebuilt(reply: tuple[Any, ...], request: httpx.Request) -> Exception:
    _, name, message, kind, reason = reply
    cls = getattr(httpx, name, None)
    if not (isinstance(cls, type) and issubclass(cls, httpx.RequestError)):
        return RuntimeError(message)
    error = cls(message, request=request)
    cause: BaseException | None = None
    if kind == "dns":
        cause = socket.gaierror(message)
    elif kind == "refused":
        cause = ConnectionRefusedError(message)
    elif kind == "tls":
        cause = ssl.SSLError(message)
        cause.reason = reason
    error.__cause__ = cause
    return error


# --- the helper's side ---

# the helper runs this file by path, not as ``feedback_sync.api.http_helper``: importing
# the package would cost it the package's imports for nothing. httpx's command-line client
# is marked absent as the console script does (``internals.skip_httpx_cli``, whose line
# the helper runs itself: half the helper's start); ``_spawn`` names the module
_BOOT = (
    "import importlib.util, sys\n"
    "sys.modules.setdefault({httpx_cli!r}, None)\n"
    "spec = importlib.util.spec_from_file_location('feedback_sync_http_helper', sys.argv[1])\n"
    "module = importlib.util.module_from_spec(spec)\n"
    "spec.loader.exec_module(module)\n"
    "module.serve(int(sys.argv[2]))\n"
)


def serve(control_fd: int) -> None:
    """The helper's main loop: a thread per socket pair passed in, until the sync's
    process closes the control socket (or ends)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the sync's to handle
    control = socket.socket(fileno=control_fd)
    # What making the transport costs, done before the limits arrive (while the sync's
    # process is still importing): httpcore's import, which httpx leaves to its first
    # transport (28-50 ms), and httpx's default TLS context, the one the transport would
    # make (its CA bundle, or SSL_CERT_FILE / SSL_CERT_DIR from the environment: 23-28 ms).
    # After the limits, the sync's process waited for them: 60 ms of a `demo` run's 1.5 s.
    import httpcore  # noqa: F401

    verify = httpx.create_ssl_context()
    max_connections, max_keepalive = _receive(control)
    transport = httpx.HTTPTransport(
        verify=verify,
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_keepalive
        ),
    )
    _send(control, "ready")
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            break
        if not fds:
            break  # the sync's process closed the control socket, or ended
        channel = socket.socket(fileno=fds[0])
        threading.Thread(target=_serve_channel, args=(channel, transport), daemon=True).start()
    os._exit(0)  # threads still serving end with the process


def _serve_channel(channel: socket.socket, transport: httpx.HTTPTransport) -> None:
    with channel:
        while True:
            try:
                method, url, headers, content, timeout = _receive(channel)
            except (OSError, HelperGone):
                return
            try:
                reply = _exchange(transport, method, url, headers, content, timeout)
            except Exception as exc:  # each goes back to the sync's process, as its class
                reply = _failure(exc)
            try:
                _send(channel, reply)
            except OSError:
                return


def _exchange(
    transport: httpx.HTTPTransport,
    method: str,
    url: str,
    headers: list[tuple[bytes, bytes]],
    content: bytes,
    timeout: dict[str, float | None] | None,
) -> tuple[Any, ...]:
    request = httpx.Request(method, url, headers=headers, content=content or None)
    if timeout is not None:
        request.extensions["timeout"] = timeout
    response = transport.handle_request(request)
    try:
        body = response.read()  # decoded, as the client would have read it
    finally:
        response.close()
    kept = [(k, v) for k, v in response.headers.raw if k.lower() not in _BODY_HEADERS]
    extensions = {
        k: v for k, v in response.extensions.items() if k in ("http_version", "reason_phrase")
    }
    return ("answer", response.status_code, kept, extensions, body)
