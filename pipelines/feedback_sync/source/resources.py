"""What the project knows about each resource the API serves, declared once.

Each ``Resource`` names its table (the dlt resource's name, and the ``--resources`` name),
where the API lists it and how it pages, its key, the column its child tables name their
parent by, the types of the fields the API documents (``api-spec.md``; ideas from
``api-contract.md``) on its root table and its child tables, how a run reads it and finds
what changed, and which history it keeps. Everything else is derived from ``RESOURCES``:
the dlt resources (``source.py`` builds one per declaration, by its ``reading``), the
declared types (``types.DECLARED``), the parent keys (``PARENT_KEYS``), the deletes, the
status lines, the data checks and the tables reference; ``sql/sources.toml`` repeats the
types for the models and a test holds it to these. ``registered`` adds one for a block (a
test's toy resource).

This module imports nothing heavy: the command line's parser and ``status`` read it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
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

# how a run reads a resource (``source.py`` has one reader for each)
Reading = Literal["cursor", "window", "per_idea", "full", "idea_list"]
READINGS: dict[Reading, str] = {
    "cursor": "a cursor list: a normal run reads past the saved cursor",
    "window": "newest first by publication: a normal run re-reads a look-back window",
    "per_idea": "one listing per idea (or per type): complete only on a full run",
    "full": "read whole on every run",
    "idea_list": "read whole on every run; its pages also drive the per-idea reads",
}
# how a list pages (``api/paging.py``: ``PAGINATORS``)
Paging = Literal["cursor", "link_cursor", "page_number"]


@dataclass(frozen=True, kw_only=True)
class Resource:
    """One resource of the API as the warehouse holds it."""

    name: str
    # where the API lists it (``/v1/<path>``) and how that list pages
    path: str
    paging: Paging
    parent_key: str
    columns: Mapping[str, str]
    reading: Reading
    # what one row of its table is (the tables reference, docs/reference/tables.md)
    row: str
    # query parameters every read of its list sends
    params: Mapping[str, str] = field(default_factory=dict)
    # a normal run loads only its rows that changed, and names the keys gone
    # (``changes.py``; read whole, ``full`` and ``idea_list``)
    compares: bool = False
    # the history entities its tables keep versions of (``warehouse/history.py``)
    history: tuple[str, ...] = ()
    # a per-idea resource the API also lists by ``?type=`` (integration links)
    by_type: bool = False
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
RESOURCES: list[Resource] = [
    Resource(
        name="followers",
        path="followers",
        paging="cursor",
        params={"include_attributes": "true"},
        parent_key="follower_idx",
        columns={"idx": "text", "name": "text", "email": "text", "avatar": "text", **TIMES},
        reading="cursor",
        row="a follower: a person who gives feedback",
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
        history=("companies",),
    ),
    Resource(
        name="announcements",
        path="announcements",
        paging="cursor",
        parent_key="announcement_idx",
        columns={
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
        reading="window",
        row="an announcement: a changelog post, published, scheduled or a draft",
        children={
            "categories": {"idx": "text", "name": "text", "color": "text"},
            "ideas": {"idx": "text", "name": "text"},
            # reaction_count's keys as rows
            "reactions": {"reaction": "text", "count": "bigint"},
        },
        shaped_from={"reactions": "reaction_count"},
        keys_as_rows=frozenset({"reaction_count"}),
        compares=True,
        history=("announcements",),
    ),
    Resource(
        name="comments",
        path="comments",
        paging="cursor",
        # both list forms the comments list accepts; the contract's is the comma
        params={"included_types": "comments,notes"},
        parent_key="comment_idx",
        columns={
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
        reading="per_idea",
        row="a public comment or a private note on an idea",
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
        name="topics",
        path="topics",
        paging="page_number",
        parent_key="topic_idx",
        columns={"idx": "text", "name": "text", "idea_count": "double", "order": "double", **TIMES},
        reading="full",
        row="a topic ideas are filed under",
        compares=True,
    ),
    Resource(
        name="statuses",
        path="statuses",
        paging="cursor",
        parent_key="status_idx",
        columns={"idx": "text", "name": "text", "color": "text", **TIMES},
        reading="full",
        row="a status an idea can have",
        compares=True,
    ),
    Resource(
        name="integration_links",
        path="integration-links",
        paging="link_cursor",
        parent_key="integration_link_idx",
        columns={
            "idx": "text",
            "idea_idx": "text",
            "type": "text",
            "link_ref": "text",
            "meta": "json",
            **TIMES,
        },
        reading="per_idea",
        row="a link between an idea and a record in another tool (Jira, Zendesk, ...)",
        by_type=True,
    ),
    Resource(
        name="ideas",
        path="ideas",
        paging="cursor",
        parent_key="idea_idx",
        columns={
            "idx": "text",
            "id": "bigint",
            "name": "text",
            "status_idx": "text",
            "comment_count": "bigint",
            "note_count": "bigint",
            **TIMES,
        },
        reading="idea_list",
        row="an idea on the feedback board",
        # the idea's topic_idxs, one row each (shaping.idea)
        children={"topics": {"topic_idx": "text"}},
        shaped_from={"topics": "topic_idxs"},
        compares=True,
        history=("ideas",),
    ),
]

# derived from RESOURCES, updated in place by ``registered`` (importers hold these objects)
NAMES: list[str] = []
BY_NAME: dict[str, Resource] = {}
# the column each resource's child tables name their parent row by
PARENT_KEYS: dict[str, str] = {}
# resources a full run reads completely though a normal one does not (so only a full run
# can find what was deleted at the source)
COMPLETE_WHEN_FULL: set[str] = set()
# the declared column types of every table the resources land, and of the sync's own table
# of items that cannot land as rows, whole (``screening.py``)
TABLES: dict[str, dict[str, str]] = {}
REJECTED_COLUMNS = {
    "resource": "text",
    "record_sha256": "text",
    "idx": "text",
    "reason": "text",
    "record": "text",
}
# (resource, field) of the objects whose keys become rows
KEYS_AS_ROWS: set[tuple[str, str]] = set()


def _derive() -> None:
    NAMES[:] = [r.name for r in RESOURCES]
    BY_NAME.clear()
    BY_NAME.update({r.name: r for r in RESOURCES})
    PARENT_KEYS.clear()
    PARENT_KEYS.update({r.name: r.parent_key for r in RESOURCES})
    COMPLETE_WHEN_FULL.clear()
    COMPLETE_WHEN_FULL.update(r.name for r in RESOURCES if r.reading == "per_idea")
    TABLES.clear()
    TABLES.update({table: columns for r in RESOURCES for table, columns in r.tables().items()})
    TABLES["rejected_rows"] = dict(REJECTED_COLUMNS)
    KEYS_AS_ROWS.clear()
    KEYS_AS_ROWS.update((r.name, key) for r in RESOURCES for key in r.keys_as_rows)


_derive()


@contextmanager
def registered(resource: Resource) -> Iterator[Resource]:
    """Adds ``resource`` to the registry for the block, read last: everything derived
    from the declarations (the dlt source, types, deletes, status) includes it."""
    if resource.name in BY_NAME:
        raise ValueError(f"a resource named {resource.name!r} is declared already")
    RESOURCES.append(resource)
    _derive()
    try:
        yield resource
    finally:
        RESOURCES.remove(resource)
        _derive()


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
