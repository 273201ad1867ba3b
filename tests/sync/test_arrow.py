"""``arrow.Tabulator``: shaped rows to typed Arrow tables for the root and child tables."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from pipelines.feedback.arrow import POSITION, Tabulator


def _tables(items: list[Any]) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    for item in items:
        name = item.meta.hints["table_name"]
        out[name] = pa.concat_tables([out[name], item.data]) if name in out else item.data
    return out


def test_rows_split_into_root_and_child_tables_without_changing_the_input() -> None:
    rows = [
        {
            "idx": "f1",
            "created_at": datetime(2025, 1, 2, tzinfo=UTC),
            "author": {"name": "Ana", "deep": {"x": 1}},
            "companies": [{"id": "c1", "monthly_spend": 10, "attributes": {"a": [1]}}],
            "labels": ["red", "blue"],
            "content": {"nodes": [1]},
        }
    ]
    before = copy.deepcopy(rows)
    tabulator = Tabulator("followers", {"content": {"data_type": "json"}})
    assert list(tabulator.add(rows)) == []  # below a batch: nothing yet
    tables = _tables(list(tabulator.flush()))
    assert rows == before
    root = tables["followers"].to_pylist()
    assert root == [
        {
            "idx": "f1",
            "created_at": datetime(2025, 1, 2, tzinfo=UTC),
            "author__name": "Ana",
            "author__deep": '{"x":1}',
            "content": '{"nodes":[1]}',
        }
    ]
    assert tables["followers"].schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert not tables["followers"].schema.field("idx").nullable
    assert tables["followers__companies"].to_pylist() == [
        {
            "follower_idx": "f1",
            POSITION: 0,
            "id": "c1",
            "monthly_spend": 10,
            "attributes": '{"a":[1]}',
        }
    ]
    assert tables["followers__labels"].to_pylist() == [
        {"follower_idx": "f1", POSITION: 0, "value": "red"},
        {"follower_idx": "f1", POSITION: 1, "value": "blue"},
    ]


def test_types_hold_for_the_run_and_drift_goes_to_variants() -> None:
    tabulator = Tabulator("topics", {})
    assert list(tabulator.add([{"idx": "t1", "n": None, "w": 1}])) == []
    first = _tables(list(tabulator.flush()))
    assert "n" not in first["topics"].column_names  # never seen with a value: not typed yet
    assert (
        list(tabulator.add([{"idx": "t2", "n": 3, "w": 1.5}, {"idx": "t3", "n": "x", "w": 2}]))
        == []
    )
    table = _tables(list(tabulator.flush()))["topics"]
    assert table.schema.field("w").type == pa.int64()  # typed by the first batch
    assert table.column("w").to_pylist() == [None, 2]
    assert table.column("w__v_double").to_pylist() == [1.5, None]
    assert table.column("n").to_pylist() == [3, None]
    assert table.column("n__v_text").to_pylist() == [None, "x"]


def test_batches_are_yielded_as_rows_arrive() -> None:
    tabulator = Tabulator("topics", {}, batch_rows=3)
    assert list(tabulator.add([{"idx": "a"}, {"idx": "b"}])) == []
    out = list(tabulator.add([{"idx": "c"}, {"idx": "d"}]))
    assert [item.data.num_rows for item in out] == [4]
    assert list(tabulator.flush()) == []
