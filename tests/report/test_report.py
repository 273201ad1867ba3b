"""The dashboard: written from the marts of a tiny sync, self-contained, and drawn by a real
headless Chromium (console clean, every chart's marks on the page, nothing fetched)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.app.cli import main
from feedback_sync.app.report import write
from feedback_sync.errors import ModelError

from tests.support.browser import open_page
from tests.sync.harness import Harness

CHARTS = ("demand", "cadence", "activity", "funnel", "coverage")


@pytest.mark.slow
def test_the_dashboard_draws_in_headless_chromium(harness: Harness, tmp_path: Path) -> None:
    harness.sync()
    out = tmp_path / "out" / "report.html"
    report = write(harness.target(), out)
    assert report.charts == len(CHARTS) and out.exists()
    page = out.read_text(encoding="utf-8")
    # self-contained: nothing that would make a browser fetch
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|@import|url\(", page, re.I)

    path = harness.target().duckdb_file()
    assert path is not None
    with duckdb.connect(str(path), read_only=True) as con:
        top = con.execute(
            "select idea_name from marts.idea_engagement "
            "order by commenter_monthly_spend desc, public_comments desc, idea_idx limit 1"
        ).fetchone()
        statuses = con.execute("select count(*) from marts.status_summary").fetchone()
        types = con.execute("select count(*) from marts.integration_coverage").fetchone()
    assert top and statuses and types

    with open_page(out) as visit:
        p = visit.page
        assert visit.console_errors == []
        # the file itself is the only thing loaded
        assert visit.requests == [out.resolve().as_uri()]
        for chart in CHARTS:
            svg = p.locator(f"section#{chart} svg.chart")
            assert svg.count() == 1, chart
            box = svg.bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 40, chart
            marks = p.locator(f"section#{chart} svg.chart :is(rect.bar, polyline.line)")
            assert marks.count() > 0, f"{chart}: no bars or lines drawn"
            widths = [marks.nth(i).bounding_box() for i in range(marks.count())]
            assert any(b is not None and b["width"] > 0 and b["height"] > 0 for b in widths)
        # the charts show the marts' figures
        first_label = p.locator("section#demand svg text.label").first.text_content()
        assert first_label and top[0].startswith(first_label.rstrip("…"))
        assert p.locator("section#funnel rect.bar").count() == statuses[0]
        assert p.locator("section#coverage rect.bar").count() == types[0]
        assert p.locator("section#activity polyline.line").count() == 2
        shot = tmp_path / "shot.png"
        p.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_report_without_marts_says_what_to_run(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    with pytest.raises(ModelError, match="run `feedback-sync sync` first"):
        write(harness.target(), tmp_path / "r.html")
    harness.sync(models=False)
    with pytest.raises(ModelError, match="run `feedback-sync models` first"):
        write(harness.target(), tmp_path / "r.html")
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(harness.target().duckdb_file()))
    assert main(["report", "--output", str(tmp_path / "r.html")]) == 1
    assert "feedback-sync report: error:" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
    assert main(["models"]) == 0
    assert main(["report", "--output", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").stat().st_size > 5_000


def test_the_cadence_chart_keeps_months_without_posts() -> None:
    from datetime import date

    from feedback_sync.app.report import _stacked_columns

    rows = [
        {
            "month": date(2025, 1, 1),
            "category_idx": "c1",
            "category_name": "other",
            "posts_published": 2,
        },
        {
            "month": date(2025, 9, 1),
            "category_idx": "c2",
            "category_name": "other",
            "posts_published": 1,
        },
    ]
    svg = _stacked_columns(rows)
    # nine month slots, labelled, though only two months had posts
    for label in ("Jan 25", "May 25", "Sep 25"):
        assert f">{label}</text>" in svg
    # two categories with the same name stay two stacks (keyed by idx), drawn side by side
    assert svg.count('class="bar"') == 2
    xs = [float(x) for x in re.findall(r'class="bar" x="([0-9.]+)"', svg)]
    assert xs[1] - xs[0] > 8 * (760 - 50) / 9 - 1
