"""The comment header and the ``{{ }}`` calls every SQL file of the project shares (models
and push targets are read by this one parser)."""

from __future__ import annotations

from feedback_sync.models.sqlfile import calls, read_header, substitute

SQL = """-- orders: What was ordered: one line.
-- grain: one row per order
-- key: order_id, line
-- columns:
--   order_id: the order's id
--   note: a meaning that goes on
--     past one line: with a colon in it
--   total: the amount, in the account's currency
-- kind: followers
select * from {{ source('orders') }} join {{ ref('customers') }} using (id)
where x = {{ var('limit') }} and y = {{ unknown('z') }}
"""


def test_the_header_reads_fields_columns_and_carried_on_meanings() -> None:
    header = read_header(SQL, "orders")
    assert header is not None
    assert header.description == "What was ordered: one line."
    assert header.fields == {
        "grain": "one row per order",
        "key": "order_id, line",
        "kind": "followers",
    }
    assert header.columns == {
        "order_id": "the order's id",
        "note": "a meaning that goes on past one line: with a colon in it",
        "total": "the amount, in the account's currency",
    }


def test_the_description_and_header_lines_carry_on_indented() -> None:
    """An indented line outside ``columns:`` and ``tests:`` goes on with what is above it:
    the description, or the header line before it (``models --list`` and the models
    reference show them whole)."""
    sql = (
        "-- orders: What was ordered,\n"
        "--   line by line.\n"
        "-- grain: one row per order\n"
        "--   and line\n"
        "-- key: order_id\n"
        "-- columns:\n"
        "--   order_id: the order's id\n"
        "select 1\n"
    )
    header = read_header(sql, "orders")
    assert header is not None
    assert header.description == "What was ordered, line by line."
    assert header.fields == {"grain": "one row per order and line", "key": "order_id"}
    assert header.columns == {"order_id": "the order's id"}


def test_a_file_without_a_comment_has_no_header() -> None:
    assert read_header("select 1", "x") is None


def test_calls_are_found_and_replaced_for_the_functions_asked_only() -> None:
    assert calls(SQL, ("source", "ref")) == [("source", "orders"), ("ref", "customers")]
    out = substitute(SQL, ("source", "ref", "var"), lambda f, n: f"<{f}:{n}>")
    assert "<source:orders>" in out and "<ref:customers>" in out and "<var:limit>" in out
    assert "{{ unknown('z') }}" in out


def test_only_sql_that_calls_a_clock_is_volatile() -> None:
    from feedback_sync.models.project import _volatile

    assert not _volatile("-- its name now\nselect name from t -- as of today\n")
    assert _volatile("select now() as at")
    assert _volatile("select current_date")
    assert _volatile("select cast('now' as timestamp)")  # a clock spelled as text
    assert not _volatile("select ideas_now, known from t")
