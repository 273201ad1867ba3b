"""The source's settings are declared once (``FeedbackSettings``' fields): dlt's spec, the
checks and their messages, and the names all come from that declaration, and dlt still
reads every setting from the environment."""

from __future__ import annotations

import dataclasses

import pytest
from dlt.common.configuration.specs.base_configuration import is_secret_hint
from feedback_sync.api.config import spec_of
from feedback_sync.api.declaration import REQUIRED, Section
from feedback_sync.api.settings import SOURCE, FeedbackSettings, load_settings
from feedback_sync.errors import ConfigError


def test_every_setting_says_what_it_does_and_only_the_key_is_a_secret() -> None:
    assert [s.name for s in SOURCE.settings if s.secret] == ["api_key"]
    assert [s.name for s in SOURCE.settings if s.default is REQUIRED] == ["base_url", "api_key"]
    for s in SOURCE.settings:
        assert s.doc and s.note, s.name
    checked = {f.name for f in dataclasses.fields(FeedbackSettings)}
    assert set(SOURCE.names()) == checked


def test_dlt_resolves_one_field_per_setting_and_the_key_as_a_secret() -> None:
    fields = spec_of(SOURCE).get_resolvable_fields()
    assert list(fields) == list(SOURCE.names())
    assert [name for name, hint in fields.items() if is_secret_hint(hint)] == ["api_key"]


def test_every_setting_is_read_from_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "BASE_URL": "https://feedback.example.com/v1/",
        "API_KEY": "k-1",
        "PAGE_SIZE": "5",
        "REQUESTS_PER_SECOND": "2.5",
        "INTEGRATION_TYPES": "zendesk, jira",
        "HISTORY_IDEAS": "false",
        "DELETE_MODE": "SOFT",
    }.items():
        monkeypatch.setenv(f"SOURCES__FEEDBACK__{name}", value)
    settings = load_settings()
    assert (settings.base_url, settings.api_key) == ("https://feedback.example.com/v1", "k-1")
    assert (settings.page_size, settings.requests_per_second) == (5, 2.5)
    assert settings.integration_types == ("zendesk", "jira")
    assert (settings.history_ideas, settings.delete_mode) == (False, "soft")
    assert settings.max_retries == 8  # the declared default


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (
            {"page_size": 0},
            "PAGE_SIZE (page_size in [{s}]) must be an integer from 1 to 100, got 0",
        ),
        (
            {"timeout_seconds": "soon"},
            "TIMEOUT_SECONDS (timeout_seconds in [{s}]) must be a number >= 0.01, got 'soon'",
        ),
        (
            {"auth_method": "Digest"},
            "AUTH_METHOD (auth_method in [{s}]) must be one of bearer, basic, query, got 'digest'",
        ),
        (
            {"history_ideas": "maybe"},
            "HISTORY_IDEAS (history_ideas in [{s}]) must be true or false",
        ),
        (
            {"idea_idxs": ["a", ""]},
            "IDEA_IDXS (idea_idxs in [{s}]) must be a list of non-empty strings, got ['a', '']",
        ),
    ],
)
def test_a_section_under_another_path_names_that_path(raw: dict[str, object], said: str) -> None:
    """The messages come from the section's path: the same declaration checked as another
    table (an account's, say) names that table."""
    for section in (SOURCE, Section("sources.feedback.accounts.acme", FeedbackSettings)):
        prefix = section.path.replace(".", "__").upper()
        with pytest.raises(ConfigError) as failure:
            section.check({"base_url": "https://x/v1", "api_key": "k", **raw})
        assert str(failure.value).startswith(f"{prefix}__{said.format(s=section.path)}")
