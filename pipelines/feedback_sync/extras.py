"""The optional parts of feedback-sync, each an extra of the distribution
(``pip install 'feedback-sync[postgres]'``): the modules each brings, and the one line that
says which to install when a command needs one that is missing."""

from __future__ import annotations

import importlib.util

from feedback_sync.errors import MissingExtra

# extra -> the modules it installs that feedback-sync imports (pyproject.toml lists them),
# for the extras that are not a destination's: a destination's module names its own
# (``warehouse/postgres.py``, ``warehouse/delta.py``: ``DRIVER_MODULES``)
EXTRAS: dict[str, tuple[str, ...]] = {
    "prefect": ("prefect",),
    "sandbox": ("starlette", "uvicorn", "sortedcontainers", "markdown_it"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules: importing it fails
        return False


def require(extra: str, what: str, modules: tuple[str, ...] | None = None) -> None:
    """Raises ``MissingExtra`` naming ``extra`` when a module it brings is not installed.

    Args:
        extra: the extra's name.
        what: what needs it, as the message says it ("the PostgreSQL destination").
        modules: the modules the extra brings (None: ``EXTRAS[extra]``).
    """
    brought = EXTRAS[extra] if modules is None else modules
    missing = [module for module in brought if not _installed(module)]
    if missing:
        raise MissingExtra(
            f"feedback-sync's extra [{extra}] is not installed ({', '.join(missing)} is "
            f"missing), and {what} needs it: pip install 'feedback-sync[{extra}]'"
        )
