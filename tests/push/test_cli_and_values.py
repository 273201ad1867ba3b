"""``feedback-sync push`` on the command line (exit codes 0, 1, 2), and exact values."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from feedback_sync.app.cli import main
from feedback_sync.errors import BadValue
from feedback_sync.push import values

from tests.push.helpers import BOT, accounts, write_csv
from tests.sync.harness import Harness


@pytest.mark.slow
def test_cli_preview_apply_and_exit_codes(
    harness: Harness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    harness.sync(full=True)
    monkeypatch.setenv("SOURCES__FEEDBACK__BASE_URL", harness.server.base_url)
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", harness.server.api_key)
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(harness.target().duckdb_file()))
    monkeypatch.setenv("PUSH__NOTE_AUTHOR_EMAIL", BOT)
    curated = tmp_path / "curated"
    rows = accounts(harness.dump())
    write_csv(curated / "accounts.csv", rows)
    base = ["push", "--curated-dir", str(curated), "--targets", "followers"]

    assert main(base) == 0
    out = capsys.readouterr().out
    assert "dry run, nothing sent" in out and "Run with --apply" in out
    assert harness.server.api_key not in out

    assert main([*base, "--apply"]) == 0
    assert "push applied" in capsys.readouterr().out

    write_csv(curated / "accounts.csv", [*rows, {"email": "not-an-email", "name": "X"}])
    assert main([*base, "--apply"]) == 1
    assert "invalid not-an-email: email is not a valid email address" in capsys.readouterr().out

    assert main(["push", "--curated-dir", str(curated), "--targets", "nope"]) == 2
    assert "unknown push target(s) nope" in capsys.readouterr().err
    monkeypatch.setenv("PUSH__MAX_CHANGE_SHARE", "2")
    assert main(base) == 2
    assert "max_change_share" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("raw", "sent"),
    [
        ("2500.50", 2500.5),
        ("2500", 2500),
        ("-0.1", -0.1),
        (Decimal("12.34"), 12.34),
        (7, 7),
        ("123456789012345678901234567890", 123456789012345678901234567890),
        ("1e3", 1000),
    ],
)
def test_numbers_are_sent_exactly(raw: object, sent: object) -> None:
    value = values.number(raw)
    assert value == sent and type(value) is type(sent)


@pytest.mark.parametrize("raw", ["lots", "2,500", "", True, None, "1.23456789012345678", "NaN"])
def test_what_is_not_an_exact_number_is_refused(raw: object) -> None:
    with pytest.raises(BadValue):
        values.number(raw)


def test_comparison_by_value_and_kind() -> None:
    assert values.same(2500, 2500.0) and values.same(12.34, Decimal("12.34"))
    assert values.same(2500, "2500.0") and not values.same(2500, "unlimited")
    assert not values.same(1, True) and not values.same("2500", 2500)
    assert values.same(["b", "a"], ["a", "b"]) and not values.same(["a"], ["a", "b"])
    instant = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert values.same(instant, "2026-03-04 05:06:07") and values.same(
        instant, "2026-03-04T05:06:07Z"
    )
    assert values.moment("2026-03-04") == datetime(2026, 3, 4, tzinfo=UTC)
    assert values.idx_list('["a", "b", "a"]') == ["a", "b"] and values.idx_list("a, b") == [
        "a",
        "b",
    ]
    with pytest.raises(BadValue):
        values.email("bob@@example.com")
