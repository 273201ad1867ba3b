"""The command line answers ``--help`` and bad arguments without importing the heavy
libraries (dlt, DuckDB, Arrow, httpx, Prefect...): each command imports what it needs when
it runs. Asserted on the modules a fresh interpreter holds afterwards, not on time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = (
    "dlt",
    "duckdb",
    "pyarrow",
    "httpx",
    "pendulum",
    "prefect",
    "deltalake",
    "psycopg2",
    "sqlglot",
    "starlette",
    "pipelines.feedback.source",
    "pipelines.sync",
)
PROBE = """
import json, sys
from pipelines.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
heavy = sorted(m for m in sys.modules if m in {heavy!r} or m.split('.')[0] in {roots!r})
print(json.dumps({{"code": code, "heavy": heavy}}))
"""


def _probe(argv: list[str]) -> dict[str, object]:
    roots = [m for m in HEAVY if "." not in m]
    code = PROBE.format(heavy=list(HEAVY), roots=roots)
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["sync", "--help"], 0),
        (["push", "--help"], 0),
        (["sandbox", "--help"], 0),
        (["sync", "--no-such-flag"], 2),
        (["sync", "--dataset", "not a name"], 2),
        (["sync", "--wait", "-1"], 2),
        (["no-such-command"], 2),
    ],
)
def test_help_and_bad_arguments_import_nothing_heavy(argv: list[str], code: int) -> None:
    result = _probe(argv)
    assert result["code"] == code, result
    heavy = sorted({str(m).split(".")[0] for m in result["heavy"]})
    assert heavy == [], f"{argv} imported {heavy}"


def test_the_probe_sees_a_command_that_does_import_dlt() -> None:
    """The probe can fail: a sync with valid arguments imports dlt (and then refuses the
    unknown resource)."""
    result = _probe(["sync", "--resources", "no_such_resource"])
    assert "dlt" in result["heavy"], result


def test_the_source_keeps_its_section(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moved out of the package's ``__init__``, the source still has section ``feedback``:
    its settings (``sources.feedback``) and the state earlier runs saved under
    ``sources/feedback`` stay where they were."""
    monkeypatch.setenv("SOURCES__FEEDBACK__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", "not-used")
    from pipelines.feedback import feedback

    source = feedback(full=True)
    assert (source.section, source.name) == ("feedback", "feedback")
