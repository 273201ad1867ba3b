"""The sync's output in the flow run's logs: progress lines, the summary, dlt's warnings.

``run_sync`` prints progress to a stream and dlt logs through the ``dlt`` logger; inside a
flow run both are forwarded to Prefect's run logger (scrubbed of secrets first), so they
show in the UI without ``PREFECT_LOGGING_EXTRA_LOGGERS``.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from feedback_sync.redaction import SCRUBBER

FORWARDED = ("dlt", "feedback_sync")


class RunLogStream(io.TextIOBase):
    """A text stream whose every line becomes an INFO record of the run logger."""

    def __init__(self, logger: Any) -> None:
        self._logger = logger
        self._buffer = ""
        # the run's own lines and its progress thread's write at once
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._buffer += text
            *lines, self._buffer = self._buffer.split("\n")
        for line in lines:
            if line.strip():
                self._logger.info(SCRUBBER.scrub(line))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            rest, self._buffer = self._buffer, ""
        if rest.strip():
            self._logger.info(SCRUBBER.scrub(rest))


class _ToRunLogger(logging.Handler):
    def __init__(self, logger: Any) -> None:
        super().__init__(level=logging.WARNING)
        self._logger = logger

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = SCRUBBER.scrub(f"{record.name}: {record.getMessage()}")
            self._logger.log(record.levelno, message)
        except Exception:
            self.handleError(record)


@contextmanager
def forwarded(logger: Any) -> Iterator[None]:
    """While open, warnings of the ``dlt`` and ``feedback_sync`` loggers reach ``logger``."""
    handler = _ToRunLogger(logger)
    targets = [logging.getLogger(name) for name in FORWARDED]
    for target in targets:
        target.addHandler(handler)
    try:
        yield
    finally:
        for target in targets:
            target.removeHandler(handler)
