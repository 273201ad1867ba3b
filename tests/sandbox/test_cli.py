"""``feedback-sync sandbox`` as a user runs it: a real process on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


def feedback_sync(*args: str) -> list[str]:
    return [sys.executable, "-m", "feedback_sync.app.cli", *args]


def test_sandbox_command_serves_and_prints_url_and_key(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    process = subprocess.Popen(
        feedback_sync(
            "sandbox",
            "--port",
            "0",
            "--scale",
            "tiny",
            "--seed",
            "3",
            "--api-key",
            "cli-key",
            "--no-ideas-endpoint",
            "--ready-file",
            str(ready),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "sandbox did not start"
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        assert info["api_key"] == "cli-key"
        base = info["base_url"]
        assert base.startswith("http://127.0.0.1:") and base.endswith("/v1")
        response = httpx.get(f"{base}/statuses", params={"api_key": "cli-key"})
        assert response.status_code == 200 and response.json()["pagination"]["total"] == 5
        assert httpx.get(f"{base}/ideas", params={"api_key": "cli-key"}).status_code == 404
        assert httpx.get(f"{base}/statuses").status_code == 401
        assert httpx.get(base.removesuffix("/v1") + "/openapi.json").json()["openapi"]
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    assert f"base URL: {base}" in out
    assert "API key:  cli-key" in out
    # Ctrl-C is how the server stops: a clean exit, not an interrupted run
    assert process.returncode == 0, err
    assert err.rstrip().endswith("feedback-sync sandbox: stopped")
    assert "interrupted" not in err


def test_sandbox_command_refuses_bad_input() -> None:
    result = subprocess.run(
        feedback_sync("sandbox", "--host", "192.0.2.10"), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "loopback" in result.stderr
    result = subprocess.run(
        feedback_sync("sandbox", "--scale", "tiny", "--fault-kinds", "meteor"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "meteor" in result.stderr
    result = subprocess.run(
        feedback_sync("sandbox", "--scale", "galactic"), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "galactic" in result.stderr
