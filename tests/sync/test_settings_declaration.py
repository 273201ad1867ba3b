"""The source's settings are declared once (``FeedbackSettings``' fields): dlt's spec, the
checks and their messages, and the names all come from that declaration, and dlt still
reads every setting from the environment. The kinds a declaration is made of check what
they accept and name what they refuse."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from dlt.common.configuration.specs.base_configuration import is_secret_hint
from feedback_sync.api.config import spec_of
from feedback_sync.api.declaration import (
    REQUIRED,
    Email,
    Folder,
    Integer,
    Kind,
    Number,
    Numbers,
    Section,
)
from feedback_sync.api.settings import SOURCE, FeedbackSettings, load_settings
from feedback_sync.errors import ConfigError


def test_every_setting_says_what_it_does_and_only_the_key_is_a_secret() -> None:
    assert [s.name for s in SOURCE.settings if s.secret] == ["api_key"]
    assert [s.name for s in SOURCE.settings if s.default is REQUIRED] == ["base_url", "api_key"]
    for s in SOURCE.settings:
        assert s.doc and s.note, s.name
    # every field declares a setting, but where the settings were read
    checked = {f.name for f in dataclasses.fields(FeedbackSettings)} - {"section_path"}
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


@pytest.mark.parametrize(
    ("kind", "value", "made"),
    [
        (Integer(0, None), "12", 12),
        (Number(0.0, maximum=1.0), "0.25", 0.25),
        (Numbers(0.0), "[30, 120]", (30.0, 120.0)),
        (Numbers(0.0), " 5, 7.5", (5.0, 7.5)),
        (Numbers(0.0), 45, (45.0,)),
        (Folder(), " data/x ", Path("data/x")),
        (Folder(), "~/x", Path.home() / "x"),
        (Folder(optional=True), None, None),
        (Email(optional=True), " bot@example.com", "bot@example.com"),
        (Email(optional=True), None, None),
    ],
)
def test_the_kinds_make_what_they_accept(kind: Kind, value: object, made: object) -> None:
    assert kind.check(value, "X", False) == made
    assert kind.check(made, "X", False) == made  # a checked value checks again as itself


@pytest.mark.parametrize(
    ("kind", "value", "said"),
    [
        (Integer(0, None), -1, "X must be an integer >= 0, got -1"),
        (Integer(0, None), True, "X must be an integer >= 0, got True"),
        (Integer(0, 1000), "many", "X must be an integer from 0 to 1000, got 'many'"),
        (Number(0.0, maximum=1.0), "2", "X must be a number from 0 to 1, got '2'"),
        (Number(0.0, maximum=1.0), True, "X must be a number from 0 to 1, got True"),
        (Number(0.01), "soon", "X must be a number >= 0.01, got 'soon'"),
        (Numbers(0.0), [], "X must be a list of numbers >= 0, got []"),
        (Numbers(0.0), "", "X must be a list of numbers >= 0, got ''"),
        (Numbers(0.0), [1, "inf"], "X must be a list of numbers >= 0, got [1, 'inf']"),
        (Numbers(0.0), "[1,", "X is not a valid JSON list: '[1,'"),
        (Folder(), None, "X must be a folder path, got None"),
        (Folder(), 3, "X must be a folder path, got 3"),
        (Folder(existing="the models"), "no/such", "X no/such: no such folder (the models)"),
        (Email(), "bot", "X must be an email, got 'bot'"),
        (Email(optional=True), "", "X must be an email, got ''"),
    ],
)
def test_the_kinds_name_what_they_refuse(kind: Kind, value: object, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        kind.check(value, "X", False)
    assert str(refused.value) == said


def test_a_value_given_another_way_is_checked_by_the_settings_kind_and_named_as_given() -> None:
    assert SOURCE.given("page_size", "7", "--page-size") == 7
    with pytest.raises(ConfigError) as refused:
        SOURCE.given("page_size", 0, "--page-size")
    assert str(refused.value) == "--page-size must be an integer from 1 to 100, got 0"
