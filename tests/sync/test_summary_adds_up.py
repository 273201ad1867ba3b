"""A run's summary adds up: for every table, child and history tables included, rows before
+ added - removed = rows after, in the text and in ``--json``; and each figure is what the
warehouse's rows say, read here by their keys before and after the run."""

from __future__ import annotations

import re
from typing import Any

import duckdb
import pytest
from feedback_sync.app.documents import sync_document
from feedback_sync.app.sync import SyncResult

from tests.sync.harness import Harness

# the key of a child row: its parent's key and its position in the parent's list
CHILD_KEY = "_dlt_list_idx"


def _keys(harness: Harness) -> dict[str, set[tuple[Any, ...]]]:
    """Every data table's row keys (a root's idx; a child's parent key and position)."""
    path = harness.target().duckdb_file()
    assert path is not None
    if not path.exists():
        return {}
    keys: dict[str, set[tuple[Any, ...]]] = {}
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = "
                "'feedback' and table_name not like '\\_dlt%' escape '\\'"
            ).fetchall()
        ]
        for table in tables:
            columns = [
                r[0]
                for r in con.execute(
                    "select column_name from information_schema.columns where table_schema = "
                    "'feedback' and table_name = ?",
                    [table],
                ).fetchall()
            ]
            if CHILD_KEY in columns:
                parent = next(c for c in columns if c.endswith("_idx") and c != CHILD_KEY)
                chosen = [parent, CHILD_KEY]
            elif "valid_from" in columns:  # a history table: a version per key and start
                chosen = [columns[0], "valid_from"]
            elif "idx" in columns:
                chosen = ["idx"]
            else:
                continue  # bookkeeping (history_checks)
            quoted = ", ".join(f'"{c}"' for c in chosen)
            rows = con.execute(f'select {quoted} from feedback."{table}"').fetchall()
            keys[table] = set(rows)
            assert len(keys[table]) == len(rows), f"{table}: a key twice"
    return keys


def _summary_rows(result: SyncResult) -> dict[str, list[int]]:
    """The text summary's table, as numbers per table (before, added, updated, removed,
    now, and marked deleted where shown)."""
    rows = {}
    for line in result.summary().splitlines():
        match = re.fullmatch(r"  (\w+)((?:\s+[\d,]+){5,6})", line)
        if match:
            rows[match.group(1)] = [int(n.replace(",", "")) for n in match.group(2).split()]
    return rows


def _check(harness: Harness, result: SyncResult, before: dict[str, set[Any]]) -> None:
    after = _keys(harness)
    text = _summary_rows(result)
    document = sync_document(result, 0)["tables"]
    assert set(text) == set(document) == set(after), set(text) ^ set(after)
    for table, keys in after.items():
        had = before.get(table, set())
        figures = document[table]
        shown = (figures["rows_before"], figures["added"], figures["updated"])
        shown += (figures["removed"], figures["rows"])
        # what the keys say, apart from the product's own counting
        assert figures["rows_before"] == len(had), table
        assert figures["rows"] == len(keys), table
        assert figures["added"] == len(keys - had), table
        assert figures["removed"] == len(had - keys), table
        assert figures["rows_before"] + figures["added"] - figures["removed"] == figures["rows"]
        if table in result.versions:
            assert figures["updated"] == result.versions[table].closed
        else:
            assert figures["loaded"] == figures["added"] + figures["updated"], table
            assert figures["updated"] >= 0, table
        assert text[table][:5] == list(shown), table


def _run(harness: Harness, **kwargs: Any) -> SyncResult:
    before = _keys(harness)
    result = harness.sync(models=False, **kwargs)
    _check(harness, result, before)
    return result


CHANGES = {
    "followers": {"create": 3, "update": 2, "delete": 2},
    "announcements": {"create": 2, "update": 2, "delete": 2},
    "comments": {"create": 6, "update": 2, "delete": 2},
    "topics": {"create": 1, "update": 1, "delete": 1},
    "statuses": {"create": 1, "update": 1},
    "integration_links": {"create": 2, "update": 1, "delete": 1},
    "ideas": {"create": 2, "update": 3, "delete": 1},
}


@pytest.mark.slow
def test_every_tables_figures_add_up_over_full_normal_and_removing_runs(
    harness: Harness,
) -> None:
    _run(harness, full=True)
    harness.mutate(seed=61, counts=CHANGES)
    normal = _run(harness)
    assert any(normal.change(t).updated for t in normal.tables())
    harness.mutate(seed=62, counts=CHANGES)
    full = _run(harness, full=True)  # removes what the service no longer has
    removed = {t: full.change(t).removed for t in full.tables()}
    assert removed["announcements"] and removed["announcements__categories"]
    assert removed["followers"] and removed["ideas"]
    harness.mutate(seed=63, counts=CHANGES)
    _run(harness)
    nothing = _run(harness)  # nothing changed: nothing added, updated or removed
    for table in nothing.tables():
        done = nothing.change(table)
        assert (done.added, done.updated, done.removed, done.after) == (0, 0, 0, done.before)


@pytest.mark.slow
def test_rows_marked_deleted_stay_and_the_figures_still_add_up(harness: Harness) -> None:
    _run(harness, full=True, delete_mode="soft")
    harness.mutate(seed=64, counts=CHANGES)
    full = _run(harness, full=True, delete_mode="soft")
    marked = sync_document(full, 0)["tables"]
    assert marked["followers"]["marked_deleted"] == 2
    assert marked["followers"]["removed"] == 0
    assert "marked deleted" in full.summary()
