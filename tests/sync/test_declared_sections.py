"""Every section feedback-sync owns besides the source's (``[push]``, ``[models]``,
``[report]``, ``[flows]``) is declared like it: dlt resolves each setting from its
environment variable, a malformed one is refused in one line that names it, and a value a
command's option gives wins, checked by the same kind and named as the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from feedback_sync.api.config import load
from feedback_sync.api.declaration import Section
from feedback_sync.app.settings import FLOWS, REPORT
from feedback_sync.errors import ConfigError
from feedback_sync.models.project import SQL_DIR, sql_dir
from feedback_sync.models.settings import MODELS
from feedback_sync.push.settings import PUSH, PushSettings, load_push_settings


@pytest.fixture(autouse=True)
def _no_settings_of_this_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only what a test sets: no ``PUSH__*``, ... variable of this process, and a folder
    without ``.dlt/``."""
    import os

    for name in os.environ:
        if name.startswith(("PUSH__", "MODELS__", "REPORT__", "FLOWS__")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("section", "variable", "value", "said"),
    [
        (PUSH, "CURATED_DIR", " ", "must be a folder path, got ' '"),
        (PUSH, "MAX_CHANGE_SHARE", "2", "must be a number from 0 to 1, got '2'"),
        (PUSH, "MAX_CHANGE_SHARE", "most", "must be a number from 0 to 1, got 'most'"),
        (PUSH, "MAX_CHANGE_MIN_ROWS", "-1", "must be an integer >= 0, got -1"),
        (PUSH, "MAX_CHANGE_MIN_ROWS", "some", "must be an integer >= 0, got 'some'"),
        (PUSH, "NOTE_AUTHOR_EMAIL", "bot", "must be an email, got 'bot'"),
        (PUSH, "SAMPLE_SIZE", "1001", "must be an integer from 0 to 1000, got 1001"),
        (MODELS, "SQL_DIR", " ", "must be a folder path, got ' '"),
        (MODELS, "SQL_DIR", "my-sql", "my-sql: no such folder (the SQL models' folder)"),
        (
            REPORT,
            "CURRENCY",
            "a currency name far too long",
            "must be a currency's code or symbol of 1 to 16 characters (EUR, USD, £), got "
            "'a currency name far too long'",
        ),
        (FLOWS, "API_KEY_SECRET_BLOCK", " ", "must be a block name, got ' '"),
        (FLOWS, "SYNC_RETRIES", "-1", "must be an integer >= 0, got -1"),
        (FLOWS, "SYNC_RETRIES", "twice", "must be an integer >= 0, got 'twice'"),
        (
            FLOWS,
            "SYNC_RETRY_DELAY_SECONDS",
            "30,soon",
            "must be a list of numbers >= 0, got '30,soon'",
        ),
        (FLOWS, "SYNC_RETRY_DELAY_SECONDS", "[]", "must be a list of numbers >= 0, got '[]'"),
        (
            FLOWS,
            "SYNC_RETRY_DELAY_SECONDS",
            "[30, -1]",
            "must be a list of numbers >= 0, got '[30, -1]'",
        ),
    ],
)
def test_a_malformed_setting_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, section: Section[Any], variable: str, value: str, said: str
) -> None:
    monkeypatch.setenv(section.env(variable.lower()), value)
    with pytest.raises(ConfigError) as refused:
        load(section)
    assert str(refused.value) == f"{section.describe(variable.lower())} {said}"


def test_every_setting_is_read_from_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "my-sql").mkdir()
    for name, value in {
        "PUSH__CURATED_DIR": "~/curated ",
        "PUSH__MAX_CHANGE_SHARE": "0.25",
        "PUSH__MAX_CHANGE_MIN_ROWS": "3",
        "PUSH__NOTE_AUTHOR_EMAIL": " bot@example.com",
        "PUSH__SAMPLE_SIZE": "0",
        "MODELS__SQL_DIR": "my-sql",
        "REPORT__CURRENCY": " CHF ",
        "FLOWS__API_KEY_SECRET_BLOCK": "our-key",
        "FLOWS__SYNC_RETRIES": "0",
        "FLOWS__SYNC_RETRY_DELAY_SECONDS": "5, 7.5",
    }.items():
        monkeypatch.setenv(name, value)
    assert load(PUSH) == PushSettings(
        curated_dir=Path.home() / "curated",
        max_change_share=0.25,
        max_change_min_rows=3,
        note_author_email="bot@example.com",
        sample_size=0,
    )
    assert sql_dir() == Path("my-sql")
    assert load(REPORT).currency == "CHF"
    flows = load(FLOWS)
    assert (flows.api_key_secret_block, flows.sync_retries) == ("our-key", 0)
    assert flows.sync_retry_delay_seconds == (5.0, 7.5)
    monkeypatch.setenv("FLOWS__SYNC_RETRY_DELAY_SECONDS", "[10, 60]")  # as JSON, too
    assert load(FLOWS).sync_retry_delay_seconds == (10.0, 60.0)
    monkeypatch.setenv("FLOWS__SYNC_RETRY_DELAY_SECONDS", "45")  # one wait: a list of one
    assert load(FLOWS).sync_retry_delay_seconds == (45.0,)
    assert FLOWS.check({"sync_retry_delay_seconds": 45})["sync_retry_delay_seconds"] == (45.0,)


def test_unset_is_the_declared_default() -> None:
    assert load(PUSH) == PushSettings()
    assert PushSettings().curated_dir == Path("data/curated")
    assert sql_dir() == SQL_DIR
    assert load(REPORT).currency is None
    flows = load(FLOWS)
    assert (flows.api_key_secret_block, flows.sync_retries) == ("feedback-api-key", 2)
    assert flows.sync_retry_delay_seconds == (30.0, 120.0)


def test_an_option_wins_checked_and_named_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--samples``, ``--curated-dir``, ``--sql-dir`` and ``--currency`` win over the
    setting (a malformed setting they replace is not read), and a malformed one is named as
    the option, in the setting's words."""
    from feedback_sync.app.report import currency_setting

    monkeypatch.setenv("PUSH__SAMPLE_SIZE", "many")
    monkeypatch.setenv("MODELS__SQL_DIR", "no-such-folder")
    monkeypatch.setenv("REPORT__CURRENCY", "")
    settings = load_push_settings(curated_dir="elsewhere", sample_size=3)
    assert (settings.curated_dir, settings.sample_size) == (Path("elsewhere"), 3)
    assert sql_dir(SQL_DIR) == SQL_DIR
    assert currency_setting("EUR") == "EUR"
    for call, said in [
        (
            lambda: load_push_settings(sample_size=5000),
            "--samples must be an integer from 0 to 1000, got 5000",
        ),
        (
            lambda: load_push_settings(curated_dir=" ", sample_size=3),
            "--curated-dir must be a folder path, got ' '",
        ),
        (lambda: sql_dir("nope"), "--sql-dir nope: no such folder (the SQL models' folder)"),
        (
            lambda: currency_setting(" "),
            "--currency must be a currency's code or symbol of 1 to 16 characters (EUR, USD, "
            "£), got ' '",
        ),
    ]:
        with pytest.raises(ConfigError) as refused:
            call()
        assert str(refused.value) == said
