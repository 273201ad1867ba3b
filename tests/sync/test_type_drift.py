"""Values whose types drift at the source land exactly as sent, run after run.

The drift test rewrites what a live sandbox sends (``Intercept``) with values hypothesis
draws, keeps what was sent, and compares every landed value with it, column and type
variants read together, after several full syncs whose values drift.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import dlt
import httpx
import pyarrow as pa
import pytest
from dlt.common.normalizers.naming import snake_case
from feedback_sync.app.failures import explain
from feedback_sync.errors import LoadFailed
from feedback_sync.sandbox.server import RunningSandbox
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sync.harness import Harness, Intercept, fold_variants

SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    # beyond 64 bits (a decimal variant) and beyond 38 digits (kept as its digits)
    st.integers(-(10**45), 10**45).filter(lambda n: abs(n) >= 2**63),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=2),
    st.dictionaries(st.text(max_size=3), SCALARS, max_size=2),
)
# per run: a few values per drifting field, dealt to the rows in turn
RUNS = st.lists(
    st.fixed_dictionaries(
        {
            "monthly_spend": st.lists(VALUES, min_size=1, max_size=4),
            "seats": st.lists(VALUES, min_size=1, max_size=4),
            "order": st.lists(VALUES, min_size=1, max_size=4),
        }
    ),
    min_size=2,
    max_size=3,
)


def same(sent: Any, landed: Any) -> bool:
    """Equal in value and in kind: True is not 1, "2500" is not 2500; an integer may land
    in a double column (it fits exactly); JSON is compared parsed."""
    if sent is None or landed is None:
        return sent is None and landed is None
    if isinstance(sent, bool) or isinstance(landed, bool):
        return type(sent) is type(landed) and sent == landed
    if isinstance(sent, int) and abs(sent) >= 10**38:
        return landed == str(sent)  # too long for any number column: its digits, as text
    if isinstance(landed, Decimal):  # an integer beyond 64 bits: decimal(38, 0)
        return isinstance(sent, int) and Decimal(sent) == landed
    if isinstance(sent, int | float):
        if not isinstance(landed, int | float):
            return False
        if isinstance(sent, float) and not isinstance(landed, float):
            return False
        return sent == landed or (math.isnan(sent) and math.isnan(landed))
    if isinstance(sent, dict | list):
        return isinstance(landed, dict | list) and json.dumps(sent) == json.dumps(landed)
    return isinstance(landed, str) and sent == landed


class Drift:
    """Rewrites followers' companies and topics with one run's drawn values; keeps what it sent."""

    def __init__(self, plan: dict[str, list[Any]]) -> None:
        self.plan = plan
        self.sent: dict[tuple[str, ...], dict[str, Any]] = {}
        self._dealt = 0

    def _next(self, field: str) -> Any:
        values = self.plan[field]
        self._dealt += 1
        return values[self._dealt % len(values)]

    def __call__(self, request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path == "/v1/followers":
            for row in body["data"]:
                for position, company in enumerate(row.get("companies") or ()):
                    company["monthly_spend"] = self._next("monthly_spend")
                    company["seats"] = self._next("seats")
                    self.sent[("followers__companies", row["idx"], str(position))] = {
                        "monthly_spend": company["monthly_spend"],
                        "seats": company["seats"],
                    }
        elif request.url.path == "/v1/topics":
            for row in body["data"]:
                row["order"] = self._next("order")
                self.sent[("topics", row["idx"])] = {"order": row["order"]}
        return body


def _landed(harness: Harness) -> dict[tuple[str, ...], dict[str, Any]]:
    landed: dict[tuple[str, ...], dict[str, Any]] = {}
    tables = harness.target().pipeline().default_schema.tables
    for con in harness.connect():
        for table, keys, fields in (
            ("followers__companies", ("follower_idx", "_dlt_list_idx"), ("monthly_spend", "seats")),
            ("topics", ("idx",), ("order",)),
        ):
            cursor = con.execute(f"select * from feedback.{table}")
            names = [d[0] for d in cursor.description]
            for values in cursor.fetchall():
                row = dict(zip(names, values, strict=True))
                key = (table, *(str(row[k]) for k in keys))
                json_text = {
                    name
                    for name, column in tables[table]["columns"].items()
                    if column.get("x-feedback-kind") == "json"
                }
                landed[key] = {f: fold_variants(row, f, f in json_text) for f in fields}
    return landed


@pytest.mark.slow
@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(runs=RUNS)
def test_drifting_values_land_exactly_as_sent_run_after_run(
    live_sandbox: RunningSandbox, tmp_path: Path, runs: list[dict[str, list[Any]]]
) -> None:
    harness = Harness(live_sandbox, Path(tempfile.mkdtemp(dir=tmp_path)))
    try:
        for plan in runs:
            drift = Drift(plan)
            harness.sync(
                full=True,
                resources=["followers", "topics"],
                transport=Intercept(rewrite=drift),
                models=False,
            )
            assert harness.dlt_warnings == []  # nothing left for dlt to coerce
            landed = _landed(harness)
            assert set(landed) == set(drift.sent)
            wrong = {
                key: (sent, landed[key])
                for key, sent in drift.sent.items()
                if not all(same(sent[f], landed[key][f]) for f in sent)
            }
            assert not wrong, f"{len(wrong)} values changed, e.g. {list(wrong.items())[:3]}"
    finally:
        harness.close()


@pytest.mark.slow
def test_the_sandbox_drift_lands_exactly_and_the_views_read_it_as_one_value(
    harness: Harness,
) -> None:
    harness.switches(number_drift=1, company_fields="top_level")
    for seed in (1, 2):
        harness.switches(number_drift=seed)
        harness.sync(full=True)
        assert harness.dlt_warnings == []
        dump = harness.dump()
        harness.assert_equals_truth(dump)
        sent = {
            (f["idx"], str(position)): c
            for f in dump["followers"]
            for position, c in enumerate(f.get("companies") or ())
        }
        assert {type(c.get("seats")) for c in sent.values()} >= {int, float, str}
        landed = {k: v["seats"] for k, v in _seats(harness).items()}
        assert all(same(c.get("seats"), landed[key]) for key, c in sent.items())
    for con in harness.connect():
        staged = con.execute(
            "select follower_idx, position, monthly_spend, monthly_spend_as_sent, "
            "typeof(monthly_spend) from staging.follower_companies"
        ).fetchall()
        drift = con.execute(
            "select table_name, row_key, column_name, sent_type, value_as_sent "
            "from staging.type_drift where column_name = 'monthly_spend'"
        ).fetchall()
    assert {row[4] for row in staged} == {"DOUBLE"}
    expected_drift = set()
    for follower, position, spend, as_sent, _ in staged:
        value = sent[(follower, str(position))].get("monthly_spend")
        if isinstance(value, str):
            # text reads as its number where it is one; the text itself stays visible
            number = None if value == "unlimited" else float(value)
            assert (spend, as_sent) == (number, value)
            expected_drift.add(("followers__companies", f"{follower}/{position}", value))
        else:
            assert (spend, as_sent) == (value, None)
    assert expected_drift and {(t, k, v) for t, k, _, _, v in drift} == expected_drift
    assert any(c.get("seats") == "unlimited" for c in sent.values())  # a word among numbers
    # the top-level custom fields, each value with the kind it was stored as
    for con in harness.connect():
        custom = con.execute(
            "select row_key, value_type, value from staging.custom_fields "
            "where table_name = 'followers__companies' and field_name = 'seats'"
        ).fetchall()
        fields = con.execute("select distinct table_name, field_name from staging.custom_fields")
        custom_keys = {k for c in sent.values() for k in c} - {"id", "name", "monthly_spend"}
        assert custom_keys >= {"seats", "plan"} and "attributes" in custom_keys
        custom_keys.discard("attributes")  # declared (and empty with top-level fields)
        column = snake_case.NamingConvention().normalize_identifier  # "Renewal Date"
        expected_fields = {("followers__companies", column(k)) for k in custom_keys}
        assert set(fields.fetchall()) == expected_fields
    kinds = {"bigint": int, "double": float, "text": str}
    seats = {key: value for key, kind, value in custom}
    assert len(seats) == len(custom)
    expected_seats = {
        f"{follower}/{position}": c["seats"]
        for (follower, position), c in sent.items()
        if c.get("seats") is not None
    }
    assert seats.keys() == expected_seats.keys()
    for key, kind, value in custom:
        sent_value = expected_seats[key]
        assert isinstance(sent_value, kinds[kind]), (key, kind, sent_value)
        assert (value if kind == "text" else float(value)) == sent_value


def _seats(harness: Harness) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for con in harness.connect():
        cursor = con.execute("select * from feedback.followers__companies")
        names = [d[0] for d in cursor.description]
        for values in cursor.fetchall():
            row = dict(zip(names, values, strict=True))
            out[(row["follower_idx"], str(row["_dlt_list_idx"]))] = {
                "seats": fold_variants(row, "seats")
            }
    return out


@pytest.mark.slow
def test_a_warehouse_with_a_bigint_spend_gets_exact_values_from_the_next_full(
    harness: Harness,
) -> None:
    # an earlier version typed monthly_spend by its first value: a whole number made it BIGINT
    follower = harness.dump()["followers"][0]["idx"]
    legacy = pa.table(
        {
            "follower_idx": [follower],
            "_dlt_list_idx": [0],
            "id": ["acct-legacy"],
            "monthly_spend": pa.array([2500], type=pa.int64()),
        }
    )

    @dlt.source(name="feedback")
    def earlier_version() -> Any:
        @dlt.resource(name="followers")
        def followers() -> Any:
            yield dlt.mark.with_hints(
                legacy,
                dlt.mark.make_hints(
                    table_name="followers__companies",
                    write_disposition="merge",
                    primary_key=["follower_idx", "_dlt_list_idx"],
                ),
            )

        return followers

    harness.target().pipeline().run(earlier_version(), loader_file_format="parquet")
    harness.sync(full=True)
    dump = harness.dump()
    harness.assert_equals_truth(dump)
    for con in harness.connect():
        kinds = dict(
            con.execute(
                "select column_name, data_type from information_schema.columns "
                "where table_schema = 'feedback' and table_name = 'followers__companies'"
            ).fetchall()
        )
        staged = dict(
            con.execute(
                "select follower_idx || '/' || position, monthly_spend "
                "from staging.follower_companies"
            ).fetchall()
        )
    # the stored column keeps its type; fractions sit in the variant, and the view is exact
    assert kinds["monthly_spend"] == "BIGINT" and kinds["monthly_spend__v_double"] == "DOUBLE"
    expected = {
        f"{f['idx']}/{p}": c.get("monthly_spend")
        for f in dump["followers"]
        for p, c in enumerate(f.get("companies") or ())
    }
    assert any(isinstance(v, float) and not v.is_integer() for v in expected.values())
    assert staged == expected


class _FailingCopy:
    """Makes the DuckDB load job of ``table`` fail terminally ``times`` times."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, table: str, times: int, after_seconds: float = 0
    ) -> None:
        from dlt.destinations.exceptions import DatabaseTerminalException
        from dlt.destinations.impl.duckdb.duck import DuckDbCopyJob

        self.left = times
        original = DuckDbCopyJob.run

        def run(job: Any) -> None:
            if job.load_table_name == table and self.left > 0:
                self.left -= 1
                time.sleep(after_seconds)  # the other tables' copies finish first
                raise DatabaseTerminalException(Exception(f"injected failure for {table}"))
            original(job)

        monkeypatch.setattr(DuckDbCopyJob, "run", run)


def _committed_loads(harness: Harness) -> set[str]:
    for con in harness.connect():
        rows = con.execute("select load_id from feedback._dlt_loads where status = 0").fetchall()
    return {r[0] for r in rows}


FOLLOWER_TABLES = ["followers", "followers__companies", "followers__attributes"]


@pytest.mark.slow
def test_a_load_that_fails_for_good_is_aborted_and_the_next_run_reads_its_rows_again(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.sync(full=True)
    loads = _committed_loads(harness)
    created = harness.mutate(seed=5, counts={"followers": {"create": 4}})["followers"]["created"]
    failing = _FailingCopy(monkeypatch, "followers", times=1)
    with pytest.raises(Exception) as caught:
        harness.sync()
    message, code = explain(caught.value)
    assert code == 1 and message is not None and "\n" not in message
    assert "table followers" in message and "injected failure" in message
    assert any(isinstance(e, LoadFailed) for e in _chain(caught.value))
    pipeline = harness.target().pipeline()
    # nothing is left pending, nothing of the package was committed
    assert not pipeline.has_pending_data
    assert _committed_loads(harness) == loads
    assert failing.left == 0
    # the next run reads the new followers again: the failed run's cursor never committed
    harness.sync()
    for con in harness.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
    assert set(created) <= landed
    harness.assert_equals_truth(tables=FOLLOWER_TABLES)


def _rows_of_uncommitted_loads(harness: Harness) -> dict[str, int]:
    """Rows per data table whose load id no committed load holds (dlt's state table is
    appended to as the package loads; dlt reads a state only with its committed load)."""
    found: dict[str, int] = {}
    for con in harness.connect():
        tables = con.execute(
            "select table_name from information_schema.columns where table_schema = "
            "'feedback' and column_name = '_dlt_load_id' "
            "and not starts_with(table_name, '_dlt_')"
        ).fetchall()
        for (table,) in tables:
            (count,) = con.execute(
                f'select count(*) from feedback."{table}" where _dlt_load_id not in '
                "(select load_id from feedback._dlt_loads where status = 0)"
            ).fetchone() or (0,)
            if count:
                found[table] = count
    return found


@pytest.mark.slow
def test_a_package_that_fails_for_good_leaves_no_table_merged(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The followers copy fails after the comments chain was copied: without merges held
    back to the end, the new comments would be merged while the package is aborted."""
    harness.sync(full=True)
    for con in harness.connect():
        before = con.execute("select count(*) from feedback.comments").fetchone()
    changes = harness.mutate(seed=7, counts={"followers": {"create": 3}, "comments": {"create": 5}})
    assert len(changes["comments"]["created"]) == 5
    _FailingCopy(monkeypatch, "followers", times=1, after_seconds=1.5)
    with pytest.raises(Exception, match="injected failure"):
        harness.sync()
    assert _rows_of_uncommitted_loads(harness) == {}
    for con in harness.connect():
        assert con.execute("select count(*) from feedback.comments").fetchone() == before
    harness.sync()
    assert _rows_of_uncommitted_loads(harness) == {}
    harness.assert_equals_truth(tables=[*FOLLOWER_TABLES, "comments"])


@pytest.mark.slow
def test_a_first_load_that_fails_for_good_leaves_no_rows_in_the_tables_it_appended_to(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A first load appends to new tables (no staging copy holds them back): when the
    followers copy fails for good after the other tables landed, the aborted package's rows
    are deleted from them, and the next run (with no state committed, it reads everything
    again) lands everything once."""
    _FailingCopy(monkeypatch, "followers", times=1, after_seconds=1.5)
    caplog.set_level(logging.WARNING, logger="feedback_sync")
    with pytest.raises(Exception, match="injected failure"):
        harness.sync(full=True, models=False)
    assert _rows_of_uncommitted_loads(harness) == {}
    said = [r.getMessage() for r in caplog.records]
    assert any("a load that was never committed" in line for line in said), said
    harness.sync(models=False)
    assert _rows_of_uncommitted_loads(harness) == {}
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_first_package_left_pending_then_refused_leaves_no_rows_behind(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first run dies before its load; the next run loads that package first, and the
    followers copy fails for good after the other tables landed: the recovered package is
    aborted, its rows are deleted from the tables it appended to, and the run goes on."""
    from feedback_sync.warehouse.journal import Journal

    def killed(*args: Any) -> None:
        raise RuntimeError("killed before the load")

    with monkeypatch.context() as patch:
        patch.setattr(Journal, "write", killed)
        with pytest.raises(RuntimeError, match="killed before the load"):
            harness.sync(full=True, models=False)
    assert harness.target().pipeline().has_pending_data
    _FailingCopy(monkeypatch, "followers", times=1, after_seconds=1.5)
    # this run reads topics only: nothing it loads replaces the aborted package's rows
    result = harness.sync(models=False, resources=["topics"])
    assert "could not be loaded" in harness.last_output and result.recovered_packages == 1
    assert _rows_of_uncommitted_loads(harness) == {}
    harness.sync(full=True, models=False)
    harness.assert_equals_truth()


@pytest.mark.slow
def test_a_package_an_earlier_version_left_pending_is_given_up_and_read_again(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wedge of earlier versions: a package whose job failed for good stayed pending and
    every later run failed on it. Now the run that finds one gives it up and goes on."""
    harness.sync(full=True)
    created = harness.mutate(seed=6, counts={"followers": {"create": 3}})["followers"]["created"]
    _FailingCopy(monkeypatch, "followers", times=2)

    def as_earlier_versions(pipeline: Any) -> None:
        dlt.config[f"{pipeline.pipeline_name}.load.auto_abort_on_terminal_error"] = False

    with pytest.raises(Exception, match="injected failure"):
        harness.sync(after_extract=as_earlier_versions)
    assert harness.target().pipeline().has_pending_data  # wedged, as before
    harness.sync()
    assert "could not be loaded" in harness.last_output
    for con in harness.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
    assert set(created) <= landed
    harness.assert_equals_truth(tables=FOLLOWER_TABLES)


@pytest.mark.slow
def test_a_column_the_warehouse_cannot_take_fails_naming_table_and_column(
    harness: Harness,
) -> None:
    harness.sync(full=True, resources=["statuses"])
    path = harness.target().duckdb_file()
    assert path is not None
    import duckdb

    with duckdb.connect(str(path)) as con:
        # a column altered behind dlt's back: the schema says text, the table BIGINT
        con.execute("update feedback.statuses set color = null")
        con.execute("alter table feedback.statuses alter color type bigint")
    # a status changed at the source, so the normal run loads it (unchanged rows do not load)
    harness.mutate(seed=7, counts={"statuses": {"update": 1}})
    for _ in range(2):  # the same failure each time, never a package retried forever
        with pytest.raises(Exception) as caught:
            harness.sync(resources=["statuses"])
        message, code = explain(caught.value)
        assert code == 1 and message is not None
        assert "table statuses, column color" in message, message
        assert "loading what the previous run left pending" not in harness.last_output
        assert not harness.target().pipeline().has_pending_data
    with duckdb.connect(str(path)) as con:
        con.execute("alter table feedback.statuses alter color type varchar")
    harness.sync(resources=["statuses"])
    for con in harness.connect():
        loaded = con.execute("select count(*) from feedback.statuses where color is not null")
        assert loaded.fetchone() == (1,)  # the changed status, loaded at last
    # the colors nulled behind dlt's back are unchanged at the source: a full run loads them
    harness.sync(full=True, resources=["statuses"])
    harness.assert_equals_truth(tables=["statuses"])


def _chain(exc: BaseException) -> list[BaseException]:
    from feedback_sync.app.failures import causes

    return causes(exc)
