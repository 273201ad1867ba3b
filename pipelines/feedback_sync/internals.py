"""The private members of other libraries that feedback-sync still reads, all of them.

Each has no public equivalent (its docstring says what the public way would cost or lack),
and each names in ``CHECKED`` the releases it was read in: the versions uv.lock holds,
which are also pyproject.toml's lowest bounds (``tests/install/test_lowest.py`` runs on
those). ``tests/test_internals.py`` fails when one of them is gone or has changed shape,
and when the installed release is not one checked: then read the library's new code,
re-check the use here, and add the release to ``CHECKED``. Code elsewhere in the package
reaches none of them directly (the same test reads the package for that).

Nothing here imports the libraries: the functions take their objects, so importing this
module costs a command nothing.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

# the releases each library's members below were read in (Python: the interpreters the
# package supports, for ``atexit``)
CHECKED: dict[str, tuple[str, ...]] = {
    "httpx": ("0.28.1",),
    "dlt": ("1.31.0",),
    "python": ("3.11", "3.12", "3.13"),
}

# httpx's command-line client, a module ``import httpx`` imports in a ``try`` whenever
# click, rich and pygments are installed (Prefect installs them), falling back to a stub
# ``httpx.main`` that says the client is not installed
HTTPX_CLI_MODULE = "httpx._main"


def skip_httpx_cli() -> None:
    """Marks httpx's command-line client (``HTTPX_CLI_MODULE``) absent, so that a later
    ``import httpx`` takes its own fallback instead of importing click, rich and pygments.

    Measured: 40-45 ms of every command that imports httpx (``app/process.py``), for a
    client the process never runs; in the HTTP helper (``api/http_helper.py``, which
    writes the same line into the helper's start) half its start, 0.15 -> 0.08 s
    (``python -P -c "import httpx"`` against the same with the mark, 4 pairs). Public
    alternative: none; httpx has no switch for it. Checked: httpx ``CHECKED["httpx"]``.
    """
    sys.modules.setdefault(HTTPX_CLI_MODULE, None)  # type: ignore[arg-type]


def transport_for_url(
    client: httpx.Client,
) -> Callable[[httpx.URL], httpx.BaseTransport] | None:
    """httpx's own choice of transport for a URL (``Client._transport_for_url``: the
    client's mounts, the proxies from the environment among them), or None where httpx
    has it no more.

    ``api/client.py`` sends each request straight through that transport, without the
    client's layers it does not use (redirects, auth flows, event hooks, the cookie jar):
    the jar alone parses every answer, 0.06-0.15 ms of a request's 0.7-0.9 ms of client
    CPU (1,500 requests to the sandbox), about 5% of a full sync's. Public alternative:
    ``Client.send``, with those layers; the client takes it when this returns None.
    Checked: httpx ``CHECKED["httpx"]``.
    """
    pick: Callable[[httpx.URL], httpx.BaseTransport] | None = getattr(
        client, "_transport_for_url", None
    )
    return pick


def load_job_schema_name(job: Any) -> str:
    """The name of the schema a dlt load job loads: its client's (``RunnableLoadJob.
    _job_client``, set by ``run_managed`` before ``run``).

    ``warehouse/delta_tables.py`` changes only the Delta jobs of this product's source;
    dlt gives a job's schema to its ``run`` through these private members only. Public
    alternative: none (``load_table_name`` is the table's name alone). Checked: dlt
    ``CHECKED["dlt"]``.
    """
    name: str = job._job_client.schema.name
    return name


def load_job_table(job: Any) -> Any:
    """The table schema a dlt load job loads (``RunnableLoadJob._load_table``, set by
    ``set_run_vars``): its columns say the primary key. Public alternative: none, as for
    ``load_job_schema_name``. Checked: dlt ``CHECKED["dlt"]``.
    """
    return job._load_table


def run_exit_handlers() -> None:
    """Runs the exit handlers now, as the interpreter's own exit would
    (``atexit._run_exitfuncs``; it empties the list, so none runs twice).

    The console script ends its process with ``os._exit`` once the command is done, which
    runs none: this runs them first (temporary folders, DuckDB's, dlt's), so the quick exit
    (``app/process.py``: 0.3 s of teardown skipped) loses nothing. Public alternative:
    none; ``atexit`` runs its handlers only from the interpreter's exit. Checked: CPython
    ``CHECKED["python"]``.
    """
    atexit._run_exitfuncs()
