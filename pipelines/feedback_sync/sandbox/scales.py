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
    "tiny": Scale(
        followers=40,
        ideas=12,
        comments=160,
        announcements=16,
        links=30,
        topics=6,
        statuses=5,
        companies=10,
        users=3,
        categories=4,
    ),
    "demo": Scale(
        followers=2_000,
        ideas=300,
        comments=8_000,
        announcements=400,
        links=2_000,
        topics=12,
        statuses=6,
        companies=250,
        users=6,
        categories=8,
    ),
    # a small account: about 500 requests and 24k rows for a full sync (the benchmark's
    # fixed-cost comparison)
    "small": Scale(
        followers=2_000,
        ideas=200,
        comments=8_000,
        announcements=400,
        links=2_000,
        topics=12,
        statuses=6,
        companies=250,
        users=6,
        categories=8,
    ),
    # a quarter of large: the benchmark's 1x scale to large's 4x
    "medium": Scale(
        followers=50_000,
        ideas=5_000,
        comments=125_000,
        announcements=5_000,
        links=25_000,
        topics=40,
        statuses=7,
        companies=5_000,
        users=25,
        categories=12,
    ),
    "large": Scale(
        followers=200_000,
        ideas=20_000,
        comments=500_000,
        announcements=20_000,
        links=100_000,
        topics=40,
        statuses=7,
        companies=20_000,
        users=25,
        categories=12,
    ),
}
