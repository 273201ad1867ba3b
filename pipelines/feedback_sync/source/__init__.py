"""The ``feedback`` dlt source (``source.py``) and what it is built from.

Importing this package is cheap: ``feedback`` and ``SyncRun`` (which need dlt) are loaded
from ``source.py`` the first time they are asked for, so the command line's parser and
``--help`` never import dlt (tests/sync/test_cli_imports.py).

    from feedback_sync.source import feedback   # the dlt source
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from feedback_sync.source.resources import NAMES as RESOURCES

if TYPE_CHECKING:
    from feedback_sync.source.context import SyncRun
    from feedback_sync.source.source import feedback

__all__ = ["RESOURCES", "SyncRun", "feedback"]


def __getattr__(name: str) -> Any:
    if name == "feedback":
        from feedback_sync.source.source import feedback

        return feedback
    if name == "SyncRun":
        from feedback_sync.source.context import SyncRun

        return SyncRun
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
