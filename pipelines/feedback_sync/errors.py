"""The errors the feedback source raises, in one small tree.

::

    FeedbackError
    ├── ConfigError         a setting is missing or malformed; names the setting
    ├── LoadFailed          the warehouse refused a load job for good; names the table and
    │                       the warehouse's reason (the run's package was aborted)
    └── ApiError            the service refused a request for good (4xx other than 429)
        │                   or kept failing past the retry bound; names the resource,
        │                   the request (key redacted) and what the server said
        ├── NotFound        404: callers skip an idea that vanished
        ├── RetriesExhausted  429, 5xx, timeouts, dropped connections or unreadable
        │   │               bodies, more times than ``max_retries`` allows
        │   └── Unreachable no connection before the service ever answered (a wrong
        │                   base URL): given up after a few quick tries
        └── OutcomeUnknown  a create failed after it may have reached the service: the
                            caller looks for the object before it creates again

Messages never contain the API key: requests are described by ``redact_url``.
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMS = frozenset({"api_key"})


class FeedbackError(Exception):
    """Base of every error the feedback source raises on purpose."""


class ConfigError(FeedbackError):
    """A setting is missing or malformed."""


class LoadFailed(FeedbackError):
    """The destination refused a load job for good (a terminal job failure).

    The run's load package was aborted, so its state (the new cursors) was not committed:
    the next run reads the same rows again.
    """


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


class Unreachable(RetriesExhausted):
    """No connection could be opened, and the service never answered this run: most likely
    a wrong base URL (port, host), so the run stops within seconds and names it."""


class OutcomeUnknown(ApiError):
    """A write that is not idempotent failed in a way that may have come after the service
    acted on it (timeout, dropped connection, 5xx, unreadable answer); it was not resent."""


class ModelError(Exception):
    """A model that cannot be built, a SQL folder that does not make sense, or a warehouse
    that keeps no models (another destination, nothing synced yet)."""


def redact_url(url: str) -> str:
    """The URL with secret query parameters, and a password in it, replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is not None:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1))
    if not parts.query:
        return urlunsplit(parts)
    pairs = [
        (name, "***" if name.lower() in SECRET_PARAMS else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit(parts._replace(query=urlencode(pairs, safe="*,:")))


_KEY_IN_QUERY = re.compile(r"(?i)(api_key=)[^&\s\"']+")


class SecretScrubber(logging.Filter):
    """Rewrites log records that would carry a secret: ``api_key=...`` in any URL, and every
    registered secret wherever it appears.

    Installed on the loggers that print request URLs (``httpx`` logs each request at INFO,
    query string included), so no log level or handler setting can leak the key.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def register(self, secret: str) -> None:
        with self._lock:
            self._secrets.add(secret)

    def scrub(self, text: str) -> str:
        text = _KEY_IN_QUERY.sub(r"\1***", text)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


SCRUBBER = SecretScrubber()
for _name in ("httpx", "feedback_sync", "dlt"):
    logging.getLogger(_name).addFilter(SCRUBBER)
