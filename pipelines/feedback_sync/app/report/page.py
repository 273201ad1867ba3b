"""The dashboard's page: its sections' prose around the charts, the tiles, the line that
says how current the data is, and the HTML around them, drawn from ``Figures``. Nothing
here reads the warehouse: ``figures`` does."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from feedback_sync.app.report.charts import PALETTE, empty_note, hbars, month_columns, month_lines
from feedback_sync.app.report.figures import TOP_IDEAS, Figures, Freshness, Row, Tiles
from feedback_sync.app.report.words import Money, count, day, many, moment, share

CADENCE_MONTHS = 24
ACTIVITY_MONTHS = 36
CATEGORIES_IN_TOOLTIP = 6
# what the page calls money when no currency is named
ACCOUNT_CURRENCY = "the account's currency"


@dataclass(frozen=True)
class Board:
    """One account's part of a page over several accounts: its name, its figures (read
    from its own marts) and how current they are."""

    account: str
    figures: Figures
    freshness: Freshness


def draw(
    figures: Figures, source: str, freshness: Freshness, currency: str | None
) -> tuple[str, int]:
    """The page of ``figures`` read from ``source``, and how many charts it has.
    ``currency`` names the unit of money (None: the account's currency)."""
    sections = _sections(figures, freshness, currency)
    page = _PAGE.format(
        style=_STYLE,
        header=_HEADER.format(
            meta=html.escape(f"{_freshness_line(freshness)} · {_unit(currency)}"),
            tiles=_tiles(figures.tiles, Money(currency)),
        ),
        body=f"<main>\n{chr(10).join(sections)}\n</main>",
        generated=html.escape(moment(datetime.now(UTC))),
        source=html.escape(source),
        schemas="schema marts",
    )
    return page, len(sections)


def draw_accounts(
    boards: Sequence[Board], source: str, currency: str | None, left_out: Sequence[str]
) -> tuple[str, int]:
    """The page of several accounts: one board per account (its tiles and charts, from
    its own marts), a line naming the accounts shown (and ``left_out``: chosen but with no
    marts), and a filter that shows one account or all (CSS alone: the page runs no
    script)."""
    shown = ", ".join(board.account for board in boards)
    line = f"Accounts shown: {shown}"
    if left_out:
        line += f" (not shown, never synced: {', '.join(left_out)})"
    radios = [
        '<label><input type="radio" name="account" id="show-all" checked> every account</label>'
    ] + [
        f'<label><input type="radio" name="account" id="show-{b.account}"> {b.account}</label>'
        for b in boards
    ]
    rules = "".join(
        f'\n  body:has(#show-{b.account}:checked) .board:not([data-account="{b.account}"])'
        " { display: none; }"
        for b in boards
    )
    parts, charts = [], 0
    for board in boards:
        sections = _sections(board.figures, board.freshness, currency)
        charts += len(sections)
        parts.append(_board(board, sections, currency))
    page = _PAGE.format(
        style=_STYLE + _ACCOUNTS_STYLE.replace("{rules}", rules),
        header=(
            f'<header>\n<h1>Feedback dashboard</h1>\n<p class="meta">'
            f"{html.escape(f'{line} · {_unit(currency)}')}</p>\n"
            f"{_filter(radios)}</header>"
        ),
        body="\n".join(parts),
        generated=html.escape(moment(datetime.now(UTC))),
        source=html.escape(source),
        schemas=f"schemas {', '.join(f'marts_{b.account}' for b in boards)}",
    )
    return page, charts


def _filter(radios: list[str]) -> str:
    """The accounts filter, where there is more than one account to choose from."""
    if len(radios) <= 2:
        return ""
    return f'<form class="accounts">Show: {" ".join(radios)}</form>\n'


def _board(board: Board, sections: list[str], currency: str | None) -> str:
    """One account's board: its name, how current its data is, its tiles and charts (the
    charts' anchors carry its name: ``#acme-demand``)."""
    account = html.escape(board.account)
    anchor = '<section id="'
    named = [section.replace(anchor, f"{anchor}{account}-", 1) for section in sections]
    return (
        f'<div class="board" id="account-{account}" data-account="{account}">\n'
        f'<header>\n<h2 class="account">{account}</h2>\n'
        f'<p class="meta">{html.escape(_freshness_line(board.freshness))}</p>\n'
        f'<div class="tiles">{_tiles(board.figures.tiles, Money(currency))}</div>\n</header>\n'
        f"<main>\n{chr(10).join(named)}\n</main>\n</div>"
    )


def _unit(currency: str | None) -> str:
    unit = (
        f"Money is monthly spend in {currency}"
        if currency
        else f"Money is monthly spend in {ACCOUNT_CURRENCY} (the API names none)"
    )
    return f"{unit}, rounded to whole units."


def _sections(figures: Figures, freshness: Freshness, currency: str | None) -> list[str]:
    """The charts' sections of one account's figures."""
    as_of = freshness.as_of
    money = Money(currency)
    current = date(as_of.year, as_of.month, 1) if as_of is not None else None
    partial_note = (
        f"{current.strftime('%B %Y')} is partial: the data is as of {day(as_of)}."
        if current is not None and as_of is not None
        else "When the data was last loaded is not known, so no month is marked partial."
    )
    return [
        _demand(figures.ideas, money),
        _cadence(figures.posts, figures.categories, current, partial_note),
        _activity(figures.activity, current, partial_note),
        _funnel(figures.funnel, money),
        _flow(figures.flow, as_of),
        _coverage(figures.coverage),
    ]


def _tiles(tiles: Tiles, money: Money) -> str:
    """The headline counts, each tagged with what it counts (``data-figure``)."""
    values = [
        ("ideas", "ideas", count(tiles.ideas)),
        ("followers", "followers", count(tiles.followers)),
        ("public_comments", "public comments", count(tiles.public_comments)),
        ("private_notes", "private notes", count(tiles.private_notes)),
        ("companies", "customer companies", count(tiles.companies)),
        ("monthly_spend", "their monthly spend, in all", money(tiles.spend)),
        ("posts_published", "posts published", count(tiles.posts)),
    ]
    return "".join(
        f'<div class="tile" data-figure="{key}"><b>{html.escape(value)}</b>'
        f"<span>{html.escape(label)}</span></div>"
        for key, label, value in values
    )


def _freshness_line(freshness: Freshness) -> str:
    """How current the data is, and, where the marts missed the last load, what to run."""
    if freshness.as_of is None:
        return "Data as of: not known (the warehouse records no completed load)"
    if freshness.stale and freshness.last_load is not None:
        return (
            f"Data as of {moment(freshness.as_of)}, when the marts were built: the load of "
            f"{moment(freshness.last_load)} is not in them (run `feedback-sync models`)"
        )
    return f"Data as of {moment(freshness.as_of)} (the last load)"


def _demand(ideas: list[Row], money: Money) -> str:
    return _section(
        "demand",
        "Demand by idea, weighted by revenue",
        f"The {TOP_IDEAS} ideas whose commenters' companies spend the most per month. A "
        "company counts once per idea, and in every idea its followers wrote on: the "
        "bars do not add up to the total spend.",
        hbars(
            [
                (
                    str(r["idea_name"] or "(unnamed)"),
                    float(r["commenter_monthly_spend"]),
                    f"{money(r['commenter_monthly_spend'])} · "
                    f"{many(r['commenter_companies'], 'company')} · "
                    f"{count(r['public_comments'] + r['private_notes'])} comments and notes",
                )
                for r in ideas
            ],
            PALETTE[0],
        ),
    )


def _cadence(
    posts: list[Row], categories: list[Row], current: date | None, partial_note: str
) -> str:
    per_month = {r["month"]: int(r["posts_published"]) for r in posts}
    by_category: dict[date, list[str]] = {}
    for r in categories:
        by_category.setdefault(r["month"], []).append(
            f"{r['category_name'] or '(unnamed)'} {count(r['posts_published'])}"
        )
    months = _window([r["month"] for r in posts], current, CADENCE_MONTHS)
    return _section(
        "cadence",
        "Announcement cadence",
        f"Posts published per month, each post counted once, the last {CADENCE_MONTHS} "
        "months (a column's tooltip names its categories; a post filed under two counts "
        f"in both there). {partial_note}",
        month_columns(
            [
                (
                    month,
                    per_month.get(month, 0),
                    "; ".join(by_category.get(month, [])[:CATEGORIES_IN_TOOLTIP]),
                )
                for month in months
            ],
            current,
        ),
    )


def _activity(activity: list[Row], current: date | None, partial_note: str) -> str:
    months = _window([r["month"] for r in activity], current, ACTIVITY_MONTHS)
    written = {r["month"]: r for r in activity}
    return _section(
        "activity",
        "Comment activity over time",
        f"Public comments and private notes written per month, the last {ACTIVITY_MONTHS} "
        f"months. {partial_note}",
        month_lines(
            months,
            [
                ("public comments", [_written(written, m, "public_comments") for m in months]),
                ("private notes", [_written(written, m, "private_notes") for m in months]),
            ],
            current,
        ),
    )


def _funnel(funnel: list[Row], money: Money) -> str:
    return _section(
        "funnel",
        "Status funnel",
        "Ideas per status, in the board's order; how many of them a published post "
        "names (which says nothing of their status); and the companies whose followers "
        "commented on them, with those companies' monthly spend. A company behind ideas "
        "in two statuses counts in both: the companies and their spend do not add up "
        "across statuses.",
        hbars(
            [
                (
                    str(r["status_name"] or "(unnamed)"),
                    float(r["ideas"]),
                    f"{many(r['ideas'], 'idea')}, {count(r['announced_ideas'])} of them "
                    "named in a published post\n"
                    f"{many(r['commenter_companies'], 'company')} behind them: "
                    f"{money(r['commenter_monthly_spend'])}, "
                    f"{share(r['share_of_spend'])} of all companies' spend",
                )
                for r in funnel
            ],
            PALETTE[2],
        ),
    )


def _flow(flow: list[Row], as_of: datetime | None) -> str:
    return _section(
        "flow",
        "Time in status",
        "Per status, in the board's order: the median days an idea stayed before it "
        "moved on (or was deleted), over the stays that ended, from the history the "
        "syncs keep; and the ideas there now. A stay begins when a sync first sees the "
        "idea there: two moves between syncs count as one. A status without a bar has "
        "had no stay end yet.",
        hbars(
            [
                (
                    str(r["status_name"] or "(status no longer loaded)"),
                    float(r["median_days_completed"] or 0.0),
                    "\n".join(line for line in (_stays_line(r), _waiting_line(r, as_of)) if line),
                )
                for r in flow
            ],
            PALETTE[5],
        )
        if any(r["stays_completed"] for r in flow)
        else empty_note(
            "No idea has left a status since the history began (the first sync that "
            "kept it): the chart fills in as ideas move."
        ),
    )


def _coverage(coverage: list[Row]) -> str:
    return _section(
        "coverage",
        "Integration coverage",
        "Share of ideas with at least one linked record, per tool, and the share of all "
        "companies' monthly spend behind those ideas. An idea linked in two tools counts "
        "in both, and so does a company: the shares do not add up across tools.",
        hbars(
            [
                (
                    str(r["integration_type"]),
                    float(r["share_of_ideas"]) * 100,
                    f"{share(r['share_of_ideas'])} of ideas ({count(r['ideas_linked'])}), "
                    f"{many(r['links'], 'link')}\n"
                    f"{many(r['commenter_companies'], 'company')} behind them: "
                    f"{share(r['share_of_spend'])} of all companies' spend",
                )
                for r in coverage
            ],
            PALETTE[1],
            maximum=100.0,
        ),
    )


def _stays_line(row: Row) -> str:
    """A status's ended stays: their median and 90th-percentile days, and how many; a
    single stay as what it is; none: nothing (the chart's note says it once)."""
    if not row["stays_completed"]:
        return ""
    if row["stays_completed"] == 1:
        return f"1 stay ended, after {row['median_days_completed']:,.2f} days"
    return (
        f"median {row['median_days_completed']:,.2f} days, 90th percentile "
        f"{row['p90_days_completed']:,.2f} days, over {many(row['stays_completed'], 'stay')} "
        "that ended"
    )


def _waiting_line(row: Row, as_of: datetime | None) -> str:
    """The ideas in a status now, and since when the longest-waiting one is there."""
    if not row["ideas_now"]:
        return "no idea there now"
    since = row["waiting_since"]
    line = f"{many(row['ideas_now'], 'idea')} there now, the longest since {day(since)}"
    if as_of is not None:
        days = max((as_of - since).total_seconds(), 0.0) / 86400
        line += f" ({days:,.0f} days by {day(as_of)})"
    return line


def _written(by_month: dict[date, Row], month: date, column: str) -> int:
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


def _window(months: Sequence[date], current: date | None, size: int) -> list[date]:
    """The last ``size`` months up to the later of the last of ``months`` and the month
    of the last load (``current``), every month in between, those without a row included.
    Empty when ``months`` is."""
    if not months:
        return []
    last = max(months) if current is None else max(max(months), current)
    return _months(min(months), last)[-size:]


def _section(anchor: str, title: str, note: str, chart: str) -> str:
    return (
        f'<section id="{anchor}"><h2>{html.escape(title)}</h2>'
        f'<p class="note">{html.escape(note)}</p>{chart}</section>'
    )


_STYLE = """  :root { color-scheme: light; }
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
         background: #f8fafc; color: #0f172a; }
  header, main, footer { margin: 0 auto; padding: 0 24px; max-width: 2400px; }
  header h1 { font-size: 22px; margin: 24px 0 2px; }
  .meta { color: #475569; margin: 0; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr));
            gap: 10px; margin: 16px 0; }
  .tile { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 10px 14px; }
  .tile b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
  .tile span { color: #64748b; }
  main { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 640px), 1fr));
          gap: 14px; align-items: start; }
  section { background: #fff; border: 1px solid #e2e8f0; border-radius: 8px;
             padding: 12px 16px 16px; min-width: 0; }
  section h2 { font-size: 16px; margin: 4px 0; }
  .note { color: #64748b; margin: 0 0 8px; }
  svg.chart { width: 100%; height: auto; display: block; }
  svg text { font-size: 11px; fill: #334155; }
  svg text.value, svg text.axis { fill: #64748b; }
  svg .grid { stroke: #e2e8f0; stroke-width: 1; }
  svg .line { stroke-width: 2; }
  footer { color: #94a3b8; font-size: 12px; padding-top: 8px; padding-bottom: 24px; }
"""
# the page over several accounts: each account's board, and the filter's rules (one per
# account: with its radio checked, every other board is hidden; ``:has`` needs a browser of
# 2023 or later, and an older one shows every board)
_ACCOUNTS_STYLE = """  .accounts { margin: 8px 0 0; color: #475569; }
  .accounts label { margin-right: 10px; white-space: nowrap; }
  .board { margin-top: 18px; }
  .board > header { padding-top: 4px; border-top: 2px solid #cbd5e1; }
  .board h2.account { font-size: 19px; margin: 10px 0 2px; }{rules}
"""
# a header over one account's figures
_HEADER = """<header>
<h1>Feedback dashboard</h1>
<p class="meta">{meta}</p>
<div class="tiles">{tiles}</div>
</header>"""

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Feedback dashboard</title>
<style>
{style}</style>
</head>
<body>
{header}
{body}
<footer>Generated {generated} by feedback-sync report from {source} ({schemas}).</footer>
</body>
</html>
"""
