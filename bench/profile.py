"""Where a full sync spends its time: py-spy samples of one run, summed two ways.

py-spy (a sampling profiler that reads the process from outside, so the run is not slowed
by instrumentation) records the stack of the thread holding the GIL 100 times a second
(``--gil``): where the Python process spends the CPU that caps it, since the client runs
its Python on one core at a time. Native work that releases the GIL is not counted.
The samples are summed by phase of the run (which dlt step or our own code is on the stack)
and by the function at the top of the stack (where the CPU was), and rendered as Markdown.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench.processes import SYNC_ARGV, child_env

RATE = 100

# the first pattern found on a stack, from its leaf up, names the phase
PHASES: list[tuple[str, tuple[str, ...]]] = [
    ("Python imports (start-up)", ("importlib._bootstrap",)),
    ("HTTP (httpx, sockets)", ("httpx/", "httpcore/", "h11/", "ssl.py", "socket.py")),
    ("JSON decoding of answers", ("orjson", "json/decoder")),
    ("shaping rows (feedback_sync/source/shaping.py)", ("source/shaping.py",)),
    ("building Arrow tables (feedback_sync/source/arrow.py)", ("source/arrow.py",)),
    ("DuckDB (loading, merging)", ("duckdb",)),
    ("dlt normalize", ("dlt/normalize/",)),
    ("dlt load", ("dlt/load/", "dlt/destinations/")),
    ("dlt extract", ("dlt/extract/",)),
    ("pyarrow / Parquet", ("pyarrow/",)),
    ("our paging and client", ("api/paging.py", "api/client.py")),
    (
        "our sync, reconcile, export",
        (
            "feedback_sync/app/sync.py",
            "feedback_sync/warehouse/reconcile.py",
            "feedback_sync/warehouse/parquet_files.py",
        ),
    ),
]


def _phase(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, patterns in PHASES:
            if any(p in frame for p in patterns):
                return name
    return "other (imports, dlt set-up, interpreter)"


def _leaf(frames: list[str]) -> str:
    leaf = frames[-1]
    # "function (path/to/module.py:123)" -> "function (module.py)"
    if " (" in leaf:
        name, where = leaf.split(" (", 1)
        where = where.rstrip(")").rsplit(":", 1)[0]
        parts = where.split("/")
        short = "/".join(parts[-2:]) if len(parts) > 1 else where
        return f"{name} ({short})"
    return leaf


def summarize(raw: str, top: int = 12) -> tuple[Counter[str], Counter[str], int]:
    phases: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        # py-spy's first frames name the process and the thread; drop them
        frames = stack.split(";")
        while frames and frames[0].startswith(("process ", "thread ")):
            frames = frames[1:]
        if not frames:
            continue
        phases[_phase(frames)] += n
        leaves[_leaf(frames)] += n
        total += n
    return phases, Counter(dict(leaves.most_common(top))), total


def render(phases: Counter[str], leaves: Counter[str], total: int, wall_s: float) -> str:
    lines = [
        f"Profile of one full sync -> DuckDB (py-spy, {RATE} samples/s per busy thread, "
        f"{total:,} samples, {wall_s:.0f} s wall; "
        f"a sample is {1000 // RATE} ms of one thread holding the GIL; "
        "native work that releases it, DuckDB's among it, is not counted):",
        "",
        "| phase (innermost match on the stack) | samples | share |",
        "|---|---|---|",
    ]
    for name, n in phases.most_common():
        lines.append(f"| {name} | {n:,} | {n / total:.0%} |")
    lines += ["", "| busiest functions (top of the stack) | samples | share |", "|---|---|---|"]
    for name, n in leaves.most_common():
        lines.append(f"| `{name}` | {n:,} | {n / total:.0%} |")
    return "\n".join(lines)


def full_sync(workdir: Path, env: dict[str, str]) -> str:
    """Profiles a full sync into an empty DuckDB under py-spy; the summary as Markdown."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = workdir / "profile.txt"
    py_spy = Path(sys.executable).parent / "py-spy"
    argv = [str(py_spy), "record", "--gil", "--subprocesses", "--rate", str(RATE)]
    argv += ["--format", "raw"]
    argv += ["--nonblocking", "--output", str(out), "--"]
    argv += SYNC_ARGV
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, env=child_env(**env), capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0 or not out.exists():
        return f"Profile: py-spy failed ({done.returncode}): {done.stderr.strip()[-500:]}"
    phases, leaves, total = summarize(out.read_text())
    return render(phases, leaves, total, wall)
