"""``arrow.Tabulator``: shaped rows to typed Arrow tables for the root and child tables."""

from __future__ import annotations

import copy
import logging
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from feedback_sync.errors import DataError
from feedback_sync.source.arrow import POSITION, Tabulator
from feedback_sync.source.types import ColumnTypes


def _tables(items: list[Any]) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    for item in items:
        name = item.meta.hints["table_name"]
        out[name] = pa.concat_tables([out[name], item.data]) if name in out else item.data
    return out


def test_rows_split_into_root_and_child_tables_without_changing_the_input() -> None:
    rows = [
        {
            "idx": "c1",
            "created_at": datetime(2025, 1, 2, tzinfo=UTC),
            "follower": {"name": "Ana", "deep": {"x": 1}},
            "attachments": [{"idx": "a1", "meta": {"a": [1]}}],
            "labels": ["red", "blue"],
            "content": [{"type": "paragraph"}],
        }
    ]
    before = copy.deepcopy(rows)
    tabulator = Tabulator("comments", {}, ColumnTypes({}))
    assert list(tabulator.add(rows)) == []  # below a batch: nothing yet
    tables = _tables(list(tabulator.flush()))
    assert rows == before
    root = tables["comments"].to_pylist()[0]
    # declared columns are there even when not sent; an object is flattened one level
    assert {k: v for k, v in root.items() if v is not None} == {
        "idx": "c1",
        "created_at": datetime(2025, 1, 2, tzinfo=UTC),
        "follower__name": "Ana",
        "follower__deep": '{"x":1}',
        "content": '[{"type":"paragraph"}]',
    }
    assert set(root) >= {"message", "is_private", "idea_id", "follower__idx"}
    schema = tables["comments"].schema
    assert schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert schema.field("idea_id").type == pa.int64()
    assert schema.field("is_private").type == pa.bool_()
    assert not schema.field("idx").nullable
    assert tables["comments__attachments"].to_pylist()[0] == {
        "comment_idx": "c1",
        POSITION: 0,
        "idx": "a1",
        "name": None,
        "url": None,
        "type": None,
        "created_at": None,
        "updated_at": None,
        "meta": '{"a":[1]}',
    }
    assert tables["comments__labels"].to_pylist() == [
        {"comment_idx": "c1", POSITION: 0, "value": "red"},
        {"comment_idx": "c1", POSITION: 1, "value": "blue"},
    ]


def test_declared_types_win_over_the_first_value() -> None:
    tabulator = Tabulator("topics", {}, ColumnTypes({}))
    list(tabulator.add([{"idx": "t1", "order": 1, "idea_count": 2, "name": 5}]))
    table = _tables(list(tabulator.flush()))["topics"]
    # the spec's numbers are doubles even when the first one is whole; a number sent where
    # the spec says string goes to a variant, exactly
    assert table.schema.field("order").type == pa.float64()
    assert table.column("order").to_pylist() == [1.0]
    assert table.column("name").to_pylist() == [None]
    assert table.column("name__v_bigint").to_pylist() == [5]


def test_stored_types_win_over_declared_and_first_values() -> None:
    stored = {
        "followers__companies": {
            "columns": {
                "monthly_spend": {"data_type": "bigint"},  # an earlier version's guess
                "seats": {"data_type": "bigint"},
                "attributes": {"data_type": "json"},
            }
        }
    }
    tabulator = Tabulator("followers", {}, ColumnTypes(stored))
    companies = [
        {"id": "a", "name": "A", "monthly_spend": 2499.5, "seats": "unlimited", "attributes": {}},
        {"id": "b", "name": "B", "monthly_spend": 2500, "seats": 10, "attributes": "x"},
    ]
    list(tabulator.add([{"idx": "f1", "companies": companies}]))
    table = _tables(list(tabulator.flush()))["followers__companies"]
    assert table.column("monthly_spend").to_pylist() == [None, 2500]
    assert table.column("monthly_spend__v_double").to_pylist() == [2499.5, None]
    assert table.column("seats").to_pylist() == [None, 10]
    assert table.column("seats__v_text").to_pylist() == ["unlimited", None]
    assert table.column("attributes").to_pylist() == ["{}", None]
    assert table.column("attributes__v_text").to_pylist() == [None, "x"]


def test_types_hold_for_the_run_and_drift_goes_to_variants() -> None:
    types = ColumnTypes({})
    tabulator = Tabulator("topics", {}, types)
    assert list(tabulator.add([{"idx": "t1", "n": None, "w": 1}])) == []
    first = _tables(list(tabulator.flush()))
    assert "n" not in first["topics"].column_names  # never seen with a value: not typed yet
    # another builder of the same run (a parallel transformer call) agrees on the types
    other = Tabulator("topics", {}, types)
    assert list(other.add([{"idx": "t2", "n": 3, "w": 1.5}, {"idx": "t3", "n": "x", "w": 2}])) == []
    table = _tables(list(other.flush()))["topics"]
    assert table.schema.field("w").type == pa.int64()  # typed by the first batch
    assert table.column("w").to_pylist() == [None, 2]
    assert table.column("w__v_double").to_pylist() == [1.5, None]
    assert table.column("n").to_pylist() == [3, None]
    assert table.column("n__v_text").to_pylist() == [None, "x"]


def test_a_row_without_its_key_stops_the_run_naming_the_table() -> None:
    tabulator = Tabulator("statuses", {}, ColumnTypes({}))
    list(tabulator.add([{"idx": "s1"}, {"name": "no idx"}]))
    with pytest.raises(DataError, match=r"statuses: row 2 .* idx = None"):
        list(tabulator.flush())


def test_batches_are_yielded_as_rows_arrive() -> None:
    tabulator = Tabulator("topics", {}, ColumnTypes({}), batch_rows=3)
    assert list(tabulator.add([{"idx": "a"}, {"idx": "b"}])) == []
    out = list(tabulator.add([{"idx": "c"}, {"idx": "d"}]))
    assert [item.data.num_rows for item in out] == [4]
    assert list(tabulator.flush()) == []


def test_integers_of_any_size_land_exactly() -> None:
    """2**60 is a double exactly (Arrow still refuses ints past 2**53 into float64);
    2**64 + 1 is not, and goes to a 38-digit decimal; 10**40 + 1 fits no number column
    and keeps its digits as text."""
    tabulator = Tabulator("topics", {}, ColumnTypes({}))
    rows = [
        {"idx": "t1", "order": 2**60, "custom": 2**64 + 1, "note": "a", "seats": 5},
        {"idx": "t2", "order": 2**64 + 1, "custom": 10**40 + 1, "note": 10**40 + 1, "seats": 2**64},
    ]
    list(tabulator.add(rows))
    table = _tables(list(tabulator.flush()))["topics"]
    # every value an int, one past 64 bits: the bigint column refuses it, its variant holds it
    assert table.schema.field("seats").type == pa.int64()
    assert table.column("seats").to_pylist() == [5, None]
    assert [
        None if v is None else int(v) for v in table.column("seats__v_decimal").to_pylist()
    ] == [
        None,
        2**64,
    ]
    assert table.column("order").to_pylist() == [float(2**60), None]
    decimals = table.column("order__v_decimal").to_pylist()
    assert [None if v is None else int(v) for v in decimals] == [None, 2**64 + 1]
    assert table.schema.field("custom").type == pa.decimal128(38, 0)
    assert table.column("custom__v_text").to_pylist() == [None, str(10**40 + 1)]
    assert table.column("note").to_pylist() == ["a", str(10**40 + 1)]


def test_an_integer_past_64_bits_before_a_small_one_goes_to_the_variant() -> None:
    """A declared bigint column (ideas.comment_count) whose batch sends 2**64 first: the
    check of the batch's integers looks at each one, not at one of them."""
    tabulator = Tabulator("ideas", {}, ColumnTypes({}))
    list(tabulator.add([{"idx": "i1", "comment_count": 2**64}, {"idx": "i2", "comment_count": 5}]))
    table = _tables(list(tabulator.flush()))["ideas"]
    assert table.column("comment_count").to_pylist() == [None, 5]
    decimals = table.column("comment_count__v_decimal").to_pylist()
    assert [None if v is None else int(v) for v in decimals] == [2**64, None]


def test_rejected_items_are_logged_one_by_one_then_as_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tabulator = Tabulator("topics", {}, ColumnTypes({}), batch_rows=4)
    bad = [{"name": f"no idx {n}"} for n in range(8)]
    with caplog.at_level(logging.WARNING, logger="feedback_sync"):
        accepted = [row for row in [*bad, {"idx": "t1"}] if tabulator.accept(row)]
        batches = list(tabulator.add(accepted)) + list(tabulator.flush())
    assert accepted == [{"idx": "t1"}] and tabulator.rejected == 8
    lines = [r.getMessage() for r in caplog.records]
    assert sum("an item was rejected (it has no idx)" in line for line in lines) == 5
    assert lines[-1] == "topics: 3 more items were rejected; every one is in rejected_rows"
    rejected = _tables(batches)["rejected_rows"]
    assert rejected.num_rows == 8 and set(rejected.column("reason").to_pylist()) == {
        "it has no idx"
    }


@pytest.mark.parametrize(
    ("odd", "at_once"),
    [
        ({}, True),  # every declared text and bool column in one pass
        ({"message": 5}, False),  # a number in a text column: each column on its own
        ({"is_private": "yes"}, False),  # text in a bool column, likewise
        ({"message": b"raw"}, True),  # bytes are no JSON value; as ever, they land as text
    ],
)
def test_text_and_bool_columns_built_at_once_land_as_column_by_column(
    monkeypatch: pytest.MonkeyPatch, odd: dict[str, Any], at_once: bool
) -> None:
    """The one-pass build of the text and boolean columns gives the very tables the
    column-by-column path gives, whatever a batch holds."""
    from feedback_sync.source.arrow import _Table

    passes: list[int] = []
    one_pass = _Table._text_and_bool

    def counted(table: _Table, rows: list[Any], names: dict[str, None]) -> Any:
        built = one_pass(table, rows, names)
        if table.name == "comments":
            passes.append(len(built))
        return built

    monkeypatch.setattr(_Table, "_text_and_bool", counted)
    rows = [
        {
            "idx": f"c{i}",
            "message": None if i % 3 else f"m{i}",
            "is_private": i % 2 == 0,
            "type": "note",
            "content": [{"t": i}],
            "created_at": datetime(2025, 1, 2, tzinfo=UTC),
            "idea_id": i,
            "follower": {"idx": f"f{i}", "name": "Ana"},
            "attachments": [{"idx": f"a{i}", "name": "x.png"}],
        }
        for i in range(5)
    ]
    rows[3].update(odd)

    def build() -> dict[str, pa.Table]:
        tabulator = Tabulator("comments", {}, ColumnTypes({}))
        return _tables([*tabulator.add(copy.deepcopy(rows)), *tabulator.flush()])

    at_once_tables = build()
    # the pass built comments' declared text and bool columns, or (an odd value) none
    assert passes == ([10] if at_once else [0])
    monkeypatch.setattr(_Table, "_text_and_bool", lambda *a: {})
    one_by_one = build()
    assert at_once_tables.keys() == one_by_one.keys()
    for name, table in at_once_tables.items():
        assert table.equals(one_by_one[name], check_metadata=True), name
