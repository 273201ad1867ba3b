"""The errors the feedback source raises, in one small tree.

::

    FeedbackError
    ├── ConfigError         a setting is missing or malformed; names the setting
    └── ApiError            the service refused a request for good (4xx other than 429)
        │                   or kept failing past the retry bound; names the resource,
        │                   the request (key redacted) and what the server said
        ├── NotFound        404: callers skip an idea that vanished
        └── RetriesExhausted  429, 5xx, timeouts, dropped connections or unreadable
                            bodies, more times than ``max_retries`` allows

Messages never contain the API key: requests are described by ``redact_url``.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMS = frozenset({"api_key"})


class FeedbackError(Exception):
    """Base of every error the feedback source raises on purpose."""


class ConfigError(FeedbackError):
    """A setting is missing or malformed."""


class ApiError(FeedbackError):
    """The service answered a request with a failure the client does not retry (any more)."""

    def __init__(
        self,
        resource: str,
        method: str,
        url: str,
        status: int | None,
        detail: str,
    ) -> None:
        self.resource = resource
        self.method = method
        self.url = url
        self.status = status
        self.detail = detail
        answer = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{resource}: {method} {url} failed ({answer}): {detail}")


class NotFound(ApiError):
    """404: the thing the request names does not exist (any more)."""


class RetriesExhausted(ApiError):
    """A retryable failure kept happening past the retry bound."""


def redact_url(url: str) -> str:
    """The URL with secret query parameters replaced by ``***``."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    pairs = [
        (name, "***" if name.lower() in SECRET_PARAMS else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(pairs, safe="*,:")))
