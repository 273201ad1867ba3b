"""The history step compares only the rows loaded since its last comparison.

Which rows it reads is shown by a row changed in the warehouse behind the sync's back (no
load brings it): a comparison of the rows loaded since does not see it, a comparison of
every row does. The versions a sequence of syncs records are held to the sandbox's own
record in ``test_history.py``, where every second sync compares this way.
"""

from __future__ import annotations

from typing import Any

import duckdb
from feedback_sync.warehouse import reconcile
from feedback_sync.warehouse.base import INTERNAL_SCHEMA
from feedback_sync.warehouse.history import COMPARED_TABLE

from tests.sync.harness import Harness
from tests.sync.test_history import versions

RECORD = f'"{INTERNAL_SCHEMA}"."{COMPARED_TABLE}"'


def _record(h: Harness) -> dict[str, str]:
    for con in h.connect():
        return dict(con.execute(f"select table_name, load_id from {RECORD}").fetchall())
    raise AssertionError("no connection")


def _newest_load(h: Harness) -> str:
    for con in h.connect():
        row = con.execute("select max(load_id) from feedback._dlt_loads").fetchone()
        assert row is not None
        return str(row[0])
    raise AssertionError("no connection")


def _write(h: Harness, sql: str, *args: Any) -> None:
    path = h.target("duckdb").duckdb_file()
    assert path is not None
    with duckdb.connect(str(path)) as con:
        con.execute(sql, list(args))


def test_a_sync_compares_only_the_rows_loaded_since_the_last_comparison(
    harness: Harness,
) -> None:
    h = harness
    h.sync(full=True, models=False)
    assert _record(h) == {"ideas_history": _newest_load(h), "companies_history": _newest_load(h)}
    idea = sorted(i["idx"] for i in h.dump()["ideas"])[0]
    _write(h, "update feedback.ideas set name = 'renamed in the warehouse' where idx = ?", idea)

    h.sync(models=False)  # nothing changed at the service: no row of that idea loads
    assert versions(h, "ideas_history", "name")[idea][-1][0] != "renamed in the warehouse"
    assert _record(h)["ideas_history"] == _newest_load(h)

    # without a record of what was compared, every row is
    _write(h, f"delete from {RECORD} where table_name = 'ideas_history'")
    h.sync(models=False)
    last = versions(h, "ideas_history", "name")[idea][-1]
    assert last[0] == "renamed in the warehouse" and last[-1] is True
    assert _record(h)["ideas_history"] == _newest_load(h)


def test_a_load_committed_out_of_order_makes_the_next_comparison_whole(harness: Harness) -> None:
    """dlt's load ids are the extracting machine's clock: a load from a machine whose clock
    is behind (or that synced the same dataset from elsewhere) can complete after the record
    with a lower id. Its rows would never be "loaded since": every row is compared."""
    h = harness
    h.sync(full=True, models=False)
    idea = sorted(i["idx"] for i in h.dump()["ideas"])[0]
    _write(h, "update feedback.ideas set name = 'loaded by a slow clock' where idx = ?", idea)
    _write(h, "update feedback.ideas set _dlt_load_id = '1000000000.5' where idx = ?", idea)
    _write(
        h,
        "insert into feedback._dlt_loads (load_id, schema_name, status, inserted_at) "
        "values ('1000000000.5', 'feedback', 0, now())",
    )
    h.sync(models=False)
    last = versions(h, "ideas_history", "name")[idea][-1]
    assert last[0] == "loaded by a slow clock" and last[-1] is True


def test_copies_removed_without_a_load_make_the_next_company_comparison_whole(
    harness: Harness,
) -> None:
    """A company's current state is its newest copy: removing a copy (a follower sent again
    with fewer companies, or gone) can move it with no row of the company loaded. Such a
    removal drops the companies' record in its own transaction; the ideas' stays."""
    h = harness
    h.sync(full=True, models=False)
    before = _record(h)
    pipeline = h.target().pipeline()
    for con in h.connect():
        follower, load = con.execute(
            "select follower_idx, _dlt_load_id from feedback.followers__companies limit 1"
        ).fetchone()
    # a copy left over from an earlier list of that follower, then the follower sent again
    _write(
        h,
        "insert into feedback.followers__companies (follower_idx, _dlt_list_idx, id, name, "
        "_dlt_load_id) values (?, 99, 'cmp_left_over', 'Left Over', ?)",
        follower,
        load,
    )
    _write(h, "update feedback.followers set _dlt_load_id = 'again' where idx = ?", follower)
    _write(
        h,
        "update feedback.followers__companies set _dlt_load_id = 'again' "
        "where follower_idx = ? and _dlt_list_idx <> 99",
        follower,
    )
    removed = reconcile.replace_children(pipeline, "again")
    assert removed == {"followers__companies": 1}
    assert _record(h) == {"ideas_history": before["ideas_history"]}

    # a removal elsewhere leaves the record alone
    h.sync(models=False)
    assert set(_record(h)) == {"ideas_history", "companies_history"}
    _write(
        h,
        "insert into feedback.ideas__topics (idea_idx, _dlt_list_idx, topic_idx, _dlt_load_id) "
        "select idx, 99, 'top_left_over', _dlt_load_id from feedback.ideas limit 1",
    )
    left_over = "in (select idea_idx from feedback.ideas__topics where _dlt_list_idx = 99)"
    _write(h, f"update feedback.ideas set _dlt_load_id = 'again2' where idx {left_over}")
    _write(
        h,
        "update feedback.ideas__topics set _dlt_load_id = 'again2' "
        f"where idea_idx {left_over} and _dlt_list_idx <> 99",
    )
    assert reconcile.replace_children(pipeline, "again2") == {"ideas__topics": 1}
    assert set(_record(h)) == {"ideas_history", "companies_history"}

    # so do followers removed as gone at the service
    h.sync(models=False)
    assert set(_record(h)) == {"ideas_history", "companies_history"}
    removed = reconcile.reconcile(pipeline, _newest_load(h), ["followers"], "hard")
    assert removed["followers"] > 0  # none came in that (normal) run's load
    assert set(_record(h)) == {"ideas_history"}
