"""What every destination shares."""

from __future__ import annotations

import logging

from feedback_sync.source.screening import REJECTED_TABLE

log = logging.getLogger("feedback_sync")


def warn_unknown_rejection(root: str) -> None:
    """Nothing of ``root`` is removed this run: an item without an idx was rejected."""
    log.warning(
        "%s: no rows removed this run: an item without an idx was rejected "
        "(%s), and it may be any of the rows not seen",
        root,
        REJECTED_TABLE,
    )
