"""What the project knows about each resource the API serves, declared once.

Each ``Resource`` names its table (the dlt resource's name, and the ``--resources`` name),
its key, the column its child tables name their parent by, the types of the fields the
API documents (``api-spec.md``; ideas from ``api-contract.md``) on its root table and its
child tables, and how a run reads it. Everything else is derived from ``RESOURCES``: the
declared types (``types.DECLARED``), the parent keys (``PARENT_KEYS``), the deletes, the
status lines, the data checks; ``sql/sources.toml`` repeats the types for the models and a
test holds it to these.

This module imports nothing heavy: the command line's parser and ``status`` read it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from feedback_sync.errors import ConfigError

# the dlt source's name, and so its schema's: the section of its settings and state
SOURCE_NAME = "feedback"
KEY = "idx"
TIMES = {"created_at": "timestamp", "updated_at": "timestamp"}
_PERSON = {"__idx": "text", "__name": "text", "__avatar": "text"}
# a child row's own columns before its fields: its parent's key column, then its position
LIST_INDEX = "_dlt_list_idx"

# how a run reads a resource
Reading = Literal["cursor", "window", "per_idea", "full"]
READINGS: dict[Reading, str] = {
    "cursor": "a cursor list: a normal run reads past the saved cursor",
    "window": "newest first by publication: a normal run re-reads a look-back window",
    "per_idea": "one listing per idea (or per type): complete only on a full run",
    "full": "read whole on every run",
}


@dataclass(frozen=True)
class Resource:
    """One resource of the API as the warehouse holds it."""

    name: str
    parent_key: str
    columns: Mapping[str, str]
    reading: Reading
    # what one row of its table is (the tables reference, docs/reference/tables.md)
    row: str
    # child tables by their field (``<name>__<field>``): that field's declared types
    children: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # a per-idea resource whose state keeps a cursor per idea (not only the ideas seen)
    idea_cursors: bool = False
    # child tables the shaping makes from an API field of another name or form: child ->
    # the field as sent (an object whose keys become rows, or a list of idxs)
    shaped_from: Mapping[str, str] = field(default_factory=dict)
    # of those fields, the objects whose keys become rows (not columns)
    keys_as_rows: frozenset[str] = frozenset()

    def tables(self) -> dict[str, dict[str, str]]:
        """The declared types of every table it lands: its own, then its child tables (with
        the parent's key and the list position first)."""
        declared = {self.name: dict(self.columns)}
        for child, fields in self.children.items():
            declared[f"{self.name}__{child}"] = {
                self.parent_key: "text",
                LIST_INDEX: "bigint",
                **fields,
            }
        return declared


# in the order a run starts them
RESOURCES: tuple[Resource, ...] = (
    Resource(
        "followers",
        "follower_idx",
        {"idx": "text", "name": "text", "email": "text", "avatar": "text", **TIMES},
        "cursor",
        "a follower: a person who gives feedback",
        children={
            "companies": {
                "id": "text",
                "name": "text",
                "monthly_spend": "double",
                "attributes": "json",
            },
            # the object's keys as rows
            "attributes": {"key": "text", "value": "text", "value_type": "text"},
        },
        shaped_from={"attributes": "attributes"},
        keys_as_rows=frozenset({"attributes"}),
    ),
    Resource(
        "announcements",
        "announcement_idx",
        {
            "idx": "text",
            "name": "text",
            "slug": "text",
            "excerpt": "text",
            "content": "text",
            "content_html": "text",
            "is_published": "bool",
            "published_at": "timestamp",
            **TIMES,
            **{f"author{suffix}": kind for suffix, kind in _PERSON.items()},
        },
        "window",
        "an announcement: a changelog post, published, scheduled or a draft",
        children={
            "categories": {"idx": "text", "name": "text", "color": "text"},
            "ideas": {"idx": "text", "name": "text"},
            # reaction_count's keys as rows
            "reactions": {"reaction": "text", "count": "bigint"},
        },
        shaped_from={"reactions": "reaction_count"},
        keys_as_rows=frozenset({"reaction_count"}),
    ),
    Resource(
        "comments",
        "comment_idx",
        {
            "idx": "text",
            "message": "text",
            "content": "json",
            "content_html": "text",
            "content_markdown": "text",
            "is_private": "bool",
            "type": "text",
            **TIMES,
            **{f"follower{suffix}": kind for suffix, kind in _PERSON.items()},
            "idea_id": "bigint",
            "idea_idx": "text",
        },
        "per_idea",
        "a public comment or a private note on an idea",
        children={
            "attachments": {
                "idx": "text",
                "name": "text",
                "url": "text",
                "type": "text",
                **TIMES,
            },
        },
        idea_cursors=True,
    ),
    Resource(
        "topics",
        "topic_idx",
        {"idx": "text", "name": "text", "idea_count": "double", "order": "double", **TIMES},
        "full",
        "a topic ideas are filed under",
    ),
    Resource(
        "statuses",
        "status_idx",
        {"idx": "text", "name": "text", "color": "text", **TIMES},
        "full",
        "a status an idea can have",
    ),
    Resource(
        "integration_links",
        "integration_link_idx",
        {
            "idx": "text",
            "idea_idx": "text",
            "type": "text",
            "link_ref": "text",
            "meta": "json",
            **TIMES,
        },
        "per_idea",
        "a link between an idea and a record in another tool (Jira, Zendesk, ...)",
    ),
    Resource(
        "ideas",
        "idea_idx",
        {
            "idx": "text",
            "id": "bigint",
            "name": "text",
            "status_idx": "text",
            "comment_count": "bigint",
            "note_count": "bigint",
            **TIMES,
        },
        "full",
        "an idea on the feedback board",
        # the idea's topic_idxs, one row each (shaping.idea)
        children={"topics": {"topic_idx": "text"}},
        shaped_from={"topics": "topic_idxs"},
    ),
)

NAMES: tuple[str, ...] = tuple(r.name for r in RESOURCES)
BY_NAME: dict[str, Resource] = {r.name: r for r in RESOURCES}
# the column each resource's child tables name their parent row by
PARENT_KEYS: dict[str, str] = {r.name: r.parent_key for r in RESOURCES}
# resources a full run reads completely though a normal one does not (so only a full run
# can find what was deleted at the source)
COMPLETE_WHEN_FULL: frozenset[str] = frozenset(r.name for r in RESOURCES if r.reading == "per_idea")


def declared_tables() -> dict[str, dict[str, str]]:
    """The declared column types of every table the resources land."""
    return {table: columns for r in RESOURCES for table, columns in r.tables().items()}


def check_resources(names: Sequence[str] | None) -> tuple[str, ...] | None:
    """``--resources``' names, each once, in the order given (None: all of them).

    Raises:
        ConfigError: a name is not a resource's.
    """
    if not names:
        return None
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise ConfigError(
            f"--resources: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(NAMES)}"
        )
    return tuple(dict.fromkeys(names))
