"""Many accounts (issue 56): one sync of N accounts against the sum of their single syncs.

One ``feedback-sync sandbox`` process per account (account ``accNN``: seed NN and its own
API key, so the accounts' data differ and a key sent to the wrong server is refused), all
started and seeded before the first timed run, and one sync into each destination made
and left out (a warm-up). For each destination and each number of accounts N, in every
round:

1. **the single runs**: each account synced alone, ``feedback-sync sync --account NAME
   --full --no-models --json`` in a fresh folder and warehouse with only that account
   configured, one after another, each followed by a normal sync with nothing to do in
   its warehouse: their wall and CPU times summed, their peak memory the largest of theirs
   (measured once per account and round, and summed over the first N accounts for each N);
2. **the whole run**, for each ``--parallel`` P: ``feedback-sync sync --parallel P --full
   --no-models --json`` with the N accounts configured, in a fresh folder and warehouse;
   then a normal sync with nothing to do in the same warehouse (``sync --parallel P``);
   after the first P's, ``feedback-sync models`` (the marts over the N accounts), which a
   sync with models builds once after every account.

Both sides fetch the same accounts from the same sandboxes: the requests (each sandbox's
own log, per account) and the rows (the tables' rows after the run, from ``--json``) of
both sides are compared per account in every round. Every command runs as its own
process tree from ``measure`` (``bench/processes.py``): wall time, CPU time (the tree's,
the kernel's count for the command and the processes it waited for), and peak memory of
the whole tree sampled by ``TreeMemory`` (the parent and every account process and HTTP
helper it starts). Each figure is the median of the rounds (the lower of the middle two);
odd rounds measure the single runs first, even rounds the whole runs first.
Writes ``bench/RESULTS-accounts.md``.

    ./run bench accounts [--accounts 1,4,16] [--scale small] [--destinations duckdb,postgres]
                         [--parallel 1,2,4] [--rounds 2] [--output bench/RESULTS-accounts.md]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NoReturn

from bench.processes import FEEDBACK_SYNC, SYNC_ARGS, Sandbox, TreeMemory, child_env, measure
from tests.support import postgres

RESULTS = Path(__file__).parent / "RESULTS-accounts.md"
DESTINATIONS = {"duckdb": "DuckDB", "postgres": "PostgreSQL"}
# what the sync says when it runs several accounts (app/sync_accounts.py)
AT_A_TIME = re.compile(r"^sync: (\d+) accounts \(.*\), (\d+) at a time$", re.MULTILINE)


def account_names(count: int) -> list[str]:
    """The accounts' names: ``acc01``, ``acc02``, ... (account n is served with seed n)."""
    return [f"acc{n:02d}" for n in range(1, count + 1)]


@dataclass
class Figures:
    """One measured command."""

    wall_s: float
    cpu_s: float
    peak_mb: float | None
    # the most processes its tree had at once
    processes: int
    # CPU the sandboxes of its accounts used meanwhile (they share the machine's cores)
    server_cpu_s: float | None
    # per account: the requests its sandbox served, the rows its tables held after
    requests: dict[str, int]
    rows: dict[str, int]
    # accounts at once, as the sync said (None: one account, synced in the command's process)
    ran_parallel: int | None = None
    # each account's "start" phase (s): the process's start, imports and settings
    starts: list[float] = field(default_factory=list)
    # each account's process: its time beyond the sync's own count of it (its spawn, exit)
    outside: list[float] = field(default_factory=list)


def read_json(figures: Figures, stdout: str, names: Sequence[str]) -> None:
    """Fills in what a sync's ``--json`` says of each account: the rows its tables held
    after the run, its start phase, and the time its process took beyond its own count
    (its spawn and its exit). The document of several accounts, or of one (``names[0]``,
    synced in the command's own process)."""
    document = json.loads(stdout)
    if "accounts" not in document:
        figures.rows = {names[0]: sum(int(t["rows"]) for t in document["tables"].values())}
        figures.starts = [float(document["phases"]["start"])]
        figures.outside = [figures.wall_s - float(document["seconds"])]
        return
    for name, run in document["accounts"].items():
        figures.rows[name] = int(run["rows"])
        result = run.get("result") or {}
        if "start" in result.get("phases", {}):
            figures.starts.append(float(result["phases"]["start"]))
        if "seconds" in result:
            figures.outside.append(float(run["seconds"]) - float(result["seconds"]))


class Servers:
    """One sandbox process per account, started before anything is timed."""

    def __init__(self, scale: str, count: int, workdir: Path, say: Callable[[str], None]) -> None:
        self.sandboxes: dict[str, Sandbox] = {}
        try:
            for n, name in enumerate(account_names(count), start=1):
                self.sandboxes[name] = Sandbox(scale, workdir, api_key=f"bench-{name}", seed=n)
        except BaseException:
            self.stop()
            raise
        seeded = sum(s.seed_seconds for s in self.sandboxes.values())
        say(f"{count} sandboxes at {scale} ready ({seeded:.1f} s to seed them, not measured)")

    def env(self, names: Sequence[str]) -> dict[str, str]:
        """The variables that configure ``names`` as the project's accounts."""
        env = {"SOURCES__FEEDBACK__ACCOUNT_NAMES": json.dumps(list(names))}
        for name in names:
            sandbox = self.sandboxes[name]
            env[f"SOURCES__FEEDBACK__ACCOUNTS__{name.upper()}__BASE_URL"] = sandbox.base_url
            env[f"SOURCES__FEEDBACK__ACCOUNTS__{name.upper()}__API_KEY"] = sandbox.api_key
        return env

    def cpu_seconds(self, names: Sequence[str]) -> float | None:
        used = [self.sandboxes[name].cpu_seconds() for name in names]
        return None if None in used else sum(u for u in used if u is not None)

    def stop(self) -> None:
        for sandbox in self.sandboxes.values():
            sandbox.stop()


class Warehouses:
    """A fresh warehouse per run: a DuckDB file in the run's folder, or a new PostgreSQL
    database (dropped after the run) on one server started for the benchmark."""

    def __init__(self, server: postgres.Server | None) -> None:
        self.server = server
        self._made = 0

    @contextlib.contextmanager
    def fresh(self, destination: str) -> Iterator[tuple[list[str], dict[str, str]]]:
        """The arguments and variables of a run into a new, empty warehouse."""
        args = ["--destination", destination]
        if destination == "duckdb":
            yield args, {}
            return
        assert self.server is not None, "PostgreSQL is started for a run into it"
        self._made += 1
        database = f"bench_accounts_{self._made}"
        dsn = self.server.create_database(database)
        try:
            yield args, {"DESTINATION__POSTGRES__CREDENTIALS": dsn}
        finally:
            self.server.psql(f'drop database "{database}" with (force)')


class Bench:
    """The runs of every round, by destination and what they are."""

    def __init__(
        self, servers: Servers, warehouses: Warehouses, workdir: Path, say: Callable[[str], None]
    ) -> None:
        self.servers = servers
        self.warehouses = warehouses
        self.workdir = workdir
        self.say = say
        # (destination, run key) -> one Figures per round; a run key is ("single", account),
        # ("full", N, P), ("normal", N, P) or ("models", N)
        self.runs: dict[tuple[str, tuple[Any, ...]], list[Figures]] = {}

    def _measured(
        self, names: Sequence[str], argv: list[str], cwd: Path, env: dict[str, str]
    ) -> Figures:
        """``argv`` run in ``cwd`` with ``names`` configured, measured."""
        marks = {name: self.servers.sandboxes[name].mark() for name in names}
        server_before = self.servers.cpu_seconds(names)
        tree = TreeMemory()
        try:
            done = measure(argv, env, cwd, started=tree.watch)
        finally:
            tree.stop()
        server_after = self.servers.cpu_seconds(names)
        requests = {
            name: len(self.servers.sandboxes[name].requests_since(mark))
            for name, mark in marks.items()
        }
        said = AT_A_TIME.search(done.stderr)
        figures = Figures(
            wall_s=done.wall_s,
            cpu_s=done.cpu_s,
            peak_mb=tree.peak_mb,
            processes=tree.most_processes,
            server_cpu_s=(
                server_after - server_before
                if server_after is not None and server_before is not None
                else None
            ),
            requests=requests,
            rows={},
            ran_parallel=int(said.group(2)) if said else None,
        )
        if "--json" in argv:
            read_json(figures, done.stdout, names)
        return figures

    def _keep(self, destination: str, key: tuple[Any, ...], figures: Figures) -> None:
        self.runs.setdefault((destination, key), []).append(figures)
        peak = f"{figures.peak_mb:,.0f} MB" if figures.peak_mb is not None else "? MB"
        self.say(
            f"    {figures.wall_s:.1f} s, {figures.cpu_s:.1f} s CPU, {peak} peak, "
            f"{sum(figures.requests.values()):,} requests"
        )

    def _folder(self, *parts: str) -> Path:
        folder = self.workdir.joinpath(*parts)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    def singles(self, destination: str, names: Sequence[str], round_: int) -> None:
        """Each account alone, one after another, each into a fresh warehouse: a full sync,
        then a normal one."""
        for name in names:
            self.say(f"  {destination}, round {round_ + 1}: {name} alone ...")
            folder = self._folder(destination, f"r{round_}", f"single-{name}")
            with self.warehouses.fresh(destination) as (args, env):
                env = child_env(**self.servers.env([name]), **env)
                sync = [*FEEDBACK_SYNC, *SYNC_ARGS, "--json", *args, "--account", name]
                full = self._measured([name], [*sync, "--full"], folder, env)
                self._keep(destination, ("single", name), full)
                self.say("    then a normal sync, nothing to do ...")
                normal = self._measured([name], sync, folder, env)
                self._keep(destination, ("single normal", name), normal)
            shutil.rmtree(folder, ignore_errors=True)

    def warm_up(self, destination: str, name: str) -> None:
        """One full sync of ``name``, not recorded: the first run of a destination reads
        the libraries and the warehouse's code from disk, which no later run does."""
        self.say(f"  {destination}: a warm-up sync of {name} (not recorded) ...")
        folder = self._folder(destination, "warm-up")
        with self.warehouses.fresh(destination) as (args, env):
            argv = [*FEEDBACK_SYNC, *SYNC_ARGS, "--full", *args, "--account", name]
            self._measured([name], argv, folder, child_env(**self.servers.env([name]), **env))
        shutil.rmtree(folder, ignore_errors=True)

    def whole(self, destination: str, count: int, parallel: Sequence[int], round_: int) -> None:
        """The N accounts in one command at each ``--parallel``: a full sync, a normal one
        after it, and the models after the first."""
        names = account_names(count)
        for p in parallel:
            self.say(f"  {destination}, round {round_ + 1}: {count} accounts, --parallel {p} ...")
            folder = self._folder(destination, f"r{round_}", f"n{count}-p{p}")
            with self.warehouses.fresh(destination) as (args, env):
                env = child_env(**self.servers.env(names), **env)
                sync = [*FEEDBACK_SYNC, *SYNC_ARGS, "--json", *args, "--parallel", str(p)]
                full = self._measured(names, [*sync, "--full"], folder, env)
                self._keep(destination, ("full", count, p), full)
                self.say("    then a normal sync, nothing to do ...")
                normal = self._measured(names, sync, folder, env)
                self._keep(destination, ("normal", count, p), normal)
                if p == parallel[0]:
                    self.say(f"    then the models over {count} accounts ...")
                    models = self._measured(names, [*FEEDBACK_SYNC, "models", *args], folder, env)
                    self._keep(destination, ("models", count), models)
            shutil.rmtree(folder, ignore_errors=True)


def distinct_parallel(count: int, parallel: Sequence[int]) -> list[int]:
    """The ``--parallel`` values that make different runs of ``count`` accounts: the sync
    runs at most as many at once as there are accounts (one account: in its own process)."""
    seen: set[int] = set()
    kept: list[int] = []
    for p in parallel:
        if min(p, count) not in seen:
            seen.add(min(p, count))
            kept.append(p)
    return kept


def run(options: argparse.Namespace, workdir: Path, say: Callable[[str], None]) -> Bench:
    """Every round of every destination."""
    stack = contextlib.ExitStack()
    with stack:
        server = None
        if "postgres" in options.destinations:
            server = stack.enter_context(postgres.running(durable=True))
            options.postgres_version = server.psql("show server_version").strip()
        servers = Servers(options.scale, max(options.accounts), workdir, say)
        stack.callback(servers.stop)
        bench = Bench(servers, Warehouses(server), workdir, say)
        every = account_names(max(options.accounts))
        for destination in options.destinations:
            bench.warm_up(destination, every[0])
        for round_ in range(options.rounds):
            for destination in options.destinations:
                # odd rounds the single runs first, even rounds the whole runs first: a drift
                # of the machine's speed falls on both sides
                if round_ % 2 == 0:
                    bench.singles(destination, every, round_)
                for count in options.accounts:
                    parallel = distinct_parallel(count, options.parallel)
                    bench.whole(destination, count, parallel, round_)
                if round_ % 2 == 1:
                    bench.singles(destination, every, round_)
    return bench


def _positive_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"a comma-separated list of whole numbers >= 1: {text!r}")
    return sorted(set(values), key=values.index)


def _destination_list(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    wrong = [v for v in values if v not in DESTINATIONS]
    if not values or wrong:
        raise argparse.ArgumentTypeError(
            f"a comma-separated list of {', '.join(DESTINATIONS)}: {text!r}"
        )
    return list(dict.fromkeys(values))


def _rounds(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number >= 1: {text!r}")
    return int(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad option is one line, exit 2 (argparse's usage is ``--help``'s)."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse(argv: list[str]) -> argparse.Namespace:
    from feedback_sync.sandbox.scales import SCALES

    parser = _Parser(
        prog="./run bench accounts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--accounts", type=_positive_list, default=[1, 4, 16], metavar="N,N")
    parser.add_argument("--scale", choices=list(SCALES), default="small")
    parser.add_argument(
        "--destinations", type=_destination_list, default=list(DESTINATIONS), metavar="D,D"
    )
    parser.add_argument("--parallel", type=_positive_list, default=[1, 2, 4], metavar="P,P")
    parser.add_argument("--rounds", type=_rounds, default=2, help="each figure their median")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--workdir", help="keep the runs' files here (default: a temporary folder)")
    options = parser.parse_args(argv)
    options.argv = argv
    options.postgres_version = None
    return options


def main(argv: list[str]) -> int:
    options = parse(argv)
    work = Path(options.workdir) if options.workdir else Path(tempfile.mkdtemp(prefix="bench-acc-"))
    work.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(line, flush=True)

    load_before = os.getloadavg()[0]
    try:
        bench = run(options, work, say)
    finally:
        if not options.workdir:
            shutil.rmtree(work, ignore_errors=True)
    text = render(bench.runs, options, (load_before, os.getloadavg()[0]))
    Path(options.output).write_text(text, encoding="utf-8")
    print(f"wrote {options.output}")
    return 0


# the report


def _median(values: Sequence[float]) -> float:
    # the lower of the middle two for an even number, as the other benchmarks
    return statistics.median_low(values)


@dataclass
class Row:
    """A row of a table: the median over the rounds of one run (or of the sum of runs)."""

    rounds: list[Figures]

    @property
    def wall_s(self) -> float:
        return _median([f.wall_s for f in self.rounds])

    @property
    def cpu_s(self) -> float:
        return _median([f.cpu_s for f in self.rounds])

    @property
    def peak_mb(self) -> float | None:
        peaks = [f.peak_mb for f in self.rounds if f.peak_mb is not None]
        return _median(peaks) if peaks else None

    @property
    def server_cpu_s(self) -> float | None:
        used = [f.server_cpu_s for f in self.rounds if f.server_cpu_s is not None]
        return _median(used) if used else None

    def every(self) -> str:
        return ", ".join(f"{f.wall_s:.1f}" for f in self.rounds)


def summed(singles: Sequence[Figures]) -> Figures:
    """The single runs of several accounts as one: times summed, memory the largest."""
    peaks = [f.peak_mb for f in singles if f.peak_mb is not None]
    servers = [f.server_cpu_s for f in singles if f.server_cpu_s is not None]
    return Figures(
        wall_s=sum(f.wall_s for f in singles),
        cpu_s=sum(f.cpu_s for f in singles),
        peak_mb=max(peaks) if peaks else None,
        processes=max(f.processes for f in singles),
        server_cpu_s=sum(servers) if len(servers) == len(singles) else None,
        requests={k: v for f in singles for k, v in f.requests.items()},
        rows={k: v for f in singles for k, v in f.rows.items()},
        starts=[s for f in singles for s in f.starts],
        outside=[s for f in singles for s in f.outside],
    )


def same_work(sums: Sequence[Figures], wholes: Sequence[Figures]) -> str:
    """Both sides' requests and rows, account by account and round by round: one figure
    where they agree, else every difference."""
    differences = []
    for round_, (one, other) in enumerate(zip(sums, wholes, strict=True), start=1):
        for name in sorted(one.requests):
            mine = (one.requests[name], one.rows.get(name))
            theirs = (other.requests.get(name), other.rows.get(name))
            if mine != theirs:
                differences.append(
                    f"{name} round {round_}: requests {mine[0]:,} / {theirs[0]}, "
                    f"rows {mine[1]} / {theirs[1]}"
                )
    if differences:
        return "**DIFFER** (single / whole): " + "; ".join(differences)
    totals = {(sum(f.requests.values()), sum(f.rows.values())) for f in (*sums, *wholes)}
    if len(totals) > 1:  # both sides agree in each round, the rounds do not
        return "equal in each round, not across rounds: " + ", ".join(
            f"{r:,} requests, {n:,} rows" for r, n in sorted(totals)
        )
    return f"equal: {_work(sums)}"


def _work(rounds: Sequence[Figures]) -> str:
    """The requests and rows of a run, one figure where every round agrees."""
    totals = sorted({(sum(f.requests.values()), sum(f.rows.values())) for f in rounds})
    return " / ".join(f"{requests:,} requests, {rows:,} rows" for requests, rows in totals)


def _mb(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "?"


def _at_once(rounds: Sequence[Figures], asked: int) -> str:
    """The accounts the sync ran at once, as it said (every round's, where they differ)."""
    ran = sorted({f.ran_parallel for f in rounds}, key=lambda v: -1 if v is None else v)
    if ran == [None]:
        return "1 (in the command's process)"
    shown = ", ".join("?" if v is None else str(v) for v in ran)
    return shown if ran == [asked] else f"{shown} (asked {asked})"


def _target(count: int, whole: Row, total: Row) -> str:
    """The issue's target: the whole run no dearer than the single runs, cheaper when
    accounts ran at once."""
    if count == 1:
        return "- (one account: the same run as alone)"
    ran = {f.ran_parallel or 1 for f in whole.rounds}
    ratio = whole.wall_s / total.wall_s
    if min(ran) > 1:
        return f"< 1: {'met' if ratio < 1 else '**missed**'}"
    return f"<= 1: {'met' if ratio <= 1 else '**missed**'}"


def _full_table(
    runs: dict[tuple[str, tuple[Any, ...]], list[Figures]], destination: str, options: Any
) -> list[str]:
    lines = [
        "| accounts | run | at once | wall s | every round | CPU s | sandboxes' CPU s "
        "| peak MB | processes | wall / sum | peak / largest single | requests and rows "
        "| target |",
        "|---:|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for count in options.accounts:
        names = account_names(count)
        singles = [runs[(destination, ("single", name))] for name in names]
        sums = [summed(each) for each in zip(*singles, strict=True)]
        total = Row(sums)
        lines.append(
            f"| {count} | sum of the {count} single run{'s' if count > 1 else ''} | 1 | "
            f"{total.wall_s:.1f} | {total.every()} | {total.cpu_s:.1f} | "
            f"{_fmt(total.server_cpu_s)} | {_mb(total.peak_mb)} | "
            f"{max(f.processes for f in sums)} | | | {_work(sums)} | |"
        )
        for p in distinct_parallel(count, options.parallel):
            rounds = runs[(destination, ("full", count, p))]
            whole = Row(rounds)
            peak = (
                f"{whole.peak_mb / total.peak_mb:.2f}"
                if whole.peak_mb is not None and total.peak_mb
                else "?"
            )
            lines.append(
                f"| {count} | whole run, `--parallel {p}` | {_at_once(rounds, p)} | "
                f"{whole.wall_s:.1f} | {whole.every()} | {whole.cpu_s:.1f} | "
                f"{_fmt(whole.server_cpu_s)} | {_mb(whole.peak_mb)} | "
                f"{max(f.processes for f in rounds)} | {whole.wall_s / total.wall_s:.2f} | "
                f"{peak} | {same_work(sums, rounds)} | {_target(count, whole, total)} |"
            )
    return lines


def _after_table(
    runs: dict[tuple[str, tuple[Any, ...]], list[Figures]], destination: str, options: Any
) -> list[str]:
    lines = [
        "| accounts | run | at once | wall s | every round | CPU s | peak MB | requests "
        "| wall / sum |",
        "|---:|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for count in options.accounts:
        singles = [runs[(destination, ("single normal", name))] for name in account_names(count)]
        sums = [summed(each) for each in zip(*singles, strict=True)]
        total = Row(sums)
        parallel = distinct_parallel(count, options.parallel)
        named: list[tuple[str, list[Figures], str]] = [
            (f"sum of the {count} single normal sync{'s' if count > 1 else ''}", sums, "1")
        ]
        named += [
            (
                f"normal sync, nothing to do, `--parallel {p}`",
                runs[(destination, ("normal", count, p))],
                _at_once(runs[(destination, ("normal", count, p))], p),
            )
            for p in parallel
        ]
        named.append(
            (f"`feedback-sync models` over {count}", runs[(destination, ("models", count))], "-")
        )
        for label, rounds, at_once in named:
            row = Row(rounds)
            requests = sorted({sum(f.requests.values()) for f in rounds})
            ratio = f"{row.wall_s / total.wall_s:.2f}" if label.startswith("normal") else ""
            lines.append(
                f"| {count} | {label} | {at_once} | {row.wall_s:.1f} | {row.every()} | "
                f"{row.cpu_s:.1f} | {_mb(row.peak_mb)} | "
                f"{', '.join(f'{r:,}' for r in requests)} | {ratio} |"
            )
    return lines


def _fmt(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "?"


def _versions(options: Any) -> str:
    names = ["feedback-sync", "dlt", "duckdb", "pyarrow", "httpx"]
    if "postgres" in options.destinations:
        names.append("psycopg2-binary")
    found = []
    for name in names:
        with contextlib.suppress(PackageNotFoundError):
            found.append(f"{name} {version(name)}")
    if options.postgres_version:
        found.append(f"PostgreSQL {options.postgres_version}")
    return ", ".join([f"Python {platform.python_version()}", *found])


def _machine() -> str:
    cores = len(os.sched_getaffinity(0))
    memory = model = "?"
    with contextlib.suppress(OSError):
        total_kb = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        memory = f"{int(total_kb.group(1)) / 2**20:.1f} GB" if total_kb else "?"
    with contextlib.suppress(OSError):
        named = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        model = named.group(1).strip() if named else "?"
    return f"{platform.machine()}, Linux {platform.release()}, {cores} cores ({model}), {memory}"


def render(
    runs: dict[tuple[str, tuple[Any, ...]], list[Figures]],
    options: Any,
    load: tuple[float, float],
) -> str:
    """The results file."""
    command = shlex.join(["./run", "bench", "accounts", *options.argv])
    lines = [
        "# Benchmarks: many accounts",
        "",
        f"`{command}` wrote this file ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC). In effect: "
        f"accounts {','.join(map(str, options.accounts))}, scale `{options.scale}`, "
        f"destinations {','.join(options.destinations)}, parallel "
        f"{','.join(map(str, options.parallel))}, {options.rounds} round(s).",
        "",
        f"- machine: {_machine()}; load average {load[0]:.2f} at the start, "
        f"{load[1]:.2f} at the end",
        f"- versions: {_versions(options)}",
        *[f"- {line}" for line in _method(options)],
        "",
    ]
    for destination in options.destinations:
        lines += [
            f"## {DESTINATIONS[destination]}",
            "",
            f"A full sync (`--full`, into an empty warehouse) of N accounts at `{options.scale}`: "
            "the whole run against the sum of the accounts' single runs. `wall / sum` is the "
            "whole run's wall time over the sum of the single runs'; the target, from the "
            "issue: no more than the sum, less where accounts ran at once.",
            "",
            *_full_table(runs, destination, options),
            "",
            "After the full syncs: a normal sync with nothing to do (the first after the "
            "full one, which also reads each link type once to get its cursor), of each "
            "account alone (summed) and of the N accounts in one command, and the SQL models "
            "over the N accounts (`feedback-sync models`, once per N, after the first "
            "`--parallel`'s run).",
            "",
            *_after_table(runs, destination, options),
            "",
        ]
    lines += _limits(runs, options)
    return "\n".join(lines) + "\n"


def _method(options: Any) -> list[str]:
    return [
        "servers: one `feedback-sync sandbox` process per account on loopback (account "
        "`accNN` at seed NN, so the accounts' data differ, with an API key of its own), "
        "started and seeded before the first timed run and in no measured process. One "
        "server per account is the closer to reality: each account is a board of its own "
        "with its own base URL and key, so the sync opens each account's connections, paces "
        "its requests and sends its key to that account's server alone. One sandbox serving "
        "several keys would put every account's requests through one server process (one "
        "event loop, one core): at 4 accounts at once that server, not the sync, would set "
        "the pace. The servers do share this machine's cores with the sync (their CPU time "
        "during each run is in the tables).",
        "the single runs: `feedback-sync sync --account NAME --full --no-models --json` in a "
        "fresh folder and warehouse, only that account configured, one after another, each "
        "followed by a normal sync in its warehouse; summed for each N over the first N "
        "accounts (wall and CPU times added, peak memory the largest of theirs, requests "
        "and rows added)",
        "the whole run: `feedback-sync sync --parallel P --full --no-models --json` with the "
        "N accounts configured (`SOURCES__FEEDBACK__ACCOUNT_NAMES` and each account's "
        "variables), in a fresh folder and warehouse (a new PostgreSQL database per run); "
        "`--parallel` values that make the same run are run once (one account runs in the "
        "command's own process whatever `--parallel` says)",
        "peak memory: of the whole process tree (the command, each account's process and "
        "each one's HTTP helper), sampled every 50 ms from `/proc`: each process's private "
        "resident memory added up, and the largest file-backed resident part (the "
        "interpreter and libraries every process maps) counted once "
        "(`bench/processes.py`, `TreeMemory`). The kernel's `ru_maxrss` is one process's "
        "peak: wrong for a tree whose processes overlap. The sandboxes and the PostgreSQL "
        "server are not in the tree; DuckDB runs inside the sync's processes and is.",
        "CPU: user + system time of the command and every process it waited for (the "
        "kernel's `wait4`); `sandboxes' CPU s`: what the serving sandboxes used meanwhile",
        "requests: each account's sandbox's own log; rows: the rows every table held after "
        "the run (`--json`), per account. `requests and rows` compares both sides account "
        "by account in every round: `equal` where they agree, `**DIFFER**` with each "
        "difference where not",
        f"each figure is the median of {options.rounds} round(s) (the lower of the middle "
        "two for an even number); every round's wall time is beside it; odd rounds measure "
        "the single runs first, even rounds the whole runs first; before the first round, "
        "one sync into each destination is made and left out (a warm-up)",
    ]


def _busiest(
    runs: dict[tuple[str, tuple[Any, ...]], list[Figures]], destination: str, options: Any
) -> tuple[int, int, Row] | None:
    """The whole run of the most accounts with the most at once: (N, P, its row)."""
    count = max(options.accounts)
    if count < 2:
        return None
    p = max(distinct_parallel(count, options.parallel))
    return count, p, Row(runs[(destination, ("full", count, p))])


def _limits(runs: dict[tuple[str, tuple[Any, ...]], list[Figures]], options: Any) -> list[str]:
    cores = len(os.sched_getaffinity(0))
    lines = ["## What limits the figures", ""]
    for destination in options.destinations:
        busiest = _busiest(runs, destination, options)
        if busiest is None:
            continue
        count, p, row = busiest
        server = (
            f", the sandboxes {row.server_cpu_s / row.wall_s:.2f} more" if row.server_cpu_s else ""
        )
        lines.append(
            f"- **{cores} cores.** Into {DESTINATIONS[destination]}, {count} accounts at "
            f"`--parallel {p}` kept {row.cpu_s / row.wall_s:.2f} cores busy (the tree's CPU "
            f"time over its wall time){server}. Each account's sync is bound by its own CPU "
            "(parsing JSON, building Arrow tables; `bench/RESULTS.md`), with its HTTP helper "
            "beside it: more accounts at once than cores only queue for them."
        )
    duck = [
        (f.ran_parallel or 1, key[2])
        for (destination, key), rounds in runs.items()
        if destination == "duckdb" and key[0] == "full" and key[1] > 1
        for f in rounds
    ]
    if duck:
        most = max(ran for ran, _ in duck)
        if most == 1 and max(asked for _, asked in duck) > 1:
            lines.append(
                "- **DuckDB takes one writing process per file.** The accounts share one "
                "file, and the sync ran them one after another whatever `--parallel` asked "
                "(the `at once` column): into DuckDB the whole run is the single runs in a "
                "row, plus its own process."
            )
        elif most > 1:
            lines.append(
                f"- **DuckDB takes one writing process per file.** The sync ran up to {most} "
                "accounts at once into the one file; their loads into it take turns."
            )
    lines += _start_and_exit(runs)
    lines.append(
        "- **Memory grows with the accounts at once.** Each account's process holds its own "
        "account's data and load (DuckDB's buffers, into DuckDB), with its HTTP helper "
        "beside it: the tree's peak is about the single run's peak times the accounts at "
        "once (`peak / largest single`)."
    )
    lines.append(
        "- **The servers run on the same cores.** A real service's servers are elsewhere, "
        "and its network latency adds to every request: there, accounts at once overlap "
        "their waiting as well as their CPU. The PostgreSQL server also runs here (fsync "
        "on); its CPU and memory are in no figure of the tree."
    )
    return [*lines, ""]


def _start_and_exit(runs: dict[tuple[str, tuple[Any, ...]], list[Figures]]) -> list[str]:
    """What each account's process costs before and after its sync, on both sides."""

    def every(kind: str, what: str) -> list[float]:
        return [
            value
            for (_, key), rounds in runs.items()
            if key[0] == kind and (kind == "single" or key[1] > 1)
            for figures in rounds
            for value in getattr(figures, what)
        ]

    alone, spawned = every("single", "starts"), every("full", "starts")
    alone_out, spawned_out = every("single", "outside"), every("full", "outside")
    if not (alone and spawned and alone_out and spawned_out):
        return []
    line = (
        "- **Start and exit of each account's process.** In the whole runs an account's "
        f"process spent a median {_median(spawned):.2f} s from its start to its first "
        "request (the sync's `start` phase, in its `--json`: the interpreter, the imports, "
        f"the settings, the pipeline's state) and {_median(spawned_out):.2f} s beyond the "
        "sync's own count of it (its spawn and its exit, as the parent timed it); a single "
        f"run {_median(alone):.2f} s and {_median(alone_out):.2f} s (its wall time less its "
        "own count). Both sides pay them once per account; the whole run also starts its "
        "own process (`./run bench sync` measures a command's fixed cost in its start-up "
        "rows, `bench/startup.py`)."
    )
    from feedback_sync.app.fanout import CHILD

    if "-m" in CHILD and _median(spawned_out) - _median(alone_out) > 0.2:
        line += (
            " The accounts' processes run as `python -m feedback_sync.app.cli`, which ends "
            "through the interpreter's teardown, where the `feedback-sync` command skips it "
            "(`app/process.py`, `end_quickly`)."
        )
    return [line]
