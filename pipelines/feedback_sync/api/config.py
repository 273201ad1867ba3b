"""The dlt configuration spec of section ``sources.feedback`` (raw values; see settings.py).

Fields are loosely typed on purpose: dlt hands over what the user wrote (a TOML value, or a
string from the environment) and ``FeedbackSettings.validate`` checks it with messages that
name the setting. Only ``api_key`` is typed as a secret, so dlt reads it from secret
providers and masks it.

The string under each field says what the setting does: the settings reference
(``docs/reference/settings.md``, written by ``./run docs``) is made from them.
"""

from __future__ import annotations

from typing import Any, List, Optional, Union  # noqa: UP035

from dlt.common.configuration import configspec
from dlt.common.configuration.specs import BaseConfiguration
from dlt.common.typing import TSecretStrValue


@configspec
class FeedbackConfiguration(BaseConfiguration):
    # Optional[...] rather than "X | None": dlt inspects these annotations at runtime
    base_url: Optional[str] = None  # noqa: UP045
    """The service's address, ending in the API's version segment ``/v1`` (another ending is
    refused at start). Plain ``http://`` only to this machine (``localhost``, ``127.x``, ``::1``)
    unless ``allow_insecure_http`` is set."""
    api_key: Optional[TSecretStrValue] = None  # noqa: UP045
    """The company's API key. Keep it in ``.dlt/secrets.toml`` or the environment, never in a
    committed file."""
    auth_method: Any = "bearer"
    """How the key is sent: ``bearer`` (an ``Authorization: Bearer`` header), ``basic`` (HTTP
    basic auth with the key as user name and an empty password) or ``query`` (``?api_key=`` in
    every URL: avoid it, URLs end up in proxy logs)."""
    page_size: Any = 100
    """Rows asked for per request, 1 to 100."""
    max_concurrency: Any = 8
    """Requests in flight at once, across every resource and the per-idea fan-out (1 to
    256)."""
    requests_per_second: Optional[Union[str, float]] = None  # noqa: UP007, UP045
    """A client-side rate limit. Unset (or 0): none of its own; a service that states its
    limit (``X-RateLimit-Limit``) is asked at 80% of it either way, or at this rate when it
    is lower."""
    integration_types: Optional[Union[str, List[str]]] = None  # noqa: UP006, UP007, UP045
    """Integration types whose links are listed by type on every run (a TOML list, or
    comma-separated in the environment: ``zendesk,jira``). Unset: the types the last full run
    saw, and links of a new type wait for the next ``--full``."""
    idea_idxs: Optional[Union[str, List[str]]] = None  # noqa: UP006, UP007, UP045
    """Extra ideas to read comments and links of when the service has no ``/ideas`` list (a
    list, like ``integration_types``)."""
    announcement_lookback_days: Any = 7
    """How far before the newest published post seen a normal run re-reads posts, in days
    (0 or more)."""
    timeout_seconds: Any = 30
    """The time allowed for each request, in seconds."""
    max_retries: Any = 8
    """Retries per request after a 429, a 5xx, a timeout, a dropped connection or a body
    that is not the expected JSON (0 to 100), with exponential backoff."""
    delete_mode: Any = "hard"
    """What a ``--full`` run does with rows deleted at the source: ``hard`` removes them,
    ``soft`` keeps them with ``_deleted_at`` set."""
    allow_insecure_http: Any = False
    """Lets ``base_url`` be plain ``http://`` to another machine (the key then crosses the
    network unencrypted)."""
    # None: not set (the default); Optional, or dlt would call them required
    history_ideas: Optional[Union[str, bool]] = None  # noqa: UP007, UP045
    """Keep the versioned history of ideas (``ideas_history``). Unset: on where the warehouse
    keeps history (DuckDB, Parquet, PostgreSQL); on elsewhere is an error."""
    history_companies: Optional[Union[str, bool]] = None  # noqa: UP007, UP045
    """Keep the versioned history of companies (``companies_history``). Unset: on where the
    warehouse keeps history."""
    history_announcements: Optional[Union[str, bool]] = None  # noqa: UP007, UP045
    """Keep the versioned history of announcements (``announcements_history``). Unset:
    off."""
    http_process: Any = "auto"
    """Where a sync sends its requests from: ``on``, a helper process, so speaking HTTP and
    reading answers run on another core than parsing and writing the rows; ``off``, the
    sync's own process; ``auto`` (the default), ``on`` where the process may use two CPUs or
    more (its affinity, and a container's CPU quota) on Linux or macOS. Where the
    environment names a proxy for the service, requests go from the sync's process."""
