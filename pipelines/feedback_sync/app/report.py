"""``feedback-sync report``: a self-contained HTML dashboard drawn from the marts.

One HTML file with its styles inline and its charts as inline SVG, drawn here from the
marts: it opens offline, in any browser, from a file or an email attachment, and fetches
nothing (no script, font, style or image from anywhere). It fills the window's width
(the charts side by side where there is room).

Every figure counts something once, and says what it counts:

- the tiles: ideas, followers, public comments, private notes, companies, their monthly
  spend and posts published, each a count of distinct things or a sum of an additive
  column (``idea_engagement``, ``follower_activity``, ``idea_follower_activity``,
  ``company_feedback``, ``announcement_months``);
- demand by idea, weighted by revenue (``idea_engagement``): bars, never summed;
- announcement cadence: posts published per month, each post once
  (``announcement_months``), their categories in each column's tooltip
  (``announcement_calendar``);
- comment activity over time (``activity_by_month``);
- time in status (``status_flow``, from the history the syncs keep): the median days of
  the stays that ended, per status, and the ideas there now and since when;
- the status funnel (``status_summary``) and integration coverage
  (``integration_coverage``): the companies behind each row are counted once per row, and
  the page says they do not add up across rows.

The page says how current the data is (the warehouse's newest completed load, or, where
the marts were built before it and not since, their build: it then says to run
``models``), draws that month as partial, and names the unit of money: the API sends
amounts without a currency, so it is "the account's currency" unless ``[report]
currency`` (or ``--currency``) names it.
"""

from __future__ import annotations

import html
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dlt

from feedback_sync.errors import ConfigError, FeedbackError, ModelError
from feedback_sync.models.project import MARTS_SCHEMA, current_since
from feedback_sync.warehouse.engines import Engine, records
from feedback_sync.warehouse.target import Target

PALETTE = ("#4f46e5", "#0ea5e9", "#10b981", "#f59e0b", "#ef4444", "#8b5cf6", "#64748b")
WIDTH = 760
TOP_IDEAS = 15
CADENCE_MONTHS = 24
ACTIVITY_MONTHS = 36
CATEGORIES_IN_TOOLTIP = 6
# what the page calls money when no currency is named
ACCOUNT_CURRENCY = "the account's currency"
_CURRENCY = re.compile(r"^[^\x00-\x1f\x7f]{1,16}$")
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


@dataclass
class Report:
    """What ``write`` wrote."""

    path: Path
    charts: int
    bytes: int

    def summary(self) -> str:
        return f"report: {self.path} ({self.charts} charts, {self.bytes / 1024:,.0f} KiB)"


def currency_setting(chosen: str | None = None) -> str | None:
    """The currency the page names: ``chosen`` (``--currency``), else ``currency`` of
    ``[report]`` (``REPORT__CURRENCY``), else None (the account's currency).

    Raises:
        ConfigError: the value is empty, longer than 16 characters or holds control
            characters.
    """
    setting = "--currency"
    if chosen is None:
        chosen = dlt.config.get("report.currency")
        setting = "REPORT__CURRENCY (currency in [report])"
    if chosen is None:
        return None
    if not isinstance(chosen, str) or not _CURRENCY.match(chosen.strip()):
        raise ConfigError(
            f"{setting} must be a currency's code or symbol of 1 to 16 characters "
            f"(EUR, USD, £), got {chosen!r}"
        )
    return chosen.strip()


def write(target: Target, output: Path, currency: str | None = None) -> Report:
    """Writes the dashboard of ``target``'s marts to ``output`` (replaced whole).
    ``currency`` names the unit of money (None: the account's currency).

    Raises:
        ModelError: no warehouse, or the marts are not built there.
    """
    loaded = _last_load(target)
    with target.open_models(read_only=True) as (engine, where):
        marts = {
            row[0]
            for row in engine.execute(
                "select table_name from information_schema.tables where table_schema = ?",
                [MARTS_SCHEMA],
            )
        }
        missing = [name for name in NEEDED if name not in marts]
        if missing:
            raise ModelError(
                f"{where} lacks the marts {', '.join(missing)}: run `feedback-sync models` first"
            )
        freshness = Freshness(loaded, current_since(engine))
        page, charts = render(engine, source=where, freshness=freshness, currency=currency)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(output)
    return Report(output, charts, len(page.encode()))


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

    def line(self) -> str:
        if self.as_of is None:
            return "Data as of: not known (the warehouse records no completed load)"
        if self.stale and self.last_load is not None:
            return (
                f"Data as of {_moment(self.as_of)}, when the marts were built: the load of "
                f"{_moment(self.last_load)} is not in them (run `feedback-sync models`)"
            )
        return f"Data as of {_moment(self.as_of)} (the last load)"


def _last_load(target: Target) -> datetime | None:
    """When the warehouse's newest completed load was stored (UTC), or None when that
    cannot be told (no load recorded, or the warehouse cannot say)."""
    try:
        stamp = target.committed().last_load
    except FeedbackError:
        return None
    if not isinstance(stamp, datetime):
        return None
    return stamp.astimezone(UTC) if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


def _rows(engine: Engine, sql: str) -> list[dict[str, Any]]:
    return records(engine, engine.translate(sql))


def render(
    con: Engine, source: str, freshness: Freshness | None = None, currency: str | None = None
) -> tuple[str, int]:
    """The page, and how many charts it has."""
    freshness = freshness or Freshness(None)
    as_of = freshness.as_of
    m = MARTS_SCHEMA
    money = _Money(currency)
    tiles = _rows(
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
    ideas = _rows(
        con,
        f"""select idea_name, commenter_monthly_spend, commenter_companies, public_comments,
                   private_notes, status_name
            from {m}.idea_engagement
            order by commenter_monthly_spend desc, public_comments desc, idea_idx
            limit {TOP_IDEAS}""",
    )
    posts = _rows(
        con,
        f"select month, posts_published from {m}.announcement_months "
        "where posts_published > 0 order by month",
    )
    categories = _rows(
        con,
        f"""select month, category_name, posts_published from {m}.announcement_calendar
            where posts_published > 0
            order by month, posts_published desc, category_name""",
    )
    activity = _rows(
        con,
        f"select month, public_comments, private_notes from {m}.activity_by_month order by month",
    )
    funnel = _rows(
        con,
        f"""select status_name, ideas, announced_ideas, commenter_companies,
                   commenter_monthly_spend, share_of_spend
            from {m}.status_summary order by funnel_position""",
    )
    flow = _rows(
        con,
        f"""select f.status_name, f.stays_completed, f.median_days_completed,
                   f.p90_days_completed, f.ideas_now, f.waiting_since
            from {m}.status_flow as f
            left join {m}.status_summary as s using (status_idx)
            order by s.funnel_position nulls last, f.status_name, f.status_idx""",
    )
    coverage = _rows(
        con,
        f"""select integration_type, ideas_linked, share_of_ideas, commenter_companies,
                   share_of_spend, links
            from {m}.integration_coverage order by share_of_ideas desc, integration_type""",
    )
    current = date(as_of.year, as_of.month, 1) if as_of is not None else None
    cadence_months = _window([r["month"] for r in posts], current, CADENCE_MONTHS)
    activity_months = _window([r["month"] for r in activity], current, ACTIVITY_MONTHS)
    per_month = {r["month"]: int(r["posts_published"]) for r in posts}
    by_category: dict[date, list[str]] = {}
    for r in categories:
        by_category.setdefault(r["month"], []).append(
            f"{r['category_name'] or '(unnamed)'} {_count(r['posts_published'])}"
        )
    written = {r["month"]: r for r in activity}
    partial_note = (
        f"{current.strftime('%B %Y')} is partial: the data is as of {_day(as_of)}."
        if current is not None and as_of is not None
        else "When the data was last loaded is not known, so no month is marked partial."
    )
    sections = [
        _section(
            "demand",
            "Demand by idea, weighted by revenue",
            f"The {TOP_IDEAS} ideas whose commenters' companies spend the most per month. A "
            "company counts once per idea, and in every idea its followers wrote on: the "
            "bars do not add up to the total spend.",
            _hbars(
                [
                    (
                        str(r["idea_name"] or "(unnamed)"),
                        float(r["commenter_monthly_spend"]),
                        f"{money(r['commenter_monthly_spend'])} · "
                        f"{_many(r['commenter_companies'], 'company')} · "
                        f"{_count(r['public_comments'] + r['private_notes'])} comments and notes",
                    )
                    for r in ideas
                ],
                PALETTE[0],
            ),
        ),
        _section(
            "cadence",
            "Announcement cadence",
            f"Posts published per month, each post counted once, the last {CADENCE_MONTHS} "
            "months (a column's tooltip names its categories; a post filed under two counts "
            f"in both there). {partial_note}",
            _columns(
                [
                    (
                        month,
                        per_month.get(month, 0),
                        "; ".join(by_category.get(month, [])[:CATEGORIES_IN_TOOLTIP]),
                    )
                    for month in cadence_months
                ],
                current,
            ),
        ),
        _section(
            "activity",
            "Comment activity over time",
            f"Public comments and private notes written per month, the last {ACTIVITY_MONTHS} "
            f"months. {partial_note}",
            _lines(
                activity_months,
                [
                    (
                        "public comments",
                        [_written(written, m, "public_comments") for m in activity_months],
                    ),
                    (
                        "private notes",
                        [_written(written, m, "private_notes") for m in activity_months],
                    ),
                ],
                current,
            ),
        ),
        _section(
            "funnel",
            "Status funnel",
            "Ideas per status, in the board's order; how many of them a published post "
            "names (which says nothing of their status); and the companies whose followers "
            "commented on them, with those companies' monthly spend. A company behind ideas "
            "in two statuses counts in both: the companies and their spend do not add up "
            "across statuses.",
            _hbars(
                [
                    (
                        str(r["status_name"] or "(unnamed)"),
                        float(r["ideas"]),
                        f"{_many(r['ideas'], 'idea')}, {_count(r['announced_ideas'])} of them "
                        "named in a published post\n"
                        f"{_many(r['commenter_companies'], 'company')} behind them: "
                        f"{money(r['commenter_monthly_spend'])}, "
                        f"{_share(r['share_of_spend'])} of all companies' spend",
                    )
                    for r in funnel
                ],
                PALETTE[2],
            ),
        ),
        _section(
            "flow",
            "Time in status",
            "Per status, in the board's order: the median days an idea stayed before it "
            "moved on (or was deleted), over the stays that ended, from the history the "
            "syncs keep; and the ideas there now. A stay begins when a sync first sees the "
            "idea there: two moves between syncs count as one. A status without a bar has "
            "had no stay end yet.",
            _hbars(
                [
                    (
                        str(r["status_name"] or "(status no longer loaded)"),
                        float(r["median_days_completed"] or 0.0),
                        "\n".join(
                            line for line in (_stays_line(r), _waiting_line(r, as_of)) if line
                        ),
                    )
                    for r in flow
                ],
                PALETTE[5],
            )
            if any(r["stays_completed"] for r in flow)
            else _empty_note(
                "No idea has left a status since the history began (the first sync that "
                "kept it): the chart fills in as ideas move."
            ),
        ),
        _section(
            "coverage",
            "Integration coverage",
            "Share of ideas with at least one linked record, per tool, and the share of all "
            "companies' monthly spend behind those ideas. An idea linked in two tools counts "
            "in both, and so does a company: the shares do not add up across tools.",
            _hbars(
                [
                    (
                        str(r["integration_type"]),
                        float(r["share_of_ideas"]) * 100,
                        f"{_share(r['share_of_ideas'])} of ideas ({_count(r['ideas_linked'])}), "
                        f"{_many(r['links'], 'link')}\n"
                        f"{_many(r['commenter_companies'], 'company')} behind them: "
                        f"{_share(r['share_of_spend'])} of all companies' spend",
                    )
                    for r in coverage
                ],
                PALETTE[1],
                maximum=100.0,
            ),
        ),
    ]
    tile_values = [
        ("ideas", "ideas", _count(tiles["ideas"])),
        ("followers", "followers", _count(tiles["followers"])),
        ("public_comments", "public comments", _count(tiles["public_comments"])),
        ("private_notes", "private notes", _count(tiles["private_notes"])),
        ("companies", "customer companies", _count(tiles["companies"])),
        ("monthly_spend", "their monthly spend, in all", money(tiles["spend"])),
        ("posts_published", "posts published", _count(tiles["posts"])),
    ]
    loaded = freshness.line()
    unit = (
        f"Money is monthly spend in {currency}"
        if currency
        else f"Money is monthly spend in {ACCOUNT_CURRENCY} (the API names none)"
    )
    page = _PAGE.format(
        tiles="".join(
            f'<div class="tile" data-figure="{key}"><b>{html.escape(value)}</b>'
            f"<span>{html.escape(label)}</span></div>"
            for key, label, value in tile_values
        ),
        meta=html.escape(f"{loaded} · {unit}, rounded to whole units."),
        sections="\n".join(sections),
        generated=html.escape(_moment(datetime.now(UTC))),
        source=html.escape(source),
    )
    return page, len(sections)


class _Money:
    """Amounts as whole units with thousands separators, per month, in the named currency."""

    def __init__(self, currency: str | None) -> None:
        self.suffix = f" {currency}/mo" if currency else "/mo"

    def __call__(self, value: Any) -> str:
        return f"{_count(round(float(value or 0)))}{self.suffix}"


def _stays_line(row: dict[str, Any]) -> str:
    """A status's ended stays: their median and 90th-percentile days, and how many; a
    single stay as what it is; none: nothing (the chart's note says it once)."""
    if not row["stays_completed"]:
        return ""
    if row["stays_completed"] == 1:
        return f"1 stay ended, after {row['median_days_completed']:,.2f} days"
    return (
        f"median {row['median_days_completed']:,.2f} days, 90th percentile "
        f"{row['p90_days_completed']:,.2f} days, over {_many(row['stays_completed'], 'stay')} "
        "that ended"
    )


def _waiting_line(row: dict[str, Any], as_of: datetime | None) -> str:
    """The ideas in a status now, and since when the longest-waiting one is there."""
    if not row["ideas_now"]:
        return "no idea there now"
    since = row["waiting_since"]
    line = f"{_many(row['ideas_now'], 'idea')} there now, the longest since {_day(since)}"
    if as_of is not None:
        days = max((as_of - since).total_seconds(), 0.0) / 86400
        line += f" ({days:,.0f} days by {_day(as_of)})"
    return line


def _count(value: Any) -> str:
    """The one way a number is written: whole, with a comma every three digits."""
    return f"{int(value):,}"


def _share(value: Any) -> str:
    """A share as a whole percentage; under 1% but not 0 as "<1%"; NULL (no share can be
    told: a company's spend is negative) as "n/a"."""
    if value is None:
        return "n/a"
    share = float(value)
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def _many(count: Any, noun: str) -> str:
    """``1 company``, ``2 companies``: the count written the one way, the noun agreeing."""
    n = int(count)
    if n == 1:
        return f"1 {noun}"
    consonant_y = noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u")
    plural = noun[:-1] + "ies" if consonant_y else noun + "s"
    return f"{_count(n)} {plural}"


def _moment(stamp: datetime) -> str:
    return stamp.strftime("%d %b %Y, %H:%M UTC").lstrip("0")


def _day(stamp: datetime) -> str:
    return stamp.strftime("%d %b %Y").lstrip("0")


def _written(by_month: dict[date, dict[str, Any]], month: date, column: str) -> int:
    row = by_month.get(month)
    return int(row[column]) if row is not None else 0


def _next_month(month: date) -> date:
    year, index = divmod(month.month, 12)
    return date(month.year + year, index + 1, 1)


def _months(first: date, last: date) -> list[date]:
    """Every first-of-month from ``first`` to ``last``."""
    out, current = [], date(first.year, first.month, 1)
    while current <= last:
        out.append(current)
        current = _next_month(current)
    return out


def _window(months: Sequence[date], current: date | None, count: int) -> list[date]:
    """The last ``count`` months up to the later of the last of ``months`` and the month
    of the last load (``current``), every month in between, those without a row included.
    Empty when ``months`` is."""
    if not months:
        return []
    last = max(months) if current is None else max(max(months), current)
    return _months(min(months), last)[-count:]


def _month_label(value: date) -> str:
    return value.strftime("%b %Y")


def _section(anchor: str, title: str, note: str, chart: str) -> str:
    return (
        f'<section id="{anchor}"><h2>{html.escape(title)}</h2>'
        f'<p class="note">{html.escape(note)}</p>{chart}</section>'
    )


def _empty(height: int = 60) -> str:
    return (
        f'<svg class="chart empty" viewBox="0 0 {WIDTH} {height}" role="img">'
        f'<text x="{WIDTH // 2}" y="{height // 2}" text-anchor="middle">no data yet</text></svg>'
    )


def _empty_note(text: str) -> str:
    """A chart with nothing to draw yet, saying why."""
    return (
        f'<svg class="chart empty" viewBox="0 0 {WIDTH} 40" role="img">'
        f'<text class="value" x="8" y="24">{html.escape(text)}</text></svg>'
    )


def _hbars(rows: Sequence[tuple[str, float, str]], color: str, maximum: float = 0.0) -> str:
    """Horizontal bars: ``(label, value, annotation)`` per row; the annotation goes below
    the bar, a line per ``\n``, so a long one never runs off the chart."""
    if not rows:
        return _empty()
    label_w, bar_h, line_h, right = 190, 14, 15, 20
    top = max([maximum] + [value for _, value, _ in rows]) or 1.0
    span = WIDTH - label_w - right
    heights = [bar_h + 8 + line_h * len(note.split("\n")) + 6 for _, _, note in rows]
    parts = [f'<svg class="chart hbar" viewBox="0 0 {WIDTH} {sum(heights) + 8}" role="img">']
    y = 4
    for (label, value, note), row_h in zip(rows, heights, strict=True):
        w = max(1.0, span * value / top) if value > 0 else 0.0
        text = _clipped(label)
        lines = note.split("\n")
        parts.append(
            f'<text class="label" x="{label_w - 8}" y="{y + 14}" text-anchor="end">'
            f"{html.escape(text)}</text>"
            f'<rect class="bar" x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{bar_h}" '
            f'fill="{color}"><title>{html.escape(label)}: {html.escape(" · ".join(lines))}'
            "</title></rect>"
        )
        for k, line in enumerate(lines):
            parts.append(
                f'<text class="value" x="{label_w}" y="{y + bar_h + 17 + k * line_h}">'
                f"{html.escape(line)}</text>"
            )
        y += row_h
    parts.append("</svg>")
    return "".join(parts)


def _columns(cells: Sequence[tuple[date, int, str]], current: date | None) -> str:
    """One column per month: ``(month, posts, tooltip detail)``; the month of the last
    load (``current``) is drawn as partial."""
    if not any(n for _, n, _ in cells):
        return _empty()
    left, bottom, plot_h, legend_h = 48, 40, 220, 28
    height = legend_h + plot_h + bottom
    top = max(n for _, n, _ in cells) or 1
    step = (WIDTH - left - 10) / len(cells)
    bar_w = max(2.0, step * 0.7)
    parts = [f'<svg class="chart columns" viewBox="0 0 {WIDTH} {height}" role="img">']
    keys = [("posts published", PALETTE[0], False)]
    if any(month == current for month, _, _ in cells):
        keys.append(("partial month", PALETTE[0], True))
    parts += _legend(keys)
    parts += _grid(top, left, legend_h, plot_h)
    for i, (month, n, detail) in enumerate(cells):
        x = left + i * step + (step - bar_w) / 2
        partial = month == current
        if n:
            h = plot_h * n / top
            title = f"{_month_label(month)}: {_many(n, 'post')}" + (" (so far)" if partial else "")
            if detail:
                title += f"; by category: {detail}"
            parts.append(
                f'<rect class="bar{" partial" if partial else ""}" x="{x:.1f}" '
                f'y="{legend_h + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[0]}"{_PARTIAL_FILL if partial else ""}>'
                f"<title>{html.escape(title)}</title></rect>"
            )
        if _labelled(i, len(cells), current is not None and cells[-1][0] == current):
            label = f"{_month_label(month)}{'*' if partial else ''}"
            parts.append(
                _axis_label(x + bar_w / 2, legend_h + plot_h + 16, label, i == len(cells) - 1)
            )
    parts.append("</svg>")
    return "".join(parts)


def _lines(
    months: Sequence[date], series: Sequence[tuple[str, Sequence[int]]], current: date | None
) -> str:
    """One line per series over the whole months; the month of the last load
    (``current``) is partial: its point is hollow and not joined to the line (a month a
    few days old would otherwise draw as a collapse)."""
    if not months:
        return _empty()
    left, bottom, plot_h, legend_h = 48, 40, 220, 28
    height = legend_h + plot_h + bottom
    top = max([1] + [v for _, values in series for v in values])
    step = (WIDTH - left - 20) / max(1, len(months) - 1)
    partial = len(months) > 0 and months[-1] == current
    parts = [f'<svg class="chart lines" viewBox="0 0 {WIDTH} {height}" role="img">']
    keys = [(name, PALETTE[j % len(PALETTE)], False) for j, (name, _) in enumerate(series)]
    parts += _legend(keys + ([("partial month", PALETTE[-1], True)] if partial else []))
    parts += _grid(top, left, legend_h, plot_h)
    for j, (name, values) in enumerate(series):
        color = PALETTE[j % len(PALETTE)]
        points = [
            (left + i * step, legend_h + plot_h - plot_h * v / top) for i, v in enumerate(values)
        ]
        whole = points[:-1] if partial else points
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in whole)
        parts.append(f'<polyline class="line" points="{path}" stroke="{color}" fill="none"/>')
        for i, ((x, y), month, v) in enumerate(zip(points, months, values, strict=True)):
            last = partial and i == len(points) - 1
            fill = "#fff" if last else color
            note = " so far (partial month)" if last else ""
            parts.append(
                f'<circle class="point{" partial" if last else ""}" cx="{x:.1f}" cy="{y:.1f}" '
                f'r="{3.5 if last else 2.5}" fill="{fill}" stroke="{color}">'
                f"<title>{_month_label(month)}: {_count(v)} {html.escape(name)}{note}</title>"
                "</circle>"
            )
    for i, month in enumerate(months):
        last = partial and i == len(months) - 1
        if _labelled(i, len(months), partial):
            label = f"{_month_label(month)}{'*' if last else ''}"
            x = left + i * step
            parts.append(_axis_label(x, legend_h + plot_h + 16, label, i == len(months) - 1))
    parts.append("</svg>")
    return "".join(parts)


# a bar's label fits in the label column (182 of the chart's units; a character of the 11 px
# label takes up to 7.5 in common fonts): this many narrow characters, a wide one (CJK) two
LABEL_CHARACTERS = 24


def _clipped(label: str) -> str:
    """``label`` cut with "…" where it would run past the left edge of its chart."""
    width = 0
    for i, char in enumerate(label):
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
        if width > LABEL_CHARACTERS:
            return label[: max(i - 1, 0)] + "…"
    return label


def _axis_label(x: float, y: float, text: str, last: bool) -> str:
    """A month under its column or point; the last one ends at its mark rather than
    centring on it, so it never runs past the chart's right edge ("Nov 202")."""
    anchor = "end" if last else "middle"
    at = min(x + 4, WIDTH - 2) if last else x
    return (
        f'<text class="axis" x="{at:.1f}" y="{y}" text-anchor="{anchor}">{html.escape(text)}</text>'
    )


def _labelled(i: int, count: int, partial_last: bool) -> bool:
    """Whether the ``i``-th of ``count`` months gets an axis label: about 12 evenly, and the
    partial last month always (then no other label crowds it)."""
    every = max(1, math.ceil(count / 12))
    if partial_last:
        return i == count - 1 or (i % every == 0 and count - 1 - i >= every)
    return i % every == 0


# a partial month's column: the colour, lighter, with its outline dashed
_PARTIAL_FILL = ' fill-opacity="0.35" stroke-dasharray="4 3"'


def _legend(keys: Sequence[tuple[str, str, bool]]) -> list[str]:
    """``(name, colour, partial)`` per key."""
    parts, x, height = [], 48.0, 28
    for name, color, partial in keys:
        style = f' fill-opacity="0.35" stroke="{color}" stroke-dasharray="3 2"' if partial else ""
        parts.append(
            f'<rect class="key" x="{x:.1f}" y="{height / 2 - 6:.1f}" width="12" height="12" '
            f'fill="{color}"{style}/>'
            f'<text class="legend" x="{x + 16:.1f}" y="{height / 2 + 4:.1f}">'
            f"{html.escape(name)}{' (*)' if partial else ''}</text>"
        )
        x += 36 + 7 * len(name)
    return parts


def _grid(top: float, left: int, offset: int, plot_h: int) -> list[str]:
    """Horizontal gridlines with their values, for charts whose y axis starts at 0."""
    parts = []
    for tick in _ticks(top):
        y = offset + plot_h - plot_h * tick / top
        parts.append(
            f'<line class="grid" x1="{left}" x2="{WIDTH - 10}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_count(tick)}</text>"
        )
    return parts


def _ticks(top: float) -> list[int]:
    """Up to five round gridline values from 0 to ``top``."""
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [int(i * step) for i in range(int(top // step) + 1)]


_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Feedback dashboard</title>
<style>
  :root {{ color-scheme: light; }}
  body {{ font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
         background: #f8fafc; color: #0f172a; }}
  header, main, footer {{ margin: 0 auto; padding: 0 24px; max-width: 2400px; }}
  header h1 {{ font-size: 22px; margin: 24px 0 2px; }}
  .meta {{ color: #475569; margin: 0; }}
  .tiles {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr));
            gap: 10px; margin: 16px 0; }}
  .tile {{ background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 10px 14px; }}
  .tile b {{ display: block; font-size: 20px; font-variant-numeric: tabular-nums; }}
  .tile span {{ color: #64748b; }}
  main {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 640px), 1fr));
          gap: 14px; align-items: start; }}
  section {{ background: #fff; border: 1px solid #e2e8f0; border-radius: 8px;
             padding: 12px 16px 16px; min-width: 0; }}
  section h2 {{ font-size: 16px; margin: 4px 0; }}
  .note {{ color: #64748b; margin: 0 0 8px; }}
  svg.chart {{ width: 100%; height: auto; display: block; }}
  svg text {{ font-size: 11px; fill: #334155; }}
  svg text.value, svg text.axis {{ fill: #64748b; }}
  svg .grid {{ stroke: #e2e8f0; stroke-width: 1; }}
  svg .line {{ stroke-width: 2; }}
  footer {{ color: #94a3b8; font-size: 12px; padding-top: 8px; padding-bottom: 24px; }}
</style>
</head>
<body>
<header>
<h1>Feedback dashboard</h1>
<p class="meta">{meta}</p>
<div class="tiles">{tiles}</div>
</header>
<main>
{sections}
</main>
<footer>Generated {generated} by feedback-sync report from {source} (schema marts).</footer>
</body>
</html>
"""
