"""feedback-sync: a product-feedback service's data into a warehouse and back.

The packages follow the data, each importing only those below it (``CONTRIBUTING.md``;
``tests/test_layout.py`` checks it)::

    api        the HTTP client every caller shares: auth, retries, rate limit, paging
    source     the dlt source: resources, their shapes and types, incremental reads
    warehouse  where a sync lands: one module per destination, deletes, the run lock
    models     the SQL models of ``sql/`` built in the warehouse, and the data checks
    push       curated warehouse rows back through the API
    app        the commands people run: sync, status, report, demo, the command line
    flows      the Prefect flows (``flows/`` at the repository's root names them)
    sandbox    the reference server: the API run locally, for tests, benchmarks and the demo
"""

from importlib.metadata import PackageNotFoundError, version

try:  # the one place the version is written is pyproject.toml; this reads it installed
    __version__ = version("feedback-sync")
except PackageNotFoundError:  # the source tree on sys.path without an install
    __version__ = "0+unknown"
