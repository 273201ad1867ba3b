"""``./run reliability``: the fault matrix, printed and written into reliability/RESULTS.md.

    ./run reliability [--kinds 429,502,...] [--rates 0.01,0.1,0.3] [--seed 7]
                      [--kills 60] [--kill-scale tiny] [--output reliability/RESULTS.md]

Exits 1 when any cell lost a row, held a key twice, applied a write twice, left a write
undone, or failed without leaving the warehouse as it was, when a run killed with SIGKILL
(``reliability/kills.py``) did not recover the same way, or when two runs started against
one warehouse (``reliability/concurrent.py``) did not keep out of each other's way.
"""

from __future__ import annotations

import argparse
import logging
import platform
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from reliability.concurrent import Overlap, run_overlaps
from reliability.kills import STAGES, Campaign, run_campaign
from reliability.matrix import (
    KINDS,
    RATE_LIMIT,
    RATES,
    Cell,
    exhausted_cell,
    push_cell,
    rate_limit_cell,
    sync_cells,
    totals,
)

BEGIN = "<!-- reliability:begin (written by ./run reliability; edits inside are overwritten) -->"
END = "<!-- reliability:end -->"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "RESULTS.md"

# what differs from run to run and says nothing about the result: the sandbox's loopback
# address (a free port each run) and the process ids and start times in a lock's message
_RUN_DETAILS = [
    (re.compile(r"https?://(?:127\.0\.0\.1|localhost|\[::1\]):\d+"), "<sandbox>"),
    (re.compile(r"\(process \d+, since [^)]*\)"), "(process <pid>, since <time>)"),
]


def plain(line: str) -> str:
    """A run's line without the details that change every run (port, process id, time)."""
    for pattern, stand_in in _RUN_DETAILS:
        line = pattern.sub(stand_in, line)
    return line


def _cell(text: str) -> str:
    """Text as one Markdown table cell: no column break, and no angle bracket read as HTML
    (a 502's body is an HTML page)."""
    return text.replace("|", "/").replace("<", "&lt;").replace(">", "&gt;")


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="./run reliability", description=__doc__, allow_abbrev=False
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help="fault kinds (default: all)")
    parser.add_argument("--rates", default=",".join(f"{r:g}" for r in RATES))
    parser.add_argument("--seed", type=int, default=7, help="sandbox data and fault draws")
    parser.add_argument("--kills", type=int, default=60, help="SIGKILLs (0: none)")
    parser.add_argument("--kill-scale", default="tiny", help="the sandbox's data for them")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    kinds = _csv(args.kinds)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"--kinds: unknown {', '.join(unknown)}; known: {', '.join(KINDS)}")
    try:
        rates = [float(r) for r in _csv(args.rates)]
    except ValueError:
        parser.error(f"--rates: not a comma-separated list of numbers: {args.rates!r}")
    if not rates or not all(0 < r <= 1 for r in rates):
        parser.error(f"--rates: each rate must be in (0, 1], got {args.rates!r}")
    # retries are logged as warnings by design; hundreds of them would bury the progress
    logging.getLogger("feedback_sync").setLevel(logging.ERROR)

    started = time.perf_counter()
    cells: list[Cell] = []
    total = len(kinds) * len(rates)
    with tempfile.TemporaryDirectory(prefix="feedback-reliability-") as tmp:
        for n, (kind, rate) in enumerate(((k, r) for k in kinds for r in rates), 1):
            print(f"[{n}/{total}] {kind} at {rate:.0%} ...", flush=True)
            where = Path(tmp) / f"{kind}-{rate:g}"
            for cell in [
                *sync_cells(kind, rate, args.seed, where / "sync"),
                push_cell(kind, rate, args.seed, where / "push"),
            ]:
                cells.append(cell)
                print(f"    {_line(cell)}", flush=True)
        exhausted = []
        for kind in kinds:
            print(f"{kind} at 100%, 2 retries ...", flush=True)
            cell = exhausted_cell(kind, args.seed, Path(tmp) / f"{kind}-exhausted")
            exhausted.append(cell)
            print(f"    {_line(cell)}: {cell.message}", flush=True)
        print("rate limit ...", flush=True)
        limited, busiest = rate_limit_cell(args.seed, Path(tmp) / "rate-limit")
        print(f"    {_line(limited)}; busiest second at the server: {busiest:g} requests")
        print("concurrent runs ...", flush=True)
        overlaps = run_overlaps(Path(tmp) / "overlaps", seed=args.seed)
        for overlap in overlaps:
            verdict = "ok" if overlap.ok else f"WRONG: {'; '.join(overlap.problems)}"
            print(f"    {overlap.describe()}: {verdict}", flush=True)
        campaign = None
        if args.kills > 0:
            print(f"SIGKILL campaign: {args.kills} kills at {args.kill_scale} ...", flush=True)
            campaign = run_campaign(
                args.kills,
                seed=args.seed,
                scale=args.kill_scale,
                workdir=Path(tmp) / "kills",
                progress=lambda line: print(f"    {line}", flush=True),
            )
    seconds = time.perf_counter() - started
    report = render(cells, exhausted, limited, busiest, seconds, args)
    report += "\n\n" + render_overlaps(overlaps)
    if campaign is not None:
        report += "\n\n" + render_campaign(campaign, args)
    print(report)
    _write(args.output, report)
    print(f"written to {args.output}")
    wrong = [c for c in [*cells, limited] if not c.ok] or busiest > RATE_LIMIT
    wrong = wrong or [c for c in exhausted if c.outcome != "failed cleanly"]
    wrong = wrong or (campaign is not None and not campaign.ok)
    wrong = wrong or not all(o.ok for o in overlaps)
    return 1 if wrong else 0


def _line(cell: Cell) -> str:
    figures = (
        f"{cell.check}: {cell.outcome} ({cell.requests} requests, {cell.faults} faults, "
        f"{cell.seconds:.1f} s"
    )
    if cell.check == "push":
        figures += f", {cell.runs} run(s), {cell.writes} writes, {cell.writes_twice} twice"
        figures += f", {cell.writes_lost} lost"
    else:
        figures += f", {cell.rows_compared} rows, {cell.rows_lost} lost"
        figures += f", {cell.duplicates} duplicates"
    figures += ")"
    return figures + (f": {cell.message}" if cell.message and not cell.ok else "")


def render(
    cells: list[Cell],
    exhausted: list[Cell],
    limited: Cell,
    busiest: float,
    seconds: float,
    args: argparse.Namespace,
) -> str:
    t = totals(cells)
    lines = [
        f"Run {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.machine()}, "
        f"{seconds / 60:.1f} min: `./run reliability --kinds {args.kinds} --rates {args.rates} "
        f"--seed {args.seed} --kills {args.kills} --kill-scale {args.kill_scale}`.",
        "",
        "| fault | rate | full sync | normal sync | push (runs) | requests | faults served "
        "| rows compared | rows lost | duplicates | writes applied | sent twice "
        "| writes lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    by_cell: dict[tuple[str, float], dict[str, Cell]] = {}
    for cell in cells:
        by_cell.setdefault((cell.kind, cell.rate), {})[cell.check] = cell
    for (kind, rate), row in by_cell.items():
        full, normal, push = row["full sync"], row["normal sync"], row["push"]
        group = [full, normal, push]
        lines.append(
            f"| `{kind}` | {rate:.0%} | {full.outcome} | {normal.outcome} "
            f"| {push.outcome} ({push.runs}) | {sum(c.requests for c in group):,} "
            f"| {sum(c.faults for c in group):,} "
            f"| {full.rows_compared + normal.rows_compared:,} "
            f"| {full.rows_lost + normal.rows_lost} | {sum(c.duplicates for c in group)} "
            f"| {push.writes} | {push.writes_twice} | {push.writes_lost} |"
        )
    lines += [
        "",
        f"**Totals**: {t['cells']} checks, {t['equal']} equal to the ground truth, "
        f"{t['failed cleanly']} failed cleanly (warehouse and state as before), "
        f"{t['wrong']} wrong; {t['requests']:,} requests, {t['faults']:,} faults served; "
        f"{t['rows compared']:,} rows compared, **{t['rows lost']} lost**, "
        f"{t['rows unexpected']} unexpected, **{t['duplicates']} duplicates**; "
        f"{t['writes']:,} writes applied, **{t['writes sent twice']} sent twice**, "
        f"**{t['writes lost']} lost**.",
        "",
        "**Retries that run out** (every request meets the fault, 2 retries, after a clean "
        "full sync and seeded creates): the normal sync must fail with one line, leave the "
        "warehouse and its state exactly as they were, and the next run, faults gone, must end "
        "equal to the ground truth:",
        "",
        "| fault | outcome | requests | the one line |",
        "|---|---|---|---|",
        *[
            f"| `{c.kind}` | {c.outcome} | {c.requests} | {_cell(plain(c.message))} |"
            for c in exhausted
        ],
        "",
        f"**Rate limit**: a full sync against a server allowing {RATE_LIMIT:g} requests per "
        f"second (the client not told, it reads `X-RateLimit-Limit`): {limited.outcome}, "
        f"{limited.requests:,} requests in {limited.seconds:.1f} s, busiest second at the "
        f"server **{busiest:g} requests**.",
    ]
    failures = [c for c in cells if c.message]
    if failures:
        lines += ["", "Runs that ended with rows to settle or failed (each cell's last):", ""]
        lines += [
            f"- `{c.kind}` {c.rate:.0%} {c.check}: {_cell(plain(c.message))}" for c in failures
        ]
    return "\n".join(lines)


def render_overlaps(overlaps: list[Overlap]) -> str:
    lines = [
        "**Concurrent runs** (`reliability/concurrent.py`; answers slowed so the first run is "
        "still going): the second run fails at once, doing nothing, or with `--wait` waits for "
        "the first; the failed command run again must exit 0, and then every key of the "
        "server's data is in the warehouse once, a push preview plans nothing and no write "
        "was applied twice:",
        "",
        "| started | second exits | in (s) | the one line | keys lost | keys twice "
        "| writes twice | writes left | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in overlaps:
        said = plain(o.second_line).split(": error: ", 1)[-1] if o.second_line else "-"
        said = said[said.find("is in use by") :] if "is in use by" in said else said
        said = (said[:110] + "...") if len(said) > 110 else said
        lines.append(
            f"| {o.describe()} | {o.second_code} | {o.second_seconds:.1f} "
            f"| {_cell(said)} | {o.lost} | {o.duplicates} | {o.writes_twice} "
            f"| {o.writes_left} | {'ok' if o.ok else 'WRONG'} |"
        )
    return "\n".join(lines)


def render_campaign(campaign: Campaign, args: argparse.Namespace) -> str:
    spread = campaign.distribution()
    rounds = campaign.rounds
    lines = [
        f"**SIGKILL campaign** ({args.kill_scale} data, {campaign.seconds / 60:.1f} min): "
        f"{len(campaign.kills)} kills in {len(rounds)} rounds (a run that finished before its "
        "kill is not counted), each followed by the same command, which must exit 0:",
        "",
        "| stage killed | kills | reruns failed | keys lost | keys twice | writes twice "
        "| writes left |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage in STAGES:
        hit = [r for r in rounds if r.stage == stage]
        lines.append(
            f"| {stage} | {spread[stage]} | {sum(not r.rerun_ok for r in hit)} "
            f"| {sum(r.lost for r in hit)} | {sum(r.duplicates for r in hit)} "
            f"| {sum(r.writes_twice for r in hit)} | {sum(r.writes_lost for r in hit)} |"
        )
    verdict = "equal" if campaign.final_equal else f"NOT equal: {campaign.final_problems}"
    lines += [
        "",
        f"Then a `--full` sync: {verdict} to the ground truth ({campaign.rows_compared:,} rows "
        "compared).",
    ]
    wrong = [r for r in rounds if not r.ok]
    if wrong:
        lines += ["", *[f"- round {r.number} ({r.stage}): {r.message}" for r in wrong]]
    return "\n".join(lines)


def _write(path: Path, report: str) -> None:
    block = f"{BEGIN}\n{report}\n{END}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path} has no {BEGIN} ... {END} block to write the figures into")
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + block + rest.split(END, 1)[1], encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
