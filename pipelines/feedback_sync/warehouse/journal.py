"""What a sync owes after its load, kept in the warehouse's dlt working folder.

A run writes its ``Owed`` before the load (the load id, the resources read completely, the
delete mode, the run's time, the keys the source named gone) and clears it at the end. A
run that finds one left by a run that died between its load and its end does what it names
once that package has landed (stale child rows, deletes, history at that run's time, the
files a Parquet target publishes), so a crash there never leaves deletes unapplied or files
stale. A journal whose package never landed owes nothing and is cleared.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlt.pipeline.pipeline import Pipeline

FILE_NAME = "feedback_sync_journal.json"


@dataclass(frozen=True)
class Owed:
    """What one run still has to do after its load."""

    load_id: str | None
    complete: list[str] = field(default_factory=list)
    mode: str = "hard"
    run_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    gone: dict[str, list[str]] = field(default_factory=dict)


class Journal:
    """The journal file of ``pipeline``'s working folder."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.path = Path(pipeline.working_dir) / FILE_NAME

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, owed: Owed) -> None:
        """Replaces the journal with ``owed`` in one step (a crash leaves the old or the
        new, never half of one)."""
        body = {**asdict(owed), "run_at": owed.run_at.isoformat()}
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(body))
        os.replace(partial, self.path)

    def read(self) -> Owed | None:
        """What the journal owes, or None where there is none."""
        if not self.path.exists():
            return None
        body = json.loads(self.path.read_text())
        return Owed(
            load_id=body.get("load_id") or None,
            complete=list(body.get("complete") or []),
            mode=body.get("mode", "hard"),
            run_at=_run_time(body.get("run_at")),
            gone=dict(body.get("gone") or {}),
        )

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def _run_time(raw: Any) -> datetime:
    """The journaled run's time (a journal from before history kept none: now)."""
    try:
        moment = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        moment = None
    return moment if moment is not None and moment.tzinfo is not None else datetime.now(UTC)
