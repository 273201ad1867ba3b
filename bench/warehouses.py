"""The sync into each warehouse, side by side in one run: DuckDB, PostgreSQL, Parquet, Delta.

At one scale (``large`` by default) a sandbox runs in its own process, and a PostgreSQL
server (``tests/support/postgres.py``, with fsync on: as a real server runs) in its own. Then,
each as its own measured process (``bench/processes.py``), one after another:

1. a full sync into each of DuckDB, PostgreSQL, Parquet and Delta (``--no-models``);
2. a normal sync into Parquet and into Delta with nothing changed (the first after a full
   one reads each link type once to get its cursor);
3. the sandbox changes 1% of its data (seeded), and a normal sync into Parquet and into Delta
   lands that same change.

Each run reports wall and CPU time, peak RSS, the bytes the process wrote to storage (the
kernel's ``write_bytes``, read at the child's exit) and, for Parquet and Delta, the bytes of
the files it added or rewrote in the target folder. Writes ``bench/RESULTS-warehouses.md``.

    ./run bench warehouses [--scale large] [--output bench/RESULTS-warehouses.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.processes import SYNC_ARGS, Sandbox, child_env, measure
from tests.support import postgres

RESULTS = Path(__file__).parent / "RESULTS-warehouses.md"
CHANGE = 0.01
# runs the sync in this process and writes the kernel's I/O counters for it at exit
_WITH_IO = (
    "import atexit, runpy, shutil, sys\n"
    "target = sys.argv.pop(1)\n"
    "atexit.register(shutil.copyfile, '/proc/self/io', target)\n"
    "sys.argv[0] = 'feedback-sync'\n"
    "runpy.run_module('feedback_sync.app.cli', run_name='__main__')\n"
)


@dataclass
class Run:
    name: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    write_mb: float
    files_mb: float | None
    summary: str


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    if not folder.exists():
        return {}
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def _sync(name: str, args: list[str], env: dict[str, str], cwd: Path, folder: Path | None) -> Run:
    before = _files(folder) if folder is not None else {}
    io_file = cwd / ".io"
    argv = [sys.executable, "-c", _WITH_IO, str(io_file), *SYNC_ARGS, *args]
    measured = measure(argv, env, cwd)
    counters = dict(line.split(": ") for line in io_file.read_text().splitlines() if ": " in line)
    files_mb = None
    if folder is not None:
        after = _files(folder)
        written = sum(
            size for path, (size, mtime) in after.items() if before.get(path) != (size, mtime)
        )
        files_mb = written / 1e6
    lines = [line for line in measured.stdout.splitlines() if " finished in " in line]
    run = Run(
        name,
        measured.wall_s,
        measured.cpu_s,
        measured.peak_rss_mb,
        int(counters.get("write_bytes", "0")) / 1e6,
        files_mb,
        lines[-1] if lines else "",
    )
    print(
        f"  {name}: {run.wall_s:.1f} s, {run.peak_rss_mb:,.0f} MB peak, "
        f"{run.write_mb:,.1f} MB written",
        flush=True,
    )
    return run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="./run bench warehouses", allow_abbrev=False)
    parser.add_argument("--scale", default="large")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--workdir", help="keep the runs' files here (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench-wh-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    try:
        with postgres.running(durable=True) as server:
            dsn = server.create_database("bench")
            sandbox = Sandbox(args.scale, work)
            try:
                env = child_env(**sandbox.sync_env(), DESTINATION__POSTGRES__CREDENTIALS=dsn)
                targets = {
                    "DuckDB": (["--destination", "duckdb"], None),
                    "PostgreSQL": (["--destination", "postgres"], None),
                    "Parquet": (
                        ["--destination", "parquet", "--parquet-dir", "parquet"],
                        work / "parquet",
                    ),
                    "Delta": (["--destination", "delta", "--delta-dir", "delta"], work / "delta"),
                }
                env["DESTINATION__DUCKDB__CREDENTIALS"] = str(work / "warehouse.duckdb")
                print(f"bench warehouses at {args.scale}:", flush=True)
                for name, (extra, folder) in targets.items():
                    runs.append(
                        _sync(f"full sync -> {name}", ["--full", *extra], env, work, folder)
                    )
                for name in ("Parquet", "Delta"):
                    extra, folder = targets[name]
                    runs.append(
                        _sync(f"normal sync, nothing changed -> {name}", extra, env, work, folder)
                    )
                sandbox.mutate(CHANGE, seed=7)
                for name in ("Parquet", "Delta"):
                    extra, folder = targets[name]
                    runs.append(
                        _sync(f"normal sync, 1% changed -> {name}", extra, env, work, folder)
                    )
                sizes = {
                    name: sum(size for size, _ in _files(folder).values()) / 1e6
                    for name, (_, folder) in targets.items()
                    if folder is not None
                }
            finally:
                sandbox.stop()
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    Path(args.output).write_text(_report(args.scale, runs, sizes), encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


def _report(scale: str, runs: list[Run], sizes: dict[str, float]) -> str:
    by = {r.name: r for r in runs}
    pg, duck = by["full sync -> PostgreSQL"], by["full sync -> DuckDB"]
    pq, dl = by["normal sync, 1% changed -> Parquet"], by["normal sync, 1% changed -> Delta"]
    lines = [
        "# Benchmarks: the sync into each warehouse",
        "",
        f"`./run bench warehouses --scale {scale}` wrote this file "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}). Every run is its own "
        "process, one after another, in this one invocation; PostgreSQL runs with fsync on.",
        "",
        "| run | wall s | CPU s | peak RSS MB | written to storage MB "
        "| files added or rewritten MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        files = f"{r.files_mb:,.1f}" if r.files_mb is not None else ""
        lines.append(
            f"| {r.name} | {r.wall_s:.1f} | {r.cpu_s:.1f} | {r.peak_rss_mb:,.0f} | "
            f"{r.write_mb:,.1f} | {files} |"
        )
    lines += [
        "",
        "Folder sizes after the runs: "
        + ", ".join(f"{name} {mb:,.1f} MB" for name, mb in sizes.items())
        + ".",
        "",
        "| target | result |",
        "|---|---|",
        f"| full sync into PostgreSQL within 1.5x of DuckDB | "
        f"{'**met**' if pg.wall_s <= 1.5 * duck.wall_s else '**missed**'}: "
        f"{pg.wall_s / duck.wall_s:.2f}x ({pg.wall_s:.1f} s / {duck.wall_s:.1f} s) |",
        f"| a 1% change, Delta against Parquet | time {dl.wall_s / pq.wall_s:.2f}x "
        f"({dl.wall_s:.1f} s / {pq.wall_s:.1f} s), written to storage "
        f"{dl.write_mb / max(pq.write_mb, 0.001):.2f}x "
        f"({dl.write_mb:,.1f} / {pq.write_mb:,.1f} MB), "
        f"peak memory {dl.peak_rss_mb / pq.peak_rss_mb:.2f}x "
        f"({dl.peak_rss_mb:,.0f} / {pq.peak_rss_mb:,.0f} MB) |",
        "",
        "The syncs' own summaries:",
        "",
        *[f"- {r.name}: `{r.summary}`" for r in runs if r.summary],
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
