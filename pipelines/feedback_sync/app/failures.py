"""Turning a failed run into one line a person can act on, and the one place that reads
what other libraries (dlt, DuckDB, psycopg2, Prefect) say when they fail.

dlt wraps what a resource raised (``PipelineStepFailed`` -> ``ResourceExtractionError`` ->
our error); this walks the chain for the error that says what happened. An error of our own
tree (``errors.py``) carries its exit code and whether it is transient; another library's
is recognised here by its class or, where it has no class of its own, by its words.
"""

from __future__ import annotations

import errno

from feedback_sync.errors import (
    ConfigError,
    FeedbackError,
    Interrupted,
    LoadFailed,
    WarehouseBusy,
    causes,
)

NO_SPACE = "No space left on device"  # strerror(ENOSPC), as DuckDB and the OS word it
# Prefect's words for a global concurrency limit that does not exist (it has no class)
_LIMIT_MISSING = "must be created"


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, a Ctrl-C: Python's ``KeyboardInterrupt``, dlt's
    ``SignalReceivedException`` (its steps stop at their next check), or a destination's
    interrupted statement (DuckDB's)."""
    from dlt.common.exceptions import SignalReceivedException

    from feedback_sync.warehouse.driver_errors import interrupted_statement

    for error in causes(exc):
        if isinstance(error, KeyboardInterrupt | SignalReceivedException):
            return True
        if interrupted_statement(error):
            return True
    return False


def explain(exc: BaseException) -> tuple[str | None, int]:
    """``(message, exit code)`` for a failure we can describe, else ``(None, 1)``.

    The first of these that recognises something in the chain speaks: a Ctrl-C, bad
    settings, a destination that cannot be reached, our own errors, a full disk, a warehouse
    another process holds, a destination out of memory (the destinations' words are their
    modules', ``warehouse/driver_errors.py``)."""
    chain = causes(exc)
    for error in chain:
        if isinstance(error, Interrupted):  # it says which step, before what it wraps
            return str(error), error.exit_code
    if interrupted(exc):
        return "interrupted; the next run resumes from the last committed state", 130
    for explained in (
        _misconfigured,
        _unreachable,
        _ours,
        _no_space,
        _held_elsewhere,
        _out_of_memory,
    ):
        said = explained(chain)
        if said is not None:
            return said
    return None, 1


def _misconfigured(chain: list[BaseException]) -> tuple[str, int] | None:
    """Bad settings: ours, an unreadable settings file, an unknown destination, or one
    that lacks a field dlt needs."""
    from dlt.common.configuration.exceptions import ConfigFieldMissingException
    from dlt.common.configuration.providers.toml import TomlProviderReadException
    from dlt.common.destination.exceptions import UnknownDestinationModule

    for error in chain:
        if isinstance(error, ConfigError):
            return str(error), error.exit_code
        if isinstance(error, TomlProviderReadException):
            # settings_files.check_settings_files reads these first; this is the fallback
            where = " or ".join(error.full_paths)
            said = str(error).splitlines()[-1]
            return f"{error.file_name} ({where}) is not valid TOML: {said}", 2
        if isinstance(error, UnknownDestinationModule):
            return f"--destination: {str(error).splitlines()[0]}", 2
        if isinstance(error, ConfigFieldMissingException):
            missing = ", ".join(f"`{field}`" for field in error.fields)
            return (
                f"the destination is not configured: missing {missing} "
                f"(see dlt's docs for {error.spec_name}; e.g. DESTINATION__<NAME>__CREDENTIALS)",
                2,
            )
    return None


def _unreachable(chain: list[BaseException]) -> tuple[str, int] | None:
    """A destination's server that refused the login (configuration, exit 2: the
    destination's module says so, ``driver_errors.explain_connection``) or could not be reached
    (exit 1)."""
    from feedback_sync.warehouse.driver_errors import explain_connection, failed_to_connect

    for error in chain:
        if not failed_to_connect(error):
            continue
        first = _first_line(error)
        return explain_connection(first) or (f"cannot connect to the destination: {first}", 1)
    return None


def _ours(chain: list[BaseException]) -> tuple[str, int] | None:
    """An error of our own tree, in its own words (and, where the next run resumes, saying
    so)."""
    for error in chain:
        if isinstance(error, WarehouseBusy | LoadFailed):
            return str(error), error.exit_code
        if isinstance(error, FeedbackError) and error.resumes:
            resumes = f"{error}. Nothing from this run was committed; the next run resumes."
            return resumes, error.exit_code
        if isinstance(error, FeedbackError):
            return str(error), error.exit_code
    return None


def _no_space(chain: list[BaseException]) -> tuple[str, int] | None:
    """A write that failed for want of space, in the words of the error that says it
    itself (dlt's wrappers quote it deeper in their text)."""
    full = [e for e in chain if _disk_full(e) and NO_SPACE in _first_line(e)]
    full += [e for e in chain if isinstance(e, OSError) and e.errno == errno.ENOSPC]
    for error in full[:1]:
        first = _first_line(error)
        if isinstance(error, OSError) and error.filename and str(error.filename) not in first:
            first = f"{first} ({error.filename})"
        return (
            f"the disk is full: {first}. Nothing of this run was committed; free some "
            "space and run again (the next run finishes what this one left)",
            1,
        )
    return None


def _held_elsewhere(chain: list[BaseException]) -> tuple[str, int] | None:
    """A warehouse another process holds (DuckDB's file), in its destination's words."""
    from feedback_sync.warehouse.driver_errors import held_elsewhere

    for error in chain:
        said = held_elsewhere(error)
        if said is not None:
            return said, 1
    return None


def _out_of_memory(chain: list[BaseException]) -> tuple[str, int] | None:
    """A destination out of the memory it may use, with the setting that raises it."""
    from feedback_sync.warehouse.driver_errors import out_of_memory

    for error in chain:
        said = out_of_memory(error)
        if said is not None:
            return said, 1
    return None


def _disk_full(error: BaseException) -> bool:
    """A write that failed for want of space (Python's, or DuckDB's in its message)."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return True
    return NO_SPACE in str(error)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def is_transient(exc: BaseException) -> bool:
    """True when running again later may well succeed: the network or the service was in
    trouble (the client's retries ran out), the destination failed a job it calls
    retryable, or another run (or process) held the warehouse. False for bad configuration, bad
    data, a load the warehouse refused for good, a request the service refused (4xx) and
    anything not recognised: retrying those only repeats the failure.

    The one place that decides what a scheduler (Prefect's task retries) may retry.
    """
    import httpx
    from dlt.common.destination.exceptions import (
        DestinationTerminalException,
        DestinationTransientException,
    )

    chain = causes(exc)
    for error in chain:
        # a cause that is known for good wins over a transient-looking wrapper
        if isinstance(error, FeedbackError) and error.transient is False:
            return False
        if isinstance(error, DestinationTerminalException):
            return False
    from feedback_sync.warehouse.driver_errors import (
        explain_connection,
        failed_to_connect,
        held_elsewhere,
    )

    for error in chain:
        if failed_to_connect(error):
            # a server that is down or restarting may be back; a refused login will not be
            return explain_connection(_first_line(error)) is None
        if isinstance(error, FeedbackError) and error.transient is True:
            return True
        if isinstance(error, httpx.TransportError):
            return True
        if isinstance(error, DestinationTransientException) or held_elsewhere(error) is not None:
            return True
    return False


def limit_missing(exc: BaseException) -> bool:
    """Whether Prefect refused a concurrency slot because the limit does not exist (rather
    than because its server failed)."""
    return _LIMIT_MISSING in str(exc)
