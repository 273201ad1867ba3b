"""The dashboard: written from the marts of a tiny sync, self-contained, drawn by a real
headless Chromium (console clean, every chart's marks on the page, nothing fetched, the
window's width used), and every figure on it equal to the one computed in Python from the
sandbox's ground truth (``tests/models/truth.py``), not from the marts' SQL."""

from __future__ import annotations

import html
import re
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.app.cli import main
from feedback_sync.app.report import Freshness, render, write
from feedback_sync.app.report.charts import _clipped, month_columns
from feedback_sync.app.report.page import _stays_line, _window
from feedback_sync.errors import ModelError
from feedback_sync.models.project import build
from feedback_sync.warehouse.duckdb import open_duckdb_models

from tests.models.history_truth import HistoryTruth
from tests.models.truth import Truth, every_month
from tests.support.browser import open_page
from tests.sync.harness import Harness

CHARTS = ("demand", "cadence", "activity", "funnel", "flow", "coverage")


def _month(value: date) -> str:
    return value.strftime("%b %Y")


def _n(count: int, one: str, many: str) -> str:
    return f"1 {one}" if count == 1 else f"{count:,} {many}"


def _section(page: str, anchor: str) -> str:
    found = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert found, anchor
    return found.group(1)


def _texts(svg: str, css: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(rf'<text class="{css}"[^>]*>([^<]*)</text>', svg)]


def _last_load(harness: Harness) -> datetime:
    path = harness.target().duckdb_file()
    assert path is not None
    with duckdb.connect(str(path), read_only=True) as con:
        row = con.execute(
            "select max(inserted_at) from feedback._dlt_loads where status = 0"
        ).fetchone()
    assert row is not None and isinstance(row[0], datetime)
    return row[0].astimezone(UTC)


@pytest.mark.slow
def test_every_figure_on_the_dashboard_equals_the_source(harness: Harness, tmp_path: Path) -> None:
    harness.sync()
    first = harness.dump()
    harness.mutate(seed=5, fraction=0.2)  # deletes, renames, new rows: not just the seed
    harness.mutate(seed=6, counts={"ideas": {"update": 15}})  # moves: stays that end
    second = harness.sync(full=True)
    assert second.run_at is not None
    dump = harness.dump()
    truth = Truth(dump, HistoryTruth(first, dump, second.run_at, full=True))
    out = tmp_path / "report.html"
    write(harness.target(), out, currency="EUR")
    page = out.read_text(encoding="utf-8")

    # the tiles count distinct things, each once
    tiles = {
        key: html.unescape(value)
        for key, value in re.findall(r'data-figure="(\w+)"><b>([^<]+)</b>', page)
    }
    comments = Counter(c["is_private"] for c in dump["comments"])
    assert tiles == {
        "ideas": f"{len(dump['ideas']):,}",
        "followers": f"{len(dump['followers']):,}",
        "public_comments": f"{comments[False]:,}",
        "private_notes": f"{comments[True]:,}",
        "companies": f"{len(truth.companies):,}",
        "monthly_spend": f"{round(truth.total_spend()):,} EUR/mo",
        "posts_published": f"{sum(1 for a in dump['announcements'] if a['is_published']):,}",
    }

    # when the data was last loaded, and the unit of money
    as_of = _last_load(harness)
    assert f"Data as of {as_of.strftime('%d %b %Y, %H:%M UTC').lstrip('0')}" in page
    assert "Money is monthly spend in EUR" in page
    current = date(as_of.year, as_of.month, 1)

    # demand by idea: the top idea, its spend, companies and comments
    demand = _section(page, "demand")
    ideas = truth.idea_engagement()
    top = min(
        ideas,
        key=lambda i: (
            -ideas[i]["commenter_monthly_spend"],
            -ideas[i]["public_comments"],
            i,
        ),
    )
    row = ideas[top]
    assert _texts(demand, "label")[0].rstrip("…") in row["idea_name"]
    assert _texts(demand, "value")[0] == (
        f"{round(row['commenter_monthly_spend']):,} EUR/mo · "
        f"{_n(row['commenter_companies'], 'company', 'companies')} · "
        f"{row['public_comments'] + row['private_notes']:,} comments and notes"
    )

    # the status funnel: ideas, announced ideas, the companies behind each status once
    funnel = _texts(_section(page, "funnel"), "value")
    statuses = sorted(truth.status_summary().values(), key=lambda r: r["funnel_position"])
    expected: list[str] = []
    for s in statuses:
        expected += [
            f"{_n(s['ideas'], 'idea', 'ideas')}, {s['announced_ideas']:,} of them named in a "
            "published post",
            f"{_n(s['commenter_companies'], 'company', 'companies')} behind them: "
            f"{round(s['commenter_monthly_spend']):,} EUR/mo, "
            f"{s['share_of_spend']:.0%} of all companies' spend",
        ]
    assert funnel == expected
    # no status has more companies behind it than the board has
    assert all(s["commenter_companies"] <= len(truth.companies) for s in statuses)

    # time in status: per status in the board's order (then those no longer loaded), the
    # ended stays' median and 90th percentile, and the ideas there now, from the history
    flow = _texts(_section(page, "flow"), "value")
    position = {k: r["funnel_position"] for k, r in truth.status_summary().items()}
    per_status = truth.status_flow()
    order = sorted(
        per_status,
        key=lambda k: (position.get(k, 10**6), per_status[k]["status_name"] or "", k),
    )
    expected = []
    for k in order:
        f = per_status[k]
        ended = f["stays_completed"]
        # a single stay is told as what it is; none is said once, in the chart's note
        if ended == 1:
            expected.append(f"1 stay ended, after {f['median_days_completed']:,.2f} days")
        elif ended:
            expected.append(
                f"median {f['median_days_completed']:,.2f} days, 90th percentile "
                f"{f['p90_days_completed']:,.2f} days, over {ended:,} stays that ended"
            )
        if f["ideas_now"]:
            since = f["waiting_since"]
            days = (as_of - since).total_seconds() / 86400
            expected.append(
                f"{_n(f['ideas_now'], 'idea', 'ideas')} there now, the longest since "
                f"{since.strftime('%d %b %Y').lstrip('0')} ({days:,.0f} days by "
                f"{as_of.strftime('%d %b %Y').lstrip('0')})"
            )
        else:
            expected.append("no idea there now")
    assert flow == expected
    assert any(per_status[k]["stays_completed"] > 1 for k in order), "medians of several"

    # integration coverage
    coverage = _texts(_section(page, "coverage"), "value")
    kinds = truth.integration_coverage()
    order = sorted(kinds, key=lambda k: (-kinds[k]["share_of_ideas"], k))
    expected = []
    for k in order:
        c = kinds[k]
        expected += [
            f"{c['share_of_ideas']:.0%} of ideas ({c['ideas_linked']:,}), "
            f"{_n(c['links'], 'link', 'links')}",
            f"{_n(c['commenter_companies'], 'company', 'companies')} behind them: "
            f"{c['share_of_spend']:.0%} of all companies' spend",
        ]
    assert coverage == expected

    # the cadence: posts published per month, each post once, up to the month of the load
    cadence = _section(page, "cadence")
    months = truth.announcement_months()
    drawn = {
        title_month: int(n.replace(",", ""))
        for title_month, n in re.findall(r"<title>([A-Z][a-z]{2} \d{4}): ([\d,]+) posts?", cadence)
    }
    shown = every_month(min(months), current)[-24:]
    assert drawn == {
        _month(m): months[m]["posts_published"]
        for m in shown
        if m in months and months[m]["posts_published"]
    }
    assert f">{_month(current)}*</text>" in cadence

    # comment activity: every month up to the load's, the load's month drawn as partial
    activity = _section(page, "activity")
    per_month = truth.activity_by_month()
    points = re.findall(
        r'<circle class="point( partial)?"[^>]*><title>([A-Z][a-z]{2} \d{4}): ([\d,]+) '
        r"public comments",
        activity,
    )
    shown = every_month(min(per_month), max(max(per_month), current))[-36:]
    assert [(m, int(n.replace(",", ""))) for _, m, n in points] == [
        (_month(m), per_month[m]["public_comments"] if m in per_month else 0) for m in shown
    ]
    assert [bool(partial) for partial, _, _ in points] == [m == current for m in shown]
    # the partial month is a point of its own, not joined: no line runs into it
    assert 'class="line partial"' not in activity
    assert all(f"{x}," not in line for line in _polylines(activity) for x in _partial_x(activity))


@pytest.mark.slow
def test_the_dashboard_draws_in_headless_chromium(harness: Harness, tmp_path: Path) -> None:
    harness.sync()
    harness.mutate(seed=6, counts={"ideas": {"update": 15}})  # stays that end: time in status
    harness.sync()
    out = tmp_path / "out" / "report.html"
    report = write(harness.target(), out)
    assert report.charts == len(CHARTS) and out.exists()
    page = out.read_text(encoding="utf-8")
    # self-contained: nothing that would make a browser fetch
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|@import|url\(", page, re.I)
    assert "Money is monthly spend in the account&#x27;s currency" in page

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
        # two series, each with its partial last month a point apart, not joined
        assert p.locator("section#activity polyline.line").count() == 2
        assert p.locator("section#activity circle.point.partial").count() == 2
        # no axis label runs past its chart ("Nov 202")
        for chart in CHARTS:
            svg_box = p.locator(f"section#{chart} svg.chart").bounding_box()
            assert svg_box is not None
            labels = p.locator(f"section#{chart} svg.chart text")
            for i in range(labels.count()):
                box = labels.nth(i).bounding_box()
                assert box is not None
                assert box["x"] >= svg_box["x"] - 0.5, (chart, labels.nth(i).text_content())
                assert box["x"] + box["width"] <= svg_box["x"] + svg_box["width"] + 0.5, (
                    chart,
                    labels.nth(i).text_content(),
                )
        # at 900 px the sections stack: one column
        boxes = [p.locator(f"section#{c}").bounding_box() for c in CHARTS]
        assert all(b is not None for b in boxes)
        assert len({round(b["x"]) for b in boxes if b is not None}) == 1
        shot = tmp_path / "shot.png"
        p.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    # a wide window is used: the sections go side by side and fill it
    with open_page(out, width=1600) as visit:
        p = visit.page
        boxes = [p.locator(f"section#{c}").bounding_box() for c in CHARTS]
        assert all(b is not None for b in boxes)
        demand, cadence = boxes[0], boxes[1]
        assert demand is not None and cadence is not None
        assert abs(demand["y"] - cadence["y"]) < 1 and cadence["x"] > demand["x"] + 600
        assert cadence["x"] + cadence["width"] > 1500
        tiles = p.locator(".tile")
        first, last = tiles.first.bounding_box(), tiles.last.bounding_box()
        assert first is not None and last is not None and abs(first["y"] - last["y"]) < 1


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


def test_the_currency_is_a_setting_and_a_bad_one_is_refused(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    harness.sync()
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(harness.target().duckdb_file()))
    out = tmp_path / "r.html"
    monkeypatch.setenv("REPORT__CURRENCY", "CHF")
    assert main(["report", "--output", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "Money is monthly spend in CHF" in page and " CHF/mo</b>" in page
    # the option wins over the setting
    assert main(["report", "--output", str(out), "--currency", "£"]) == 0
    assert "Money is monthly spend in £" in out.read_text(encoding="utf-8")
    capsys.readouterr()
    # a malformed one: one line naming the setting, exit 2, the page left as it was
    before = out.read_bytes()
    monkeypatch.setenv("REPORT__CURRENCY", "a currency name far too long")
    assert main(["report", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "REPORT__CURRENCY (currency in [report]) must be" in err[0]
    assert out.read_bytes() == before
    assert main(["report", "--output", str(out), "--currency", " "]) == 2
    assert "--currency must be" in capsys.readouterr().err


def test_without_a_load_time_no_month_is_drawn_partial(harness: Harness) -> None:
    harness.sync()
    path = harness.target().duckdb_file()
    assert path is not None
    with open_duckdb_models(path, read_only=True) as (engine, where):
        page, charts = render(engine, source=where)
        loaded = Freshness(datetime(2026, 11, 27, 9, 8, tzinfo=UTC))
        with_load, _ = render(engine, source=where, freshness=loaded)
    assert charts == len(CHARTS)
    assert "Data as of: not known" in page
    assert not re.search(r'class="[a-z]+ partial"', page)
    assert "no month is marked partial" in _section(page, "activity")
    # one sync: no stay has ended yet, and the time-in-status chart says so
    assert "No idea has left a status since the history began" in _section(page, "flow")
    assert "November 2026 is partial: the data is as of 27 Nov 2026." in with_load
    assert "Data as of 27 Nov 2026, 09:08 UTC (the last load)" in with_load


def test_the_cadence_keeps_months_without_posts_and_marks_the_partial_one() -> None:
    months = [date(2025, 1, 1), date(2025, 9, 1)]
    # every month in between, up to the month of the load
    shown = _window(months, date(2025, 11, 1), 24)
    assert shown[0] == date(2025, 1, 1) and shown[-1] == date(2025, 11, 1) and len(shown) == 11
    assert _window(months, None, 24)[-1] == date(2025, 9, 1)
    assert len(_window(months, date(2027, 1, 1), 24)) == 24
    svg = month_columns(
        [
            (m, {date(2025, 1, 1): 2, date(2025, 9, 1): 1, shown[-1]: 3}.get(m, 0), "")
            for m in shown
        ],
        shown[-1],
    )
    # eleven month slots, labelled, though only three months had posts
    for label in ("Jan 2025", "Mar 2025", "Sep 2025", "Nov 2025*"):
        assert f">{label}</text>" in svg
    assert svg.count('class="bar"') == 2 and svg.count('class="bar partial"') == 1
    assert "Nov 2025: 3 posts (so far)" in svg


def _meta(harness: Harness, tmp_path: Path) -> str:
    out = tmp_path / "r.html"
    write(harness.target(), out)
    found = re.search(r'<p class="meta">(.*?)</p>', out.read_text(encoding="utf-8"))
    assert found
    return html.unescape(found.group(1))


@pytest.mark.slow
def test_marts_older_than_the_last_load_say_so(harness: Harness, tmp_path: Path) -> None:
    harness.sync()
    assert "(the last load)" in _meta(harness, tmp_path)
    # a sync that changed nothing the models read reuses them: they stand for the new load
    again = harness.sync()
    assert again.models is not None and again.models.reused_from is not None
    assert "(the last load)" in _meta(harness, tmp_path)
    # a load whose models were not built: the page dates its figures by the marts' build
    harness.mutate(seed=8, counts={"comments": {"create": 3}})
    harness.sync(models=False)
    meta = _meta(harness, tmp_path)
    assert "when the marts were built: the load of " in meta
    assert "is not in them (run `feedback-sync models`)" in meta
    stamp = _last_load(harness).strftime("%d %b %Y, %H:%M UTC").lstrip("0")
    assert f"the load of {stamp} is not in them" in meta
    path = harness.target().duckdb_file()
    assert path is not None
    with duckdb.connect(str(path)) as con:
        build(con, "feedback")
    assert "(the last load)" in _meta(harness, tmp_path)


def _polylines(svg: str) -> list[str]:
    return re.findall(r'<polyline class="line" points="([^"]*)"', svg)


def _partial_x(svg: str) -> list[str]:
    """The x of each partial month's point."""
    return re.findall(r'<circle class="point partial" cx="([\d.]+)"', svg)


def test_a_single_stay_is_told_as_one_and_none_is_left_to_the_note() -> None:
    one = {"stays_completed": 1, "median_days_completed": 3.5, "p90_days_completed": 3.5}
    assert _stays_line(one) == "1 stay ended, after 3.50 days"
    many = {"stays_completed": 4, "median_days_completed": 2.0, "p90_days_completed": 9.25}
    assert _stays_line(many) == (
        "median 2.00 days, 90th percentile 9.25 days, over 4 stays that ended"
    )
    assert _stays_line({"stays_completed": 0}) == ""


def test_a_long_bar_label_is_cut_to_fit_its_column() -> None:
    assert _clipped("Tag custom fields") == "Tag custom fields"
    assert _clipped("Comment on SSO users (renamed) (renamed)") == "Comment on SSO users (r…"
    assert len(_clipped("日本語" * 10)) <= 13  # a wide character counts two
