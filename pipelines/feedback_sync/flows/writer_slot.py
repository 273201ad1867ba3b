"""The warehouse's writer slot: a Prefect global concurrency limit of 1, taken by every run
of the sync and the push flows before they write (its name: ``lineage.concurrency_limit``).

Taken with ``strict=True``, so a run whose limit does not exist fails at once instead of
writing unguarded; that failure is turned into one line naming the command that creates
the limit (``WriterSlotMissing``, a configuration error).
"""

from __future__ import annotations

from contextlib import ExitStack

from prefect.concurrency.asyncio import ConcurrencySlotAcquisitionError
from prefect.concurrency.sync import concurrency

from feedback_sync.app.failures import limit_missing
from feedback_sync.errors import WriterSlotMissing


def take_writer_slot(held: ExitStack, limit: str) -> None:
    """Holds the slot ``limit`` until ``held`` closes. Raises ``WriterSlotMissing`` when no
    such limit exists, and Prefect's own error when the server failed otherwise."""
    try:
        held.enter_context(concurrency(limit, occupy=1, strict=True))
    except ConcurrencySlotAcquisitionError as exc:
        if not limit_missing(exc):
            raise
        raise WriterSlotMissing(
            f"no global concurrency limit named {limit!r} on the Prefect server ({exc}); "
            f"create it once with: prefect gcl create {limit} --limit 1"
        ) from None
