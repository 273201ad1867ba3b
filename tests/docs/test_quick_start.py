"""The README's quick start, its lines run as written (the install aside, and another port
so that the test never meets a server of someone else's), ends with a table in DuckDB and
the dashboard, and its query line prints that table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.script import free_port, run_script

ROOT = Path(__file__).resolve().parents[2]


def _blocks(section: str) -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    body = readme.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", body, re.S)


@pytest.mark.slow
def test_the_quick_start_ends_with_a_mart_in_duckdb_and_the_dashboard(tmp_path: Path) -> None:
    start, query = _blocks("Quick start")
    lines = start.strip().splitlines()
    assert lines[0].startswith("pip install"), "the quick start begins with the install"
    port = str(free_port())
    # the server the script starts in the background stops when the script ends, however
    # it ends (its output pipes would otherwise keep the run open)
    script = "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"
    script += (
        "\n".join(lines[1:])
        .replace("feedback-sync sandbox ", f"feedback-sync sandbox --port {port} ")
        .replace(":8765/", f":{port}/")
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("SOURCES__FEEDBACK__BASE_URL", None)
    env.pop("SOURCES__FEEDBACK__API_KEY", None)
    code, out, err = run_script(script, tmp_path, env, 300)
    assert code == 0, out[-2000:] + err[-2000:]
    assert "finished in" in out

    warehouse = tmp_path / "data" / "warehouse.duckdb"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        flows = con.execute("select count(*) from marts.status_flow").fetchone()
        statuses = con.execute("select count(*) from feedback.statuses").fetchone()
    assert flows and statuses and flows[0] == statuses[0] > 0
    report = tmp_path / "data" / "report.html"
    assert report.is_file() and "<svg" in report.read_text(encoding="utf-8")

    shown = subprocess.run(
        ["bash", "-e", "-c", query.strip()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "status_name" in shown.stdout and "ideas_now" in shown.stdout


def test_the_quick_start_talks_to_the_server_it_starts() -> None:
    """Its key and its address are the server's: a typo there is a quick start that fails."""
    (start, _query) = _blocks("Quick start")
    key = re.search(r"sandbox --api-key (\S+)", start)
    assert key is not None
    assert f"SOURCES__FEEDBACK__API_KEY={key.group(1)}" in start
    assert "SOURCES__FEEDBACK__BASE_URL=http://127.0.0.1:8765/v1" in start
    server = start.splitlines()[1]
    assert "feedback-sync sandbox" in server and "&" in server, "the server runs in the background"
