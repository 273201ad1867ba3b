"""Seeded data: the same seed and scale give the same company, byte for byte.

The shape follows ``api-contract.md``: a few ideas draw most comments (Zipf-like skew),
followers have 0-3 companies and a handful of custom attributes whose keys are awkward as
column names, announcements include drafts and scheduled posts and emoji reactions,
comments include private notes and attachments, and names and text carry Unicode.

Every resource draws from its own ``random.Random`` stream, built in bulk and loaded into
the store's indexes sorted, so ``large`` builds in well under a minute.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

from feedback_sync.sandbox.records import (
    Announcement,
    Attachment,
    Category,
    Comment,
    Company,
    Follower,
    Idea,
    JsonScalar,
    Link,
    Status,
    Topic,
    User,
)
from feedback_sync.sandbox.scales import SCALES, Scale
from feedback_sync.sandbox.store import STATUS_PALETTE, Store, make_idx
from feedback_sync.sandbox.timefmt import DAY, SECOND, Clock, from_datetime

# the seeded company's "now": data lies in the three years before it, scheduled posts after
REFERENCE_NOW = from_datetime(datetime(2026, 11, 1, 9, 0, 0, tzinfo=UTC))
HISTORY = 3 * 365 * DAY


FIRST_NAMES = (
    "Ada",
    "Zoë",
    "José",
    "Łukasz",
    "Søren",
    "Mária",
    "Ngọc",
    "Aiko",
    "Олена",
    "Björn",
    "Chloé",
    "Mehmet",
    "Priya",
    "Kwame",
    "Siobhán",
    "François",
    "Dmitri",
    "Inés",
    "Yūki",
    "Ana-María",
    "Sam",
    "Fatima",
    "Lars",
    "Chen",
    "Amara",
    "Noah",
    "Émile",
    "Greta",
)
LAST_NAMES = (
    "Lovelace",
    "Müller",
    "García",
    "Kowalski",
    "Ødegaard",
    "Nguyễn",
    "Tanaka",
    "Шевченко",
    "O'Brien",
    "Dubois",
    "Yılmaz",
    "Patel",
    "Mensah",
    "Ní Bhriain",
    "Smith",
    "van der Berg",
    "Ivanov",
    "Núñez",
    "Sato",
    "Li",
    "Okafor",
    "Lindqvist",
    "Chen",
    "Rossi",
)
EMAIL_DOMAINS = ("example.com", "acme.test", "mail.example.org", "firma.example.de")
# custom attribute keys chosen to be awkward as column names
ATTRIBUTE_KEYS: tuple[tuple[str, str], ...] = (
    ("plan", "plan"),
    ("Signup Source", "source"),
    ("NPS score", "int"),
    ("beta-tester", "bool"),
    ("2fa_enabled", "bool"),
    ("select", "word"),
    ("Ünïcode Schlüssel", "word"),
    ("a.b.c", "word"),
    ("$lifetime_value", "money"),
    ("UPPER_case", "word"),
    ("__dunder__", "int"),
    ("with  two  spaces", "word"),
    ("Last Login (UTC)", "date"),
    ("role", "role"),
)
COMPANY_WORDS = (
    "Nordwind",
    "Café Étoile",
    "Blue Harbor",
    "Zürich Analytics",
    "Kōfuku",
    "Acme",
    "Initech",
    "Umbrella",
    "Globex",
    "Soylent",
    "Hooli",
    "Vandelay",
    "Северсталь",
    "Pied Piper",
    "Wayne",
    "Stark",
    "Tyrell",
    "Cyberdyne",
    "Aperture",
    "Black Mesa",
)
COMPANY_SUFFIXES = ("GmbH", "Inc.", "Ltd", "SA", "AB", "株式会社", "LLC", "& Co.", "Oy", "")
PLANS = ("free", "starter", "growth", "business", "enterprise")
INDUSTRIES = ("SaaS", "Retail", "Fintech", "Health", "Education", "Media", "Logistics")
ROLES = ("admin", "member", "viewer", "owner")
SOURCES = ("organic", "ads", "referral", "partner", "event")
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "über", "naïve", "日本")
STATUS_NAMES = (
    "Under review",
    "Planned",
    "In progress",
    "Shipped",
    "Closed",
    "Won't do",
    "Needs info",
)
TOPIC_NAMES = (
    "Integrations",
    "Reporting",
    "Mobile",
    "API",
    "Billing",
    "UX",
    "Performance",
    "Security",
    "Notifications",
    "Search",
    "Accessibility",
    "Localization",
    "Onboarding",
    "Exports",
    "Permissions",
    "Dashboards",
    "Automation",
    "Admin",
    "Email",
    "Calendar",
)
CATEGORY_NAMES = (
    ("New", "#10b981"),
    ("Improved", "#3b82f6"),
    ("Fixed", "#ef4444"),
    ("Announcement", "#f59e0b"),
    ("Beta", "#8b5cf6"),
    ("Security", "#111827"),
    ("Deprecated", "#6b7280"),
    ("Mobile", "#ec4899"),
    ("API", "#14b8a6"),
    ("Integrations", "#0ea5e9"),
    ("Design", "#d946ef"),
    ("Performance", "#84cc16"),
)
IDEA_VERBS = (
    "Export",
    "Import",
    "Filter",
    "Schedule",
    "Sync",
    "Bulk edit",
    "Share",
    "Archive",
    "Search",
    "Tag",
    "Merge",
    "Group",
    "Sort",
    "Comment on",
    "Embed",
    "Translate",
)
IDEA_OBJECTS = (
    "ideas to CSV",
    "roadmap items",
    "changelog posts",
    "followers",
    "status updates",
    "reports",
    "dashboards",
    "votes",
    "comments",
    "attachments",
    "Jira issues",
    "Slack threads",
    "Zendesk tickets",
    "release notes",
    "the portal in 日本語",
    "custom fields",
    "SSO users",
    "webhooks",
    "dark mode themes",
    "email digests",
)
SENTENCES = (
    "We need this for our weekly reporting.",
    "This would save our team hours every week.",
    "Any update on this? 🙏",
    "Our customers ask for this constantly.",
    "+1, blocking our rollout to the EU team.",
    "Would love to see this on mobile too 📱",
    "Ça serait très utile pour nous.",
    "Das wäre großartig für unser Team.",
    "これは本当に必要な機能です。",
    "See https://docs.example.com/guide for how we work around it today.",
    "We currently use `export_all()` in a script as a workaround.",
    "Is there an ETA? Our renewal is next quarter.",
    "Thanks for shipping the first part of this! 🎉",
    "It should respect the user's time zone (UTC+05:30 here).",
    "Related: the API returns 20 rows by default, we'd need 100.",
    "Marking this as high priority for our CSM 🚀",
    "Not sure this fits everyone, but for us it is essential.",
    "Can you share a timeline with the <b>customer</b> team?",
    'Quotes "inside" and backslashes \\ should survive.',
    "Emoji with modifiers 👍🏽 and flags 🇳🇴 too.",
)
EMOJI = ("👍", "🎉", "❤️", "🚀", "👀", "😄", "🙌", "👍🏽")
LINK_TYPES: tuple[tuple[str, float], ...] = (
    ("zendesk", 0.35),
    ("intercom", 0.25),
    ("hubspot", 0.15),
    ("jira", 0.12),
    ("slack", 0.08),
    ("github", 0.05),
)
ATTACHMENT_KINDS = (
    ("screenshot.png", "image/png"),
    ("export.csv", "text/csv"),
    ("spec.pdf", "application/pdf"),
    ("diagram.jpg", "image/jpeg"),
)


def _zipf_cum_weights(n: int, s: float) -> list[float]:
    return list(accumulate(1.0 / (rank + 1) ** s for rank in range(n)))


def _stamp_between(rng: random.Random, lo: int, hi: int) -> int:
    """A whole-second moment in [lo, hi]."""
    if hi <= lo:
        return lo - lo % SECOND
    moment = lo + int(rng.random() * (hi - lo))
    return moment - moment % SECOND


def _attribute_value(rng: random.Random, kind: str) -> JsonScalar:
    if kind == "plan":
        return rng.choice(PLANS)
    if kind == "source":
        return rng.choice(SOURCES)
    if kind == "int":
        return rng.randint(0, 10)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "money":
        return round(rng.lognormvariate(6, 1.2), 2)
    if kind == "date":
        return f"2026-{rng.randint(1, 10):02d}-{rng.randint(1, 28):02d}"
    if kind == "role":
        return rng.choice(ROLES)
    return rng.choice(WORDS)


def _paragraphs(rng: random.Random, max_paragraphs: int) -> str:
    blocks = [
        " ".join(rng.choices(SENTENCES, k=rng.randint(1, 3)))
        for _ in range(rng.randint(1, max_paragraphs))
    ]
    return "\n\n".join(blocks)


def _announcement_markdown(rng: random.Random, title: str, idea_names: list[str]) -> str:
    parts = [f"## {title}", _paragraphs(rng, 2)]
    if idea_names:
        parts.append("\n".join(f"- Shipped: **{name}**" for name in idea_names))
    if rng.random() < 0.3:
        parts.append("```python\nclient.ideas.list(limit=100)\n```")
    if rng.random() < 0.5:
        parts.append("Read more in [the docs](https://docs.example.com/changelog).")
    return "\n\n".join(parts)


def build_store(scale: str | Scale = "tiny", seed: int = 1, clock: Clock | None = None) -> Store:
    """Builds a store filled with the seeded company at ``scale``.

    Raises:
        KeyError: an unknown scale name.
    """
    size = SCALES[scale] if isinstance(scale, str) else scale
    store = Store(clock or Clock(REFERENCE_NOW))
    now = REFERENCE_NOW
    start = now - HISTORY

    def rng_for(name: str) -> random.Random:
        return random.Random(f"{seed}:{name}")

    _seed_catalog(store, size, rng_for("catalog"), start)
    _seed_ideas(store, size, rng_for("ideas"), start, now)
    _seed_followers(store, size, rng_for("followers"), start, now)
    _seed_comments(store, size, rng_for("comments"), now)
    _seed_announcements(store, size, rng_for("announcements"), start, now)
    _seed_links(store, size, rng_for("links"), now)
    return store


def _seed_catalog(store: Store, size: Scale, rng: random.Random, start: int) -> None:
    statuses = []
    for i in range(size.statuses):
        moment = start + i * 60 * SECOND
        name = STATUS_NAMES[i] if i < len(STATUS_NAMES) else f"Stage {i + 1}"
        statuses.append(Status(make_idx("sts", i + 1), name, STATUS_PALETTE[i % 8], moment, moment))
    store.statuses.load_sorted(statuses)
    store.counters["sts"] = size.statuses

    topics = []
    for i in range(size.topics):
        moment = start + i * 120 * SECOND
        name = TOPIC_NAMES[i] if i < len(TOPIC_NAMES) else f"{rng.choice(TOPIC_NAMES)} {i + 1}"
        topics.append(Topic(make_idx("top", i + 1), name, i + 1, moment, moment))
        store.topic_idea_count[topics[-1].idx] = 0
    store.topics.load_sorted(topics)
    store.counters["top"] = size.topics

    for i in range(size.users):
        idx = make_idx("usr", i + 1)
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        store.users[idx] = User(idx, name, f"https://avatars.example.com/{idx}.png")
    store.counters["usr"] = size.users
    for i in range(size.categories):
        idx = make_idx("cat", i + 1)
        name, color = CATEGORY_NAMES[i % len(CATEGORY_NAMES)]
        store.categories[idx] = Category(idx, name, color)
    store.counters["cat"] = size.categories


def _seed_ideas(store: Store, size: Scale, rng: random.Random, start: int, now: int) -> None:
    status_idxs = [key[1] for key in store.statuses.order]
    status_weights = [6, 4, 3, 5, 2, 1, 1][: len(status_idxs)] + [1] * max(0, len(status_idxs) - 7)
    topic_idxs = [key[1] for key in store.topics.order]
    moments = sorted(_stamp_between(rng, start, now - DAY) for _ in range(size.ideas))
    ideas = []
    for i, moment in enumerate(moments):
        name = f"{rng.choice(IDEA_VERBS)} {rng.choice(IDEA_OBJECTS)}"
        if rng.random() < 0.2:
            name += f" ({rng.choice(WORDS)})"
        status = rng.choices(status_idxs, weights=status_weights)[0] if status_idxs else None
        idea = Idea(
            idx=make_idx("ide", i + 1),
            id=1001 + i,
            name=name,
            status_idx=status,
            topic_idxs=[],
            comment_count=0,
            note_count=0,
            created=moment,
            updated=moment,
        )
        picked = rng.sample(topic_idxs, k=min(len(topic_idxs), rng.choice((0, 1, 1, 2, 3))))
        store.set_idea_topics(idea, picked)
        ideas.append(idea)
    store.ideas.load_sorted(ideas)
    store.counters["ide"] = size.ideas


def _seed_followers(store: Store, size: Scale, rng: random.Random, start: int, now: int) -> None:
    for i in range(size.companies):
        company_id = f"acct-{i + 1:06d}"
        name = f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_SUFFIXES)}".strip()
        attributes: dict[str, JsonScalar] = {
            "plan": rng.choice(PLANS),
            "industry": rng.choice(INDUSTRIES),
            "seats": rng.randint(1, 500),
        }
        if rng.random() < 0.3:
            attributes["Renewal Date"] = f"2027-{rng.randint(1, 12):02d}-01"
        spend = round(rng.lognormvariate(7, 1.3), 2) if rng.random() < 0.9 else 0.0
        store.companies[company_id] = Company(company_id, name, spend, attributes)
    company_ids = list(store.companies)

    moments = sorted(_stamp_between(rng, start, now - DAY) for _ in range(size.followers))
    followers = []
    for i, moment in enumerate(moments):
        idx = make_idx("flw", i + 1)
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        local = "".join(ch for ch in f"{first}.{last}".lower() if ch.isascii() and ch.isalnum())
        email = f"{local or 'user'}{i + 1}@{rng.choice(EMAIL_DOMAINS)}"
        if rng.random() < 0.1:
            email = email.capitalize()
        attributes = {
            key: _attribute_value(rng, kind)
            for key, kind in rng.sample(ATTRIBUTE_KEYS, k=rng.randint(0, 6))
        }
        n_companies = rng.choices((0, 1, 2, 3), weights=(35, 45, 15, 5))[0]
        companies = rng.sample(company_ids, k=min(n_companies, len(company_ids)))
        updated = moment if rng.random() < 0.7 else _stamp_between(rng, moment, now - DAY)
        followers.append(
            Follower(
                idx=idx,
                name=f"{first} {last}",
                email=email,
                avatar=f"https://avatars.example.com/{idx}.png",
                attributes=attributes,
                company_ids=companies,
                created=moment,
                updated=updated,
            )
        )
    store.load_followers(followers)


def _seed_comments(store: Store, size: Scale, rng: random.Random, now: int) -> None:
    ideas = list(store.ideas)
    followers = list(store.followers)
    if not ideas or not followers:
        return
    idea_order = list(range(len(ideas)))
    rng.shuffle(idea_order)
    follower_order = list(range(len(followers)))
    rng.shuffle(follower_order)
    idea_picks = rng.choices(
        idea_order, cum_weights=_zipf_cum_weights(len(ideas), 1.05), k=size.comments
    )
    follower_picks = rng.choices(
        follower_order, cum_weights=_zipf_cum_weights(len(followers), 0.8), k=size.comments
    )
    drafts: list[tuple[int, int, int, bool]] = []
    for idea_i, follower_i in zip(idea_picks, follower_picks, strict=True):
        lo = max(ideas[idea_i].created, followers[follower_i].created)
        drafts.append(
            (_stamp_between(rng, lo, now - 60 * SECOND), idea_i, follower_i, rng.random() < 0.25)
        )
    drafts.sort()
    comments = []
    attachment_n = 0
    for n, (created, idea_i, follower_i, is_private) in enumerate(drafts, start=1):
        idx = make_idx("cmt", n)
        attachments = []
        if rng.random() < 0.05:
            for _ in range(rng.randint(1, 2)):
                attachment_n += 1
                att_idx = make_idx("att", attachment_n)
                name, media_type = rng.choice(ATTACHMENT_KINDS)
                url = f"https://files.example.com/{att_idx}/{name}"
                attachments.append(Attachment(att_idx, name, url, media_type, created, created))
        updated = created if rng.random() < 0.9 else _stamp_between(rng, created, now)
        idea, follower = ideas[idea_i], followers[follower_i]
        comment = Comment(
            idx=idx,
            message=_paragraphs(rng, 3),
            is_private=is_private,
            follower_idx=follower.idx,
            idea_idx=idea.idx,
            attachments=attachments,
            created=created,
            updated=updated,
        )
        comments.append(comment)
    store.load_comments(comments, attachment_n)


def _seed_announcements(
    store: Store, size: Scale, rng: random.Random, start: int, now: int
) -> None:
    ideas = list(store.ideas)
    idea_created = [idea.created for idea in ideas]
    user_idxs = list(store.users)
    category_idxs = list(store.categories)
    moments = sorted(_stamp_between(rng, start, now - DAY) for _ in range(size.announcements))
    announcements = []
    for i, created in enumerate(moments):
        # every scale holds drafts and scheduled posts: the newest two are one of each
        roll = rng.random()
        if i == len(moments) - 1:
            roll = 0.0
        elif i == len(moments) - 2:
            roll = 0.1
        published: int | None
        if roll < 0.08:
            published = None  # draft
        elif roll < 0.12:
            published = _stamp_between(rng, now + DAY, now + 60 * DAY)  # scheduled
        else:
            published = _stamp_between(rng, created, min(now - 60 * SECOND, created + 3 * DAY))
        available = bisect_right(idea_created, created)
        shipped = (
            [
                ideas[j].idx
                for j in rng.sample(range(available), k=min(available, rng.choice((0, 1, 1, 2, 3))))
            ]
            if available
            else []
        )
        title = f"{rng.choice(('New', 'Improved', 'Faster', 'Fixed'))}: {rng.choice(IDEA_OBJECTS)}"
        reactions: dict[str, int] = {}
        if published is not None and published <= now and rng.random() < 0.7:
            for emoji in rng.sample(EMOJI, k=rng.randint(1, 4)):
                reactions[emoji] = int(rng.paretovariate(1.2))
        names = [store.ideas.by_idx[idx].name for idx in shipped]
        announcement = Announcement(
            idx=make_idx("ann", i + 1),
            name=title,
            slug=store.unique_slug(title),
            content=_announcement_markdown(rng, title, names),
            published_at=published,
            author_idx=rng.choice(user_idxs),
            category_idxs=rng.sample(
                category_idxs, k=min(len(category_idxs), rng.choice((0, 1, 1, 2)))
            ),
            idea_idxs=shipped,
            reactions=reactions,
            created=created,
            updated=created if published is None or published > now else max(created, published),
        )
        announcements.append(announcement)
    store.load_announcements(announcements)


def _seed_links(store: Store, size: Scale, rng: random.Random, now: int) -> None:
    ideas = list(store.ideas)
    if not ideas:
        return
    order = list(range(len(ideas)))
    rng.shuffle(order)
    picks = rng.choices(order, cum_weights=_zipf_cum_weights(len(ideas), 0.9), k=size.links)
    types = rng.choices(
        [t for t, _ in LINK_TYPES], weights=[w for _, w in LINK_TYPES], k=size.links
    )
    drafts = sorted(
        (ideas[i].created + int(rng.random() * (now - ideas[i].created)), i, link_type)
        for i, link_type in zip(picks, types, strict=True)
    )
    links = []
    for n, (created, idea_i, link_type) in enumerate(drafts, start=1):
        number = rng.randint(1000, 999_999)
        ref = f"{link_type[:2].upper()}-{number}"
        meta: dict[str, Any] = {"url": f"https://{link_type}.example.com/records/{number}"}
        if rng.random() < 0.5:
            meta["status"] = rng.choice(("open", "pending", "solved", "closed"))
        updated = created if rng.random() < 0.8 else created + int(rng.random() * (now - created))
        links.append(
            Link(
                idx=make_idx("lnk", n),
                idea_idx=ideas[idea_i].idx,
                type=link_type,
                link_ref=ref,
                meta=meta,
                created=created,
                updated=updated,
            )
        )
    store.load_links(links)
