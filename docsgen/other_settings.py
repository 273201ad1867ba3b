"""The settings feedback-sync reads but does not declare (its own sections are declared:
``declared_sections`` in ``settings.py``).

The destinations' keys and ``[load]``, ``[runtime]`` are dlt's own, which feedback-sync
also reads or chooses a value for; a few environment variables have no TOML key. They are
listed here, their defaults taken from the constants the code uses. ``tests/docs`` finds
every key the package reads with ``dlt.config.get`` or ``dlt.secrets.get`` and every
``FEEDBACK_SYNC_*`` variable it names, and fails when one is missing from the page.
"""

from __future__ import annotations

from docsgen.markdown import code
from docsgen.specs import Setting, default_text


def settings() -> list[Setting]:
    """Every setting outside the declared sections, by section; environment variables
    alone last."""
    from feedback_sync.app.crash import ERROR_DIR_VARIABLE
    from feedback_sync.app.telemetry import ENV as TELEMETRY_ENV
    from feedback_sync.app.telemetry import SETTING as TELEMETRY
    from feedback_sync.warehouse.delta import DEFAULT_DELTA_DIR
    from feedback_sync.warehouse.duckdb import DEFAULT_DUCKDB_PATH, DUCKDB_MEMORY_LIMIT
    from feedback_sync.warehouse.target import KEEP_LOADED_PACKAGES

    runtime, _, telemetry_key = TELEMETRY_ENV.lower().partition("__")
    assert telemetry_key == TELEMETRY, TELEMETRY_ENV
    return [
        Setting(
            "destination.duckdb",
            "credentials",
            "path",
            default_text(DEFAULT_DUCKDB_PATH),
            "The DuckDB file ``--destination duckdb`` loads into. Its name may be anything "
            "but the dataset's (``feedback.duckdb``), ``<dataset>_staging`` and "
            "``information_schema``.",
        ),
        Setting(
            "destination.postgres",
            "credentials",
            "text",
            "",
            "The PostgreSQL server ``--destination postgres`` loads into, as a connection "
            "string (``postgresql://user:password@host:5432/database``) or dlt's fields. "
            "The password may be left out: libpq then reads ``PGPASSWORD`` or "
            "``~/.pgpass``.",
            secret=True,
        ),
        Setting(
            "destination.filesystem",
            "bucket_url",
            "text",
            f"under ``--delta-dir`` ({code(str(DEFAULT_DELTA_DIR))})",
            "Where ``--destination delta`` writes its Delta tables: a folder, ``s3://``, "
            "``gs://`` or ``az://``, with dlt's credentials for it "
            "(``DESTINATION__FILESYSTEM__CREDENTIALS__*``).",
        ),
        Setting(
            "load",
            "delete_completed_jobs",
            "true or false",
            default_text(True),
            "dlt's setting, turned on by feedback-sync: a loaded package's data files are "
            "deleted from dlt's working folder. Set it to ``false`` to keep them.",
        ),
        Setting(
            runtime,
            telemetry_key,
            "true or false",
            default_text(False),
            "dlt's anonymous usage telemetry. feedback-sync turns it off for its commands "
            "and flows unless this is set, in the environment or any settings file dlt "
            "reads.",
        ),
        Setting(
            "",
            "FEEDBACK_SYNC_DUCKDB_MEMORY_LIMIT",
            "text",
            default_text(DUCKDB_MEMORY_LIMIT),
            "How much memory DuckDB may use in a sync or a models build (``1GB``, ...); it "
            "spills to disk beyond that where it can. The history step of 200,000 followers "
            "needs more than ``64MB`` at once (``128MB`` is enough): below what it needs, it "
            "fails with a line naming this setting, and the synced data is kept.",
        ),
        Setting(
            "",
            "FEEDBACK_SYNC_KEEP_PACKAGES",
            "integer",
            default_text(KEEP_LOADED_PACKAGES),
            "How many loaded packages stay in dlt's working folder after a good run, for "
            "``dlt pipeline feedback_sync load-package``; ``0`` keeps all.",
        ),
        Setting(
            "",
            ERROR_DIR_VARIABLE,
            "path",
            code("$XDG_STATE_HOME/feedback-sync/errors"),
            "Where the trace of an unexpected error is written (scrubbed of secrets). "
            "Without ``XDG_STATE_HOME``: ``~/.local/state/feedback-sync/errors``.",
        ),
        Setting(
            "",
            "DLT_PROJECT_DIR",
            "path",
            "the current folder",
            "The folder whose ``.dlt/`` holds the settings files; ``--project-dir`` wins.",
        ),
    ]
