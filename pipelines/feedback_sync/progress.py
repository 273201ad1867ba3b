"""How far a long run has come, on stderr: a live display on a terminal, plain lines in
logs and pipes.

``Progress`` is what ``sync`` and ``push`` report through. The run sets its stage
(``stage``: extract, normalize, load, models; planning or sending a push target), says
what it does (``say``: one line each), and names a reader of its figures (``watch``:
requests, retries, rows per resource or target). How that is shown is chosen once:

- ``live`` (a terminal): rich's live display, redrawn four times a second, with the stage,
  the time, the requests and a row per resource; the lines the run says, and the log's
  warnings, are printed above it. It is cleared at the end, where the run's summary follows.
- ``plain`` (anything else: a pipe, a file, a cron mail, Prefect's log): the lines the run
  says, and a line of figures every ``every`` seconds while it runs.
- ``off``: only the lines the run says.

``auto`` (the default) is ``live`` where stderr is a terminal rich can draw on (not
``TERM=dumb``), else ``plain``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any

MODES = ("auto", "live", "plain", "off")
REFRESHES_PER_SECOND = 4


@dataclass(frozen=True)
class Figures:
    """What a run has done so far."""

    requests: int = 0
    retries: int = 0
    # per resource (sync) or target (push): the requests made and the rows counted
    requests_by: Mapping[str, int] = field(default_factory=dict)
    rows_by: Mapping[str, int] = field(default_factory=dict)
    # where known: how many items the run has behind it, out of how many (per resource)
    done_by: Mapping[str, int] = field(default_factory=dict)
    total_by: Mapping[str, int] = field(default_factory=dict)

    def rows_text(self, name: str) -> str:
        """``name``'s rows, as done out of total where the total is known."""
        total = self.total_by.get(name)
        if total:
            return f"{min(self.done_by.get(name, 0), total):,}/{total:,}"
        return f"{self.rows_by.get(name, 0):,}"

    def share_done(self) -> float | None:
        """The share of the items behind the run, where every resource read so far has a
        known total (None where one has not)."""
        if not self.rows_by or any(not self.total_by.get(name) for name in self.rows_by):
            return None
        total = sum(self.total_by.values())
        done = sum(min(self.done_by.get(n, 0), t) for n, t in self.total_by.items())
        return done / total if total else None


# an estimate of the time left is shown once this share is done and this long has passed
ESTIMATE_AFTER_SHARE = 0.02
ESTIMATE_AFTER_SECONDS = 2.0


class Progress:
    """The progress of one run of ``command`` (see the module's docstring).

    ``rows`` names what the rows column counts ("rows fetched", "rows sent").
    """

    def __init__(
        self,
        command: str,
        out: IO[str] | None = None,
        *,
        mode: str = "auto",
        every: float = 5.0,
        rows: str = "rows",
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.command = command
        self._out = out if out is not None else sys.stderr
        self._every = every
        self._rows = rows
        self._read: Callable[[], Figures] = Figures  # none yet
        self._watched = time.perf_counter()
        self._stage = "starting"
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None
        self._console: Any = None
        self._moved: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._writing = threading.Lock()  # one line at a time, whole, from any thread
        self.mode = _chosen(mode, self._out)
        # called as each step begins, before it is shown (a run's own check, say that no
        # Ctrl-C went unnoticed in the step before)
        self.checkpoint: Callable[[], None] | None = None

    # what the run tells it

    def stage(self, name: str) -> None:
        if self.checkpoint is not None:
            self.checkpoint()
        self._stage = name

    @property
    def current(self) -> str:
        """The step the run is in (the last ``stage``)."""
        return self._stage

    def watch(self, read: Callable[[], Figures]) -> None:
        """``read`` gives the figures from now on (called from another thread: it must
        only read)."""
        self._read = read
        self._watched = time.perf_counter()

    def left(self, figures: Figures) -> str:
        """`` about 1m20s left`` while the figures are read, once an estimate can be made
        (the share done, and the time since ``watch``: items take about the same time
        each); nothing before, or where a total is not known."""
        share = figures.share_done()
        since = time.perf_counter() - self._watched
        if share is None or not ESTIMATE_AFTER_SHARE <= share < 1 or since < ESTIMATE_AFTER_SECONDS:
            return ""
        seconds = round(since * (1 - share) / share)
        if seconds < 1:
            return ""
        shown = f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
        return f"  about {shown} left"

    def say(self, line: str) -> None:
        if self._console is not None:
            self._console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self._write(line)

    def _write(self, line: str) -> None:
        with self._writing:
            self._out.write(line + "\n")
            self._out.flush()

    # shown while the block runs

    def __enter__(self) -> Progress:
        self._started = time.perf_counter()
        if self.mode == "live":
            self._start_live()
        elif self.mode == "plain":
            self._thread = threading.Thread(
                target=self._lines, name=f"{self.command}-progress", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._live is not None:
            self._live.stop()
            for handler, stream in self._moved:
                handler.setStream(stream)
            self._live = self._console = None

    def _figures(self) -> Figures | None:
        """The run's figures, or None where reading them failed (shown as such: a display
        must never end a run, nor print a traceback from its thread)."""
        try:
            return self._read()
        except Exception:
            return None

    def line(self) -> str:
        """The figures as one plain line."""
        figures = self._figures()
        if figures is None:
            return f"{self.command}: {self._stage}  (figures unavailable)"
        parts = [f"{name} {figures.rows_text(name)}" for name in figures.rows_by]
        return (
            f"{self.command}: {time.perf_counter() - self._started:5.1f}s  {self._stage}  "
            f"{figures.requests:,} requests ({figures.retries:,} retried){self.left(figures)}; "
            f"{self._rows}: {', '.join(parts) or 'none yet'}"
        )

    def _lines(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._write(self.line())
            except (OSError, ValueError):  # the stream was closed under us
                return

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = Console(file=self._out)
        self._live = Live(
            _Display(self),
            console=self._console,
            refresh_per_second=REFRESHES_PER_SECOND,
            transient=True,
            redirect_stdout=False,  # stdout is the summary's (or the --json document's)
            # what is written to sys.stderr while the display is live (a log handler made
            # meanwhile, dlt's included: dlt makes its own when a pipeline is made) goes
            # above the display, through rich's proxy
            redirect_stderr=True,
        )
        self._live.start()
        # and the log handlers made before, which hold the terminal's stream itself (the
        # root logger's, dlt's own when it was made earlier)
        loggers = [logging.getLogger()] + [
            logger
            for logger in list(logging.Logger.manager.loggerDict.values())
            if isinstance(logger, logging.Logger)
        ]
        above = _Above(self._console)
        for logger in loggers:
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is self._out:
                    self._moved.append((handler, handler.setStream(above)))

    def table(self) -> Any:
        """The live display's contents (rich renderables)."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        figures = self._figures()
        seconds = time.perf_counter() - self._started
        if figures is None:
            return Text(f"{self.command}: {self._stage}  {seconds:.0f}s  (figures unavailable)")
        title = Text(
            f"{self.command}: {self._stage}  {seconds:.0f}s  {figures.requests:,} requests "
            f"({figures.retries:,} retried){self.left(figures)}",
            style="bold",
        )
        table = Table(box=None, pad_edge=False)
        by_requests = bool(figures.requests_by)
        table.add_column("")
        if by_requests:
            table.add_column("requests", justify="right")
        table.add_column(self._rows, justify="right")
        for name in dict.fromkeys([*figures.requests_by, *figures.rows_by]):
            cells = [f"{figures.requests_by.get(name, 0):,}"] if by_requests else []
            table.add_row(name, *cells, figures.rows_text(name))
        return Group(title, table)


class _Display:
    """Re-read on every refresh of the live display."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def __rich__(self) -> Any:
        return self._progress.table()


class _Above:
    """A stream for the log's handler while the display is live: each line printed above it."""

    def __init__(self, console: Any) -> None:
        self._console = console

    def write(self, text: str) -> int:
        if text.strip():
            self._console.print(text.rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        return None


def _chosen(mode: str, out: IO[str]) -> str:
    if mode != "auto":
        return mode
    if not getattr(out, "isatty", lambda: False)():
        return "plain"  # decided without importing rich (a pipe, a file, a test's capture)
    from rich.console import Console

    console = Console(file=out)
    return "live" if console.is_terminal and not console.is_dumb_terminal else "plain"
