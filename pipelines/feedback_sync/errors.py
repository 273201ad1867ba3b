"""The errors feedback-sync raises on purpose, in one tree; each class carries the exit code
the command line ends with and whether running again later may succeed (``transient``:
True, False, or None where its cause decides).

::

    FeedbackError                 1  the base
    ├── ConfigError               2  a setting, argument or file is missing or malformed;
    │   │                            names it (nothing was fetched or written)
    │   ├── MissingExtra          2  a command needs an extra that is not installed
    │   ├── UsageError            2  bad command-line input
    │   └── WriterSlotMissing     2  the warehouse's Prefect concurrency limit does not exist
    ├── WarehouseBusy             1  another run holds the warehouse (transient)
    ├── Interrupted             130  Ctrl-C (or SIGTERM) stopped a run; says what of it was
    │                                committed and what the next run, or command, finishes
    ├── LoadFailed                1  the warehouse refused a load job for good; names the
    │                                table and its reason (the run's package was aborted)
    ├── DataError                 1  an item the API sent cannot be shaped into a row
    ├── ModelError                1  a model cannot be built, or the warehouse keeps none
    │   ├── DependentViewError       someone's view that reads the models does not compile
    │   ├── DeltaError               a Delta table the models cannot read as files
    │   ├── NothingSynced            the models find no loaded tables (no sync yet)
    │   └── DataTestsFailed          a data test of the marts found rows that break it (the
    │                                build was rolled back: the previous models stay)
    ├── ChecksFailed              1  data checks on a sync failed (the Prefect flow)
    ├── AccountsFailed            1  accounts of a fan-out failed (the Prefect flow); names
    │                                them
    ├── PushFailed                1  rows of a push were invalid, rejected or held
    ├── BadValue                  1  a curated value cannot be sent as its field needs it
    └── ApiError                  1  the service refused a request for good (4xx other
        │                            than 429) or kept failing past the retry bound; names
        │                            the resource, the request (key redacted), the answer
        ├── NotFound                 404: callers skip an idea that vanished
        ├── RetriesExhausted         429, 5xx, timeouts, dropped connections or unreadable
        │   │                        bodies, more than ``max_retries`` times (transient)
        │   └── Unreachable          no connection before the service ever answered (a
        │                            wrong base URL): given up after a few quick tries
        └── OutcomeUnknown           a create failed after it may have reached the service:
                                     the caller looks for the object before it creates again

What other libraries raise (dlt, DuckDB, psycopg2, Prefect) is translated in one place,
``app/failures.py``. Messages never contain the API key (``redaction.redact_url``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol


class FeedbackError(Exception):
    """Base of every error feedback-sync raises on purpose."""

    exit_code: ClassVar[int] = 1
    # whether running again later may well succeed (what a scheduler may retry); None: not
    # known for this kind of error, so what caused it decides (app/failures.is_transient)
    transient: ClassVar[bool | None] = None
    # whether it stops a sync before anything of it was committed, so that the next run
    # resumes from the last committed state (the command line says so)
    resumes: ClassVar[bool] = False


class ConfigError(FeedbackError):
    """A setting is missing or malformed."""

    exit_code: ClassVar[int] = 2
    transient: ClassVar[bool | None] = False


class MissingExtra(ConfigError):
    """A command needs an optional part of feedback-sync that is not installed; the message
    names the extra to install (``extras.py``)."""


class UsageError(ConfigError):
    """Bad command-line input: printed without a traceback."""


class WriterSlotMissing(ConfigError):
    """The warehouse's global concurrency limit does not exist on the Prefect server."""


class WarehouseBusy(FeedbackError):
    """Another run holds the warehouse (running again later succeeds)."""

    transient: ClassVar[bool | None] = True


class Interrupted(FeedbackError):
    """A run stopped by Ctrl-C (SIGINT) or SIGTERM; the message says which step it was in,
    what of it is committed, and what finishes the rest."""

    exit_code: ClassVar[int] = 130
    transient: ClassVar[bool | None] = True


class WarehouseUnwritable(FeedbackError):
    """The warehouse cannot be written now: a folder without write permission, a file
    another process holds, a server that refuses (``feedback-sync check``)."""

    transient: ClassVar[bool | None] = False


class LoadFailed(FeedbackError):
    """The destination refused a load job for good (a terminal job failure).

    The run's load package was aborted, so its state (the new cursors) was not committed:
    the next run reads the same rows again.
    """

    transient: ClassVar[bool | None] = False


class DataError(FeedbackError, ValueError):
    """A row the API sent cannot be shaped (a timestamp that is not one, say)."""

    transient: ClassVar[bool | None] = False
    resumes: ClassVar[bool] = True


class ModelError(FeedbackError):
    """A model that cannot be built, a SQL folder that does not make sense, or a warehouse
    that keeps no models (another destination, nothing synced yet)."""


class DependentViewError(ModelError):
    """A view of someone else's that reads the models does not compile against new ones."""


class DeltaError(ModelError):
    """A Delta table the models cannot read as files."""


class NothingSynced(ModelError):
    """The models find no loaded tables where they look: nothing was synced there yet (a
    build over accounts leaves such an account out, and names it)."""


class _Outcome(Protocol):
    @property
    def passed(self) -> bool: ...

    def line(self) -> str: ...


class DataTestsFailed(ModelError):
    """Data tests of the marts found rows that break them; the message names each test,
    and ``outcomes`` holds every test's result. The build was rolled back."""

    def __init__(self, outcomes: Sequence[_Outcome]) -> None:
        self.outcomes = list(outcomes)
        failed = [o for o in self.outcomes if not o.passed]
        super().__init__(
            f"{len(failed)} of {len(self.outcomes)} data tests failed, so the models were not "
            "replaced (the previous build stays): " + "; ".join(o.line() for o in failed)
        )


class _Check(Protocol):
    def line(self) -> str: ...


class ChecksFailed(FeedbackError):
    """At least one check failed; the message names each failed check, table and figure."""

    def __init__(self, failed: Sequence[_Check]) -> None:
        self.failed = list(failed)
        super().__init__("data checks failed: " + "; ".join(c.line() for c in failed))


class AccountsFailed(FeedbackError):
    """Accounts of a fan-out run failed (``flows/fanout.py``); the message names each and
    its error line."""


class PushFailed(FeedbackError):
    """Rows were invalid, rejected or held, or a target was refused."""


class BadValue(FeedbackError, ValueError):
    """A curated value that cannot be sent as the field needs it; the message says why."""

    transient: ClassVar[bool | None] = False


class ApiError(FeedbackError):
    """The service answered a request with a failure the client does not retry (any more)."""

    transient: ClassVar[bool | None] = False
    resumes: ClassVar[bool] = True

    def __init__(
        self,
        resource: str,
        method: str,
        url: str,
        status: int | None,
        detail: str,
    ) -> None:
        self.resource = resource
        self.method = method
        self.url = url
        self.status = status
        self.detail = detail
        answer = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{resource}: {method} {url} failed ({answer}): {detail}")


class NotFound(ApiError):
    """404: the thing the request names does not exist (any more)."""


class RetriesExhausted(ApiError):
    """A retryable failure kept happening past the retry bound."""

    transient: ClassVar[bool | None] = True


class Unreachable(RetriesExhausted):
    """No connection could be opened, and the service never answered this run: most likely
    a wrong base URL (port, host), so the run stops within seconds and names it."""


class OutcomeUnknown(ApiError):
    """A write that is not idempotent failed in a way that may have come after the service
    acted on it (timeout, dropped connection, 5xx, unreadable answer); it was not resent."""


def causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps: dlt's ``.exception``, causes and contexts."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        todo += [getattr(current, "exception", None), current.__cause__, current.__context__]
    return seen
