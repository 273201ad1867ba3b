"""What the destinations' drivers say when they fail, asked of every destination's class.

Each destination's module knows its own driver's words (``Target.failed_to_connect``,
``held_elsewhere``, ``out_of_memory``, ``interrupted_statement``, ``connection_refused``);
``app/failures.py`` asks here and never names a driver. Every destination's module is
asked, loaded or not: the failure may come from a process that made no target (a Prefect
task's retry decision), and the modules are light (no driver is imported).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from feedback_sync.warehouse.target import DESTINATIONS, OTHER, Target


@functools.cache
def _classes() -> tuple[type[Target], ...]:
    found: list[type[Target]] = []
    for name in (*DESTINATIONS.values(), OTHER):
        chosen: type[Target] = importlib.import_module(name).DESTINATION
        if chosen not in found:
            found.append(chosen)
    return tuple(found)


def _first(said: Callable[[type[Target]], str | None]) -> str | None:
    """The first thing a destination's class says, in ``DESTINATIONS``' order."""
    for chosen in _classes():
        line = said(chosen)
        if line is not None:
            return line
    return None


def held_elsewhere(error: BaseException) -> str | None:
    """The line of a destination whose warehouse another process holds (DuckDB's file
    lock); None otherwise."""
    return _first(lambda chosen: chosen.held_elsewhere(error))


def failed_to_connect(error: BaseException) -> bool:
    """Whether ``error`` is a failure to reach a destination, or a lost connection (not a
    warehouse another process holds, which dlt also calls a connection error)."""
    if held_elsewhere(error) is not None:
        return False
    return any(chosen.failed_to_connect(error) for chosen in _classes())


def out_of_memory(error: BaseException) -> str | None:
    """The line of a destination out of the memory it may use; None otherwise."""
    return _first(lambda chosen: chosen.out_of_memory(error))


def interrupted_statement(error: BaseException) -> bool:
    """Whether a destination's driver says a Ctrl-C stopped its statement."""
    return any(chosen.interrupted_statement(error) for chosen in _classes())


def explain_connection(first_line: str) -> tuple[str, int] | None:
    """What the destinations say of a failed connection whose error begins ``first_line``
    (``Target.connection_refused``, their drivers' words), else what any server's words
    say; None where nothing is known (a server down may be back)."""
    for chosen in _classes():
        said = chosen.connection_refused(first_line)
        if said is not None:
            return said
    return Target.connection_refused(first_line)
