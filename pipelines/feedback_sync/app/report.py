"""``feedback-sync report``: a self-contained HTML dashboard drawn from the marts.

One HTML file with its styles inline and its charts as inline SVG, drawn here from the
marts: it opens offline, in any browser, from a file or an email attachment, and fetches
nothing (no script, font, style or image from anywhere). Charts:

- demand by idea, weighted by revenue (``idea_engagement``);
- announcement cadence: posts published per month and category (``announcement_calendar``);
- comment activity over time (``activity_by_month``);
- the status funnel (``status_summary``);
- integration coverage (``integration_coverage``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from feedback_sync.errors import ModelError
from feedback_sync.models.project import MARTS_SCHEMA
from feedback_sync.warehouse.engines import Engine, records
from feedback_sync.warehouse.target import Target

PALETTE = ("#4f46e5", "#0ea5e9", "#10b981", "#f59e0b", "#ef4444", "#8b5cf6", "#64748b")
WIDTH = 760
TOP_IDEAS = 15
CADENCE_MONTHS = 24
ACTIVITY_MONTHS = 36
CATEGORIES_SHOWN = 6


@dataclass
class Report:
    """What ``write`` wrote."""

    path: Path
    charts: int
    bytes: int

    def summary(self) -> str:
        return f"report: {self.path} ({self.charts} charts, {self.bytes / 1024:,.0f} KiB)"


def write(target: Target, output: Path) -> Report:
    """Writes the dashboard of ``target``'s marts to ``output`` (replaced whole).

    Raises:
        ModelError: no warehouse, or the marts are not built there.
    """
    with target.open_models(read_only=True) as (engine, where):
        marts = {
            row[0]
            for row in engine.execute(
                "select table_name from information_schema.tables where table_schema = ?",
                [MARTS_SCHEMA],
            )
        }
        needed = {
            "idea_engagement",
            "announcement_calendar",
            "activity_by_month",
            "status_summary",
            "integration_coverage",
            "company_feedback",
        }
        if not needed <= marts:
            missing = ", ".join(sorted(needed - marts))
            raise ModelError(f"{where} lacks the marts {missing}: run `feedback-sync models` first")
        page, charts = render(engine, source=where)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(output)
    return Report(output, charts, len(page.encode()))


def _rows(engine: Engine, sql: str) -> list[dict[str, Any]]:
    return records(engine, engine.translate(sql))


def render(con: Engine, source: str) -> tuple[str, int]:
    """The page, and how many charts it has."""
    m = MARTS_SCHEMA
    kpis = _rows(
        con,
        f"""
        select
            (select count(*) from {m}.idea_engagement) as ideas,
            (select coalesce(sum(public_comments), 0) from {m}.idea_engagement) as comments,
            (select coalesce(sum(private_notes), 0) from {m}.idea_engagement) as notes,
            (select count(*) from {m}.company_feedback) as companies,
            (select coalesce(sum(monthly_spend), 0) from {m}.company_feedback) as spend,
            (select coalesce(sum(posts_published), 0) from {m}.announcement_calendar) as posts
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
    calendar = _rows(
        con,
        f"""select month, category_idx, category_name, posts_published
            from {m}.announcement_calendar
            where month >= (select max(month) from {m}.announcement_calendar
                            where posts_published > 0) - interval {CADENCE_MONTHS - 1} month
            order by month""",
    )
    activity = _rows(
        con,
        f"""select month, public_comments, private_notes from {m}.activity_by_month
            where month >= (select max(month) from {m}.activity_by_month)
                           - interval {ACTIVITY_MONTHS - 1} month
            order by month""",
    )
    funnel = _rows(
        con,
        f"""select status_name, ideas, demand_monthly_spend, shipped_ideas
            from {m}.status_summary order by funnel_position""",
    )
    coverage = _rows(
        con,
        f"""select integration_type, ideas_linked, share_of_ideas, share_of_demand, links
            from {m}.integration_coverage order by share_of_ideas desc, integration_type""",
    )
    sections = [
        _section(
            "demand",
            "Demand by idea, weighted by revenue",
            f"The {TOP_IDEAS} ideas whose commenters' companies spend the most per month "
            "(each company counted once per idea).",
            _hbars(
                [
                    (
                        str(r["idea_name"] or "(unnamed)"),
                        float(r["commenter_monthly_spend"]),
                        f"{_money(r['commenter_monthly_spend'])} · {r['commenter_companies']} "
                        f"companies · {r['public_comments'] + r['private_notes']} comments",
                    )
                    for r in ideas
                ],
                PALETTE[0],
            ),
        ),
        _section(
            "cadence",
            "Announcement cadence",
            f"Posts published per month and category, up to {CADENCE_MONTHS} months back from "
            "the latest post (a post in two categories counts in both).",
            _stacked_columns(calendar),
        ),
        _section(
            "activity",
            "Comment activity over time",
            f"Public comments and private notes written per month, the last "
            f"{ACTIVITY_MONTHS} months (the last month may be partial).",
            _lines(
                [r["month"] for r in activity],
                [
                    ("public comments", [int(r["public_comments"]) for r in activity]),
                    ("private notes", [int(r["private_notes"]) for r in activity]),
                ],
            ),
        ),
        _section(
            "funnel",
            "Status funnel",
            "Ideas per status, in the board's order, with the monthly spend behind them.",
            _hbars(
                [
                    (
                        str(r["status_name"] or "(unnamed)"),
                        float(r["ideas"]),
                        f"{r['ideas']} ideas · {_money(r['demand_monthly_spend'])} · "
                        f"{r['shipped_ideas']} shipped",
                    )
                    for r in funnel
                ],
                PALETTE[2],
            ),
        ),
        _section(
            "coverage",
            "Integration coverage",
            "Share of ideas with at least one linked record, per tool.",
            _hbars(
                [
                    (
                        str(r["integration_type"]),
                        float(r["share_of_ideas"]) * 100,
                        f"{float(r['share_of_ideas']):.0%} of ideas ({r['ideas_linked']}) · "
                        f"{float(r['share_of_demand']):.0%} of demand · {r['links']} links",
                    )
                    for r in coverage
                ],
                PALETTE[1],
                maximum=100.0,
            ),
        ),
    ]
    tiles = [
        ("ideas", f"{kpis['ideas']:,}"),
        ("public comments", f"{kpis['comments']:,}"),
        ("private notes", f"{kpis['notes']:,}"),
        ("companies", f"{kpis['companies']:,}"),
        ("their monthly spend", _money(kpis["spend"])),
        ("posts published", f"{kpis['posts']:,}"),
    ]
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = _PAGE.format(
        tiles="".join(
            f'<div class="tile"><b>{html.escape(v)}</b><span>{html.escape(k)}</span></div>'
            for k, v in tiles
        ),
        sections="\n".join(sections),
        generated=html.escape(generated),
        source=html.escape(source),
    )
    return page, len(sections)


def _money(value: Any) -> str:
    amount = float(value or 0)
    if amount >= 1_000_000:
        return f"{amount / 1_000_000:,.1f}M/mo"
    if amount >= 10_000:
        return f"{amount / 1_000:,.0f}k/mo"
    return f"{amount:,.0f}/mo"


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


def _hbars(rows: Sequence[tuple[str, float, str]], color: str, maximum: float = 0.0) -> str:
    """Horizontal bars: ``(label, value, annotation)`` per row."""
    if not rows:
        return _empty()
    label_w, row_h, right = 230, 26, 250
    top = max([maximum] + [value for _, value, _ in rows]) or 1.0
    span = WIDTH - label_w - right
    height = row_h * len(rows) + 8
    parts = [f'<svg class="chart hbar" viewBox="0 0 {WIDTH} {height}" role="img">']
    for i, (label, value, note) in enumerate(rows):
        y = 4 + i * row_h
        w = max(1.0, span * value / top) if value > 0 else 0.0
        text = label if len(label) <= 34 else label[:33] + "…"
        parts.append(
            f'<text class="label" x="{label_w - 8}" y="{y + 17}" text-anchor="end">'
            f"{html.escape(text)}</text>"
            f'<rect class="bar" x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" '
            f'fill="{color}"><title>{html.escape(label)}: {html.escape(note)}</title></rect>'
            f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 17}">'
            f"{html.escape(note)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _month_label(value: date) -> str:
    return value.strftime("%b %y")


def _months(first: date, last: date) -> list[date]:
    """Every first-of-month from ``first`` to ``last``."""
    out, current = [], date(first.year, first.month, 1)
    while current <= last:
        out.append(current)
        year, month = divmod(current.month, 12)
        current = date(current.year + year, month + 1, 1)
    return out


def _stacked_columns(rows: Sequence[dict[str, Any]]) -> str:
    """Posts per month (every month in the range), stacked by category; the smaller
    categories together as one more stack."""
    rows = [r for r in rows if r["posts_published"]]
    if not rows:
        return _empty()
    totals: dict[str, int] = {}
    names: dict[str, str] = {}
    for r in rows:
        idx = str(r["category_idx"])
        totals[idx] = totals.get(idx, 0) + int(r["posts_published"])
        names[idx] = str(r["category_name"] or idx)
    ranked = sorted(totals, key=lambda c: (-totals[c], c))
    shown = ranked[:CATEGORIES_SHOWN]
    rest = len(ranked) - len(shown)
    keys: list[str | None] = [*shown, *([None] if rest else [])]  # None: the smaller ones
    labels = [names[k] if k is not None else f"{rest} more categories" for k in keys]
    months = _months(min(r["month"] for r in rows), max(r["month"] for r in rows))
    cells: dict[tuple[date, str | None], int] = {}
    for r in rows:
        key = str(r["category_idx"]) if str(r["category_idx"]) in shown else None
        cells[(r["month"], key)] = cells.get((r["month"], key), 0) + int(r["posts_published"])
    top = max(sum(cells.get((m, k), 0) for k in keys) for m in months) or 1
    left, bottom, plot_h, legend_h = 40, 40, 220, 28
    height = legend_h + plot_h + bottom
    step = (WIDTH - left - 10) / len(months)
    bar_w = max(2.0, step * 0.7)
    parts = [f'<svg class="chart columns" viewBox="0 0 {WIDTH} {height}" role="img">']
    parts += _legend(labels, legend_h)
    parts += _grid(top, left, legend_h, plot_h)
    for i, month in enumerate(months):
        x = left + i * step + (step - bar_w) / 2
        y = float(legend_h + plot_h)
        for j, key in enumerate(keys):
            n = cells.get((month, key), 0)
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            parts.append(
                f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}"><title>{_month_label(month)}, '
                f"{html.escape(labels[j])}: {n} posts</title></rect>"
            )
        if i % max(1, math.ceil(len(months) / 12)) == 0:
            parts.append(
                f'<text class="axis" x="{x + bar_w / 2:.1f}" y="{legend_h + plot_h + 16}" '
                f'text-anchor="middle">{_month_label(month)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _lines(months: Sequence[date], series: Sequence[tuple[str, Sequence[int]]]) -> str:
    if not months:
        return _empty()
    left, bottom, plot_h, legend_h = 40, 40, 220, 28
    height = legend_h + plot_h + bottom
    top = max([1] + [v for _, values in series for v in values])
    step = (WIDTH - left - 20) / max(1, len(months) - 1)
    parts = [f'<svg class="chart lines" viewBox="0 0 {WIDTH} {height}" role="img">']
    parts += _legend([name for name, _ in series], legend_h)
    parts += _grid(top, left, legend_h, plot_h)
    for j, (name, values) in enumerate(series):
        color = PALETTE[j % len(PALETTE)]
        points = [
            (left + i * step, legend_h + plot_h - plot_h * v / top) for i, v in enumerate(values)
        ]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline class="line" points="{path}" stroke="{color}" fill="none"/>')
        for (x, y), month, v in zip(points, months, values, strict=True):
            parts.append(
                f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}">'
                f"<title>{_month_label(month)}: {v} {html.escape(name)}</title></circle>"
            )
    for i, month in enumerate(months):
        if i % max(1, math.ceil(len(months) / 12)) == 0:
            parts.append(
                f'<text class="axis" x="{left + i * step:.1f}" y="{legend_h + plot_h + 16}" '
                f'text-anchor="middle">{_month_label(month)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _legend(names: Sequence[str], height: int) -> list[str]:
    parts, x = [], 40.0
    for j, name in enumerate(names):
        parts.append(
            f'<rect class="key" x="{x:.1f}" y="{height / 2 - 6:.1f}" width="12" height="12" '
            f'fill="{PALETTE[j % len(PALETTE)]}"/>'
            f'<text class="legend" x="{x + 16:.1f}" y="{height / 2 + 4:.1f}">'
            f"{html.escape(name)}</text>"
        )
        x += 28 + 7 * len(name)
    return parts


def _grid(top: float, left: int, offset: int, plot_h: int) -> list[str]:
    """Horizontal gridlines with their values, for charts whose y axis starts at 0."""
    parts = []
    for tick in _ticks(top):
        y = offset + plot_h - plot_h * tick / top
        parts.append(
            f'<line class="grid" x1="{left}" x2="{WIDTH - 10}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="axis" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>'
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
  header, main, footer {{ max-width: 840px; margin: 0 auto; padding: 0 20px; }}
  header h1 {{ font-size: 22px; margin: 24px 0 4px; }}
  .tiles {{ display: grid; grid-template-columns: repeat(3, 1fr); gap: 10px; margin: 16px 0; }}
  .tile {{ background: #fff; border: 1px solid #e2e8f0; border-radius: 8px; padding: 10px 14px; }}
  .tile b {{ display: block; font-size: 20px; }}
  .tile span {{ color: #64748b; }}
  section {{ background: #fff; border: 1px solid #e2e8f0; border-radius: 8px;
             padding: 12px 16px 16px; margin: 14px 0; }}
  section h2 {{ font-size: 16px; margin: 4px 0; }}
  .note {{ color: #64748b; margin: 0 0 8px; }}
  svg.chart {{ width: 100%; height: auto; display: block; }}
  svg text {{ font-size: 11px; fill: #334155; }}
  svg text.value, svg text.axis {{ fill: #64748b; }}
  svg .grid {{ stroke: #e2e8f0; stroke-width: 1; }}
  svg .line {{ stroke-width: 2; }}
  footer {{ color: #94a3b8; font-size: 12px; padding-bottom: 24px; }}
</style>
</head>
<body>
<header>
<h1>Feedback dashboard</h1>
<div class="tiles">{tiles}</div>
</header>
<main>
{sections}
</main>
<footer>Generated {generated} by feedback-sync report from {source} (schema marts).</footer>
</body>
</html>
"""
