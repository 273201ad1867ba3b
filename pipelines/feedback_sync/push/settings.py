"""The push's settings: section ``[push]`` of ``.dlt/config.toml`` or ``PUSH__*`` variables.

The string under each field of ``PushConfiguration`` says what the setting does: the
settings reference (``docs/reference/settings.md``, written by ``./run docs``) is made from
them. ``PushSettings.validate`` checks the values with messages that name the setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from dlt.common.configuration import configspec, resolve_configuration
from dlt.common.configuration.specs import BaseConfiguration

from feedback_sync.errors import ConfigError

SECTION = "push"


@configspec
class PushConfiguration(BaseConfiguration):
    # raw values: PushSettings.validate checks them with messages that name the setting
    curated_dir: Any = "data/curated"
    """The folder of curated files (``<table>.csv`` or ``.parquet``), read as
    ``curated.<table>`` beside DuckDB, Parquet and Delta targets; ``--curated-dir`` wins."""
    max_change_share: Any = 0.5
    """A target whose apply would update or delete more than this share (0 to 1) of the rows
    it manages (the objects its rows match, and what it pushed before) is refused unless
    ``--force``."""
    max_change_min_rows: Any = 10
    """The share limit applies to targets managing at least this many rows: a handful of
    rows is read in the preview at a glance."""
    note_author_email: Optional[str] = None  # noqa: UP045
    """The email of the follower who authors the idea notes (created by the ``followers``
    target when ``curated.accounts`` lists it). Without it the ``idea_notes`` target is
    skipped, with that reason."""
    sample_size: Any = 5
    """Changed rows shown per target in the preview (0 to 1000); ``--samples`` wins."""


def describe(setting: str) -> str:
    return f"PUSH__{setting.upper()} ({setting} in [{SECTION}])"


@dataclass(frozen=True)
class PushSettings:
    curated_dir: Path = Path("data/curated")
    max_change_share: float = 0.5
    max_change_min_rows: int = 10
    note_author_email: str | None = None
    sample_size: int = 5

    def variables(self) -> dict[str, Any]:
        """The settings a target's SQL reads with ``{{ var('name') }}``."""
        return {"note_author_email": self.note_author_email}

    @classmethod
    def validate(cls, **raw: Any) -> PushSettings:
        """Raises ConfigError naming the first malformed setting."""
        folder = raw.get("curated_dir", "data/curated")
        if not isinstance(folder, str | Path) or not str(folder).strip():
            raise ConfigError(f"{describe('curated_dir')} must be a folder path, got {folder!r}")
        try:
            share = float(raw.get("max_change_share", 0.5))
        except (TypeError, ValueError):
            share = float("nan")
        if not 0.0 <= share <= 1.0:
            raise ConfigError(
                f"{describe('max_change_share')} must be a number from 0 to 1, "
                f"got {raw.get('max_change_share')!r}"
            )
        author = raw.get("note_author_email")
        if author is not None and (not isinstance(author, str) or "@" not in author):
            raise ConfigError(f"{describe('note_author_email')} must be an email, got {author!r}")
        sample = raw.get("sample_size", 5)
        if isinstance(sample, str) and sample.strip().isdigit():
            sample = int(sample)
        if isinstance(sample, bool) or not isinstance(sample, int) or not 0 <= sample <= 1000:
            raise ConfigError(
                f"{describe('sample_size')} must be an integer from 0 to 1000, got {sample!r}"
            )
        rows = raw.get("max_change_min_rows", 10)
        if isinstance(rows, str) and rows.strip().isdigit():
            rows = int(rows)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise ConfigError(
                f"{describe('max_change_min_rows')} must be an integer >= 0, got {rows!r}"
            )
        return cls(
            curated_dir=Path(str(folder).strip()),
            max_change_share=share,
            max_change_min_rows=rows,
            note_author_email=author.strip() if isinstance(author, str) else None,
            sample_size=sample,
        )


def load_push_settings(**overrides: Any) -> PushSettings:
    """Resolves ``[push]`` through dlt's providers; ``overrides`` (not None) win."""
    config = resolve_configuration(PushConfiguration(), sections=(SECTION,))
    raw = {name: config[name] for name in config}
    raw.update({k: v for k, v in overrides.items() if v is not None})
    return PushSettings.validate(**raw)
