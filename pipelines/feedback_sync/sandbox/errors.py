"""Error answers: one exception for every error the API gives, and its JSON body.

Bodies follow ``api-contract.md``: ``{"error": true, "message": ..., "code": ...}``.
Messages name the offending field or idx and never contain the API key. Handlers raise
``ApiError`` (or the store's ``NotFound`` / ``Invalid``); ``answer_error``, registered once
on the app, answers all of them.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from feedback_sync.sandbox.store import Invalid, NotFound

CODES = {
    400: "invalid_request",
    401: "unauthenticated",
    403: "custom_attributes_disabled",
    404: "not_found",
    405: "method_not_allowed",
    429: "rate_limited",
    500: "internal",
    503: "unavailable",
}


class ApiError(Exception):
    """An error answer: status, message and the contract's ``code``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or CODES.get(status, "error")
        self.headers = headers or {}

    def response(self) -> Response:
        return error_response(self.status, self.message, self.code, self.headers)


def error_response(
    status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
) -> Response:
    body = {"error": True, "message": message, "code": code or CODES.get(status, "error")}
    return Response(
        orjson.dumps(body), status_code=status, headers=headers, media_type="application/json"
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def json_response(payload: object) -> Response:
    return Response(orjson.dumps(payload), media_type="application/json")


def answer_error(request: Request, exc: Exception) -> Response:
    """The one place that turns a refusal into an answer: the app's exception handler."""
    if isinstance(exc, NotFound):
        return ApiError(404, str(exc)).response()
    if isinstance(exc, Invalid):
        return ApiError(400, str(exc)).response()
    assert isinstance(exc, ApiError)
    return exc.response()


# every exception class answer_error handles, for Starlette's exception_handlers
HANDLED = (ApiError, NotFound, Invalid)
