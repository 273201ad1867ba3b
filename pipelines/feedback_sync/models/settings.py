"""The SQL models' settings, declared once: section ``[models]`` of ``.dlt/config.toml`` or
``MODELS__*`` variables (``api/declaration.py``), read by ``project.sql_dir``.

This module imports no dlt: the command line checks ``--sql-dir`` with it before its
imports (``MODELS.given``), and the unknown-key check reads the names from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from feedback_sync.api.declaration import Folder, Section, setting

SECTION = "models"


@dataclass(frozen=True, kw_only=True)
class ModelsSettings:
    """Checked settings of the SQL models: each field declares one setting of
    ``[models]``."""

    sql_dir: Path | None = setting(
        Folder(existing="the SQL models' folder", optional=True),
        default=None,
        doc="""Your own copy of the SQL folder (``sources.toml``, ``staging/``, ``marts/``,
        ``push/``), for every command and the Prefect flows; ``--sql-dir`` wins. A relative
        path is read from the folder the command runs in.""",
        note="your own copy of the SQL models and push targets",
        example="my-sql",
        unset="the SQL folder feedback-sync ships",
    )


MODELS = Section(SECTION, ModelsSettings)
