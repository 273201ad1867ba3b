"""Error answers: one exception for every error the API gives, and its JSON body.

Bodies follow ``api-contract.md``: ``{"error": true, "message": ..., "code": ...}``.
Messages name the offending field or idx and never contain the API key.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response

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
