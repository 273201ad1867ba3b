"""What every push kind shares: records, requests, the context a kind plans in, the
marker notes and announcements carry, the parents some records wait for (``Parents``), and
``Kind``, the interface each kind implements.

A record's fields are flat, keyed by tuples (``("companies", "acct-1", "plan")``), so the
diff compares only what the target maps, field by field; ``None`` means "not mapped for
this row" (a NULL never overwrites unless the target lists the field under ``nulls``).

Notes and announcements carry a marker the push writes into them, a Markdown comment that
renders to nothing: ``[//]: # (feedback-sync:<target>:<key>)``. It is how a create whose
answer was lost (a crash, a timeout) is found again instead of being sent twice.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import quote, unquote

from feedback_sync.api.client import FeedbackClient
from feedback_sync.api.paging import Chain, CursorPaginator, PageNumberPaginator, walk
from feedback_sync.errors import BadValue
from feedback_sync.push.scope import Scope
from feedback_sync.warehouse.engines import Engine, has_relation, records

Field = tuple[str, ...]
_MARKER = re.compile(r"\[//\]: # \(feedback-sync:([a-z0-9_]+):([^)\s]+)\)")
PAGE = 100


def marker(target: str, key: str) -> str:
    return f"[//]: # (feedback-sync:{target}:{quote(key, safe='')})"


def with_marker(text: str, target: str, key: str) -> str:
    return f"{text.rstrip()}\n\n{marker(target, key)}"


def marked_key(text: Any, target: str) -> str | None:
    """The key of ``target``'s marker in ``text``, if there is one."""
    if not isinstance(text, str):
        return None
    for found in _MARKER.finditer(text):
        if found.group(1) == target:
            return unquote(found.group(2))
    return None


def show_field(name: Field) -> str:
    if name[0] == "companies" and len(name) == 3:
        return f"companies[{name[1]}].{name[2]}"
    return ".".join(name)


@dataclass
class Record:
    """One desired object: its key, its mapped fields, and what is wrong with it."""

    key: str
    label: str
    fields: dict[Field, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


@dataclass
class Held:
    """What the service holds for a key: from the warehouse copy or read live."""

    idx: str
    fields: dict[Field, Any]
    loaded_at: float | None = None  # the copy's load time; None when read from the API
    raw: dict[str, Any] | None = None


@dataclass
class Request:
    method: str
    path: str
    body: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)


@dataclass
class Context:
    """What kinds read besides their rows."""

    con: Engine  # the warehouse (DuckDB or PostgreSQL)
    dataset: str  # the loaded tables (the account's dataset, with accounts)
    client: FeedbackClient
    target: str
    # the account the run pushes: which rows of the models are its copy of the service
    scope: Scope = field(default_factory=Scope)
    # a parent's key -> its idx (``Parents``: this run's writes first)
    parent_idx: Callable[[str], str | None] = lambda key: None
    known_ideas: set[str] = field(default_factory=set)
    # idxs other keys of this target hold (the journal), which a lookup must not claim
    taken_idxs: set[str] = field(default_factory=set)

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of ``sql``, written in what DuckDB and PostgreSQL both accept."""
        return records(self.con, sql, params or [])

    def has(self, schema: str, table: str) -> bool:
        return has_relation(self.con, schema, table)

    def model(self, name: str) -> str | None:
        """The staging view ``name`` as this run's copy of the service (its account's
        rows), to be read ``from <it> as <alias>``; None where it was not built."""
        return self.scope.model(self.con, name)

    def load_times(self, table: str) -> dict[str, float]:
        """idx -> when the forward sync loaded that row (dlt's load id is a unix time)."""
        if not self.has(self.dataset, table):
            return {}
        rows = self.con.execute(f'select idx, _dlt_load_id from "{self.dataset}"."{table}"')
        out: dict[str, float] = {}
        for idx, load_id in rows:
            try:
                out[str(idx)] = float(load_id)
            except (TypeError, ValueError):
                continue
        return out


def walk_items(
    client: FeedbackClient,
    resource: str,
    path: str,
    filters: dict[str, str | int] | None = None,
    numbered: bool = False,
) -> Iterable[dict[str, Any]]:
    paginator = PageNumberPaginator(PAGE) if numbered else CursorPaginator(PAGE)
    chain = Chain(resource, path, paginator, filters or {})
    for page in walk(client, [chain], 1, urgent=True):
        yield from page.items


def unwrap(body: dict[str, Any]) -> dict[str, Any]:
    """Topics and statuses answer unwrapped; other resources as ``{data: ...}``."""
    data = body.get("data")
    return data if isinstance(data, dict) else body


class Parents:
    """The objects other records wait for, by key (a note waits for its author, a
    follower): those this run plans to create, those that landed (their idx) and those that
    failed (why). Shared by the threads that send. The kind whose objects are parents
    (``Kind.provides_parents``) makes one that also finds those this run did not write
    (``Kind.parents``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.found: dict[str, str] = {}
        self.planned: set[str] = set()
        self.failed: dict[str, str] = {}

    def landed(self, key: str, idx: str) -> None:
        with self.lock:
            self.found[key] = idx

    def fail(self, key: str, why: str) -> None:
        with self.lock:
            self.failed[key] = why

    def __call__(self, key: str) -> str | None:
        """The idx of the parent ``key``, or None when there is no such object."""
        with self.lock:
            return self.found.get(key)


class Kind(ABC):
    """The behaviour of one API resource."""

    name: ClassVar[str]
    resource: ClassVar[str]
    delete_options: ClassVar[tuple[str, ...]] = ("yes",)
    order: ClassVar[int]  # parents first
    # whether other kinds' records name one of this kind's as their parent (``parent()``):
    # a create planned here lets them wait for it instead of being held back (``parents``)
    provides_parents: ClassVar[bool] = False
    # whether its writes carry custom attributes, which a service may refuse with 403
    # (``strip_custom`` then drops them; ``custom_fields`` names them in the report)
    sends_custom_attributes: ClassVar[bool] = False
    custom_fields: ClassVar[str] = "custom attributes"

    @abstractmethod
    def records(self, rows: list[dict[str, Any]], key: str, ctx: Context) -> list[Record]:
        """Validated records from the target's rows (problems recorded, not raised)."""

    @abstractmethod
    def copy(
        self, ctx: Context, known: dict[str, str], records: dict[str, Record]
    ) -> dict[str, Held]:
        """The warehouse copy by key (``known``: key -> idx from the journal)."""

    @abstractmethod
    def live(
        self, ctx: Context, keys: list[tuple[str, Record | None]], known: dict[str, str]
    ) -> dict[str, Held]:
        """What the service holds now for ``keys``, read from the API (absent: none)."""

    @abstractmethod
    def create(self, record: Record, ctx: Context) -> Request: ...

    @abstractmethod
    def update(
        self, record: Record, held: Held, changes: dict[Field, tuple[Any, Any]], ctx: Context
    ) -> Request: ...

    def delete(self, idx: str, option: str) -> Request:
        return Request("DELETE", f"{self.resource}/{quote(idx, safe='')}")

    def created_idx(self, body: dict[str, Any]) -> str | None:
        idx = unwrap(body).get("idx")
        return idx if isinstance(idx, str) and idx else None

    def lookup(self, ctx: Context, key: str, payload: dict[str, Any] | None) -> str | None:
        """After a create whose outcome is unknown (``payload``: what was sent): the idx of
        the object if it exists after all."""
        held = self.live(ctx, [(key, None)], {}).get(key)
        return held.idx if held else None

    def parent(self, record: Record) -> str | None:
        """The key of the parent this record needs to exist first, if any (an object of the
        kind that ``provides_parents``)."""
        return None

    def held(self, record: Record, parents: Parents, *, planning: bool = False) -> str | None:
        """Why the create of ``record`` is held back: its parent failed to land in this run,
        or (``planning``) is nowhere to be found. None: it may be sent."""
        return None

    def parents(self, ctx: Context, applied: bool) -> Parents | None:
        """The parents registry, for the kind that ``provides_parents`` (``applied``: the
        creates planned will be sent, not only previewed)."""
        return None

    def create_problems(self, record: Record) -> list[str]:
        """Why a record that does not exist yet cannot be created (fields the API requires
        on create only)."""
        return []

    def carries_custom(self, request: Request) -> bool:
        """Whether the request carries custom attributes (the write a 403 is learned from)."""
        return False

    def strip_custom(self, request: Request) -> tuple[Request | None, bool]:
        """The request without custom attributes (learned 403), and whether it had any."""
        return request, False


def group_by_key(
    rows: list[dict[str, Any]], key: str, label: Callable[[Any], str]
) -> tuple[dict[str, list[dict[str, Any]]], list[Record]]:
    """Rows grouped by key; rows without a key become invalid records."""
    groups: dict[str, list[dict[str, Any]]] = {}
    bad: list[Record] = []
    for n, row in enumerate(rows, 1):
        value = row.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            bad.append(Record(f"(row {n})", f"row {n}", problems=[f"{key} is required"]))
            continue
        groups.setdefault(str(value).strip(), []).append(row)
    return groups, bad


def duplicate_problems(key: str, group: list[dict[str, Any]]) -> list[str]:
    return [f"duplicate key: {len(group)} rows have {key}"] if len(group) > 1 else []


def check_value(
    record: Record, name: Field, convert: Callable[[Any], Any], value: Any, what: str | None = None
) -> None:
    if value is None:
        return
    try:
        record.fields[name] = convert(value)
    except BadValue as exc:
        record.problems.append(f"{what or show_field(name)} {exc}")
