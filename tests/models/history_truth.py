"""The history marts computed in plain Python from two syncs' ground truth.

``HistoryTruth`` takes the dump taken right after a first sync, the dump after a second,
and the second sync's time, and derives each idea's and company's versions from what each
sync could see, following the documented rules (a version starts at the updated_at its
row carried when read with the new value, else at the sync's time; rows gone at a full read
end at the sync's time). The entered_at of a stay a move began is taken from the sandbox's
own record of the moves (``status_moves``). Written from the marts' documented meaning,
not from their SQL.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from tests.models.truth import ts

Row = dict[str, Any]
Version = dict[str, Any]  # fields, plus "from" and "to"


def _to_datetime(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


def _next_versions(
    versions: dict[str, list[Version]],
    seen: dict[str, tuple[Any, datetime | None]],
    run_at: datetime,
    *,
    closes_gone: bool,
) -> None:
    """One sync's reading ``seen`` (key -> (fields, updated_at)) applied to ``versions``."""
    for key, (fields, stamp) in seen.items():
        rows = versions.get(key, [])
        current = rows[-1] if rows and rows[-1]["to"] is None else None
        if current is not None and current["fields"] == fields:
            continue
        edge = None
        if rows:
            last = rows[-1]
            edge = last["from"] if last["to"] is None else last["to"]
        if current is not None:
            begins = stamp if stamp is not None and stamp > edge else max(run_at, edge)
            current["to"] = begins
        elif edge is None:
            begins = stamp if stamp is not None else run_at
        else:
            begins = stamp if stamp is not None and stamp >= edge else max(run_at, edge)
        versions.setdefault(key, []).append({"fields": fields, "from": begins, "to": None})
    if closes_gone:
        for key, rows in versions.items():
            if key not in seen and rows[-1]["to"] is None:
                rows[-1]["to"] = max(run_at, rows[-1]["from"])


def _ideas_seen(dump: dict[str, Any]) -> dict[str, tuple[Any, datetime | None]]:
    return {
        i["idx"]: ((i["status_idx"], i["name"], tuple(i["topic_idxs"])), ts(i["updated_at"]))
        for i in dump["ideas"]
    }


def _companies_seen(dump: dict[str, Any]) -> dict[str, tuple[Any, datetime | None]]:
    """Each company as the copy under its most recently updated follower (then the highest
    follower idx) shows it."""
    seen: dict[str, tuple[Any, datetime | None]] = {}
    newest_first = sorted(
        dump["followers"], key=lambda f: (ts(f["updated_at"]), f["idx"]), reverse=True
    )
    for follower in newest_first:
        for company in follower.get("companies") or ():
            if company["id"] in seen:
                continue
            fields = tuple(sorted((k, repr(v)) for k, v in company.items() if k != "id"))
            seen[company["id"]] = (fields, ts(follower["updated_at"]))
    return seen


def _median(values: list[float]) -> float | None:
    return _quantile(values, "0.5")


def _quantile(values: list[float], q: str) -> float | None:
    """Linear interpolation between the closest ranks (SQL's quantile_cont), exact in
    decimals, to 2 decimals with a half up."""
    if not values:
        return None
    ordered = sorted(Decimal(str(v)) for v in values)
    position = (len(ordered) - 1) * Decimal(q)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    exact = ordered[low] + (position - low) * (ordered[high] - ordered[low])
    return float(exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def _days(seconds: float) -> float:
    """Days to 2 decimals, a half up, through 6 decimals (as the mart does)."""
    exact = Decimal(repr(seconds)) / Decimal(86400)
    six = exact.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP)
    return float(six.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


class HistoryTruth:
    """The history marts after two syncs: ``first`` and ``last`` dumps, the second sync's
    time ``run_at``, and whether it was a full sync (``full``)."""

    def __init__(
        self, first: dict[str, Any], last: dict[str, Any], run_at: datetime, full: bool
    ) -> None:
        self.last = last
        self.run_at = run_at
        first_time = datetime(1970, 1, 1, tzinfo=UTC)  # unused: every row has updated_at
        self.ideas: dict[str, list[Version]] = {}
        _next_versions(self.ideas, _ideas_seen(first), first_time, closes_gone=True)
        _next_versions(self.ideas, _ideas_seen(last), run_at, closes_gone=True)
        self.companies: dict[str, list[Version]] = {}
        _next_versions(self.companies, _companies_seen(first), first_time, closes_gone=True)
        if full:  # a normal run reads new followers only
            _next_versions(self.companies, _companies_seen(last), run_at, closes_gone=True)
        # the record: the last move of each idea between the two syncs
        self.moved: dict[str, Row] = {}
        for move in last["status_moves"]:
            self.moved[move["idea_idx"]] = move

    def idea_status_history(self) -> dict[Any, Row]:
        names = {s["idx"]: s["name"] for s in self.last["statuses"]}
        out: dict[Any, Row] = {}
        for idea_idx, rows in self.ideas.items():
            stays: list[Row] = []
            for version in rows:
                status = version["fields"][0]
                last = stays[-1] if stays else None
                if (
                    last is not None
                    and last["status_idx"] == status
                    and last["left_at"] == version["from"]
                ):
                    last["left_at"] = version["to"]
                    continue
                stays.append(
                    {"status_idx": status, "entered_at": version["from"], "left_at": version["to"]}
                )
            if idea_idx in self.moved and len(stays) > 1:
                # the stay the last move began: at the move, as the sandbox recorded it
                move = self.moved[idea_idx]
                assert stays[-1]["status_idx"] == move["to_status_idx"], (idea_idx, stays, move)
                assert stays[-1]["entered_at"] == _to_datetime(move["at"]), (idea_idx, move)
            number = 0
            for stay in stays:
                if stay["status_idx"] is None:
                    continue
                number += 1
                left = stay["left_at"]
                days = None if left is None else _days((left - stay["entered_at"]).total_seconds())
                out[(idea_idx, number)] = {
                    "status_idx": stay["status_idx"],
                    "status_name": names.get(stay["status_idx"]),
                    "entered_at": stay["entered_at"],
                    "left_at": left,
                    "days_in_status": days,
                }
        return out

    def status_flow(self) -> dict[Any, Row]:
        names = {s["idx"]: s["name"] for s in self.last["statuses"]}
        stays = self.idea_status_history()
        per: dict[str, list[tuple[str, Row]]] = defaultdict(list)
        for (idea_idx, _), stay in stays.items():
            per[stay["status_idx"]].append((idea_idx, stay))
        out: dict[Any, Row] = {}
        for status in set(per) | set(names):
            done = [s["days_in_status"] for _, s in per[status] if s["left_at"] is not None]
            now = [s for _, s in per[status] if s["left_at"] is None]
            median = _median(done)
            p90 = _quantile(done, "0.9")
            out[status] = {
                "status_name": names.get(status),
                "ideas_entered": len({idea for idea, _ in per[status]}),
                "stays_completed": len(done),
                "median_days_completed": median,
                "p90_days_completed": p90,
                "ideas_now": len(now),
                "waiting_since": min((s["entered_at"] for s in now), default=None),
            }
        return out

    def company_spend_by_month(self) -> dict[Any, Row]:
        last_month = self.run_at.astimezone(UTC).date().replace(day=1)
        starts = [v["from"] for rows in self.companies.values() for v in rows]
        first = min(starts).date().replace(day=1)
        months = []
        month = first
        while month <= last_month:
            months.append(month)
            month = (month + timedelta(days=32)).replace(day=1)
        out: dict[Any, Row] = {}
        for company_id, rows in self.companies.items():
            for month in months:
                complete = month < last_month
                end = datetime.combine(
                    (month + timedelta(days=32)).replace(day=1), datetime.min.time(), UTC
                )
                for version in rows:
                    if complete:
                        hit = version["from"] < end and (
                            version["to"] is None or version["to"] >= end
                        )
                    else:
                        hit = version["to"] is None
                    if hit:
                        fields = dict(version["fields"])
                        out[(month, company_id)] = {
                            "company_name": _literal(fields.get("name")),
                            "monthly_spend": _literal(fields.get("monthly_spend")),
                            "is_month_complete": complete,
                        }
        return out


def _literal(text: str | None) -> Any:
    """A field kept as its repr (to compare whole copies) read back."""
    import ast

    return None if text is None else ast.literal_eval(text)


__all__ = ["HistoryTruth", "date"]
