"""``./run bench accounts`` cannot rot: a run at ``tiny`` (1 and 2 accounts into DuckDB),
the tree's memory it reports, and its arithmetic on known figures. Nothing here asserts a
time."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.accounts import Figures, distinct_parallel, read_json, same_work, summed
from bench.processes import TreeMemory, child_env, measure

ROOT = Path(__file__).resolve().parents[2]


def _table(text: str, header: str) -> list[list[str]]:
    """The rows (cells) of the first table after the line starting with ``header``."""
    lines = text.split(header, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


@pytest.mark.slow
def test_the_accounts_bench_runs_at_tiny_and_both_sides_do_the_same_work(tmp_path: Path) -> None:
    output = tmp_path / "RESULTS-accounts.md"
    options = ["--accounts", "1,2", "--scale", "tiny", "--destinations", "duckdb"]
    options += ["--parallel", "1,2", "--rounds", "1", "--output", str(output)]
    command = [sys.executable, "-m", "bench", "accounts", *options]
    done = subprocess.run(
        [*command, "--workdir", str(tmp_path / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr

    text = output.read_text()
    assert text.startswith("# Benchmarks: many accounts\n")
    # the command line that reproduces it, the machine and the versions
    assert f"`./run bench accounts {' '.join(options[:-1])} {output} --workdir " in text
    assert re.search(r"^- machine: .+ \d+ cores \(.+\), [\d.]+ GB; load average", text, re.M)
    assert re.search(r"^- versions: Python [\d.]+, feedback-sync .+, dlt [\d.]+", text, re.M)
    assert "one `feedback-sync sandbox` process per account" in text

    full = _table(text, "## DuckDB")
    assert [row[:2] for row in full] == [
        ["1", "sum of the 1 single run"],
        ["1", "whole run, `--parallel 1`"],
        ["2", "sum of the 2 single runs"],
        ["2", "whole run, `--parallel 1`"],
        ["2", "whole run, `--parallel 2`"],
    ]
    sums = {row[0]: row for row in full if row[1].startswith("sum")}
    for row in full:
        wall, every, peak, processes = float(row[3]), row[4], float(row[7]), int(row[8])
        assert wall > 0 and every == row[3] and peak > 50 and processes >= 2, row
        if row[1].startswith("sum"):
            continue
        # the same requests and rows as the accounts' single runs, account by account
        work = sums[row[0]][11]
        assert re.fullmatch(r"[\d,]+ requests, [\d,]+ rows", work), work
        assert row[11] == f"equal: {work}", row
        # the ratio of the unrounded times: within the rounding of the shown ones
        assert float(row[9]) == pytest.approx(wall / float(sums[row[0]][3]), rel=0.05)
    # two accounts' work is more than one's: each sandbox serves its own seed's data
    assert sums["2"][11] != sums["1"][11]
    assert full[1][2] == "1 (in the command's process)"
    assert full[1][12] == "- (one account: the same run as alone)"
    assert full[3][2] == "1" and full[3][12] in ("<= 1: met", "<= 1: **missed**")
    assert full[4][2] in ("2", "1 (asked 2)")  # what the sync did with one DuckDB file

    after = _table(text, "After the full syncs")
    assert [row[:2] for row in after] == [
        ["1", "sum of the 1 single normal sync"],
        ["1", "normal sync, nothing to do, `--parallel 1`"],
        ["1", "`feedback-sync models` over 1"],
        ["2", "sum of the 2 single normal syncs"],
        ["2", "normal sync, nothing to do, `--parallel 1`"],
        ["2", "normal sync, nothing to do, `--parallel 2`"],
        ["2", "`feedback-sync models` over 2"],
    ]
    # a normal sync makes the same requests alone as in one command; the models make none
    requests = [row[7] for row in after]
    assert requests[0] == requests[1] and requests[3] == requests[4] == requests[5]
    assert int(requests[3].replace(",", "")) > int(requests[0].replace(",", "")) > 0
    assert requests[2] == requests[6] == "0"
    ratios = [row[8] for row in after]
    assert [bool(r) for r in ratios] == [False, True, False, False, True, True, False]
    assert "## What limits the figures" in text
    assert "- **Start and exit of each account's process.**" in text


def test_a_bad_option_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "accounts", "--destinations", "duckdb,parquet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "./run bench accounts: error: argument --destinations: a comma-separated list of "
        "duckdb, postgres: 'duckdb,parquet'"
    ]


# a process that starts two children holding 100 MB each, both alive at once
_TREE = """
import subprocess, sys, time
hold = (
    "import sys; b = bytearray(100 * 2**20); b[::4096] = b'\\\\x01' * len(b[::4096]); "
    "print('ready', flush=True); sys.stdin.read()"
)
children = [
    subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for _ in range(2)
]
for child in children:
    child.stdout.readline()
time.sleep(0.4)
for child in children:
    child.stdin.close()
    child.wait()
"""


def test_the_tree_memory_adds_up_processes_alive_at_once(tmp_path: Path) -> None:
    """The kernel's peak is one process's (the largest child's, 100 MB and some); the
    tree's is both children's together."""
    tree = TreeMemory()
    try:
        done = measure([sys.executable, "-c", _TREE], child_env(), tmp_path, started=tree.watch)
    finally:
        tree.stop()
    assert 100 < done.peak_rss_mb < 160, done.peak_rss_mb
    assert tree.peak_mb is not None and 200 < tree.peak_mb < 300, tree.peak_mb
    assert tree.most_processes == 3


def _figures(wall: float, peak: float, requests: dict[str, int], rows: dict[str, int]) -> Figures:
    return Figures(wall, wall, peak, 2, 0.1, requests, rows)


def test_the_sum_of_single_runs_and_the_work_compared() -> None:
    one = _figures(2.0, 180.0, {"acc01": 29}, {"acc01": 551})
    two = _figures(3.0, 200.0, {"acc02": 30}, {"acc02": 507})
    total = summed([one, two])
    assert (total.wall_s, total.cpu_s, total.peak_mb) == (5.0, 5.0, 200.0)
    assert total.requests == {"acc01": 29, "acc02": 30}
    whole = _figures(4.0, 390.0, {"acc01": 29, "acc02": 30}, {"acc01": 551, "acc02": 507})
    assert same_work([total], [whole]) == "equal: 59 requests, 1,058 rows"
    whole.requests["acc02"] = 31
    assert same_work([total], [whole]) == (
        "**DIFFER** (single / whole): acc02 round 1: requests 30 / 31, rows 507 / 507"
    )
    # the rounds agree side by side, not with each other: said too
    again = _figures(2.0, 180.0, {"acc01": 30}, {"acc01": 551})
    assert same_work([one, again], [one, again]).startswith("equal in each round, not across")


def test_parallel_values_that_make_the_same_run_are_run_once() -> None:
    assert distinct_parallel(1, [1, 2, 4]) == [1]
    assert distinct_parallel(2, [1, 2, 4]) == [1, 2]
    assert distinct_parallel(16, [1, 2, 4]) == [1, 2, 4]


def test_the_json_of_one_account_and_of_several() -> None:
    one = _figures(3.0, 1.0, {}, {})
    document = {
        "seconds": 2.75,
        "phases": {"start": 0.5, "fetch": 1.0},
        "tables": {"ideas": {"rows": 200}, "comments": {"rows": 800}},
    }
    read_json(one, json.dumps(document), ["acc01"])
    assert one.rows == {"acc01": 1000} and one.starts == [0.5]
    assert one.outside == [pytest.approx(0.25)]
    several = _figures(9.0, 1.0, {}, {})
    accounts = {
        name: {"seconds": 4.0, "rows": rows, "result": {**document, "seconds": 3.5}}
        for name, rows in (("acc01", 1000), ("acc02", 990))
    }
    read_json(several, json.dumps({"accounts": accounts}), ["acc01", "acc02"])
    assert several.rows == {"acc01": 1000, "acc02": 990}
    assert several.starts == [0.5, 0.5] and several.outside == [0.5, 0.5]
