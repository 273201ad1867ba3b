"""The dlt configuration spec of section ``sources.feedback`` (raw values; see settings.py).

Fields are loosely typed on purpose: dlt hands over what the user wrote (a TOML value, or a
string from the environment) and ``FeedbackSettings.validate`` checks it with messages that
name the setting. Only ``api_key`` is typed as a secret, so dlt reads it from secret
providers and masks it.
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
    api_key: Optional[TSecretStrValue] = None  # noqa: UP045
    auth_method: Any = "bearer"
    page_size: Any = 100
    max_concurrency: Any = 8
    requests_per_second: Optional[Union[str, float]] = None  # noqa: UP007, UP045
    integration_types: Optional[Union[str, List[str]]] = None  # noqa: UP006, UP007, UP045
    idea_idxs: Optional[Union[str, List[str]]] = None  # noqa: UP006, UP007, UP045
    announcement_lookback_days: Any = 7
    timeout_seconds: Any = 30
    max_retries: Any = 8
    delete_mode: Any = "hard"
    allow_insecure_http: Any = False
    # None: not set (the default); Optional, or dlt would call them required
    history_ideas: Optional[Union[str, bool]] = None  # noqa: UP007, UP045
    history_companies: Optional[Union[str, bool]] = None  # noqa: UP007, UP045
    history_announcements: Optional[Union[str, bool]] = None  # noqa: UP007, UP045
