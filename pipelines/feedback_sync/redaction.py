"""Secrets kept out of messages and logs: ``redact_url`` for a URL in a message, and
``SCRUBBER``, the log filter that rewrites any record carrying the API key (installed by
the entry points, ``install_log_filters``)."""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SECRET_PARAMS = frozenset({"api_key"})


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
# a password in a URL's user part: scheme://user:PASSWORD@host
_URL_PASSWORD = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^\s/:@]*:)[^\s/]+@")
# A secret this short is replaced only where it stands alone (no letter or digit either
# side): everywhere, a one-letter test key would blank out that letter in every word
# ("chec*** the base URL"). A longer one is replaced wherever it appears, inside a longer
# token too (percent-encoded, base64), since no ordinary word holds it by chance.
_SHORT_SECRET = 8


class SecretScrubber(logging.Filter):
    """Rewrites log records that would carry a secret: ``api_key=...`` in any URL, a
    password in a URL's user part, and every registered secret wherever it appears.

    Installed on the loggers that print request URLs (``httpx`` logs each request at INFO,
    query string included), so no log level or handler setting can leak the key.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._short: dict[str, re.Pattern[str]] = {}
        self._lock = threading.Lock()

    def register(self, secret: str) -> None:
        if not secret:
            return
        with self._lock:
            if len(secret) < _SHORT_SECRET:
                alone = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
                self._short[secret] = re.compile(alone)
            else:
                self._secrets.add(secret)

    def scrub(self, text: str) -> str:
        text = _KEY_IN_QUERY.sub(r"\1***", text)
        text = _URL_PASSWORD.sub(r"\1***@", text)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        for pattern in self._short.values():
            text = pattern.sub("***", text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


SCRUBBER = SecretScrubber()
# the loggers that may print a request's URL or a secret: httpx's client logs each request
# it sends (query string included) at INFO (the API client's requests skip that layer where
# httpx allows, ``FeedbackClient._exchange``; other clients do not); ours and dlt's may
# quote a setting
LOGGERS = ("httpx", "feedback_sync", "dlt")


def install_log_filters() -> None:
    """Puts ``SCRUBBER`` on the loggers that may carry a secret (idempotent), so no log
    level or handler setting can leak the key. The entry points call it: the command line,
    the Prefect flows, and a ``FeedbackClient`` when it is made (a library user's own
    pipeline); importing a module changes nothing."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if SCRUBBER not in logger.filters:
            logger.addFilter(SCRUBBER)
