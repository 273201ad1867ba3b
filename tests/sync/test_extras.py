"""A command that needs an extra that is not installed says which, in one line, exit 2.
Each case runs in its own process with the extra's modules made unimportable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import said_lines

PROBE = """
import json, sys
for name in {hidden!r}:
    sys.modules[name] = None  # as if not installed: importing it fails
from feedback_sync.app.cli import main
code = main({argv!r})
print(json.dumps(code))
"""


def _run(tmp_path: Path, hidden: list[str], argv: list[str]) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    env["SOURCES__FEEDBACK__BASE_URL"] = "http://127.0.0.1:9/v1"  # never reached
    env["SOURCES__FEEDBACK__API_KEY"] = "not-used"
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(hidden=hidden, argv=argv)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), said_lines(done.stderr)


@pytest.mark.parametrize(
    ("hidden", "argv", "extra"),
    [
        (["psycopg2"], ["sync", "--destination", "postgres", "--pipelines-dir", "p"], "postgres"),
        (["psycopg2"], ["status", "--destination", "postgres", "--pipelines-dir", "p"], "postgres"),
        (["deltalake"], ["sync", "--destination", "delta", "--pipelines-dir", "p"], "delta"),
        (["starlette"], ["sandbox", "--port", "0"], "sandbox"),
        (["uvicorn"], ["demo"], "sandbox"),
    ],
)
def test_a_missing_extra_is_named_in_one_line(
    tmp_path: Path, hidden: list[str], argv: list[str], extra: str
) -> None:
    code, err = _run(tmp_path, hidden, argv)
    assert code == 2
    assert len(err) == 1, err
    assert f"pip install 'feedback-sync[{extra}]'" in err[0]
    assert f"extra [{extra}] is not installed ({hidden[0]} is missing)" in err[0]


def test_the_flows_name_their_extra(tmp_path: Path) -> None:
    code = "import sys; sys.modules['prefect'] = None\nimport feedback_sync.flows"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert "MissingExtra: feedback-sync's extra [prefect] is not installed" in done.stderr
    assert "and feedback_sync.flows (the Prefect flows) needs it" in done.stderr
