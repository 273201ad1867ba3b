"""The cron recipe of docs/how-to/cron.md, its exact lines run in order against the sandbox: the
incremental sync, the nightly full sync, the push preview; then the applying line the
user opts in to, uncommented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import httpx
import pytest
from feedback_sync.sandbox.server import RunningSandbox

from tests.push.helpers import write_csv

RECIPE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "cron.md"
MARKER = "<!-- the cron recipe: tests/sync/test_cron_recipe.py runs these lines"
FOLDER = "/home/me/feedback"
ENTRY = re.compile(r"^#?\s*(\S+ \S+ \S+ \S+ \S+)\s+(cd .*)$")


def recipe() -> tuple[dict[str, str], list[str], list[str]]:
    """The crontab's variables, its active commands, and its commented-out commands."""
    text = RECIPE.read_text()
    block = text[text.index(MARKER) :].split("```crontab\n", 1)[1].split("```", 1)[0]
    variables: dict[str, str] = {}
    active: list[str] = []
    commented: list[str] = []
    for line in block.splitlines():
        entry = ENTRY.match(line)
        if entry:
            (commented if line.startswith("#") else active).append(entry.group(2))
        elif "=" in line and not line.startswith("#"):
            name, value = line.split("=", 1)
            variables[name] = value
    return variables, active, commented


def test_the_recipe_reads_as_documented() -> None:
    variables, active, commented = recipe()
    assert set(variables) == {"SHELL", "PATH"}
    assert [c.split("&&")[1].split(">>")[0].strip() for c in active] == [
        "feedback-sync sync --wait 3000",
        "feedback-sync sync --full --wait 3000",
        "feedback-sync push --wait 1200",
    ]
    assert all(c.startswith(f"cd {FOLDER} && ") and "--wait" in c for c in active + commented)
    assert all("--apply" not in c for c in active)  # nothing writes to the API unasked
    assert [c for c in commented if "--apply" in c] == [
        active[2].replace("push --wait", "push --apply --wait")
    ]


@pytest.mark.slow
def test_the_recipe_runs_in_order_against_the_sandbox(
    live_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    variables, active, commented = recipe()
    folder = tmp_path / "feedback"
    (folder / "logs").mkdir(parents=True)
    subprocess.run(  # the project as the quick start makes it
        [str(Path(sys.executable).with_name("feedback-sync")), "init"], cwd=folder, check=True
    )
    secrets = folder / ".dlt" / "secrets.toml"
    secrets.write_text(
        secrets.read_text().replace('api_key = ""', f'api_key = "{live_sandbox.api_key}"')
    )
    config = folder / ".dlt" / "config.toml"
    text = config.read_text()
    text = re.sub(r'(?m)^# base_url = "[^"]*"', f'base_url = "{live_sandbox.base_url}"', text)
    config.write_text(text)
    dump = httpx.get(live_sandbox.root_url + "/_sandbox/dump", timeout=60).json()
    write_csv(
        folder / "data" / "curated" / "accounts.csv",
        [{"email": "cron@example.net", "name": "Cron Person"}],
    )
    # cron's environment: the crontab's variables, HOME and LOGNAME, nothing else; PATH
    # finds this checkout's feedback-sync where the recipe has ~/.local/bin
    env = {
        "HOME": str(tmp_path),
        "LOGNAME": os.environ.get("LOGNAME", "root"),
        "SHELL": variables["SHELL"],
        "PATH": variables["PATH"].replace("/home/me/.local/bin", str(Path(sys.executable).parent)),
        # not cron's: root's dlt working folder is /var/dlt, shared by the tests running at once
        "DLT_DATA_DIR": str(tmp_path / "dlt"),
    }

    def run(command: str) -> None:
        line = command.replace(FOLDER, str(folder))
        done = subprocess.run(
            [variables["SHELL"], "-c", line], env=env, capture_output=True, text=True, timeout=300
        )
        logs = "".join(p.read_text() for p in sorted((folder / "logs").glob("*.log")))
        assert done.returncode == 0, line + "\n" + done.stdout + done.stderr + logs[-3000:]
        assert done.stdout == done.stderr == ""  # all of it in the log, none in cron's mail

    for command in active:
        run(command)
    sync_log = (folder / "logs" / "sync.log").read_text()
    assert sync_log.count("sync into DuckDB data/warehouse.duckdb (dataset feedback) finished") == 2
    assert "full sync into" in sync_log and "models: built" in sync_log
    with duckdb.connect(str(folder / "data" / "warehouse.duckdb"), read_only=True) as con:
        ((followers,),) = con.execute("select count(*) from feedback.followers").fetchall()
    assert followers == len(dump["followers"])
    push_log = (folder / "logs" / "push.log").read_text()
    assert "push preview (dry run, nothing sent)" in push_log
    emails = {
        f["email"] for f in httpx.get(live_sandbox.root_url + "/_sandbox/dump").json()["followers"]
    }
    assert "cron@example.net" not in emails  # the preview sent nothing

    (opted,) = [c for c in commented if "--apply" in c]
    run(opted)
    assert "push applied in" in (folder / "logs" / "push.log").read_text()
    after = httpx.get(live_sandbox.root_url + "/_sandbox/dump", timeout=60).json()
    assert "cron@example.net" in {f["email"] for f in after["followers"]}
