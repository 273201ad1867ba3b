"""Two runs started against one warehouse at once: the second fails clearly, or waits.

Each overlap starts a real ``feedback-sync`` process (the first), waits until it holds the
warehouse's run lock, then starts the second. Every answer is slowed (the sandbox's
``latency_ms``) until the second has failed or said it waits, so the first is still running
however long the second takes to start; then answers are quick again. The second must
either fail at once (exit 1, one line naming the run that holds the warehouse, no
traceback) or, with ``--wait``, wait for the first and then succeed. Afterwards the failed
run is run again, and the warehouse must hold every key of the server's data once, a push
preview must plan nothing, and the server's log must show no write applied twice.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedback_sync.push.settings import PushSettings
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import serve_in_thread
from feedback_sync.warehouse.runlock import lock_paths
from feedback_sync.warehouse.target import make_target

from reliability.kills import CLI, LiveRun, cli_env
from reliability.matrix import keys_twice, push_aftermath
from tests.push.helpers import BOT, accounts, write_csv
from tests.sync.harness import Harness

KEY = "overlap-key-5b0a"
# every answer while the second run starts: a CLI start takes seconds on a busy machine,
# and the first run must still hold the warehouse when the second asks for it
HOLD_MS = 4000.0
# (first, second, the second waits for the first)
OVERLAPS = (
    ("sync", "sync", False),
    ("sync", "push", False),
    ("push", "sync", False),
    ("sync", "push", True),
)


@dataclass
class Overlap:
    first: str
    second: str
    waits: bool
    first_code: int | None = None
    second_code: int | None = None
    second_seconds: float = 0.0
    second_line: str = ""
    rerun_code: int | None = None
    lost: int = 0
    duplicates: int = 0
    writes_twice: int = 0
    writes_left: int = 0
    first_output: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        how = "with --wait" if self.waits else "at once"
        return f"{self.second} started {how} while a {self.first} runs"


def run_overlaps(
    workdir: Path, seed: int = 3, overlaps: tuple[tuple[str, str, bool], ...] = OVERLAPS
) -> list[Overlap]:
    """Each of ``overlaps`` in turn, against one tiny sandbox and one warehouse."""
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    with serve_in_thread(create_app("tiny", seed, api_key=KEY)) as server:
        harness = Harness(server, workdir)
        try:
            env = cli_env(server, workdir)
            pipelines_dir = ["--pipelines-dir", str(workdir / "pipelines")]
            commands = {
                "sync": [*CLI, "sync", *pipelines_dir],
                # followers only: idea notes follow the marts, which every sync here moves
                "push": [*CLI, "push", "--apply", "--targets", "followers"],
            }
            commands["push"] += ["--curated-dir", str(workdir / "curated"), *pipelines_dir]
            first = subprocess.run(
                [*commands["sync"], "--full"], env=env, capture_output=True, text=True
            )
            if first.returncode != 0:
                raise RuntimeError(f"the first full sync failed: {first.stderr}")
            target = make_target(
                duckdb_path=workdir / "warehouse.duckdb", pipelines_dir=workdir / "pipelines"
            )
            lock = lock_paths(target)[0]
            for number, (a, b, waits) in enumerate(overlaps, 1):
                overlap = Overlap(a, b, waits)
                harness.mutate(seed=seed * 100 + number, counts={"followers": {"create": 2}})
                dump = harness.dump()
                write_csv(
                    workdir / "curated" / "accounts.csv",
                    accounts(harness.dump(), n=3, bump=50.0 * number),
                )
                harness.mark_requests()

                def slow(on: bool) -> None:
                    harness.switches(latency_ms=HOLD_MS if on else 0.0)

                _overlap(overlap, commands, env, lock, slow)
                _check(harness, overlap, workdir, dump)
                results.append(overlap)
        finally:
            harness.close()
    return results


def _overlap(
    overlap: Overlap,
    commands: dict[str, list[str]],
    env: dict[str, str],
    lock: Path,
    slow: Callable[[bool], None],
) -> None:
    """The first run is kept going (every answer slowed, ``slow(True)``) until the second
    has failed, or has said it waits; then answers are quick again and both end."""
    slow(True)
    running = LiveRun(commands[overlap.first], env)
    if not _held(lock, timeout=60):
        slow(False)
        running.finish()
        overlap.problems.append(f"the first run ({overlap.first}) never held the lock")
        return
    second = LiveRun(
        [*commands[overlap.second], *(["--wait", "120"] if overlap.waits else [])], env
    )
    started = time.perf_counter()
    if overlap.waits:
        waiting = ": waiting up to 120s: another feedback-sync"
        said = second.wait_for_line(lambda line: waiting in line, timeout=120)
        slow(False)
        if not said:
            overlap.problems.append("the second run did not say it waits")
    else:
        second.finish()
        slow(False)
    second.finish()
    overlap.second_seconds = time.perf_counter() - started
    running.finish()
    overlap.first_output = "\n".join(running.seen)
    overlap.first_code, overlap.second_code = running.popen.returncode, second.popen.returncode
    output = "\n".join(second.seen)
    errors = [line for line in second.seen if line.startswith("feedback-sync ")]
    overlap.second_line = errors[-1] if errors else ""
    if overlap.first_code != 0:
        overlap.problems.append(f"the first run exited {overlap.first_code}")
    if overlap.waits:
        if second.popen.returncode != 0:
            overlap.problems.append(f"the waiting run exited {overlap.second_code}: {output}")
        return
    if overlap.second_code != 1 or "is in use by another feedback-sync" not in overlap.second_line:
        overlap.problems.append(f"the second run exited {overlap.second_code}: {output[-500:]}")
    if "Traceback" in output:
        overlap.problems.append("the second run printed a traceback")
    rerun = subprocess.run(commands[overlap.second], env=env, capture_output=True, text=True)
    overlap.rerun_code = rerun.returncode
    if rerun.returncode != 0:
        overlap.problems.append(f"the rerun exited {rerun.returncode}: {rerun.stderr[-500:]}")


def _held(lock: Path, timeout: float) -> bool:
    """Whether the lock file names a holder within ``timeout`` (the first run started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads(lock.read_text(encoding="utf-8") or "{}").get("pid"):
                return True
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return False


def _check(harness: Harness, overlap: Overlap, workdir: Path, before: dict[str, Any]) -> None:
    """Every key the server had when the overlap began is in the warehouse once (a sync
    ran to its end in every overlap); after a push, nothing left to send, no write twice."""
    for con in harness.connect():
        for table in ("followers", "comments", "announcements"):
            keys = {r["idx"] for r in before[table]}
            landed = {r[0] for r in con.execute(f"select idx from feedback.{table}").fetchall()}
            overlap.lost += len(keys - landed)
    overlap.duplicates = keys_twice(harness)
    if "push" in (overlap.first, overlap.second):
        settings = PushSettings(curated_dir=workdir / "curated", note_author_email=BOT)
        _, overlap.writes_twice, overlap.writes_left, doubled = push_aftermath(
            harness, harness.requests(), settings, ("followers",)
        )
        overlap.duplicates += doubled
    for name, count in (
        ("keys lost", overlap.lost),
        ("keys twice", overlap.duplicates),
        ("writes applied twice", overlap.writes_twice),
        ("writes left", overlap.writes_left),
    ):
        if count:
            overlap.problems.append(f"{count} {name}")
