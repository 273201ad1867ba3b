"""Seeded batches of creates, updates and deletes, to exercise incremental syncs.

Every change goes through the same store operations as the API (so counts, ``updated_at``
and cascades behave as they would for a real client), chosen by a ``random.Random`` from
the batch's seed: the same store, seed and plan give the same changes. Resources without
API writes (ideas, integration links, reactions) change here too, as they would when
people use the real service. An idea update moves it to another status, and every other
follower update changes one of its companies' monthly spend: the history tables and their
marts have moves and spend changes to see (``Store.status_moves``, ``spend_changes``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from feedback_sync.sandbox.seed import (
    ATTRIBUTE_KEYS,
    EMOJI,
    IDEA_OBJECTS,
    IDEA_VERBS,
    _attribute_value,
    _paragraphs,
)
from feedback_sync.sandbox.store import AnnouncementInput, FollowerInput, Invalid, Store, Table
from feedback_sync.sandbox.timefmt import DAY

# the order a batch applies in: ideas last, because deleting one cascades to its comments
# and links (the names are those of Store.tables())
RESOURCES = (
    "followers",
    "announcements",
    "comments",
    "topics",
    "statuses",
    "integration_links",
    "ideas",
)
OPERATIONS = ("create", "update", "delete")


class PlanError(ValueError):
    """A mutation plan that names an unknown resource or operation."""


@dataclass(slots=True)
class Changes:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)


def plan_from_request(body: dict[str, Any], store: Store) -> dict[str, dict[str, int]]:
    """Turns ``{"fraction": 0.01}`` or ``{"followers": {"create": 3}, ...}`` into counts.

    A fraction changes that share of each resource: 40% creates, 40% updates, 20% deletes
    (at least one of each where the resource has rows).

    Raises:
        PlanError: unknown keys, operations or non-integer counts.
    """
    plan: dict[str, dict[str, int]] = {}
    fraction = body.get("fraction")
    if fraction is not None:
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not 0 < fraction <= 1
        ):
            raise PlanError(f"fraction must be a number in (0, 1], got {fraction!r}")
        tables = store.tables()
        for resource in RESOURCES:
            n = max(1, round(len(tables[resource]) * fraction))
            plan[resource] = {
                "create": max(1, round(n * 0.4)),
                "update": max(1, round(n * 0.4)),
                "delete": max(1, n - 2 * max(1, round(n * 0.4))),
            }
    for key, value in body.items():
        if key in ("fraction", "seed"):
            continue
        if key not in RESOURCES:
            raise PlanError(f"unknown resource {key!r}; known: {list(RESOURCES)}")
        if not isinstance(value, dict):
            raise PlanError(f"{key} must be an object of operation counts")
        counts = plan.setdefault(key, {})
        for op, count in value.items():
            if op not in OPERATIONS:
                raise PlanError(f"{key}.{op}: unknown operation; known: {list(OPERATIONS)}")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise PlanError(f"{key}.{op} must be an integer >= 0, got {count!r}")
            counts[op] = count
    return plan


def apply_plan(store: Store, plan: dict[str, dict[str, int]], seed: int) -> dict[str, Changes]:
    """Carries out ``plan``: updates and deletes first, then creates, resource by resource."""
    rng = random.Random(f"mutate:{seed}")
    result: dict[str, Changes] = {}
    for resource in RESOURCES:
        counts = plan.get(resource)
        if not counts:
            continue
        ops = _OPS[resource]
        changes = result.setdefault(resource, Changes())
        for op, into in (
            ("update", changes.updated),
            ("delete", changes.deleted),
            ("create", changes.created),
        ):
            for _ in range(counts.get(op, 0)):
                idx = ops[op](store, rng)
                if idx is not None:
                    into.append(idx)
    return result


def _pick(rng: random.Random, table: Table[Any], avoid: str | None = None) -> str | None:
    """A random idx of ``table`` (O(log n): positional access into its sorted keys)."""
    size = len(table.order)
    for _ in range(8):
        if size == 0:
            return None
        idx: str = table.order[rng.randrange(size)][1]
        if idx != avoid:
            return idx
    return None


def _follower_create(store: Store, rng: random.Random) -> str:
    n = store.counters.get("flw", 0) + 1
    attributes = {key: _attribute_value(rng, kind) for key, kind in rng.sample(ATTRIBUTE_KEYS, 3)}
    company_id = rng.choice(list(store.companies)) if store.companies else "acct-new"
    companies = [
        {
            "id": company_id,
            "name": store.companies[company_id].name if company_id in store.companies else "New Co",
        }
    ]
    follower = store.create_follower(
        FollowerInput(
            f"New Follower {n}",
            f"new.follower.{n}.{rng.randint(0, 10**6)}@example.com",
            attributes,
            companies,
        )
    )
    return follower.idx


def _follower_update(store: Store, rng: random.Random) -> str | None:
    """Renames a follower and changes one attribute; for a follower with companies, every
    other time one company's monthly spend too (what the spend history sees)."""
    idx = _pick(rng, store.followers)
    if idx is None:
        return None
    key, kind = rng.choice(ATTRIBUTE_KEYS)
    change = FollowerInput(
        name=f"Renamed {idx[-4:]}", attributes={key: _attribute_value(rng, kind)}
    )
    company_ids = store.followers.by_idx[idx].company_ids
    if company_ids and rng.random() < 0.5:
        company = store.companies[rng.choice(company_ids)]
        spend = round((company.monthly_spend or 100.0) * rng.uniform(0.5, 1.5), 2)
        change.companies = [{"id": company.id, "name": company.name, "monthly_spend": spend}]
    store.update_follower(idx, change)
    return idx


def _follower_delete(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.followers, avoid=store.anonymous_follower_idx)
    if idx is None:
        return None
    store.delete_follower(idx, rng.choice(("delete", "reassign")))
    return idx


def _announcement_input(store: Store, rng: random.Random, name: str) -> AnnouncementInput:
    now = store.clock.now()
    roll = rng.random()
    published = None if roll < 0.15 else (now + 7 * DAY if roll < 0.25 else now - DAY)
    ideas = [idx for idx in (_pick(rng, store.ideas),) if idx]
    return AnnouncementInput(
        name=name,
        author_idx=rng.choice(list(store.users)),
        content=f"## {name}\n\n{_paragraphs(rng, 2)}",
        published_at=published,
        idea_idxs=ideas,
        category_idxs=rng.sample(list(store.categories), k=min(1, len(store.categories))),
    )


def _announcement_create(store: Store, rng: random.Random) -> str:
    name = f"Release {store.counters.get('ann', 0) + 1}: {rng.choice(IDEA_OBJECTS)}"
    return store.create_announcement(_announcement_input(store, rng, name)).idx


def _announcement_update(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.announcements)
    if idx is None:
        return None
    if rng.random() < 0.5:
        store.react(idx, rng.choice(EMOJI))
    else:
        current = store.announcements.by_idx[idx]
        store.update_announcement(idx, _announcement_input(store, rng, current.name + " (updated)"))
    return idx


def _announcement_delete(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.announcements)
    if idx is not None:
        store.delete_announcement(idx)
    return idx


def _comment_create(store: Store, rng: random.Random) -> str | None:
    author, idea = _pick(rng, store.followers), _pick(rng, store.ideas)
    if author is None or idea is None:
        return None
    attachments = [("notes.txt", "https://files.example.com/new/notes.txt", "text/plain")]
    comment = store.create_comment(
        author_idx=author,
        idea_idx=idea,
        message=_paragraphs(rng, 2),
        is_private=rng.random() < 0.25,
        attachments=attachments if rng.random() < 0.2 else (),
    )
    return comment.idx


def _comment_update(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.comments)
    if idx is not None:
        store.update_comment(idx, _paragraphs(rng, 2) + " (edited)")
    return idx


def _comment_delete(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.comments)
    if idx is not None:
        store.delete_comment(idx)
    return idx


def _topic_create(store: Store, rng: random.Random) -> str:
    return store.create_topic(f"Topic {rng.randint(1, 10**6)}").idx


def _topic_update(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.topics)
    if idx is not None:
        store.update_topic(idx, f"Renamed topic {rng.randint(1, 999)}")
    return idx


def _topic_delete(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.topics)
    if idx is not None:
        store.delete_topic(idx)
    return idx


def _status_create(store: Store, rng: random.Random) -> str:
    return store.create_status(f"Stage {rng.randint(1, 10**6)}").idx


def _status_update(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.statuses)
    if idx is not None:
        store.update_status(idx, f"Renamed status {rng.randint(1, 999)}")
    return idx


def _status_delete(store: Store, rng: random.Random) -> str | None:
    used = {idea.status_idx for idea in store.ideas.by_idx.values()}
    unused = [idx for idx in store.statuses.by_idx if idx not in used]
    if not unused:
        return None
    idx = rng.choice(unused)
    store.delete_status(idx)
    return idx


def _link_create(store: Store, rng: random.Random) -> str | None:
    idea = _pick(rng, store.ideas)
    if idea is None:
        return None
    kind = rng.choice(("zendesk", "intercom", "jira"))
    number = rng.randint(1000, 999_999)
    return store.create_link(
        idea, kind, f"{kind[:2].upper()}-{number}", f"https://{kind}.example.com/records/{number}"
    ).idx


def _link_update(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.links)
    if idx is not None:
        store.update_link(idx, {"status": rng.choice(("open", "solved", "closed"))})
    return idx


def _link_delete(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.links)
    if idx is not None:
        store.delete_link(idx)
    return idx


def _idea_create(store: Store, rng: random.Random) -> str:
    status = _pick(rng, store.statuses)
    topics = [t for t in (_pick(rng, store.topics),) if t]
    name = f"{rng.choice(IDEA_VERBS)} {rng.choice(IDEA_OBJECTS)} (new)"
    return store.create_idea(name, status, topics).idx


def _idea_update(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.ideas)
    if idx is not None:
        store.update_idea(
            idx,
            name=f"{store.ideas.by_idx[idx].name} (renamed)",
            # another status than its own, where there is one: a move the history sees
            status_idx=_pick(rng, store.statuses, avoid=store.ideas.by_idx[idx].status_idx),
        )
    return idx


def _idea_delete(store: Store, rng: random.Random) -> str | None:
    idx = _pick(rng, store.ideas)
    if idx is not None:
        store.delete_idea(idx)
    return idx


_OPS: dict[str, dict[str, Callable[[Store, random.Random], str | None]]] = {
    "followers": {
        "create": _follower_create,
        "update": _follower_update,
        "delete": _follower_delete,
    },
    "announcements": {
        "create": _announcement_create,
        "update": _announcement_update,
        "delete": _announcement_delete,
    },
    "comments": {"create": _comment_create, "update": _comment_update, "delete": _comment_delete},
    "topics": {"create": _topic_create, "update": _topic_update, "delete": _topic_delete},
    "statuses": {"create": _status_create, "update": _status_update, "delete": _status_delete},
    "integration_links": {"create": _link_create, "update": _link_update, "delete": _link_delete},
    "ideas": {"create": _idea_create, "update": _idea_update, "delete": _idea_delete},
}

__all__ = ["RESOURCES", "Changes", "Invalid", "PlanError", "apply_plan", "plan_from_request"]
