"""``feedback-sync report``: a self-contained HTML dashboard drawn from the marts.

One HTML file with its styles inline and its charts as inline SVG, drawn from the
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

The figures are read in ``figures`` (one query each, into ``Figures``), the page is drawn
in ``page`` and its charts in ``charts``; this module joins them and writes the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from feedback_sync.app.report.figures import Freshness, gather, last_load, missing_marts
from feedback_sync.app.report.page import Board, draw, draw_accounts
from feedback_sync.app.settings import REPORT
from feedback_sync.errors import ModelError
from feedback_sync.models.accounts import Part
from feedback_sync.models.project import MARTS_SCHEMA, current_since
from feedback_sync.warehouse.engines import Engine
from feedback_sync.warehouse.target import Target

__all__ = ["Freshness", "Report", "currency_setting", "render", "write"]


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
    ``[report]`` (``app/settings.py``), else None (the account's currency).

    Raises:
        ConfigError: the value is empty, longer than 16 characters or holds control
            characters.
    """
    from feedback_sync.api.config import load

    return load(REPORT, {"currency": ("--currency", chosen)}).currency


def write(
    target: Target, output: Path, currency: str | None = None, accounts: Sequence[str] = ()
) -> Report:
    """Writes the dashboard of ``target``'s marts to ``output`` (replaced whole).
    ``currency`` names the unit of money (None: the account's currency). With
    ``accounts``, one board per account, each from the account's own marts
    (``marts_<account>``: ``models/accounts.py``).

    Raises:
        ModelError: no warehouse, or the marts are not built there.
    """
    if accounts:
        page, charts = _accounts_page(target, accounts, currency)
    else:
        loaded = last_load(target)
        with target.open_models(read_only=True) as (engine, where):
            missing = missing_marts(engine)
            if missing:
                raise ModelError(
                    f"{where} lacks the marts {', '.join(missing)}: "
                    "run `feedback-sync models` first"
                )
            freshness = Freshness(loaded, current_since(engine))
            page, charts = render(engine, source=where, freshness=freshness, currency=currency)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(output)
    return Report(output, charts, len(page.encode()))


def _accounts_page(
    target: Target, accounts: Sequence[str], currency: str | None
) -> tuple[str, int]:
    """The page of several accounts: a board for each that has its marts."""
    # read before the models' file is opened (DuckDB opens a file once per process)
    loads = {account: last_load(target.for_account(account)) for account in accounts}
    boards, left_out = [], []
    with target.open_models(read_only=True) as (engine, where):
        current = current_since(engine)
        for account in accounts:
            schema = Part(target.for_account(account).dataset, account).schema(MARTS_SCHEMA)
            if missing_marts(engine, schema):
                left_out.append(account)
                continue
            figures = gather(engine, schema)
            boards.append(Board(account, figures, Freshness(loads[account], current)))
        if not boards:
            raise ModelError(
                f"{where} has the marts of none of the accounts {', '.join(accounts)}: "
                "sync them, or run `feedback-sync models`"
            )
        return draw_accounts(boards, where, currency, left_out)


def render(
    con: Engine, source: str, freshness: Freshness | None = None, currency: str | None = None
) -> tuple[str, int]:
    """The page, and how many charts it has."""
    return draw(gather(con), source, freshness or Freshness(None), currency)
