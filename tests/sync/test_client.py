"""FeedbackClient: auth, retries, backoff, error classification, redaction, rate limit, bounds.

The network is an ``httpx.MockTransport``; sleeping goes to a recorder that also advances a
fake clock, so nothing here waits for real (except a few milliseconds of overlap in the
concurrency test).
"""

from __future__ import annotations

import base64
import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
from feedback_sync.api.client import (
    BACKOFF_BASE_SECONDS,
    BACKOFF_CAP_SECONDS,
    MAX_RETRY_AFTER_SECONDS,
    FeedbackClient,
    RateLimiter,
    Slots,
)
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.errors import ApiError, NotFound, RetriesExhausted, Unreachable
from feedback_sync.redaction import redact_url

BASE = "https://api.test/v1"
KEY = "sekret-key-123"
OK_BODY = {"data": [{"idx": "flw_1"}], "pagination": {"total": 1}}

Handler = Callable[[httpx.Request], httpx.Response]


class FakeTime:
    """A clock that only moves when the client sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class EdgeRng(random.Random):
    """``uniform(a, b)`` answers one of its bounds and records the bounds it was given."""

    def __init__(self, high: bool) -> None:
        super().__init__(0)
        self.high = high
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return b if self.high else a


def settings(**overrides: Any) -> FeedbackSettings:
    raw: dict[str, Any] = {"base_url": BASE, "api_key": KEY, "max_retries": 3}
    raw.update(overrides)
    return FeedbackSettings.validate(**raw)


def make_client(
    handler: Handler,
    fake: FakeTime | None = None,
    rng: random.Random | None = None,
    **overrides: Any,
) -> FeedbackClient:
    fake = fake or FakeTime()
    s = settings(**overrides)
    client = FeedbackClient(
        s,
        transport=httpx.MockTransport(handler),
        sleep=fake.sleep,
        rng=rng or random.Random(1234),
    )
    # the limiter reads the same fake clock that the recorded sleeps advance
    client._limiter = RateLimiter(s.requests_per_second, clock=fake.clock)
    return client


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, content=orjson.dumps(body), headers=headers)


def sequence(*steps: Callable[[httpx.Request], httpx.Response] | httpx.Response) -> Any:
    """A handler that plays ``steps`` in order (a step may raise) and records each request."""
    seen: list[httpx.Request] = []
    queue = list(steps)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        step = queue.pop(0) if len(queue) > 1 else queue[0]
        return step(request) if callable(step) else step

    handler.seen = seen  # type: ignore[attr-defined]
    return handler


def raiser(exc_type: type[httpx.TransportError]) -> Callable[[httpx.Request], httpx.Response]:
    def step(request: httpx.Request) -> httpx.Response:
        raise exc_type("boom", request=request)

    return step


# --- auth ---------------------------------------------------------------------------------


def test_no_cookie_is_kept_or_sent_and_every_header_still_goes() -> None:
    """The API authenticates by key: a cookie an answer sets is never sent back (httpx's
    jar is not used), while the client's own headers go on every request."""
    set_cookie = {"Set-Cookie": "session=abc; Path=/", "Content-Type": "application/json"}
    handler = sequence(json_response(200, OK_BODY, set_cookie), json_response(200, OK_BODY))
    with make_client(handler) as client:
        client.get_json("followers", {"limit": 5}, resource="followers")
        client.get_json("followers", {"limit": 5}, resource="followers")
        assert not client._http.cookies
    first, second = handler.seen
    assert "cookie" not in second.headers
    for request in (first, second):
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert request.headers["Accept"] == "application/json"
        assert request.headers["User-Agent"].startswith("feedback-sync/")


def test_bearer_auth_sends_the_key_in_the_authorization_header() -> None:
    handler = sequence(json_response(200, OK_BODY))
    with make_client(handler, auth_method="bearer") as client:
        assert client.get_json("followers", {"limit": 5}, resource="followers") == OK_BODY
    (request,) = handler.seen
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert "api_key" not in request.url.params
    assert request.url.path == "/v1/followers"
    assert request.url.params["limit"] == "5"
    assert request.headers["Accept"] == "application/json"


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/followers", {"limit": 100, "include_attributes": True}),
        ("comments", {"idea_idx": "ide_1", "included_types": "comments,notes"}),
        ("/followers/search", {"query": "a b&c=d+e/f?g#h%20", "name": "Zoë 日本"}),
        ("/integration-links", {"type": "a|b", "after": None, "flag": False, "n": -0}),
        ("/announcements/ann_1:2", {}),
    ],
)
def test_requests_go_to_the_url_httpx_makes_of_path_and_params(
    path: str, params: dict[str, Any]
) -> None:
    """The client builds each request's URL itself (cheaper than httpx's merge of a path
    and params into ``base_url``): it is the URL httpx itself would send."""
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(200, json=OK_BODY)

    client = make_client(handler)
    client.get_json(path, params, resource="x")
    httpx_own = httpx.Client(base_url=BASE + "/").build_request(
        "GET", path.lstrip("/"), params=params
    )
    assert seen == [httpx_own.url]
    assert str(seen[0]) == str(httpx_own.url)


def test_basic_auth_sends_the_key_as_user_with_an_empty_password() -> None:
    handler = sequence(json_response(200, OK_BODY))
    with make_client(handler, auth_method="basic") as client:
        client.get_json("followers", {}, resource="followers")
    (request,) = handler.seen
    expected = base64.b64encode(b"sekret-key-123:").decode()
    assert request.headers["Authorization"] == f"Basic {expected}"
    assert base64.b64decode(request.headers["Authorization"].split()[1]) == b"sekret-key-123:"
    assert "api_key" not in request.url.params


def test_query_auth_sends_the_key_as_a_parameter_and_no_authorization_header() -> None:
    handler = sequence(json_response(200, OK_BODY))
    with make_client(handler, auth_method="query") as client:
        client.get_json("/comments", {"idea_idx": "ide_1"}, resource="comments")
    (request,) = handler.seen
    assert request.url.params["api_key"] == KEY
    assert request.url.params["idea_idx"] == "ide_1"
    assert request.url.path == "/v1/comments"
    assert "Authorization" not in request.headers


# --- retries ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        json_response(500, {"error": True, "message": "Internal server error", "code": "internal"}),
        httpx.Response(502, content=b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
        httpx.Response(503, content=b""),
        json_response(429, {"error": True, "message": "slow down", "code": "rate_limited"}),
        raiser(httpx.ReadTimeout),
        raiser(httpx.RemoteProtocolError),
        raiser(httpx.ConnectError),
    ],
    ids=["500", "502-html", "503", "429-no-retry-after", "read-timeout", "protocol", "connect"],
)
def test_retryable_failures_are_retried_then_succeed(failure: Any) -> None:
    handler = sequence(failure, failure, json_response(200, OK_BODY))
    fake = FakeTime()
    with make_client(handler, fake) as client:
        body = client.get_json("ideas", {"limit": 10}, resource="ideas")
        assert body == OK_BODY
        assert len(handler.seen) == 3
        assert client.stats.requests == 3
        assert client.stats.retries == 2
        assert client.stats.by_resource["ideas"] == 3
        assert client.stats.statuses[200] == 1
    assert len(fake.sleeps) == 2
    assert all(s > 0 for s in fake.sleeps)


def test_statuses_are_counted_per_answer_and_transport_errors_have_none() -> None:
    handler = sequence(
        raiser(httpx.ConnectError),
        json_response(503, {}),
        json_response(200, OK_BODY),
    )
    with make_client(handler) as client:
        client.get_json("ideas", {}, resource="ideas")
        assert client.stats.requests == 3
        assert client.stats.retries == 2
        assert dict(client.stats.statuses) == {503: 1, 200: 1}


def test_persistent_failure_raises_retries_exhausted_after_max_retries() -> None:
    handler = sequence(json_response(500, {"message": "Internal server error", "code": "internal"}))
    fake = FakeTime()
    with make_client(handler, fake, max_retries=2) as client:
        with pytest.raises(RetriesExhausted) as info:
            client.get_json("ideas", {"limit": 10}, resource="ideas")
        assert client.stats.requests == 3
        assert client.stats.retries == 2
    assert len(handler.seen) == 3
    assert len(fake.sleeps) == 2
    exc = info.value
    assert exc.status == 500
    assert exc.resource == "ideas"
    assert "gave up after 3 attempts" in str(exc)
    assert "Internal server error (internal)" in str(exc)
    assert f"GET {BASE}/ideas?limit=10" in str(exc)


def test_max_retries_zero_makes_exactly_one_request() -> None:
    handler = sequence(json_response(503, {}))
    fake = FakeTime()
    with make_client(handler, fake, max_retries=0) as client, pytest.raises(RetriesExhausted):
        client.get_json("ideas", {}, resource="ideas")
    assert len(handler.seen) == 1
    assert fake.sleeps == []


# --- Retry-After --------------------------------------------------------------------------


def test_retry_after_seconds_is_waited_for_at_least() -> None:
    handler = sequence(
        json_response(429, {"message": "slow down", "code": "rate_limited"}, {"Retry-After": "3"}),
        json_response(200, OK_BODY),
    )
    fake = FakeTime()
    with make_client(handler, fake) as client:
        assert client.get_json("ideas", {}, resource="ideas") == OK_BODY
        assert client.stats.retries == 1
        assert client.stats.statuses[429] == 1
    assert len(fake.sleeps) == 1
    assert 3.0 <= fake.sleeps[0] <= 3.25


def test_retry_after_pauses_the_shared_limiter() -> None:
    """A 429's pause holds back the next request of any thread, not only the one that met it."""
    handler = sequence(
        json_response(429, {}, {"Retry-After": "5"}),
        json_response(200, OK_BODY),
    )
    fake = FakeTime()
    recorded: list[float] = []

    def sleep_without_moving(seconds: float) -> None:
        recorded.append(seconds)  # the clock stands still: another thread's view

    client = make_client(handler, fake)
    client._sleep = sleep_without_moving
    with client:
        client.get_json("ideas", {}, resource="ideas")
    # the retry sleeps its delay, then the limiter makes the next request wait the same pause
    assert len(recorded) == 2
    assert 5.0 <= recorded[0] <= 5.25
    assert recorded[1] == pytest.approx(recorded[0])


def test_retry_after_http_date_is_understood() -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    handler = sequence(json_response(503, {}, {"Retry-After": when}), json_response(200, OK_BODY))
    fake = FakeTime()
    with make_client(handler, fake) as client:
        client.get_json("ideas", {}, resource="ideas")
    (slept,) = fake.sleeps
    # the date has whole seconds; a little jitter rides on top
    assert 115.0 <= slept <= 120.25


@pytest.mark.parametrize(
    "value",
    ["0", "0.0", "-5", email.utils.formatdate(time.time() - 3600, usegmt=True)],
    ids=["zero", "zero-float", "negative", "a-date-in-the-past"],
)
def test_retry_after_zero_or_past_falls_back_to_the_exponential_backoff(value: str) -> None:
    """ "Retry now" taken at its word would spend every retry within a second or two; the
    retries spread out as without the header (dlt-hub/dlt#4036 was this bug)."""
    handler = sequence(json_response(429, {"message": "slow down"}, {"Retry-After": value}))
    fake = FakeTime()
    with (
        make_client(handler, fake, max_retries=5, rng=EdgeRng(high=True)) as client,
        pytest.raises(RetriesExhausted),
    ):
        client.get_json("ideas", {}, resource="ideas")
    assert len(handler.seen) == 6
    assert fake.sleeps == [BACKOFF_BASE_SECONDS * 2**n for n in range(5)]
    assert sum(fake.sleeps) >= 15.0


def test_garbled_retry_after_falls_back_to_backoff() -> None:
    handler = sequence(
        json_response(429, {}, {"Retry-After": "soon-ish"}), json_response(200, OK_BODY)
    )
    fake = FakeTime()
    with make_client(handler, fake, rng=EdgeRng(high=True)) as client:
        client.get_json("ideas", {}, resource="ideas")
    assert fake.sleeps == [BACKOFF_BASE_SECONDS]


def test_retry_after_at_the_limit_is_waited_for() -> None:
    handler = sequence(
        json_response(429, {}, {"Retry-After": str(int(MAX_RETRY_AFTER_SECONDS))}),
        json_response(200, OK_BODY),
    )
    fake = FakeTime()
    with make_client(handler, fake) as client:
        client.get_json("ideas", {}, resource="ideas")
    (slept,) = fake.sleeps
    assert MAX_RETRY_AFTER_SECONDS <= slept <= MAX_RETRY_AFTER_SECONDS + 0.25


def test_retry_after_beyond_the_limit_fails_at_once() -> None:
    too_long = int(MAX_RETRY_AFTER_SECONDS) + 1
    handler = sequence(
        json_response(429, {"message": "slow down"}, {"Retry-After": str(too_long)}),
        json_response(200, OK_BODY),
    )
    fake = FakeTime()
    with make_client(handler, fake) as client:
        with pytest.raises(RetriesExhausted) as info:
            client.get_json("ideas", {"limit": 3}, resource="ideas")
        assert client.stats.requests == 1
        assert client.stats.retries == 0
    assert len(handler.seen) == 1
    assert fake.sleeps == []
    message = str(info.value)
    assert "Retry-After" in message
    assert f"{too_long}s" in message
    assert info.value.status == 429
    assert message.startswith(f"ideas: GET {BASE}/ideas?limit=3 failed (HTTP 429)")


# --- bodies that are not what they should be ----------------------------------------------


@pytest.mark.parametrize(
    ("bad", "detail"),
    [
        (httpx.Response(200, content=b'{"data": [{"idx": "ide_1"}, {"idx": "id'), "not JSON"),
        (httpx.Response(200, content=b"[1, 2, 3]"), "not an object"),
        (httpx.Response(200, content=b'"just a string"'), "not an object"),
        (httpx.Response(200, content=b""), "not JSON"),
    ],
    ids=["truncated", "list", "string", "empty"],
)
def test_unreadable_2xx_bodies_are_retried(bad: httpx.Response, detail: str) -> None:
    handler = sequence(bad, json_response(200, OK_BODY))
    with make_client(handler) as client:
        assert client.get_json("ideas", {}, resource="ideas") == OK_BODY
        assert client.stats.retries == 1
        assert client.stats.requests == 2

    handler = sequence(bad)
    client = make_client(handler, max_retries=2)
    with client, pytest.raises(RetriesExhausted) as info:
        client.get_json("ideas", {"after": "c_9", "limit": 5}, resource="ideas")
    assert len(handler.seen) == 3
    message = str(info.value)
    assert message.startswith("ideas: GET ")
    assert f"{BASE}/ideas?after=c_9&limit=5" in message
    assert detail in message
    assert info.value.status == 200


def test_a_body_failing_check_is_retried_and_named() -> None:
    good = {"data": [], "pagination": {}}
    handler = sequence(json_response(200, {"items": []}), json_response(200, good))
    seen_bodies: list[dict[str, Any]] = []

    def check(body: dict[str, Any]) -> str | None:
        seen_bodies.append(body)
        return None if "data" in body else "'data' is missing"

    with make_client(handler) as client:
        assert client.get_json("comments", {}, resource="comments", check=check) == good
        assert client.stats.retries == 1
    assert seen_bodies == [{"items": []}, good]

    handler = sequence(json_response(200, {"items": []}))
    client = make_client(handler, max_retries=1)
    with client, pytest.raises(RetriesExhausted) as info:
        client.get_json("comments", {"idea_idx": "ide_7"}, resource="comments", check=check)
    assert len(handler.seen) == 2
    message = str(info.value)
    assert message.startswith(f"comments: GET {BASE}/comments?idea_idx=ide_7 failed (HTTP 200)")
    assert "'data' is missing" in message


# --- backoff ------------------------------------------------------------------------------


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    handler = sequence(json_response(500, {}))
    fake = FakeTime()
    rng = EdgeRng(high=True)
    with (
        make_client(handler, fake, rng=rng, max_retries=9) as client,
        pytest.raises(RetriesExhausted),
    ):
        client.get_json("ideas", {}, resource="ideas")
    ceilings = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert fake.sleeps == ceilings
    assert rng.calls == [(c / 2, c) for c in ceilings]
    assert max(fake.sleeps) == BACKOFF_CAP_SECONDS


def test_backoff_jitter_lower_bound_is_half_the_ceiling() -> None:
    handler = sequence(json_response(503, {}))
    fake = FakeTime()
    client = make_client(handler, fake, rng=EdgeRng(high=False), max_retries=8)
    with client, pytest.raises(RetriesExhausted):
        client.get_json("ideas", {}, resource="ideas")
    assert fake.sleeps == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0]


def test_backoff_with_a_real_rng_stays_within_bounds_and_varies() -> None:
    handler = sequence(raiser(httpx.ReadTimeout))
    fake = FakeTime()
    retries = 40
    client = make_client(handler, fake, rng=random.Random(7), max_retries=retries)
    with client, pytest.raises(RetriesExhausted):
        client.get_json("ideas", {}, resource="ideas")
    assert len(fake.sleeps) == retries
    for attempt, slept in enumerate(fake.sleeps, start=1):
        ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
        assert ceiling / 2 <= slept <= ceiling, (attempt, slept)
    capped = fake.sleeps[10:]
    assert len(set(capped)) > 1  # jitter: the capped waits are not all equal


# --- errors that are not retried ----------------------------------------------------------


def test_404_raises_not_found() -> None:
    handler = sequence(
        json_response(404, {"error": True, "message": "idea not found", "code": "not_found"})
    )
    with make_client(handler) as client:
        with pytest.raises(NotFound) as info:
            client.get_json("comments", {"idea_idx": "ide_gone"}, resource="comments")
        assert client.stats.requests == 1
        assert client.stats.retries == 0
    assert len(handler.seen) == 1
    exc = info.value
    assert exc.status == 404
    assert exc.resource == "comments"
    assert exc.url == f"{BASE}/comments?idea_idx=ide_gone"
    assert "idea not found (not_found)" in str(exc)


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (400, "limit must be from 1 to 100", "invalid_request"),
        (401, "missing or wrong API key", "unauthenticated"),
        (403, "custom attributes are disabled", "custom_attributes_disabled"),
    ],
)
def test_client_errors_raise_api_error_at_once(status: int, message: str, code: str) -> None:
    handler = sequence(json_response(status, {"error": True, "message": message, "code": code}))
    fake = FakeTime()
    with make_client(handler, fake) as client:
        with pytest.raises(ApiError) as info:
            client.get_json("followers", {"limit": 500}, resource="followers")
        assert client.stats.requests == 1
        assert client.stats.retries == 0
    assert len(handler.seen) == 1
    assert fake.sleeps == []
    exc = info.value
    assert type(exc) is ApiError
    assert exc.status == status
    assert exc.resource == "followers"
    assert exc.url == f"{BASE}/followers?limit=500"
    assert str(exc) == (
        f"followers: GET {BASE}/followers?limit=500 failed (HTTP {status}): {message} ({code})"
    )


def test_a_redirect_is_not_followed_and_raises_api_error() -> None:
    handler = sequence(httpx.Response(302, headers={"Location": "http://elsewhere.test/"}))
    with make_client(handler) as client, pytest.raises(ApiError) as info:
        client.get_json("ideas", {}, resource="ideas")
    assert len(handler.seen) == 1
    assert info.value.status == 302
    assert type(info.value) is ApiError


def test_a_non_json_error_body_is_quoted_briefly() -> None:
    handler = sequence(httpx.Response(400, content=b"bad things " + b"x" * 500))
    with make_client(handler) as client, pytest.raises(ApiError) as info:
        client.get_json("ideas", {}, resource="ideas")
    detail = info.value.detail
    assert detail.startswith("'bad things xxx")
    assert len(detail) <= 202  # 200 characters of body, quoted


# --- the key never travels on -------------------------------------------------------------


def test_query_key_never_reaches_messages_logs_or_repr(caplog: pytest.LogCaptureFixture) -> None:
    handler = sequence(
        json_response(500, {"message": "Internal server error", "code": "internal"}),
        raiser(httpx.ReadTimeout),
        httpx.Response(200, content=b"{trunc"),
    )
    caplog.set_level(logging.WARNING, logger="feedback_sync")
    with make_client(handler, auth_method="query", max_retries=3) as client:
        with pytest.raises(RetriesExhausted) as info:
            client.get_json("ideas", {"limit": 5}, resource="ideas")
        assert KEY not in repr(client.settings)
        assert "api_key='***'" in repr(client.settings)
        assert KEY not in str(client.settings)
    # the key did travel on the wire
    assert all(r.url.params["api_key"] == KEY for r in handler.seen)
    retries = [r for r in caplog.records if r.name == "feedback_sync"]
    assert len(retries) == 3
    assert all(r.levelno == logging.WARNING for r in retries)
    for record in retries:
        assert KEY not in record.getMessage()
        assert f"GET {BASE}/ideas?limit=5" in record.getMessage()
    assert KEY not in caplog.text
    assert KEY not in str(info.value)
    assert KEY not in info.value.url
    assert KEY not in repr(info.value)
    assert info.value.url.startswith(f"{BASE}/ideas?")
    assert "limit=5" in info.value.url


def test_describe_redacts_a_key_given_as_a_parameter() -> None:
    with make_client(sequence(json_response(200, OK_BODY)), auth_method="query") as client:
        described = client.describe("/ideas", {"api_key": KEY, "limit": 5})
    assert described == f"{BASE}/ideas?api_key=***&limit=5"


@pytest.mark.parametrize("status", [400, 401, 404])
def test_an_error_body_echoing_the_key_does_not_leak_it(status: int) -> None:
    echo = {"error": True, "message": f"key {KEY} is not valid here", "code": f"bad_{KEY}"}
    handler = sequence(json_response(status, echo))
    with make_client(handler, auth_method="query") as client, pytest.raises(ApiError) as info:
        client.get_json("ideas", {}, resource="ideas")
    assert KEY not in str(info.value)
    assert KEY not in info.value.detail
    assert info.value.detail == "key *** is not valid here (bad_***)"


def test_a_key_at_the_edge_of_the_excerpt_is_not_cut_in_half() -> None:
    body = b"x" * 195 + KEY.encode()
    handler = sequence(httpx.Response(400, content=body))
    with make_client(handler, auth_method="query") as client, pytest.raises(ApiError) as info:
        client.get_json("ideas", {"limit": 5}, resource="ideas")
    for cut in range(4, len(KEY) + 1):
        assert KEY[:cut] not in str(info.value)


def test_query_auth_shows_the_key_parameter_redacted_in_messages() -> None:
    handler = sequence(json_response(403, {"message": "no", "code": "forbidden"}))
    with make_client(handler, auth_method="query") as client, pytest.raises(ApiError) as info:
        client.get_json("ideas", {"limit": 5}, resource="ideas")
    assert info.value.url == f"{BASE}/ideas?limit=5&api_key=***"


def test_a_retried_body_echoing_the_key_does_not_leak_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = sequence(httpx.Response(502, content=f"<html>upstream saw {KEY}</html>".encode()))
    caplog.set_level(logging.WARNING, logger="feedback_sync")
    client = make_client(handler, auth_method="query", max_retries=1)
    with client, pytest.raises(RetriesExhausted) as info:
        client.get_json("ideas", {}, resource="ideas")
    assert KEY not in str(info.value)
    assert "upstream saw ***" in str(info.value)
    assert len(caplog.records) == 1
    assert KEY not in caplog.text
    assert "upstream saw ***" in caplog.text


# --- rate limiter -------------------------------------------------------------------------


def test_rate_limiter_spaces_reservations() -> None:
    fake = FakeTime()
    limiter = RateLimiter(4.0, clock=fake.clock)
    assert [limiter.reserve() for _ in range(4)] == [0.0, 0.25, 0.5, 0.75]
    fake.now += 10.0  # long idle: the next slot is now
    assert limiter.reserve() == 0.0
    assert limiter.reserve() == 0.25
    fake.now += 0.1
    assert limiter.reserve() == pytest.approx(0.4)


def test_rate_limiter_pause_delays_the_next_slot() -> None:
    fake = FakeTime()
    limiter = RateLimiter(2.0, clock=fake.clock)
    assert limiter.reserve() == 0.0
    limiter.pause(3.0)
    assert limiter.reserve() == 3.0
    assert limiter.reserve() == 3.5
    fake.now += 1.0
    assert limiter.reserve() == 3.0  # slot at start+4.0, one second later
    # a pause shorter than the queue already waiting does not pull it in
    limiter.pause(0.5)
    assert limiter.reserve() == 3.5


def test_rate_limiter_without_a_rate_only_honours_pauses() -> None:
    fake = FakeTime()
    limiter = RateLimiter(None, clock=fake.clock)
    assert [limiter.reserve() for _ in range(5)] == [0.0] * 5
    limiter.pause(2.0)
    assert limiter.reserve() == 2.0
    assert limiter.reserve() == 2.0
    fake.now += 2.0
    assert limiter.reserve() == 0.0


def test_client_spaces_requests_at_the_configured_rate() -> None:
    fake = FakeTime()
    handler = sequence(json_response(200, OK_BODY))
    with make_client(handler, fake, requests_per_second=5) as client:
        for _ in range(3):
            client.get_json("ideas", {}, resource="ideas")
    # the fake clock only moves by sleeping, so each request waits one interval
    assert fake.sleeps == pytest.approx([0.2, 0.2])


def test_the_limit_the_service_states_paces_the_client_below_it() -> None:
    fake = FakeTime()
    handler = sequence(json_response(200, OK_BODY, headers={"X-RateLimit-Limit": "4"}))
    with make_client(handler, fake) as client:
        for _ in range(3):
            client.get_json("ideas", {}, resource="ideas")
        assert client._limiter.rate == pytest.approx(3.2)  # 80% of the stated limit
    # the first answer brings the limit: one request per 1/3.2 s from the first on
    assert fake.sleeps == pytest.approx([1 / 3.2, 1 / 3.2])


def test_threads_that_woke_late_together_are_held_to_the_pace_within_any_second() -> None:
    fake = FakeTime()
    limiter = RateLimiter(4.0, clock=fake.clock)
    slots = [limiter.reserve() for _ in range(6)]  # spaced 0.25 s apart
    assert slots == pytest.approx([0, 0.25, 0.5, 0.75, 1.0, 1.25])
    fake.now += 1.3  # every thread slept past its slot and wakes now
    assert [limiter.admit() for _ in range(4)] == [0.0] * 4
    assert limiter.admit() == pytest.approx(1.0)  # the fifth waits a second from the first
    fake.now += 1.0
    assert limiter.admit() == 0.0


def test_a_configured_rate_below_the_stated_limit_wins_and_garbage_is_ignored() -> None:
    fake = FakeTime()
    limiter = RateLimiter(2.0, clock=fake.clock)
    limiter.announce(100.0)
    assert limiter.rate == pytest.approx(2.0)
    handler = sequence(json_response(200, OK_BODY, headers={"X-RateLimit-Limit": "lots"}))
    with make_client(handler, fake) as client:
        client.get_json("ideas", {}, resource="ideas")
        assert client._limiter.rate is None


def test_until_the_first_answer_requests_go_one_at_a_time() -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0}
    release = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        release.wait(5)
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return json_response(200, OK_BODY)

    with make_client(handler, max_concurrency=4) as client:
        threads = [
            threading.Thread(target=client.get_json, args=("ideas", {}), kwargs={"resource": "x"})
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.2)
        first_wave = state["max"]
        release.set()
        for thread in threads:
            thread.join(10)
    assert first_wave == 1


# --- concurrency bound --------------------------------------------------------------------


def test_in_flight_requests_never_exceed_max_concurrency() -> None:
    lock = threading.Lock()
    state = {"now": 0, "max": 0, "calls": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        with lock:
            state["now"] += 1
            state["calls"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.003)
        with lock:
            state["now"] -= 1
        return json_response(200, OK_BODY)

    errors: list[BaseException] = []
    s = settings(max_concurrency=3)
    with FeedbackClient(s, transport=httpx.MockTransport(handler), sleep=lambda _: None) as client:

        def work() -> None:
            try:
                for _ in range(4):
                    client.get_json("ideas", {}, resource="ideas")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert client.stats.requests == 64
    assert errors == []
    assert state["calls"] == 64
    assert state["now"] == 0
    assert 2 <= state["max"] <= 3


# --- redact_url ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://api.test/v1/ideas", "http://api.test/v1/ideas"),
        ("http://api.test/v1/ideas?limit=5", "http://api.test/v1/ideas?limit=5"),
        (f"http://api.test/v1/ideas?api_key={KEY}", "http://api.test/v1/ideas?api_key=***"),
        (
            f"http://api.test/v1/ideas?limit=5&api_key={KEY}&after=c1",
            "http://api.test/v1/ideas?limit=5&api_key=***&after=c1",
        ),
        (f"http://api.test/v1/ideas?API_KEY={KEY}", "http://api.test/v1/ideas?API_KEY=***"),
        (f"http://api.test/v1/ideas?api%5Fkey={KEY}", "http://api.test/v1/ideas?api_key=***"),
        ("http://api.test/v1/ideas?api_key=", "http://api.test/v1/ideas?api_key=***"),
        (
            f"http://api.test/v1/ideas?api_key={KEY}&api_key=other",
            "http://api.test/v1/ideas?api_key=***&api_key=***",
        ),
        (
            f"https://api.test:8443/v1/x?api_key={KEY}#frag",
            "https://api.test:8443/v1/x?api_key=***#frag",
        ),
        ("http://api.test/v1/x?q=&limit=5", "http://api.test/v1/x?q=&limit=5"),
        (
            "http://api.test/v1/x?published_after=2025-03-04T05:06:07Z",
            "http://api.test/v1/x?published_after=2025-03-04T05:06:07Z",
        ),
        ("http://api.test/v1/x?keyword=api_key", "http://api.test/v1/x?keyword=api_key"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert KEY not in redact_url(url)


def test_an_urgent_request_takes_the_next_free_slot_before_earlier_waiters() -> None:
    slots = Slots(1)
    slots.acquire(urgent=False)  # the only slot is taken
    order: list[str] = []

    def wait_for_slot(name: str, urgent: bool) -> None:
        slots.acquire(urgent)
        order.append(name)
        slots.release()

    normal = threading.Thread(target=wait_for_slot, args=("fan-out", False))
    normal.start()
    time.sleep(0.1)  # the fan-out request is waiting first
    urgent = threading.Thread(target=wait_for_slot, args=("list", True))
    urgent.start()
    time.sleep(0.1)
    assert order == []  # both wait while the slot is taken
    slots.release()
    normal.join(5)
    urgent.join(5)
    assert order == ["list", "fan-out"]


def test_integers_beyond_64_bits_are_parsed_exactly() -> None:
    """orjson reads 2**64 + 1 as a float; such bodies take the exact (stdlib) parser."""
    from feedback_sync.api.client import parse_json

    body = (
        b'{"data": [{"n": 18446744073709551617, "m": -123456789012345678901234567890, "f": 0.5}]}'
    )
    row = parse_json(body)["data"][0]
    assert (row["n"], row["m"], row["f"]) == (2**64 + 1, -123456789012345678901234567890, 0.5)
    assert type(row["n"]) is int and type(row["m"]) is int
    assert parse_json(b'{"id": "12345678901234567890123", "n": 7}') == {
        "id": "12345678901234567890123",
        "n": 7,
    }
    # the edges of orjson's integers: 19 digits always fit, unless negative below -2**63
    for n in (2**64 - 1, 9999999999999999999, -(2**63), -(2**63) - 1, -9999999999999999999):
        parsed = parse_json(b'{"n": %d}' % n)["n"]
        assert parsed == n and type(parsed) is int, n
    assert parse_json(b'{"a": [1, -2], "t": "2026-11-01T09:00:00Z"}') == {
        "a": [1, -2],
        "t": "2026-11-01T09:00:00Z",
    }
    with pytest.raises(ValueError):
        parse_json(b'{"n": 1e400, "id": "12345678901234567890"}')
    with pytest.raises(ValueError):
        parse_json(b'{"n": 1e400}')


@pytest.mark.parametrize("error", [httpx.ConnectError, httpx.ConnectTimeout])
def test_a_service_never_reached_fails_after_a_few_quick_tries(error: type[Exception]) -> None:
    seen: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise error("refused", request=request)

    fake = FakeTime()
    with make_client(refuse, fake, max_retries=8) as client, pytest.raises(Unreachable) as caught:
        client.get_json("followers", {"limit": 5}, resource="followers")
    assert len(seen) == 3 and sum(fake.sleeps) < 2.0
    message = str(caught.value)
    assert f"no connection to {BASE} in 3 attempts" in message and "check the base URL" in message
    assert "\n" not in message and KEY not in message


def test_after_a_first_answer_connection_failures_get_every_retry() -> None:
    answers = [json_response(200, OK_BODY)] + [raiser(httpx.ConnectError)] * 5
    answers.append(json_response(200, OK_BODY))
    handler = sequence(*answers)
    with make_client(handler, max_retries=8) as client:
        client.get_json("ideas", {}, resource="ideas")
        assert client.get_json("ideas", {}, resource="ideas") == OK_BODY
    assert len(handler.seen) == 7


def test_an_address_that_answers_html_is_not_the_api_and_fails_fast() -> None:
    page = httpx.Response(
        200, content=b"<!doctype html><title>Welcome</title>", headers={"Content-Type": "text/html"}
    )
    handler = sequence(page)
    fake = FakeTime()
    with make_client(handler, fake, max_retries=8) as client, pytest.raises(Unreachable) as caught:
        client.get_json("followers", {}, resource="followers")
    assert len(handler.seen) == 3 and sum(fake.sleeps) < 2.0
    message = str(caught.value)
    assert "answered 3 times with HTTP 200 with a body that is not JSON (text/html)" in message
    assert "never with the API's JSON" in message and BASE in message and "\n" not in message


def test_a_cut_json_body_or_html_after_json_is_retried_as_a_fault() -> None:
    cut = httpx.Response(200, content=b'{"data": [', headers={"Content-Type": "application/json"})
    html = httpx.Response(200, content=b"<html></html>", headers={"Content-Type": "text/html"})
    ok = json_response(200, OK_BODY)
    handler = sequence(*[cut] * 4, ok, *[html] * 4, ok)
    with make_client(handler, max_retries=8) as client:
        assert client.get_json("ideas", {}, resource="ideas") == OK_BODY
        assert client.get_json("ideas", {}, resource="ideas") == OK_BODY
    assert len(handler.seen) == 10
