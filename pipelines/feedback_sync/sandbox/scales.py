"""The seeded data sizes, by name (kept apart from the seeding: the CLI lists them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scale:
    followers: int
    ideas: int
    comments: int
    announcements: int
    links: int
    topics: int
    statuses: int
    companies: int
    users: int
    categories: int


SCALES: dict[str, Scale] = {
    "tiny": Scale(40, 12, 160, 16, 30, 6, 5, 10, 3, 4),
    "demo": Scale(2_000, 300, 8_000, 400, 2_000, 12, 6, 250, 6, 8),
    # a small account: about 500 requests and 24k rows for a full sync (the benchmark's
    # fixed-cost comparison)
    "small": Scale(2_000, 200, 8_000, 400, 2_000, 12, 6, 250, 6, 8),
    # a quarter of large: the benchmark's 1x scale to large's 4x
    "medium": Scale(50_000, 5_000, 125_000, 5_000, 25_000, 40, 7, 5_000, 25, 12),
    "large": Scale(200_000, 20_000, 500_000, 20_000, 100_000, 40, 7, 20_000, 25, 12),
}
