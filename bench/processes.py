"""What every benchmark needs: a sandbox in its own process, and a measured child process.

A measured run is one child process, so its wall time, CPU time (user + system) and peak
RSS come from the kernel (``os.wait4``) for that process alone, dlt's and DuckDB's threads
included. Requests are counted by the sandbox's request log, not by the client. Its
stderr passes through a pipe, so the time of its first line is known too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


# the command as users run it: the console script (its quick exit included), not
# ``python -m feedback_sync.app.cli``
FEEDBACK_SYNC = [str(Path(sys.executable).with_name("feedback-sync"))]
# how every benchmark runs a sync: its own dlt folder, and without the SQL models (their
# build is measured on its own); the arguments, and the command with them
SYNC_ARGS = ["sync", "--pipelines-dir", "pipelines", "--no-models"]
SYNC_ARGV = [*FEEDBACK_SYNC, *SYNC_ARGS]


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child: no telemetry, the project importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    env.update(
        RUNTIME__DLTHUB_TELEMETRY="false",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class Sandbox:
    """``feedback-sync sandbox`` at a scale, as its own process on loopback."""

    def __init__(
        self, scale: str, workdir: Path, api_key: str = "bench-key", seed: int = 1
    ) -> None:
        self.scale = scale
        self.seed = seed
        # one ready file per scale and seed: several sandboxes may start in one folder
        ready = workdir / f"sandbox-{scale}-{seed}.json"
        ready.unlink(missing_ok=True)
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [
                *FEEDBACK_SYNC,
                "sandbox",
                "--port",
                "0",
                "--scale",
                scale,
                "--api-key",
                api_key,
                "--seed",
                str(seed),
                "--ready-file",
                str(ready),
            ],
            cwd=ROOT,
            env=child_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        while not ready.exists():
            if self.process.poll() is not None:
                err = self.process.stderr.read() if self.process.stderr else ""
                raise RuntimeError(f"the {scale} sandbox exited: {err}")
            time.sleep(0.002)
        info = json.loads(ready.read_text())
        self.seed_seconds = time.perf_counter() - started
        self.base_url: str = info["base_url"]
        self.api_key: str = info["api_key"]
        self.root = self.base_url.removesuffix("/v1")
        self._http = httpx.Client(base_url=f"{self.root}/_sandbox", timeout=600)

    def control(self, method: str, path: str, body: Any = None) -> Any:
        response = self._http.request(method, path, json=body)
        response.raise_for_status()
        return response.json()

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = self.control("GET", "/health")["counts"]
        return counts

    def sync_env(self) -> dict[str, str]:
        """The environment that points a sync at this sandbox."""
        return {
            "SOURCES__FEEDBACK__BASE_URL": self.base_url,
            "SOURCES__FEEDBACK__API_KEY": self.api_key,
        }

    def set_latency(self, ms: float) -> None:
        self.control("POST", "/settings", {"latency_ms": ms})

    def mark(self) -> int:
        """The request log's position; ``requests_since`` counts from here."""
        seq: int = self.control("GET", "/requests?since=999999999999")["last_seq"]
        return seq

    def requests_since(self, seq: int) -> list[dict[str, Any]]:
        """The API requests (``/v1``) served since ``seq``, the control routes left out."""
        entries: list[dict[str, Any]] = self.control("GET", f"/requests?since={seq}")["requests"]
        return [e for e in entries if e["path"].startswith("/v1/")]

    def reset(self) -> None:
        self.control("POST", "/reset", {})

    def mutate(self, fraction: float, seed: int = 1) -> Any:
        return self.control("POST", "/mutate", {"seed": seed, "fraction": fraction})

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the sandbox process has used so far; None where the
        kernel does not say (``/proc`` is Linux's). The sandbox shares the machine's cores
        with the client it serves: its CPU during a run shows how much was left."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        # utime and stime: the 14th and 15th fields, the 12th and 13th after the name
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self._http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Run:
    """One measured run: a process, or (``repeats``) the median of several."""

    scale: str
    latency_ms: float
    name: str
    wall_s: float
    cpu_s: float | None
    peak_rss_mb: float | None
    rows: int | None
    requests: int
    # the sync's own account of its steps ("fetch 73.3s, load 28.9s"), if it is a sync
    steps: str | None = None
    # every wall time, where the run is the median of several
    repeats: list[float] | None = None
    # CPU the sandbox (the server, on the same machine) used during the run
    server_cpu_s: float | None = None
    # the work done, for the compared runs: requests per endpoint (``endpoints``) and rows
    # landed per table
    endpoints: dict[str, int] | None = None
    tables: dict[str, int] | None = None
    # the fixed cost a person sees, for the syncs: seconds from the process's start to its
    # first line (on stderr), and its wall time less the "finished in" its summary said
    first_line_s: float | None = None
    untold_s: float | None = None

    @property
    def rows_per_s(self) -> float | None:
        return self.rows / self.wall_s if self.rows is not None and self.wall_s > 0 else None


def endpoints(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Requests per endpoint from the sandbox's log: ``GET /comments by idea_idx`` and the
    like (the filter that splits a list into many, not its value)."""
    counts: dict[str, int] = {}
    for entry in entries:
        path = entry["path"].removeprefix("/v1")
        names = {part.split("=", 1)[0] for part in (entry.get("query") or "").split("&")}
        by = [name for name in ("idea_idx", "type") if name in names]
        key = f"{entry.get('method', 'GET')} {path}" + (f" by {by[0]}" if by else "")
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    stdout: str
    # seconds from the start to the end of the first line on stderr (None: it wrote none)
    first_line_s: float | None = None
    stderr: str = ""


def _copy(pipe: IO[bytes], into: IO[bytes], first_line: list[float]) -> None:
    """``pipe`` into ``into`` to its end, noting in ``first_line`` when (``perf_counter``)
    its first line ended."""
    while chunk := pipe.read(65536):
        if not first_line and b"\n" in chunk:
            first_line.append(time.perf_counter())
        into.write(chunk)


# Runs a measured command and reports the command's own figures. A child's peak RSS as the
# kernel keeps it (``ru_maxrss``) is at least its parent's RSS when it was started (the
# child begins in the parent's memory until it execs), so a command started by this
# process, which holds every run's figures and the sandbox's request logs, reported the
# bench's own size whenever it was the larger (every normal sync at ``large`` read 245 MB,
# history on or off). The launcher is a bare interpreter of about 10 MB: the command's peak
# is its own. It writes the command's start and end (CLOCK_MONOTONIC, the clock of
# ``time.perf_counter`` in every process) and its rusage to the file named first.
_LAUNCH = """
import json, os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
spawned = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
ended = time.perf_counter()
with open(report, "w") as f:
    json.dump({"spawned": spawned, "ended": ended, "status": status,
               "cpu_s": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss}, f)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    expect: int = 0,
    started: Callable[[int], None] | None = None,
) -> Measured:
    """Runs ``argv`` to its end; raises with its output if it exits other than ``expect``.

    Started from a small launcher (``_LAUNCH``, isolated from ``PYTHONPATH`` and site), so
    that its peak RSS is its own; its wall time, first line and CPU count from the
    launcher's start of it, not the launcher's. The command gets ``env`` whole.
    ``started`` is called with the launcher's process id once it runs (the command is its
    one child: ``TreeMemory.watch`` samples it and its descendants)."""
    out = cwd / ".bench-stdout"
    err = cwd / ".bench-stderr"
    report = cwd / ".bench-usage.json"
    report.unlink(missing_ok=True)
    first_line: list[float] = []
    with out.open("w") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCH, str(report), *argv],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        if started is not None:
            started(process.pid)
        assert process.stderr is not None
        reader = threading.Thread(
            target=_copy, args=(process.stderr, stderr, first_line), daemon=True
        )
        reader.start()
        process.wait()
        reader.join(timeout=30)
        if reader.is_alive():  # a child of the child holds the pipe: the rest is not read
            raise RuntimeError(f"{' '.join(argv[:4])} ... left its stderr open after exiting")
        process.stderr.close()
    if not report.exists():
        raise RuntimeError(
            f"{' '.join(argv[:4])} ... could not be started (exit {process.returncode}):\n"
            f"{err.read_text()[-3000:]}"
        )
    usage = json.loads(report.read_text())
    report.unlink()
    code = os.waitstatus_to_exitcode(usage["status"])
    if code != expect:
        raise RuntimeError(
            f"{' '.join(argv[:4])} ... exited {code}:\n"
            f"{err.read_text()[-3000:]}{out.read_text()[-2000:]}"
        )
    spawned = usage["spawned"]
    wall = usage["ended"] - spawned
    return Measured(
        wall_s=wall,
        cpu_s=usage["cpu_s"],
        peak_rss_mb=usage["maxrss_kb"] / 1024,
        stdout=out.read_text(),
        # when this process read the line, an upper bound of when it was written: a reader
        # scheduled late (a busy machine, a command of a few ms) reads it after the command
        # ended, and it was written before that (seen in CI: 18.6 ms for a 15.6 ms command)
        first_line_s=min(first_line[0] - spawned, wall) if first_line else None,
        stderr=err.read_text(errors="replace"),
    )


class TreeMemory:
    """The peak memory of a process tree: a command and every process it starts, sampled
    from ``/proc`` in a thread every ``interval`` seconds (Linux only: None elsewhere).

    The kernel's peak (``ru_maxrss``, also as ``wait4`` reports it for a command and its
    reaped children) is the largest one process reached: for a command whose children
    overlap, not what they held together. Each sample adds up every process's private
    resident memory (resident less file-backed and shared pages, ``/proc/PID/statm``) and
    counts the largest file-backed part once: the interpreter and the libraries every
    process of the tree maps from the same files (Python, pyarrow, DuckDB), which ``ps``
    would count in each. Reading ``smaps_rollup`` (the kernel's proportional share) would be
    exact but costs about 20 ms per large process, too much to do 20 times a second on the
    cores the measured command uses; ``statm`` costs microseconds. The root itself (the
    launcher of ``measure``) is left out; a process that lives less than ``interval`` may
    be missed.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_mb: float | None = None
        # the most processes the tree had at once (the command and its descendants)
        self.most_processes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, root: int) -> None:
        """Starts sampling the descendants of ``root`` (``measure``'s ``started``)."""
        if not Path("/proc/self/statm").exists():
            return
        self._thread = threading.Thread(target=self._sample, args=(root,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _sample(self, root: int) -> None:
        page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20
        parents: dict[int, int] = {}
        while not self._stop.is_set():
            tree = _descendants(root, parents)
            private, shared = 0, 0
            for pid in tree:
                try:
                    fields = Path(f"/proc/{pid}/statm").read_text().split()
                except OSError:  # it ended between the listing and now
                    continue
                private += int(fields[1]) - int(fields[2])
                shared = max(shared, int(fields[2]))
            if tree:
                total = (private + shared) * page_mb
                self.peak_mb = max(self.peak_mb or 0.0, total)
                self.most_processes = max(self.most_processes, len(tree))
            self._stop.wait(self.interval)


def _descendants(root: int, parents: dict[int, int]) -> list[int]:
    """The processes below ``root``. ``parents`` (process id -> its parent's) is kept
    between calls: only a process not seen before has its ``stat`` read."""
    alive = {int(name) for name in os.listdir("/proc") if name.isdigit()}
    for pid in list(parents):
        if pid not in alive:
            del parents[pid]
    for pid in alive - parents.keys():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        # the parent's id: the second field after the name (which may hold spaces)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found
