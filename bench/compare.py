"""``./run bench compare OTHER``: this checkout's sync against another checkout's, on equal work.

Both run the same commands against one sandbox, alternately (this one first in odd rounds,
the other first in even ones, so a drift of the machine's speed falls on both): a full sync
into a fresh folder, then a normal sync with nothing to do, each its own process. Each row
is the median of the rounds; the ratio is this checkout's time over the other's. For a
change that should not change speed (a refactor), the ratios should sit near 1.0. Beside
each ratio stand the work both sides did, from each sync's ``--json``: its requests and
the rows of its tables after it (equal on both sides in every round, or the table says
where they differed).

OTHER is a checkout whose environment is built (``./run python -c 0`` there), or the
``feedback-sync`` executable of one. Every sync is the console script, as users run it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from bench.processes import FEEDBACK_SYNC, SYNC_ARGS, Sandbox, child_env

STEPS = (("full sync", ["--full"]), ("normal sync, nothing to do", []))


def _executable(other: str) -> list[str]:
    path = Path(other)
    if path.is_dir():
        path = path / ".venv" / "bin" / "feedback-sync"
    if not path.exists():
        raise SystemExit(f"bench compare: no feedback-sync at {path} (build that checkout first)")
    return [str(path.resolve())]


def compare(other: list[str], scale: str, rounds: int, workdir: Path) -> str:
    """The comparison's table (markdown)."""
    sides = {"this": FEEDBACK_SYNC, "other": other}
    times: dict[tuple[str, str], list[float]] = {}
    # (side, step) -> each round's (requests, rows after)
    work: dict[tuple[str, str], list[tuple[int, int]]] = {}
    sandbox = Sandbox(scale, workdir)
    try:
        env = child_env(**sandbox.sync_env())
        for round_ in range(rounds):
            order = ["this", "other"] if round_ % 2 == 0 else ["other", "this"]
            for side in order:
                folder = workdir / f"{side}-{round_}"
                folder.mkdir()
                for step, extra in STEPS:
                    started = time.perf_counter()
                    done = subprocess.run(
                        [*sides[side], *SYNC_ARGS, *extra, "--json"],
                        cwd=folder,
                        env=env,
                        check=True,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                    times.setdefault((side, step), []).append(time.perf_counter() - started)
                    work.setdefault((side, step), []).append(_work(done.stdout))
                shutil.rmtree(folder)
    finally:
        sandbox.stop()
    lines = [
        f"scale {scale}, {rounds} alternated rounds, medians (s); ratio = this / other",
        "",
        "| run | this | other | ratio | same work: requests, rows after | this, every round "
        "| other, every round |",
        "|---|---|---|---|---|---|---|",
    ]
    for step, _ in STEPS:
        mine, theirs = times[("this", step)], times[("other", step)]
        ratio = statistics.median(mine) / statistics.median(theirs)
        lines.append(
            f"| {step} | {statistics.median(mine):.2f} | {statistics.median(theirs):.2f} | "
            f"{ratio:.2f} | {_same_work(work[('this', step)], work[('other', step)])} | "
            f"{', '.join(f'{t:.2f}' for t in mine)} | "
            f"{', '.join(f'{t:.2f}' for t in theirs)} |"
        )
    return "\n".join(lines)


def _work(stdout: bytes) -> tuple[int, int]:
    """A sync's requests and the rows of its tables after it, from its ``--json``."""
    document = json.loads(stdout)
    rows = sum(table["rows"] for table in document["tables"].values())
    return int(document["requests"]), int(rows)


def _same_work(mine: list[tuple[int, int]], theirs: list[tuple[int, int]]) -> str:
    """Both sides' work in words: one figure where every round of both agreed."""
    if len(set(mine) | set(theirs)) == 1:
        requests, rows = mine[0]
        return f"equal in every round: {requests:,} requests, {rows:,} rows"
    shown = ", ".join(f"{r:,}/{n:,}" for r, n in mine)
    other = ", ".join(f"{r:,}/{n:,}" for r, n in theirs)
    return f"DIFFER: this {shown}; other {other}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="./run bench compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("other", help="another checkout (or its feedback-sync executable)")
    parser.add_argument("--scale", default="small", help="data scale (default small)")
    parser.add_argument("--rounds", type=int, default=8, help="alternated rounds (default 8)")
    args = parser.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        print(compare(_executable(args.other), args.scale, args.rounds, Path(tmp)))
    return 0
