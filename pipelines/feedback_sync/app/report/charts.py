"""The dashboard's charts as inline SVG: horizontal bars, monthly columns and lines, each
drawn from the rows it is given, with nothing fetched (no script, font or image)."""

from __future__ import annotations

import html
import math
import unicodedata
from collections.abc import Sequence
from datetime import date

from feedback_sync.app.report.words import count, many, month_label

PALETTE = ("#4f46e5", "#0ea5e9", "#10b981", "#f59e0b", "#ef4444", "#8b5cf6", "#64748b")
WIDTH = 760


def empty(height: int = 60) -> str:
    return (
        f'<svg class="chart empty" viewBox="0 0 {WIDTH} {height}" role="img">'
        f'<text x="{WIDTH // 2}" y="{height // 2}" text-anchor="middle">no data yet</text></svg>'
    )


def empty_note(text: str) -> str:
    """A chart with nothing to draw yet, saying why."""
    return (
        f'<svg class="chart empty" viewBox="0 0 {WIDTH} 40" role="img">'
        f'<text class="value" x="8" y="24">{html.escape(text)}</text></svg>'
    )


def hbars(rows: Sequence[tuple[str, float, str]], color: str, maximum: float = 0.0) -> str:
    """Horizontal bars: ``(label, value, annotation)`` per row; the annotation goes below
    the bar, a line per ``\n``, so a long one never runs off the chart."""
    if not rows:
        return empty()
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


def month_columns(cells: Sequence[tuple[date, int, str]], current: date | None) -> str:
    """One column per month: ``(month, posts, tooltip detail)``; the month of the last
    load (``current``) is drawn as partial."""
    if not any(n for _, n, _ in cells):
        return empty()
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
            title = f"{month_label(month)}: {many(n, 'post')}" + (" (so far)" if partial else "")
            if detail:
                title += f"; by category: {detail}"
            parts.append(
                f'<rect class="bar{" partial" if partial else ""}" x="{x:.1f}" '
                f'y="{legend_h + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[0]}"{_PARTIAL_FILL if partial else ""}>'
                f"<title>{html.escape(title)}</title></rect>"
            )
        if _labelled(i, len(cells), current is not None and cells[-1][0] == current):
            label = f"{month_label(month)}{'*' if partial else ''}"
            parts.append(
                _axis_label(x + bar_w / 2, legend_h + plot_h + 16, label, i == len(cells) - 1)
            )
    parts.append("</svg>")
    return "".join(parts)


def month_lines(
    months: Sequence[date], series: Sequence[tuple[str, Sequence[int]]], current: date | None
) -> str:
    """One line per series over the whole months; the month of the last load
    (``current``) is partial: its point is hollow and not joined to the line (a month a
    few days old would otherwise draw as a collapse)."""
    if not months:
        return empty()
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
                f"<title>{month_label(month)}: {count(v)} {html.escape(name)}{note}</title>"
                "</circle>"
            )
    for i, month in enumerate(months):
        last = partial and i == len(months) - 1
        if _labelled(i, len(months), partial):
            label = f"{month_label(month)}{'*' if last else ''}"
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


def _labelled(i: int, total: int, partial_last: bool) -> bool:
    """Whether the ``i``-th of ``total`` months gets an axis label: about 12 evenly, and the
    partial last month always (then no other label crowds it)."""
    every = max(1, math.ceil(total / 12))
    if partial_last:
        return i == total - 1 or (i % every == 0 and total - 1 - i >= every)
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
            f"{count(tick)}</text>"
        )
    return parts


def _ticks(top: float) -> list[int]:
    """Up to five round gridline values from 0 to ``top``."""
    raw = top / 4
    magnitude = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [int(i * step) for i in range(int(top // step) + 1)]
