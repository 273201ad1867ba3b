"""How the dashboard writes a number, an amount of money, a share, a count of things and a
date: one way each, for the prose and the charts alike."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any


class Money:
    """Amounts as whole units with thousands separators, per month, in the named currency."""

    def __init__(self, currency: str | None) -> None:
        self.suffix = f" {currency}/mo" if currency else "/mo"

    def __call__(self, value: Any) -> str:
        return f"{count(round(float(value or 0)))}{self.suffix}"


def count(value: Any) -> str:
    """The one way a number is written: whole, with a comma every three digits."""
    return f"{int(value):,}"


def share(value: Any) -> str:
    """A share as a whole percentage; under 1% but not 0 as "<1%"; NULL (no share can be
    told: a company's spend is negative) as "n/a"."""
    if value is None:
        return "n/a"
    fraction = float(value)
    return "<1%" if 0 < fraction < 0.005 else f"{fraction:.0%}"


def many(number: Any, noun: str) -> str:
    """``1 company``, ``2 companies``: the count written the one way, the noun agreeing."""
    n = int(number)
    if n == 1:
        return f"1 {noun}"
    consonant_y = noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u")
    plural = noun[:-1] + "ies" if consonant_y else noun + "s"
    return f"{count(n)} {plural}"


def moment(stamp: datetime) -> str:
    """A moment to the minute, in UTC: ``27 Nov 2026, 09:08 UTC``."""
    return stamp.strftime("%d %b %Y, %H:%M UTC").lstrip("0")


def day(stamp: datetime) -> str:
    """A day: ``27 Nov 2026``."""
    return stamp.strftime("%d %b %Y").lstrip("0")


def month_label(value: date) -> str:
    """A month on an axis or in a tooltip: ``Nov 2026``."""
    return value.strftime("%b %Y")
