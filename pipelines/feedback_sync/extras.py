"""The optional parts of feedback-sync, each an extra of the distribution
(``pip install 'feedback-sync[postgres]'``): the modules each brings, and the one line that
says which to install when a command needs one that is missing."""

from __future__ import annotations

import importlib.util

from feedback_sync.errors import MissingExtra

# extra -> the modules it installs that feedback-sync imports (pyproject.toml lists them)
EXTRAS: dict[str, tuple[str, ...]] = {
    "postgres": ("psycopg2", "adbc_driver_postgresql"),
    "delta": ("deltalake",),
    "prefect": ("prefect",),
    "sandbox": ("starlette", "uvicorn", "sortedcontainers", "markdown_it"),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules: importing it fails
        return False


def require(extra: str, what: str) -> None:
    """Raises ``MissingExtra`` naming ``extra`` when a module it brings is not installed.

    Args:
        extra: the extra's name (a key of ``EXTRAS``).
        what: what needs it, as the message says it ("the PostgreSQL destination").
    """
    missing = [module for module in EXTRAS[extra] if not _installed(module)]
    if missing:
        raise MissingExtra(
            f"feedback-sync's extra [{extra}] is not installed ({', '.join(missing)} is "
            f"missing), and {what} needs it: pip install 'feedback-sync[{extra}]'"
        )
