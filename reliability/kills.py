"""SIGKILL campaign: a real ``feedback-sync`` process killed in every stage, then run again.

Each round aims at the stage with the fewest kills so far: ``extract``, ``normalize``,
``load``, ``reconcile`` (a ``--full`` run), ``history``, ``models`` (syncs), or ``push``
(``push --apply``). The process runs
with its output on a pipe; when the line that opens the aimed stage appears, the runner
waits a seeded random moment inside the stage and sends SIGKILL. The stage a kill hit is
the last stage line the process printed before it died (a kill can land later than aimed);
a process that finished first is not counted as a kill.

After every kill the same command runs again and must exit 0. Then, for a sync, no key of
the server's data may be missing from the warehouse and no key may be there twice, and every
current idea and company must have its current history version, no versions overlapping
(``matrix.history_problems``); for a
push, a preview must plan nothing (no write lost), no object may exist twice at the server,
and the server's log must show no write applied twice. Between rounds the server gets
seeded creates, and each push round a new value per account. At the end a ``--full`` sync
must equal the ground truth row by row.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from feedback_sync.push.settings import PushSettings
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread

from reliability.matrix import history_problems, keys_twice, push_aftermath
from tests.push.helpers import BOT, accounts, write_csv
from tests.sync.harness import COLUMNS, Harness, expected_rows

STAGES = ("extract", "normalize", "load", "reconcile", "history", "models", "push")
# what a sync prints when it finishes the deletes a killed run owed (feedback_sync/app/sync.py)
RESUMED = "sync: finishing what the previous run left after its load"
# the line each stage opens with (feedback_sync/app/sync.py, feedback_sync/push/run.py)
MARKERS = (
    ("sync: full run of", "extract"),
    ("sync: incremental run of", "extract"),
    ("sync: normalizing ...", "normalize"),
    ("sync: loading ...", "load"),
    ("sync: removing rows", "reconcile"),
    ("sync: recording history", "history"),
    ("sync: building the SQL models", "models"),
    ("push: sending", "push"),
)
KEY = "kill-campaign-key-7d1e"
CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


@dataclass
class Round:
    number: int
    aimed: str
    stage: str | None = None  # what the kill hit; None: the run finished first
    rerun_ok: bool = True
    lost: int = 0
    duplicates: int = 0
    writes_twice: int = 0
    writes_lost: int = 0
    message: str = ""
    # the rerun finished deletes the killed run owed after its load (the sync's journal)
    resumed: bool = False

    @property
    def ok(self) -> bool:
        figures = (self.lost, self.duplicates, self.writes_twice, self.writes_lost)
        return self.rerun_ok and not any(figures)


@dataclass
class Campaign:
    rounds: list[Round] = field(default_factory=list)
    final_equal: bool = False
    final_problems: str = ""
    rows_compared: int = 0
    seconds: float = 0.0

    @property
    def kills(self) -> list[Round]:
        return [r for r in self.rounds if r.stage is not None]

    def distribution(self) -> Counter[str]:
        return Counter(r.stage for r in self.kills if r.stage is not None)

    @property
    def ok(self) -> bool:
        return self.final_equal and all(r.ok for r in self.rounds)


def _jitter(stage: str, scale: str) -> float:
    """How far into a stage a kill may land (seconds): the stage's rough length."""
    if scale == "tiny":
        return {"extract": 0.3}.get(stage, 0.0)
    return {"extract": 3.0, "normalize": 0.4, "load": 0.6, "models": 0.8}.get(stage, 0.3)


class LiveRun:
    """A CLI run whose output lines are read as they come."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, stage: str, timeout: float) -> bool:
        """Reads lines until the aimed stage opens; False if the run ended or timed out."""
        return self.wait_for_line(lambda line: _stage_of(line) == stage, timeout)

    def wait_for_line(self, match: Callable[[str], bool], timeout: float) -> bool:
        """Reads lines until one ``match``es; False if the run ended or timed out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                self.lines.put(None)  # the end stays for finish()
                return False
            self.seen.append(line)
            if match(line):
                return True
        return False

    def finish(self) -> str | None:
        """Waits for the end; the last stage the run printed."""
        self.popen.wait(timeout=120)
        self._reader.join(timeout=10)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        stages = [s for s in map(_stage_of, self.seen) if s is not None]
        return stages[-1] if stages else None


def _stage_of(line: str) -> str | None:
    for prefix, stage in MARKERS:
        if line.startswith(prefix):
            return stage
    return None


def run_campaign(
    kills: int,
    *,
    seed: int,
    scale: str,
    workdir: Path,
    progress: Callable[[str], None] = lambda line: None,
    postgres_dsn: str | None = None,
    delta: bool = False,
    stages: tuple[str, ...] = STAGES,
) -> Campaign:
    """Kills ``kills`` runs (at most ``3 * kills`` rounds) aimed at ``stages``, checking
    after each.

    With ``postgres_dsn`` the syncs load into that PostgreSQL database instead of a DuckDB
    file; with ``delta`` into Delta tables under ``workdir/delta`` (the push campaign
    writes curated files for a DuckDB warehouse: leave ``push`` out of ``stages`` then).
    """
    started = time.perf_counter()
    rng = random.Random(seed)
    campaign = Campaign()
    app = create_app(scale, seed, api_key=KEY)
    workdir.mkdir(parents=True, exist_ok=True)
    with serve_in_thread(app) as server:
        harness = Harness(server, workdir)
        try:
            env = cli_env(server, workdir)
            sync = [*CLI, "sync", "--pipelines-dir", str(workdir / "pipelines")]
            if postgres_dsn is not None:
                harness.destination, harness.postgres_dsn = "postgres", postgres_dsn
                env["DESTINATION__POSTGRES__CREDENTIALS"] = postgres_dsn
                sync += ["--destination", "postgres"]
            elif delta:
                harness.destination = "delta"
                sync += ["--destination", "delta", "--delta-dir", str(workdir / "delta")]
            push = [*CLI, "push", "--apply", "--force", "--curated-dir", str(workdir / "curated")]
            done = subprocess.run(
                [*sync, "--full"], env=env, capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                raise RuntimeError(f"the first full sync failed: {done.stdout}{done.stderr}")
            number = 0
            while len(campaign.kills) < kills and number < 3 * kills:
                number += 1
                # the stage with the fewest kills so far: a miss is aimed at again
                spread = campaign.distribution()
                aimed = min(stages, key=lambda stage: (spread[stage], stages.index(stage)))
                round_ = Round(number, aimed)
                if aimed == "push":
                    bump = 10.0 * number
                    write_csv(
                        workdir / "curated" / "accounts.csv",
                        accounts(harness.dump(), n=6, bump=bump),
                    )
                    command = push
                else:
                    harness.mutate(
                        seed=seed * 1000 + number,
                        # and moves: the history has versions to record
                        counts={
                            "followers": {"create": 3, "update": 2},
                            "comments": {"create": 4},
                            "ideas": {"update": 2},
                        },
                    )
                    full = aimed == "reconcile" or number % 4 == 0
                    command = [*sync, "--full"] if full else sync
                harness.mark_requests()
                process = LiveRun(command, env)
                if process.wait_for(aimed, timeout=300):
                    time.sleep(rng.uniform(0, _jitter(aimed, scale)))
                    if process.popen.poll() is None:
                        process.popen.send_signal(signal.SIGKILL)
                        round_.stage = process.finish()
                    else:
                        process.finish()
                else:
                    process.finish()
                time.sleep(0.3)  # the server finishes requests it already had
                rerun = subprocess.run(command, env=env, capture_output=True, text=True)
                round_.resumed = RESUMED in rerun.stderr  # progress lines go to stderr
                if rerun.returncode != 0:
                    round_.rerun_ok = False
                    round_.message = (rerun.stderr or rerun.stdout).strip().splitlines()[-1:]
                    round_.message = " ".join(round_.message)
                if aimed == "push":
                    _check_push(harness, round_, workdir)
                else:
                    _check_keys(harness, round_)
                campaign.rounds.append(round_)
                progress(_line(round_, len(campaign.kills), kills))
            final = subprocess.run([*sync, "--full"], env=env, capture_output=True, text=True)
            truth = expected_rows(harness.dump())
            problems = [] if final.returncode == 0 else [final.stderr.strip()]
            for table in COLUMNS:
                landed = harness.table_rows(table)
                campaign.rows_compared += sum(truth[table].values())
                if landed != truth[table]:
                    missing = sum((truth[table] - landed).values())
                    extra = sum((landed - truth[table]).values())
                    problems.append(f"{table}: {missing} missing, {extra} unexpected")
            gaps, twice = history_problems(harness)
            if gaps or twice:
                problems.append(f"history: {gaps} rows without their version, {twice} twice")
            campaign.final_equal = not problems
            campaign.final_problems = "; ".join(problems)
        finally:
            harness.close()
    campaign.seconds = time.perf_counter() - started
    return campaign


def cli_env(server: RunningSandbox, workdir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SOURCES__", "DESTINATION__", "PUSH__"))
    }
    env.update(
        SOURCES__FEEDBACK__BASE_URL=server.base_url,
        SOURCES__FEEDBACK__API_KEY=server.api_key,
        SOURCES__FEEDBACK__PAGE_SIZE="50",
        DESTINATION__DUCKDB__CREDENTIALS=str(workdir / "warehouse.duckdb"),
        PUSH__NOTE_AUTHOR_EMAIL=BOT,
        RUNTIME__DLTHUB_TELEMETRY="false",
    )
    return env


def _check_keys(harness: Harness, round_: Round) -> None:
    """No key of the server's data missing from the warehouse, none there twice."""
    dump = harness.dump()
    truth = {
        "followers": {r["idx"] for r in dump["followers"]},
        "comments": {r["idx"] for r in dump["comments"]},
        "announcements": {r["idx"] for r in dump["announcements"]},
    }
    for con in harness.connect():
        for table, keys in truth.items():
            landed = {r[0] for r in con.execute(f"select idx from feedback.{table}").fetchall()}
            round_.lost += len(keys - landed)
    round_.duplicates += keys_twice(harness)
    gaps, twice = history_problems(harness)
    round_.lost += gaps
    round_.duplicates += twice


def _check_push(harness: Harness, round_: Round, workdir: Path) -> None:
    """Nothing left to send, nothing twice at the server, no write applied twice."""
    settings = PushSettings(curated_dir=workdir / "curated", note_author_email=BOT)
    _, round_.writes_twice, round_.writes_lost, doubled = push_aftermath(
        harness, harness.requests(), settings
    )
    round_.duplicates += doubled


def _line(round_: Round, kills: int, wanted: int) -> str:
    hit = f"killed in {round_.stage}" if round_.stage else "finished before the kill"
    verdict = "ok" if round_.ok else "WRONG"
    return (
        f"[{kills}/{wanted}] round {round_.number}, aimed at {round_.aimed}: {hit}; rerun "
        f"{'exit 0' if round_.rerun_ok else 'FAILED'}; lost {round_.lost}, duplicates "
        f"{round_.duplicates}, writes twice {round_.writes_twice}, writes left "
        f"{round_.writes_lost}: {verdict}" + (f" ({round_.message})" if round_.message else "")
    )
