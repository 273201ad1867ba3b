"""Runs that fail, die or meet odd answers, then run again: nothing lost, nothing twice."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from feedback_sync.app.failures import causes, explain
from feedback_sync.errors import ApiError, RetriesExhausted

from tests.sync.harness import Harness, Intercept, error


class Crash(Exception):
    pass


def _crash(pipeline: Any) -> None:
    raise Crash("killed between extract and load")


@pytest.mark.slow
def test_a_run_that_dies_after_extract_is_finished_by_the_next(harness: Harness) -> None:
    with pytest.raises(Crash):
        harness.sync(full=True, after_extract=_crash)
    changes = harness.mutate(seed=2, counts={"comments": {"create": 4}})
    harness.mark_requests()
    result = harness.sync()
    # the pending package (the first run's data and state) loaded first, then the new run
    # resumed from the state it carried instead of reading everything again
    assert result.recovered_packages == 1
    followers = [r for r in harness.requests() if r["path"] == "/v1/followers"]
    assert followers and all("after" in r["params"] for r in followers)
    harness.assert_equals_truth()
    assert set(changes["comments"]["created"]) <= {
        r[0]
        for con in harness.connect()
        for r in con.execute("select idx from feedback.comments").fetchall()
    }


@pytest.mark.slow
def test_a_run_that_fails_mid_extract_commits_nothing_and_the_rerun_is_exact(
    harness: Harness,
) -> None:
    harness.sync(full=True)
    harness.mutate(seed=6, counts={"comments": {"create": 5}, "followers": {"create": 2}})
    harness.switches(
        faults={"script": [{"kind": "500", "count": 50, "path_prefix": "/v1/comments"}]}
    )
    with pytest.raises(Exception) as failure:
        harness.sync(max_retries=1)
    message, code = explain(failure.value)
    assert code == 1 and message is not None
    assert "comments: GET http://" in message and "HTTP 500" in message
    assert isinstance(
        next(e for e in causes(failure.value) if isinstance(e, ApiError)), RetriesExhausted
    )
    harness.switches(faults={"script": []})
    harness.sync()
    harness.assert_equals_truth()
    # no row twice anywhere
    for con in harness.connect():
        for table in ("followers", "comments"):
            assert con.execute(
                f"select count(*) - count(distinct idx) from feedback.{table}"
            ).fetchone() == (0,)


def test_an_idea_that_vanished_is_skipped_with_a_warning(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    dump = harness.dump()
    gone = dump["ideas"][3]["idx"]

    def answer(request: httpx.Request) -> httpx.Response | None:
        if request.url.params.get("idea_idx") == gone:
            return error(404, f"Idea {gone} not found", "not_found")
        return None

    with caplog.at_level(logging.WARNING, logger="feedback_sync"):
        result = harness.sync(full=True, transport=Intercept(answer))
    assert result.skipped == {"comments": 1, "integration_links": 1}
    assert any(gone in r.getMessage() and "skipped" in r.getMessage() for r in caplog.records)
    expected = [c for c in dump["comments"] if c["idea_idx"] != gone]
    for con in harness.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.comments").fetchall()}
    assert landed == {c["idx"] for c in expected}


@pytest.mark.slow
def test_a_rejected_saved_cursor_restarts_that_list(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    harness.sync(full=True)
    harness.mutate(seed=1, counts={"followers": {"create": 2}})

    def answer(request: httpx.Request) -> httpx.Response | None:
        if request.url.path == "/v1/followers" and "after" in request.url.params:
            return error(400, "after: unknown cursor", "invalid_request")
        return None

    with caplog.at_level(logging.WARNING, logger="feedback_sync"):
        result = harness.sync(transport=Intercept(answer), page_size=100)
    assert "followers" in result.complete  # read from the start, so deletes can be applied
    assert any("rejected the saved cursor" in r.getMessage() for r in caplog.records)
    harness.assert_equals_truth(tables=["followers", "followers__companies"])


def test_a_fatal_answer_names_resource_request_and_message(harness: Harness) -> None:
    def answer(request: httpx.Request) -> httpx.Response | None:
        if request.url.path == "/v1/statuses":
            return error(403, "Your plan does not include statuses", "forbidden")
        return None

    with pytest.raises(Exception) as failure:
        harness.sync(transport=Intercept(answer), auth_method="query")
    message, code = explain(failure.value)
    assert code == 1 and message is not None
    assert "statuses: GET " in message
    assert "HTTP 403" in message and "Your plan does not include statuses" in message
    assert "api_key=***" in message and harness.server.api_key not in message


CLI = [sys.executable, "-m", "feedback_sync.app.cli"]


@pytest.mark.slow
def test_a_crash_between_load_and_reconcile_is_finished_by_the_next_run(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.sync(full=True)
    changes = harness.mutate(seed=13, counts={"followers": {"delete": 3}})
    destination = type(harness.target())  # the deletes are the destination's own step
    real = destination.reconcile

    def crash(*args: Any, **kwargs: Any) -> dict[str, int]:
        raise Crash("killed after the load, before the deletes")

    monkeypatch.setattr(destination, "reconcile", crash)
    with pytest.raises(Crash):
        harness.sync(full=True)
    monkeypatch.setattr(destination, "reconcile", real)
    result = harness.sync()  # a normal run: it would not reconcile followers by itself
    assert result.rows_removed.get("followers") == 3
    gone = set(changes["followers"]["deleted"])
    for con in harness.connect():
        left = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
    assert not gone & left
    harness.assert_equals_truth(tables=["followers", "followers__companies"])


@pytest.mark.slow
def test_parquet_files_catch_up_after_a_crash_between_load_and_export(harness: Harness) -> None:
    harness.sync(destination="parquet")
    harness.mutate(seed=14, counts={"followers": {"create": 4}})
    with pytest.raises(Crash):
        harness.sync(destination="parquet", after_extract=_crash)
    result = harness.sync(destination="parquet")
    assert result.recovered_packages == 1
    assert "followers" in result.exported
    harness.assert_equals_truth(destination="parquet", tables=["topics", "statuses"])
    truth = {f["idx"] for f in harness.dump()["followers"]}
    landed = {row[0] for row in harness.table_rows("followers", destination="parquet")}
    assert landed == truth


def test_a_published_post_dated_in_the_future_does_not_move_the_window(
    harness: Harness,
) -> None:
    """A server may call a post dated in the future published; the window must not move
    past now, or posts published until then would be in neither list."""

    def one_post_in_2030(request: httpx.Request, body: dict[str, Any]) -> dict[str, Any]:
        if request.url.path == "/v1/announcements" and body["data"]:
            body["data"][0]["published_at"] = "2030-01-01 00:00:00"
            body["data"][0]["is_published"] = True
        return body

    harness.sync(transport=Intercept(rewrite=one_post_in_2030))
    for con in harness.connect():
        future = con.execute(
            "select count(*) from feedback.announcements where published_at >= '2030-01-01'"
        ).fetchone()
    assert future is not None and future[0] >= 1
    pipeline = harness.target().pipeline()
    saved = pipeline.state["sources"]["feedback"]["resources"]["announcements"]
    assert saved["published_high_water"] < "2030"
    assert saved["published_high_water"] <= datetime.now(UTC).isoformat()


@pytest.mark.slow
def test_old_state_versions_are_pruned(harness: Harness) -> None:
    for _ in range(12):
        harness.sync(resources=["topics"])
    for con in harness.connect():
        versions = con.execute("select count(*) from feedback._dlt_pipeline_state").fetchone()
    assert versions is not None and versions[0] <= 10
