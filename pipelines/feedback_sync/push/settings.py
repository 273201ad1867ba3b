"""The push's settings, declared once: section ``[push]`` of ``.dlt/config.toml`` or
``PUSH__*`` variables.

Each field of ``PushSettings`` declares one setting (``api/declaration.py``): its type,
default, range and what it does. dlt resolves them (``api/config.py`` makes its spec from
``PUSH``), the declaration checks them with messages that name the setting, and the
settings reference, ``init``'s template and the unknown-key check read the same fields.
``--curated-dir`` and ``--samples`` win, checked by the same kinds. This module imports no
dlt: the unknown-key check reads the names from it before any command.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedback_sync.api.declaration import Email, Folder, Integer, Number, Section, setting

SECTION = "push"


@dataclass(frozen=True)
class PushSettings:
    """Checked settings of one push: each field declares one setting of ``[push]``."""

    curated_dir: Path = setting(
        Folder(),
        default=Path("data/curated"),
        doc="""The folder of curated files (``<table>.csv`` or ``.parquet``), read as
        ``curated.<table>`` beside DuckDB, Parquet and Delta targets; ``--curated-dir``
        wins.""",
        note="curated CSV / Parquet files the push reads",
    )
    max_change_share: float = setting(
        Number(0.0, maximum=1.0),
        default=0.5,
        doc="""A target whose apply would update or delete more than this share (0 to 1) of
        the rows it manages (the objects its rows match, and what it pushed before) is
        refused unless ``--force``.""",
        note="refuse a push changing more than this share unless --force",
    )
    max_change_min_rows: int = setting(
        Integer(0, None),
        default=10,
        doc="""The share limit applies to targets managing at least this many rows: a
        handful of rows is read in the preview at a glance.""",
        note="... for targets managing at least this many rows",
    )
    note_author_email: str | None = setting(
        Email(optional=True),
        default=None,
        doc="""The email of the follower who authors the idea notes (created by the
        ``followers`` target when ``curated.accounts`` lists it). Without it the
        ``idea_notes`` target is skipped, with that reason.""",
        note="the follower who writes the idea notes",
        example="bot@example.com",
    )
    sample_size: int = setting(
        Integer(0, 1000),
        default=5,
        doc="Changed rows shown per target in the preview (0 to 1000); ``--samples`` wins.",
        note="changed rows shown per target in the preview",
    )

    def variables(self) -> dict[str, Any]:
        """The settings a target's SQL reads with ``{{ var('name') }}``."""
        return {"note_author_email": self.note_author_email}


PUSH = Section(SECTION, PushSettings)


def load_push_settings(
    curated_dir: str | Path | None = None, sample_size: int | None = None
) -> PushSettings:
    """Resolves ``[push]`` through dlt's providers and checks it; ``curated_dir``
    (``--curated-dir``) and ``sample_size`` (``--samples``) win where given.

    Raises:
        ConfigError: naming the option or setting that is malformed.
    """
    from feedback_sync.api.config import load

    given = {
        "curated_dir": ("--curated-dir", curated_dir),
        "sample_size": ("--samples", sample_size),
    }
    return load(PUSH, given)
