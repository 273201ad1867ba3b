"""The HTTP helper process (``api/http_helper.py``): answers as httpx gives them in process,
failures with their class and cause, a helper that ends with its client or its process, a
helper that dies handing the run back to the sync's process, and the ``http_process``
setting."""

from __future__ import annotations

import gzip
import http.server
import logging
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from feedback_sync.api import http_helper
from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.http_helper import HelperTransport
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.errors import ConfigError, Unreachable
from feedback_sync.internals import transport_for_url
from feedback_sync.sandbox.server import RunningSandbox

from tests.sync.harness import Harness

LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=4)

pytestmark = pytest.mark.skipif(
    http_helper.available() is not None, reason="the helper needs socket passing (POSIX)"
)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` is running (a zombie, ended and not yet reaped, is not)."""
    if os.path.isdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return not stat.read().split(") ", 1)[1].startswith("Z")
        except FileNotFoundError:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``within`` seconds."""
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _used(client: FeedbackClient, url: str) -> httpx.BaseTransport:
    """The transport the client's httpx client uses for ``url``."""
    pick = transport_for_url(client._http)
    assert pick is not None
    return pick(httpx.URL(url))


@pytest.fixture
def helper() -> Iterator[HelperTransport]:
    started = HelperTransport.start(LIMITS)
    assert started is not None
    try:
        yield started
    finally:
        started.close()


def _key_headers(sandbox: RunningSandbox) -> dict[str, str]:
    return {"Authorization": f"Bearer {sandbox.api_key}"}


def test_answers_through_the_helper_are_the_ones_httpx_gives_in_process(
    live_sandbox: RunningSandbox, helper: HelperTransport
) -> None:
    paths = ["/followers?limit=5&include_attributes=true", "/ideas?limit=3", "/nowhere"]
    with (
        httpx.Client(transport=helper, headers=_key_headers(live_sandbox)) as through,
        httpx.Client(headers=_key_headers(live_sandbox)) as direct,
    ):
        for path in paths:
            url = live_sandbox.base_url + path
            got, want = through.get(url), direct.get(url)
            assert got.status_code == want.status_code, path
            assert got.content == want.content, path
            skip = {"date", "content-length"}
            assert {k: v for k, v in got.headers.items() if k not in skip} == {
                k: v for k, v in want.headers.items() if k not in skip
            }, path
            assert got.headers["content-length"] == str(len(got.content))
            assert got.http_version == want.http_version
            assert got.reason_phrase == want.reason_phrase


class _Gzipping(http.server.BaseHTTPRequestHandler):
    body = orjson.dumps({"data": [{"idx": "x", "name": "é" * 2000}], "pagination": {}})

    def do_GET(self) -> None:
        packed = gzip.compress(self.body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(packed)))
        self.end_headers()
        self.wfile.write(packed)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_compressed_answer_arrives_decoded(helper: HelperTransport) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gzipping)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with httpx.Client(transport=helper) as client:
            got = client.get(f"http://127.0.0.1:{server.server_address[1]}/v1/x")
    finally:
        server.shutdown()
        server.server_close()
    assert got.content == _Gzipping.body
    assert "content-encoding" not in got.headers
    assert got.json()["data"][0]["name"] == "é" * 2000


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_keeps_its_class_and_cause(helper: HelperTransport) -> None:
    with httpx.Client(transport=helper) as client, pytest.raises(httpx.ConnectError) as caught:
        client.get(f"http://127.0.0.1:{_closed_port()}/v1/x")
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)


def test_an_unresolvable_host_keeps_its_cause(helper: HelperTransport) -> None:
    with httpx.Client(transport=helper) as client, pytest.raises(httpx.ConnectError) as caught:
        client.get("http://no-such-host.invalid/v1/x")
    assert isinstance(caught.value.__cause__, socket.gaierror)


def test_a_silent_server_times_out_with_httpx_s_class(helper: HelperTransport) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepts into the backlog and never answers
        port = silent.getsockname()[1]
        with (
            httpx.Client(transport=helper, timeout=0.3) as client,
            pytest.raises(httpx.ReadTimeout),
        ):
            client.get(f"http://127.0.0.1:{port}/v1/x")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, signed by its own key: (certificate file, key file)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "feedback-sync test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on 127.0.0.1 with a self-signed certificate: (its URL, the
    certificate's file)."""
    cert_file, key_file = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gzipping)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/v1/x", cert_file
    finally:
        server.shutdown()
        server.server_close()


def test_the_helper_verifies_tls_as_httpx_does_in_process(
    tls_server: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper makes its TLS context before it is asked for anything: the one httpx
    makes, trusting ``SSL_CERT_FILE`` where the environment names it, else certifi's
    bundle, which does not hold this server's certificate."""
    url, cert_file = tls_server
    http_helper.let_go()  # a helper started ahead would have the environment of before
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    trusted = HelperTransport.start(LIMITS)
    assert trusted is not None
    with httpx.Client(transport=trusted) as client:
        answer = client.get(url)
    assert answer.status_code == 200
    assert answer.json() == orjson.loads(_Gzipping.body)

    monkeypatch.delenv("SSL_CERT_FILE")
    untrusted = HelperTransport.start(LIMITS)
    assert untrusted is not None
    with httpx.Client(transport=untrusted) as client, pytest.raises(httpx.ConnectError) as caught:
        client.get(url)
    with httpx.Client() as direct, pytest.raises(httpx.ConnectError) as in_process:
        direct.get(url)
    assert isinstance(caught.value.__cause__, ssl.SSLError)
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value)
    assert "CERTIFICATE_VERIFY_FAILED" in str(in_process.value)


def _settings(base_url: str, **raw: Any) -> FeedbackSettings:
    return FeedbackSettings.validate(
        base_url=base_url, api_key="k-123", max_retries=2, timeout_seconds=5, **raw
    )


def test_the_client_names_a_refused_address_as_in_process() -> None:
    settings = _settings(f"http://127.0.0.1:{_closed_port()}/v1", http_process="on")
    with FeedbackClient(settings, helper=True, sleep=lambda s: None) as client:
        transport = _used(client, settings.base_url)
        assert isinstance(transport, HelperTransport)
        with pytest.raises(Unreachable, match="connection refused"):
            client.get_json("followers", {}, resource="followers")
        assert transport.exchanges == 3  # the first try and two more, each the helper's


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[HelperTransport | None]:
    """Every helper ``HelperTransport.start`` returns from here on (None: not started)."""
    helpers: list[HelperTransport | None] = []
    original = HelperTransport.start.__func__  # type: ignore[attr-defined]

    def recording(cls: type[HelperTransport], limits: httpx.Limits) -> HelperTransport | None:
        helpers.append(original(cls, limits))
        return helpers[-1]

    monkeypatch.setattr(HelperTransport, "start", classmethod(recording))
    return helpers


def test_behind_a_proxy_from_the_environment_the_requests_go_from_this_process(
    monkeypatch: pytest.MonkeyPatch, started: list[HelperTransport | None]
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    settings = _settings("https://api.test/v1", http_process="on")
    with FeedbackClient(settings, helper=True) as client:
        used = _used(client, settings.base_url)
        # httpx's own transport through the proxy (its pool is an HTTPProxy)
        assert isinstance(used, httpx.HTTPTransport)
        assert type(used._pool).__name__ == "HTTPProxy"
        assert client._helper is None
    assert started == []


def test_the_helper_ends_with_its_client(live_sandbox: RunningSandbox) -> None:
    settings = FeedbackSettings.validate(
        base_url=live_sandbox.base_url, api_key=live_sandbox.api_key, http_process="on"
    )
    client = FeedbackClient(settings, helper=True)
    transport = _used(client, settings.base_url)
    assert isinstance(transport, HelperTransport)
    assert client.get_json("topics", {}, resource="topics")["data"]
    client.close()
    assert _gone(transport.pid)


def test_a_helper_that_dies_hands_the_requests_back(
    live_sandbox: RunningSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    settings = FeedbackSettings.validate(
        base_url=live_sandbox.base_url, api_key=live_sandbox.api_key, http_process="on"
    )
    with FeedbackClient(settings, helper=True, sleep=lambda s: None) as client:
        transport = _used(client, settings.base_url)
        assert isinstance(transport, HelperTransport)
        before = client.get_json("topics", {}, resource="topics")
        os.kill(transport.pid, signal.SIGKILL)
        assert _gone(transport.pid)
        with caplog.at_level(logging.WARNING, logger="feedback_sync"):
            # the first finds the helper's socket dead (nothing was sent): it goes from here
            for _ in range(3):
                assert client.get_json("topics", {}, resource="topics") == before
        assert transport.exchanges == 1
    ended = [r.getMessage() for r in caplog.records if "HTTP helper process ended" in r.message]
    assert len(ended) == 1, ended
    assert "requests go from this process" in ended[0]


def test_a_helper_started_ahead_is_taken_by_the_client_or_let_go(
    live_sandbox: RunningSandbox,
) -> None:
    try:
        _taken_or_let_go(live_sandbox)
    finally:
        http_helper.let_go()


def _started_ahead(sandbox: RunningSandbox, http_process: str) -> tuple[int, FeedbackSettings]:
    """A helper started ahead (its pid), and settings for ``sandbox`` with ``http_process``."""
    http_helper.prestart("on")
    early = http_helper._early
    assert early is not None
    settings = FeedbackSettings.validate(
        base_url=sandbox.base_url, api_key=sandbox.api_key, http_process=http_process
    )
    return early[0].pid, settings


def _taken_or_let_go(live_sandbox: RunningSandbox) -> None:
    pid, on = _started_ahead(live_sandbox, "on")
    with FeedbackClient(on, helper=True) as client:
        transport = _used(client, on.base_url)
        assert isinstance(transport, HelperTransport)
        assert transport.pid == pid
        assert client.get_json("topics", {}, resource="topics")["data"]
    assert http_helper._early is None

    pid, off = _started_ahead(live_sandbox, "off")
    with FeedbackClient(off, helper=True) as client:
        assert not isinstance(_used(client, off.base_url), HelperTransport)
    assert http_helper._early is None
    assert _gone(pid)


def test_off_or_a_bad_value_starts_nothing_ahead() -> None:
    for setting in ("off", "Off ", "sometimes"):
        http_helper.prestart(setting)
        assert http_helper._early is None


def test_auto_uses_the_helper_only_with_two_cpus_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_helper, "usable_cpus", lambda: 1)
    assert not http_helper.wants_helper("auto")
    assert http_helper.wants_helper("on")
    monkeypatch.setattr(http_helper, "usable_cpus", lambda: 2)
    assert http_helper.wants_helper("auto")
    assert not http_helper.wants_helper("off")


@pytest.mark.parametrize(
    ("v2", "v1", "cpus"),
    [
        ("max 100000", None, None),
        ("150000 100000", None, 2),
        ("50000 100000", None, 1),
        (None, ("-1", "100000"), None),
        (None, ("100000", "100000"), 1),
        (None, None, None),
        ("garbled", None, None),
    ],
)
def test_a_container_s_cpu_quota_caps_the_cpus_counted(
    v2: str | None,
    v1: tuple[str, str] | None,
    cpus: int | None,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = {"v2": tmp_path / "cpu.max", "quota": tmp_path / "q", "period": tmp_path / "p"}
    if v2 is not None:
        files["v2"].write_text(v2 + "\n")
    if v1 is not None:
        files["quota"].write_text(v1[0] + "\n")
        files["period"].write_text(v1[1] + "\n")
    monkeypatch.setattr(http_helper, "CGROUP_V2", files["v2"])
    monkeypatch.setattr(http_helper, "CGROUP_V1", (files["quota"], files["period"]))
    assert http_helper.cgroup_cpus() == cpus
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert http_helper.usable_cpus() == (8 if cpus is None else cpus)
    assert http_helper.wants_helper("auto") == (cpus is None or cpus >= 2)


def test_the_setting_takes_auto_on_off_and_names_itself_otherwise() -> None:
    base = {"base_url": "https://x.test/v1", "api_key": "k"}
    assert FeedbackSettings.validate(**base).http_process == "auto"
    assert FeedbackSettings.validate(**base, http_process=" OFF ").http_process == "off"
    with pytest.raises(ConfigError, match=r"SOURCES__FEEDBACK__HTTP_PROCESS .*auto, on, off"):
        FeedbackSettings.validate(**base, http_process="yes")


def _silent_server() -> socket.socket:
    """A socket that accepts connections into its backlog and never answers."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    return silent


def _get_in_thread(client: httpx.Client, url: str) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(client.get(url))
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_helper_dying_mid_exchange_fails_that_exchange_as_a_dropped_connection(
    live_sandbox: RunningSandbox, caplog: pytest.LogCaptureFixture
) -> None:
    helper = HelperTransport.start(LIMITS)
    assert helper is not None
    with _silent_server() as silent, httpx.Client(transport=helper, timeout=30) as client:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1/x"
        thread, outcome = _get_in_thread(client, url)
        time.sleep(0.3)  # the exchange is with the helper, waiting for an answer
        with caplog.at_level(logging.WARNING, logger="feedback_sync"):
            os.kill(helper.pid, signal.SIGKILL)
            thread.join(10)
        assert not thread.is_alive()
        assert isinstance(outcome[0], httpx.RemoteProtocolError)
        # the next request goes from this process
        answer = client.get(live_sandbox.base_url + "/topics", headers=_key_headers(live_sandbox))
        assert answer.status_code == 200
    assert any("HTTP helper process ended" in r.getMessage() for r in caplog.records)


def test_closing_with_an_exchange_in_flight_ends_it_and_starts_nothing_else() -> None:
    helper = HelperTransport.start(LIMITS)
    assert helper is not None
    with _silent_server() as silent:
        client = httpx.Client(transport=helper, timeout=30)
        thread, outcome = _get_in_thread(client, f"http://127.0.0.1:{silent.getsockname()[1]}/")
        time.sleep(0.3)
        helper.close()
        thread.join(10)
        assert not thread.is_alive()
        assert isinstance(outcome[0], httpx.RemoteProtocolError | RuntimeError)
        assert helper._fallback is None  # no transport of this process was started after it
        assert _gone(helper.pid)
        with pytest.raises(RuntimeError, match="closed"):
            client.get(f"http://127.0.0.1:{silent.getsockname()[1]}/")


@pytest.mark.parametrize(
    ("boot", "why"),
    [("import sys; sys.exit(3)", ""), ("import time; time.sleep(60)", "not ready in time")],
)
def test_a_helper_that_cannot_start_leaves_the_requests_here(
    boot: str, why: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(http_helper, "_BOOT", boot)
    monkeypatch.setattr(http_helper, "READY_SECONDS", 1.0)
    monkeypatch.setattr(http_helper, "_EXIT_WAIT", 0.5)
    with caplog.at_level(logging.WARNING, logger="feedback_sync"):
        assert HelperTransport.start(LIMITS) is None
    assert any("did not start" in r.getMessage() and why in r.getMessage() for r in caplog.records)


class _BadGzip(http.server.BaseHTTPRequestHandler):
    body = _Gzipping.body

    def do_GET(self) -> None:
        if self.path.endswith("/good"):
            _Gzipping.do_GET(self)  # type: ignore[arg-type]
            return
        self.send_response(200)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"not gzip!")

    def log_message(self, *args: Any) -> None:
        pass


def test_a_body_that_does_not_decode_fails_as_in_process_and_the_helper_stays(
    helper: HelperTransport,
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BadGzip)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        with httpx.Client() as direct, pytest.raises(httpx.DecodingError):
            direct.get(base + "/bad")
        with httpx.Client(transport=helper) as client:
            with pytest.raises(httpx.DecodingError):
                client.get(base + "/bad")
            assert client.get(base + "/good").content == _Gzipping.body
    finally:
        server.shutdown()
        server.server_close()
    assert helper._fallback is None
    assert helper.exchanges == 2


def test_the_client_s_reads_take_the_helper_s_own_path_and_arrive_decoded() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gzipping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = _settings(f"http://127.0.0.1:{server.server_address[1]}/v1", http_process="on")
        with FeedbackClient(settings, helper=True) as client:
            transport = _used(client, settings.base_url)
            assert isinstance(transport, HelperTransport)
            assert client.get_json("x", {}, resource="x") == orjson.loads(_Gzipping.body)
            assert transport.exchanges == 1
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("fork", [False, True], ids=["alone", "with-a-forked-child"])
def test_the_helper_ends_when_the_sync_s_process_is_killed(fork: bool) -> None:
    # a child forked from the sync's process lets go of its copies of the sockets, so it
    # does not keep the helper alive after the sync's process is gone
    script = (
        "import httpx, os, sys, time\n"
        "from feedback_sync.api.http_helper import HelperTransport\n"
        "t = HelperTransport.start(httpx.Limits(max_connections=2))\n"
        f"child = os.fork() if {fork} else -1\n"
        "if child == 0:\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print(t.pid, child, flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        helper_pid, child_pid = map(int, parent.stdout.readline().split())
        try:
            assert _alive(helper_pid)
            parent.send_signal(signal.SIGKILL)
            parent.wait()
            assert _gone(helper_pid)
            if fork:
                assert _alive(child_pid)
        finally:
            if fork:
                os.kill(child_pid, signal.SIGKILL)


def test_a_sync_of_compressed_answers_lands_the_truth_through_the_helper(
    harness: Harness, started: list[HelperTransport | None]
) -> None:
    harness.control.post("/settings", json={"gzip": True}).raise_for_status()
    probe = httpx.get(
        harness.server.base_url + "/followers?limit=5",
        headers={**_key_headers(harness.server), "Accept-Encoding": "gzip"},
    )
    assert probe.headers["content-encoding"] == "gzip"  # the sandbox compresses
    harness.sync(full=True, http_process="on")
    harness.assert_equals_truth()
    assert len(started) == 1 and started[0] is not None
    assert started[0].exchanges >= 10 and started[0]._fallback is None


@pytest.mark.parametrize("http_process", ["on", "off"])
def test_a_sync_lands_the_truth_whichever_process_sends(
    harness: Harness, http_process: str, started: list[HelperTransport | None]
) -> None:
    harness.sync(full=True, http_process=http_process)
    harness.assert_equals_truth()
    assert len(started) == (1 if http_process == "on" else 0)
    if started:
        assert started[0] is not None and _gone(started[0].pid)
        assert started[0].exchanges >= 10  # every request of the run was the helper's
        assert started[0]._fallback is None
