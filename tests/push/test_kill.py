"""SIGKILL a real ``feedback-sync push --apply`` while writes are in flight (the server has
the request, the process never journals the answer), at several moments; then a normal
run. No object may exist twice at the server, and every row must have landed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from feedback_sync.push.kinds.base import marked_key

from tests.push.helpers import BOT, accounts, kill_during_writes, push, write_csv, writes
from tests.sync.harness import Harness

CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


@pytest.mark.slow
def test_killed_between_send_and_journal_then_rerun(harness: Harness, tmp_path: Path) -> None:
    harness.sync(full=True)
    dump = harness.dump()
    curated = tmp_path / "curated"
    write_csv(curated / "accounts.csv", accounts(dump, n=4))
    author, ideas = dump["users"][0]["idx"], [i["idx"] for i in dump["ideas"]]
    write_csv(
        curated / "releases.csv",
        [
            {
                "release_key": f"r{n}",
                "name": f"Release {n}",
                "content": f"Notes {n}",
                "author_idx": author,
                "idea_idxs": ideas[n],
            }
            for n in range(3)
        ],
    )
    write_csv(curated / "topics.csv", [{"topic_key": "ai", "name": "AI assistants"}])
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "PUSH__"))
    }
    env.update(
        SOURCES__FEEDBACK__BASE_URL=harness.server.base_url,
        SOURCES__FEEDBACK__API_KEY=harness.server.api_key,
        SOURCES__FEEDBACK__MAX_CONCURRENCY="3",
        DESTINATION__DUCKDB__CREDENTIALS=str(harness.target().duckdb_file()),
        PUSH__NOTE_AUTHOR_EMAIL=BOT,
    )
    command = [*CLI, "push", "--apply", "--force", "--curated-dir", str(curated)]
    harness.switches(latency_ms=250)
    # the n-th write of each run (fewer are left each time)
    kills = kill_during_writes(harness, command, env, (1, 2, 2, 3, 4))
    assert kills >= 4, "the runs ended before they could be killed"
    harness.switches(latency_ms=0)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for con in harness.connect():
        states = dict(
            con.execute("select state, count(*) from push._push_rows group by state").fetchall()
        )
        # writes the server made while their process died: found, not sent again
        assert states.get("recovered", 0) >= 1, states

    after = harness.dump()
    emails = Counter(f["email"].lower() for f in after["followers"])
    assert max(emails.values()) == 1
    notes = Counter(marked_key(c["message"], "idea_notes") for c in after["comments"])
    notes.pop(None, None)
    assert notes and max(notes.values()) == 1, notes
    releases = Counter(marked_key(a["content"], "announcements") for a in after["announcements"])
    releases.pop(None, None)
    assert releases == Counter({"r0": 1, "r1": 1, "r2": 1})
    assert [t["name"] for t in after["topics"]].count("AI assistants") == 1
    # every row landed: nothing is left to send
    final = push(harness, curated, apply=True, force=True)
    assert writes(harness) == [], final.report()
    assert final.exit_code() == 0
