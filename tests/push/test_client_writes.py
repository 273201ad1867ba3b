"""FeedbackClient.send_json: which failed writes are sent again, and which are handed back
as an unknown outcome (a create is never blindly repeated)."""

from __future__ import annotations

import json

import httpx
import pytest
from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.errors import ApiError, NotFound, OutcomeUnknown, RetriesExhausted

KEY = "sekret-key-123"


def client(answers: list[httpx.Response | Exception], seen: list[httpx.Request]) -> FeedbackClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    settings = FeedbackSettings.validate(base_url="https://api.test/v1", api_key=KEY, max_retries=3)
    return FeedbackClient(settings, transport=httpx.MockTransport(handler), sleep=lambda s: None)


def ok(body: dict[str, object]) -> httpx.Response:
    return httpx.Response(200, json=body)


def error(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"error": True, "message": "no", "code": "x"}, headers=headers
    )


def test_a_create_is_sent_with_its_body_and_not_repeated_after_a_5xx() -> None:
    seen: list[httpx.Request] = []
    c = client([error(502)], seen)
    with pytest.raises(OutcomeUnknown, match="may or may not have acted"):
        c.send_json(
            "POST",
            "followers",
            {"name": "A", "email": "a@x.io"},
            resource="write",
            idempotent=False,
        )
    assert len(seen) == 1
    assert json.loads(seen[0].content) == {"name": "A", "email": "a@x.io"}
    assert seen[0].headers["content-type"] == "application/json"


@pytest.mark.parametrize("failure", [httpx.ReadTimeout("slow"), httpx.RemoteProtocolError("drop")])
def test_a_create_whose_answer_was_lost_is_an_unknown_outcome(failure: Exception) -> None:
    seen: list[httpx.Request] = []
    with pytest.raises(OutcomeUnknown):
        client([failure], seen).send_json("POST", "comments", {}, resource="w", idempotent=False)
    assert len(seen) == 1


def test_a_create_is_sent_again_when_it_cannot_have_been_acted_on() -> None:
    seen: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(429, {"Retry-After": "0"}),
        httpx.ConnectError("refused"),
        ok({"data": {"idx": "flw_9"}}),
    ]
    c = client(answers, seen)
    body = c.send_json("POST", "followers", {"name": "A"}, resource="w", idempotent=False)
    assert body == {"data": {"idx": "flw_9"}} and len(seen) == 3 and c.stats.retries == 2


def test_an_update_is_retried_like_a_read() -> None:
    seen: list[httpx.Request] = []
    c = client([error(500), httpx.ReadTimeout("slow"), ok({"data": {"idx": "flw_1"}})], seen)
    c.send_json("POST", "followers/flw_1", {"name": "B"}, resource="w", idempotent=True)
    assert len(seen) == 3
    with pytest.raises(RetriesExhausted):
        client([error(503)] * 4, []).send_json("DELETE", "topics/t", resource="w", idempotent=True)


def test_refusals_are_not_retried_and_name_the_method() -> None:
    seen: list[httpx.Request] = []
    with pytest.raises(ApiError, match=r"POST https://api.test/v1/followers failed \(HTTP 403\)"):
        client([error(403)], seen).send_json(
            "POST", "followers", {}, resource="w", idempotent=False
        )
    with pytest.raises(NotFound):
        client([error(404)], seen).send_json("DELETE", "topics/t", resource="w", idempotent=True)
    assert len(seen) == 2


def test_integers_past_64_bits_are_sent_exactly() -> None:
    seen: list[httpx.Request] = []
    big = 2**70 + 1
    client([ok({"data": {}})], seen).send_json(
        "POST", "followers/f", {"attributes": {"n": big}}, resource="w", idempotent=True
    )
    assert json.loads(seen[0].content) == {"attributes": {"n": big}}
