"""Each mart computed in plain Python from the sandbox's ground truth (``/_sandbox/dump``).

Written from the marts' documented meaning, not from their SQL: the tests compare the two.
Rows are dicts keyed by the mart's key; money is rounded to cents, times are UTC.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

Row = dict[str, Any]
_NO_POSTS = {"posts_published": 0, "scheduled_posts": 0, "drafts": 0, "reactions_total": 0}


def ts(value: str | None) -> datetime | None:
    """An API timestamp, either spelling, as an aware UTC datetime."""
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def rounded(value: float, places: int) -> float:
    """``value`` to ``places`` decimals, a half away from zero, as SQL's round does
    (Python's ``round`` takes a half to the even digit: 0.03125 -> 0.0312, not 0.0313)."""
    step = Decimal(1).scaleb(-places)
    return float(Decimal(repr(value)).quantize(step, rounding=ROUND_HALF_UP))


def cents(value: float | None) -> float | None:
    """Money as the marts round it: to cents."""
    return None if value is None else rounded(value, 2)


class Truth:
    """The marts of one dump."""

    def __init__(self, dump: dict[str, Any], history: Any = None) -> None:
        """``history``: a ``history_truth.HistoryTruth`` for the history marts."""
        self.dump = dump
        self.history = history
        self.followers = {f["idx"]: f for f in dump["followers"]}
        self.companies: dict[str, tuple[str, float | None]] = {}
        self.members: dict[str, set[str]] = defaultdict(set)
        self.companies_of: dict[str, set[str]] = defaultdict(set)
        # a company's name and spend: the copy of its most recently updated follower
        newest_first = sorted(
            dump["followers"], key=lambda f: (ts(f["updated_at"]), f["idx"]), reverse=True
        )
        for follower in newest_first:
            for company in follower.get("companies") or []:
                if company["id"] not in self.companies:
                    self.companies[company["id"]] = (company["name"], company.get("monthly_spend"))
                self.members[company["id"]].add(follower["idx"])
                self.companies_of[follower["idx"]].add(company["id"])
        self.comments_by_idea: dict[str, list[Row]] = defaultdict(list)
        self.comments_by_follower: dict[str, list[Row]] = defaultdict(list)
        for comment in dump["comments"]:
            self.comments_by_idea[comment["idea_idx"]].append(comment)
            self.comments_by_follower[comment["follower"]["idx"]].append(comment)

    def idea_status_history(self) -> dict[Any, Row]:
        return self.history.idea_status_history()  # type: ignore[no-any-return]

    def status_flow(self) -> dict[Any, Row]:
        return self.history.status_flow()  # type: ignore[no-any-return]

    def company_spend_by_month(self) -> dict[Any, Row]:
        return self.history.company_spend_by_month()  # type: ignore[no-any-return]

    def spend(self, company_id: str) -> float:
        return self.companies[company_id][1] or 0.0

    @staticmethod
    def _activity(comments: list[Row]) -> Row:
        times = [ts(c["created_at"]) for c in comments]
        return {
            "public_comments": sum(1 for c in comments if not c["is_private"]),
            "private_notes": sum(1 for c in comments if c["is_private"]),
            "ideas_engaged": len({c["idea_idx"] for c in comments}),
            "first_activity_at": min(times) if times else None,
            "last_activity_at": max(times) if times else None,
        }

    def idea_follower_activity(self) -> dict[Any, Row]:
        pairs: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for comment in self.dump["comments"]:
            pairs[(comment["idea_idx"], comment["follower"]["idx"])].append(comment)
        out = {}
        for key, comments in pairs.items():
            activity = self._activity(comments)
            del activity["ideas_engaged"]
            out[key] = activity
        return out

    def company_feedback(self) -> dict[Any, Row]:
        out = {}
        for company_id, (name, spend) in self.companies.items():
            written = [c for f in self.members[company_id] for c in self.comments_by_follower[f]]
            out[company_id] = {
                "company_name": name,
                "monthly_spend": spend,
                "followers": len(self.members[company_id]),
                **self._activity(written),
            }
        return out

    def idea_engagement(self) -> dict[Any, Row]:
        statuses = {s["idx"]: s["name"] for s in self.dump["statuses"]}
        links: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for link in self.dump["integration_links"]:
            links[link["idea_idx"]][link["type"]] += 1
        shipped: dict[str, list[tuple[datetime, str]]] = defaultdict(list)
        for post in self.dump["announcements"]:
            if post["is_published"]:
                for idea in {i["idx"] for i in post["ideas"]}:
                    shipped[idea].append((ts(post["published_at"]), post["idx"]))
        out = {}
        for idea in self.dump["ideas"]:
            idx = idea["idx"]
            comments = self.comments_by_idea[idx]
            activity = self._activity(comments)
            companies = {
                company for c in comments for company in self.companies_of[c["follower"]["idx"]]
            }
            posts = sorted(shipped[idx])
            out[idx] = {
                "idea_name": idea["name"],
                "status_idx": idea["status_idx"],
                "status_name": statuses.get(idea["status_idx"]),
                "public_comments": activity["public_comments"],
                "private_notes": activity["private_notes"],
                "distinct_commenters": len({c["follower"]["idx"] for c in comments}),
                "first_activity_at": activity["first_activity_at"],
                "last_activity_at": activity["last_activity_at"],
                "linked_records": sum(links[idx].values()),
                "links_by_type": dict(links[idx]),
                "shipped_in_announcements": len(posts),
                "shipped_announcement_idxs": [p[1] for p in posts],
                "first_shipped_at": posts[0][0] if posts else None,
                "commenter_companies": len(companies),
                "commenter_monthly_spend": cents(sum(self.spend(c) for c in companies)),
            }
        return out

    def announcement_calendar(self) -> dict[Any, Row]:
        cells: dict[tuple[date, str], Row] = {}
        for post in self.dump["announcements"]:
            month, state = self._post_month(post)
            categories = post["categories"] or [{"idx": "(none)", "name": "(uncategorized)"}]
            for category in {c["idx"]: c for c in categories}.values():
                cell = cells.setdefault(
                    (month, category["idx"]),
                    {
                        "category_name": category["name"],
                        "posts_published": 0,
                        "scheduled_posts": 0,
                        "drafts": 0,
                        "reactions_by_emoji": defaultdict(int),
                        "ideas": set(),
                    },
                )
                cell[state] += 1
                if state == "posts_published":
                    for emoji, count in (post.get("reaction_count") or {}).items():
                        cell["reactions_by_emoji"][emoji] += count
                    cell["ideas"] |= {i["idx"] for i in post["ideas"]}
        out = {}
        for key, cell in cells.items():
            reactions = dict(cell.pop("reactions_by_emoji"))
            ideas = cell.pop("ideas")
            out[key] = {
                **cell,
                "reactions_total": sum(reactions.values()),
                "reactions_by_emoji": reactions,
                "ideas_announced": len(ideas),
            }
        return out

    def _post_month(self, post: Row) -> tuple[date, str]:
        """The month a post counts in, and its state."""
        if post["is_published"]:
            state = "posts_published"
        elif post["published_at"] is not None:
            state = "scheduled_posts"
        else:
            state = "drafts"
        when = ts(post["published_at"] or post["created_at"])
        assert when is not None
        return date(when.year, when.month, 1), state

    def announcement_months(self) -> dict[Any, Row]:
        cells: dict[date, Row] = {}
        ideas: dict[date, set[str]] = defaultdict(set)
        for post in self.dump["announcements"]:
            month, state = self._post_month(post)
            cell = cells.setdefault(month, dict(_NO_POSTS))
            cell[state] += 1
            if state == "posts_published":
                cell["reactions_total"] += sum((post.get("reaction_count") or {}).values())
                ideas[month] |= {i["idx"] for i in post["ideas"]}
        out = {}
        for month in every_month(min(cells), max(cells)):
            cell = cells.get(
                month,
                {"posts_published": 0, "scheduled_posts": 0, "drafts": 0, "reactions_total": 0},
            )
            out[month] = {**cell, "ideas_announced": len(ideas[month])}
        return out

    def idea_company_activity(self) -> dict[Any, Row]:
        ideas = {i["idx"] for i in self.dump["ideas"]}
        pairs: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for comment in self.dump["comments"]:
            if comment["idea_idx"] not in ideas:
                continue
            for company in self.companies_of[comment["follower"]["idx"]]:
                pairs[(comment["idea_idx"], company)].append(comment)
        out = {}
        for key, comments in pairs.items():
            activity = self._activity(comments)
            del activity["ideas_engaged"]
            out[key] = {"commenters": len({c["follower"]["idx"] for c in comments}), **activity}
        return out

    def follower_activity(self) -> dict[Any, Row]:
        out = {}
        for idx, follower in self.followers.items():
            companies = self.companies_of[idx]
            activity = self._activity(self.comments_by_follower[idx])
            out[idx] = {
                "follower_name": follower["name"],
                "email": follower["email"],
                "created_at": ts(follower["created_at"]),
                "companies": len(companies),
                "company_monthly_spend": cents(sum(self.spend(c) for c in companies)),
                **activity,
            }
        return out

    def total_spend(self) -> float:
        """Every company's monthly spend: the board's total."""
        return sum(self.spend(c) for c in self.companies)

    def _companies_behind(self, ideas: set[str]) -> Row:
        """The distinct companies whose followers wrote on ``ideas``, each counted once."""
        loaded = {i["idx"] for i in self.dump["ideas"]}
        companies = {
            company
            for idea in ideas & loaded
            for c in self.comments_by_idea[idea]
            for company in self.companies_of[c["follower"]["idx"]]
        }
        spend = sum(self.spend(c) for c in companies)
        total = self.total_spend()
        share: float | None = rounded(spend / total, 4) if total else 0.0
        if any(self.spend(c) < 0 for c in self.companies):
            share = None  # a share of a total with credits in it: not told
        if not companies:
            share = 0.0
        return {
            "commenter_companies": len(companies),
            "commenter_monthly_spend": cents(spend),
            "share_of_spend": share,
        }

    def _groups(self) -> dict[tuple[str, str], set[str]]:
        """The ideas of each status, topic and integration type, by (kind, key)."""
        statuses = {s["idx"] for s in self.dump["statuses"]}
        groups: dict[tuple[str, str], set[str]] = defaultdict(set)
        for idea in self.dump["ideas"]:
            if idea["status_idx"] in statuses:
                groups[("status", idea["status_idx"])].add(idea["idx"])
            for topic in idea["topic_idxs"]:
                groups[("topic", topic)].add(idea["idx"])
        for link in self.dump["integration_links"]:
            groups[("integration_type", link["type"])].add(link["idea_idx"])
        return groups

    def demand_by_group(self) -> dict[Any, Row]:
        out = {}
        for key, ideas in self._groups().items():
            behind = self._companies_behind(ideas)
            if behind["commenter_companies"]:
                out[key] = behind
        return out

    def _rollup(self, ideas: list[str], engagement: dict[Any, Row]) -> Row:
        rows = [engagement[i] for i in ideas]
        return {
            "ideas": len(rows),
            "public_comments": sum(r["public_comments"] for r in rows),
            "private_notes": sum(r["private_notes"] for r in rows),
            "announced_ideas": sum(1 for r in rows if r["shipped_in_announcements"] > 0),
            **self._companies_behind(set(ideas)),
        }

    def topic_summary(self) -> dict[Any, Row]:
        engagement = self.idea_engagement()
        out = {}
        for topic in self.dump["topics"]:
            ideas = [i["idx"] for i in self.dump["ideas"] if topic["idx"] in i["topic_idxs"]]
            out[topic["idx"]] = {
                "topic_name": topic["name"],
                "sort_order": topic["order"],
                **self._rollup(ideas, engagement),
                "linked_records": sum(engagement[i]["linked_records"] for i in ideas),
            }
        return out

    def status_summary(self) -> dict[Any, Row]:
        engagement = self.idea_engagement()
        ordered = sorted(self.dump["statuses"], key=lambda s: (ts(s["created_at"]), s["idx"]))
        out = {}
        for position, status in enumerate(ordered, start=1):
            ideas = [i["idx"] for i in self.dump["ideas"] if i["status_idx"] == status["idx"]]
            out[status["idx"]] = {
                "status_name": status["name"],
                "color": status["color"],
                "funnel_position": position,
                **self._rollup(ideas, engagement),
            }
        return out

    def integration_coverage(self) -> dict[Any, Row]:
        all_ideas = {i["idx"] for i in self.dump["ideas"]}
        by_type: dict[str, list[Row]] = defaultdict(list)
        for link in self.dump["integration_links"]:
            by_type[link["type"]].append(link)
        out = {}
        for kind, links in by_type.items():
            ideas = {link["idea_idx"] for link in links} & all_ideas
            times = [ts(link["created_at"]) for link in links]
            out[kind] = {
                "links": len(links),
                "ideas_linked": len(ideas),
                "ideas_total": len(all_ideas),
                "share_of_ideas": rounded(len(ideas) / len(all_ideas), 4) if all_ideas else 0.0,
                **self._companies_behind(ideas),
                "first_linked_at": min(times),
                "last_linked_at": max(times),
            }
        return out

    def activity_by_month(self) -> dict[Any, Row]:
        def month(value: str) -> date:
            when = ts(value)
            assert when is not None
            return date(when.year, when.month, 1)

        cells: dict[date, Row] = defaultdict(
            lambda: {
                "public_comments": 0,
                "private_notes": 0,
                "commenters": set(),
                "ideas": set(),
                "new_ideas": 0,
                "new_followers": 0,
            }
        )
        for comment in self.dump["comments"]:
            cell = cells[month(comment["created_at"])]
            cell["private_notes" if comment["is_private"] else "public_comments"] += 1
            cell["commenters"].add(comment["follower"]["idx"])
            cell["ideas"].add(comment["idea_idx"])
        for idea in self.dump["ideas"]:
            cells[month(idea["created_at"])]["new_ideas"] += 1
        for follower in self.dump["followers"]:
            cells[month(follower["created_at"])]["new_followers"] += 1
        out = {}
        for current in every_month(min(cells), max(cells)):
            cell = cells[current]
            out[current] = {
                "public_comments": cell["public_comments"],
                "private_notes": cell["private_notes"],
                "active_commenters": len(cell["commenters"]),
                "ideas_commented": len(cell["ideas"]),
                "new_ideas": cell["new_ideas"],
                "new_followers": cell["new_followers"],
            }
        return out


def every_month(first: date, last: date) -> list[date]:
    """Every first of a month from ``first`` to ``last``."""
    out, current = [], first
    while current <= last:
        out.append(current)
        year, month = divmod(current.month, 12)
        current = date(current.year + year, month + 1, 1)
    return out
