"""``./run bench compare OTHER``: this checkout's sync against another checkout's, on equal work.

Both run the same commands against one sandbox, alternately (this one first in odd rounds,
the other first in even ones, so a drift of the machine's speed falls on both): a full sync
into a fresh folder, then a normal sync with nothing to do, each its own process. Each row
is the median of the rounds; the ratio is this checkout's time over the other's. For a
change that should not change speed (a refactor), the ratios should sit near 1.0.

OTHER is a checkout whose environment is built (``./run python -c 0`` there), or the
``feedback-sync`` executable of one. Every sync is the console script, as users run it.
"""

from __future__ import annotations

import argparse
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
                    subprocess.run(
                        [*sides[side], *SYNC_ARGS, *extra],
                        cwd=folder,
                        env=env,
                        check=True,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    times.setdefault((side, step), []).append(time.perf_counter() - started)
                shutil.rmtree(folder)
    finally:
        sandbox.stop()
    lines = [
        f"scale {scale}, {rounds} alternated rounds, medians (s); ratio = this / other",
        "",
        "| run | this | other | ratio | this, every round | other, every round |",
        "|---|---|---|---|---|---|",
    ]
    for step, _ in STEPS:
        mine, theirs = times[("this", step)], times[("other", step)]
        ratio = statistics.median(mine) / statistics.median(theirs)
        lines.append(
            f"| {step} | {statistics.median(mine):.2f} | {statistics.median(theirs):.2f} | "
            f"{ratio:.2f} | {', '.join(f'{t:.2f}' for t in mine)} | "
            f"{', '.join(f'{t:.2f}' for t in theirs)} |"
        )
    return "\n".join(lines)


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
