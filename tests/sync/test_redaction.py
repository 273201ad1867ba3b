"""The secret scrubber: a key is never printed, and a short test key does not blank out
the letters of every word it happens to be part of."""

from __future__ import annotations

from feedback_sync.redaction import SecretScrubber


def test_a_long_key_is_replaced_wherever_it_appears() -> None:
    scrubber = SecretScrubber()
    key = "sDBs13ysc6tscgANddv5DlaguIaUJki_"
    scrubber.register(key)
    said = f"GET /v1/ideas?token={key} Bearer {key} encoded x%3D{key}y"
    assert scrubber.scrub(said) == "GET /v1/ideas?token=*** Bearer *** encoded x%3D***y"


def test_a_short_key_is_replaced_where_it_stands_alone_only() -> None:
    scrubber = SecretScrubber()
    scrubber.register("k")
    said = "check the base URL; Bearer k; api_key=k&limit=1; key k."
    assert scrubber.scrub(said) == ("check the base URL; Bearer ***; api_key=***&limit=1; key ***.")


def test_an_empty_secret_changes_nothing() -> None:
    scrubber = SecretScrubber()
    scrubber.register("")
    assert scrubber.scrub("nothing to hide") == "nothing to hide"
