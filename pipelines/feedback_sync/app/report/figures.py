"""What the dashboard shows, read from the marts: one query per figure, gathered in
``Figures``, and how current they are (``Freshness``). Nothing here draws; ``page`` does."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from feedback_sync.errors import FeedbackError
from feedback_sync.models.project import MARTS_SCHEMA
from feedback_sync.warehouse.engines import Engine, records
from feedback_sync.warehouse.target import Target

TOP_IDEAS = 15
NEEDED = (
    "idea_engagement",
    "idea_follower_activity",
    "follower_activity",
    "company_feedback",
    "announcement_months",
    "announcement_calendar",
    "activity_by_month",
    "status_summary",
    "status_flow",
    "integration_coverage",
)

# a mart's row as the query returns it: its columns by name
Row = dict[str, Any]


@dataclass(frozen=True)
class Tiles:
    """The headline counts: each a count of distinct things or a sum of an additive column."""

    ideas: int
    followers: int
    public_comments: int
    private_notes: int
    companies: int
    spend: float
    posts: int


@dataclass(frozen=True)
class Figures:
    """Every figure of the dashboard, the rows in the order they are drawn."""

    tiles: Tiles
    # idea_engagement: the TOP_IDEAS ideas with the most commenter spend
    ideas: list[Row]
    # announcement_months with a post, by month
    posts: list[Row]
    # announcement_calendar with a post, by month, then most posts
    categories: list[Row]
    # activity_by_month, by month
    activity: list[Row]
    # status_summary, in the board's order
    funnel: list[Row]
    # status_flow, in the board's order (statuses no longer loaded last)
    flow: list[Row]
    # integration_coverage, the best covered first
    coverage: list[Row]


@dataclass(frozen=True)
class Freshness:
    """How current the marts are: when the warehouse was last loaded, and since when the
    marts stand for the loaded data (their build, or a later sync that found nothing they
    read changed); either None where it is not known."""

    last_load: datetime | None
    marts_current: datetime | None = None

    @property
    def stale(self) -> bool:
        """The marts were built before the last load and not since (a sync without models,
        or whose models failed)."""
        return (
            self.last_load is not None
            and self.marts_current is not None
            and self.marts_current < self.last_load
        )

    @property
    def as_of(self) -> datetime | None:
        """The moment the marts' figures describe."""
        return self.marts_current if self.stale else self.last_load or self.marts_current


def last_load(target: Target) -> datetime | None:
    """When the warehouse's newest completed load was stored (UTC), or None when that
    cannot be told (no load recorded, or the warehouse cannot say)."""
    try:
        stamp = target.committed().last_load
    except FeedbackError:
        return None
    if not isinstance(stamp, datetime):
        return None
    return stamp.astimezone(UTC) if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def missing_marts(engine: Engine, schema: str = MARTS_SCHEMA) -> list[str]:
    """The marts of ``NEEDED`` the warehouse lacks in ``schema``, in that order."""
    marts = {
        row[0]
        for row in engine.execute(
            "select table_name from information_schema.tables where table_schema = ?",
            [schema],
        )
    }
    return [name for name in NEEDED if name not in marts]


def gather(con: Engine, schema: str = MARTS_SCHEMA) -> Figures:
    """Every figure of the dashboard, read from the marts of ``con`` in ``schema``
    (``marts``, or one account's ``marts_<account>``)."""
    m = f'"{schema}"'
    return Figures(
        tiles=_tiles(con, m),
        ideas=_rows(
            con,
            f"""select idea_name, commenter_monthly_spend, commenter_companies, public_comments,
                   private_notes, status_name
            from {m}.idea_engagement
            order by commenter_monthly_spend desc, public_comments desc, idea_idx
            limit {TOP_IDEAS}""",
        ),
        posts=_rows(
            con,
            f"select month, posts_published from {m}.announcement_months "
            "where posts_published > 0 order by month",
        ),
        categories=_rows(
            con,
            f"""select month, category_name, posts_published from {m}.announcement_calendar
            where posts_published > 0
            order by month, posts_published desc, category_name""",
        ),
        activity=_rows(
            con,
            f"select month, public_comments, private_notes from {m}.activity_by_month "
            "order by month",
        ),
        funnel=_rows(
            con,
            f"""select status_name, ideas, announced_ideas, commenter_companies,
                   commenter_monthly_spend, share_of_spend
            from {m}.status_summary order by funnel_position""",
        ),
        flow=_rows(
            con,
            f"""select f.status_name, f.stays_completed, f.median_days_completed,
                   f.p90_days_completed, f.ideas_now, f.waiting_since
            from {m}.status_flow as f
            left join {m}.status_summary as s using (status_idx)
            order by s.funnel_position nulls last, f.status_name, f.status_idx""",
        ),
        coverage=_rows(
            con,
            f"""select integration_type, ideas_linked, share_of_ideas, commenter_companies,
                   share_of_spend, links
            from {m}.integration_coverage order by share_of_ideas desc, integration_type""",
        ),
    )


def _tiles(con: Engine, m: str) -> Tiles:
    row = _rows(
        con,
        f"""
        select
            (select count(*) from {m}.idea_engagement) as ideas,
            (select count(*) from {m}.follower_activity) as followers,
            (select coalesce(sum(public_comments), 0) from {m}.idea_follower_activity)
                as public_comments,
            (select coalesce(sum(private_notes), 0) from {m}.idea_follower_activity)
                as private_notes,
            (select count(*) from {m}.company_feedback) as companies,
            (select coalesce(sum(monthly_spend), 0) from {m}.company_feedback) as spend,
            (select coalesce(sum(posts_published), 0) from {m}.announcement_months) as posts
        """,
    )[0]
    return Tiles(
        ideas=int(row["ideas"]),
        followers=int(row["followers"]),
        public_comments=int(row["public_comments"]),
        private_notes=int(row["private_notes"]),
        companies=int(row["companies"]),
        spend=float(row["spend"] or 0),
        posts=int(row["posts"]),
    )


def _rows(engine: Engine, sql: str) -> list[Row]:
    return records(engine, engine.translate(sql))
