"""The ``feedback`` dlt source: every resource of the Feedback API v1, incremental.

One resource per API resource, each merged on ``idx``. What a normal run reads:

- ``followers``: new followers only, from the cursor the last run saved;
- ``announcements``: posts published since the newest one seen minus a look-back window
  (``published_after``), plus every draft and scheduled post; of those, only the posts
  that changed load (``changes``);
- ``comments`` (public comments and private notes): for each new idea, and each idea whose
  ``comment_count``, ``note_count`` or ``updated_at`` moved, from that idea's saved cursor;
- ``integration_links``: by type from each type's saved cursor, for the configured
  ``integration_types`` or else for the types earlier full runs saw; per idea (every idea)
  on full runs without configured types;
- ``topics``, ``statuses``, ``ideas``: everything (small lists; ideas feed the fan-out);
  of ideas, only the rows that changed load (``changes``).

The resources are built from their declarations (``resources.RESOURCES``), one reader per
way of reading (``Resource.reading``: ``_READERS``), each given the declaration's path,
paging and parameters. ``full=True`` reads everything from the start. Resources read
from start to end are listed in ``SyncRun.complete``; the sync removes (or marks) their
rows that were not seen.
Without ``/ideas`` (a 404), ideas are discovered from the configured ``idea_idxs``, ideas
seen by earlier runs, every announcement, and links by configured type; every one of them
is polled on every run, since nothing says which changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import dlt
from dlt.common.schema.typing import TTableSchemaColumns
from dlt.extract.resource import DltResource

from feedback_sync.api.paging import (
    PAGINATORS,
    Chain,
    Paginator,
    walk,
)
from feedback_sync.api.settings import load_settings
from feedback_sync.errors import ApiError
from feedback_sync.source import changes, screening, shaping
from feedback_sync.source.arrow import Tabulator
from feedback_sync.source.changes import IdeaChanges, ListChanges, WindowChanges
from feedback_sync.source.context import SyncRun
from feedback_sync.source.idea_entries import idea_signature, pack_idea, unpack_idea
from feedback_sync.source.resources import NAMES as RESOURCES
from feedback_sync.source.resources import RESOURCES as DECLARED
from feedback_sync.source.resources import SOURCE_NAME, Resource

__all__ = ["RESOURCES", "SyncRun", "feedback"]

log = logging.getLogger("feedback_sync")

Row = dict[str, Any]


# section="feedback": the source's configuration and state keep the section they had when
# this module was the package's __init__ (sources.feedback; state["sources"]["feedback"])
@dlt.source(name=SOURCE_NAME, section=SOURCE_NAME, max_table_nesting=1)
def feedback(full: bool = False, run: Any = None) -> list[DltResource]:
    """The Feedback API as dlt resources.

    Args:
        full: read everything from the start (``--full``) instead of from saved cursors.
        run: a prepared ``SyncRun`` (settings, client); built from configuration if None.
    """
    if run is None:
        run = SyncRun(load_settings(), full=full)
    (idea_list,) = [r for r in DECLARED if r.reading == "idea_list"]
    pages = _idea_pages(run, idea_list)
    return [*(_READERS[r.reading](run, r, pages) for r in DECLARED), pages]


def _paginator(
    run: SyncRun, resource: Resource, cursor: str | None = None, before: int | None = None
) -> Paginator:
    """A new paginator of ``resource``'s list, from ``cursor`` (the start if None);
    ``before``: the items the list held up to the cursor, where saved."""
    return PAGINATORS[resource.paging](run.settings.page_size, cursor, before)


def _columns(run: SyncRun) -> Any:
    """Root-table hints beyond the batch's own columns (whose types ``ColumnTypes`` gives)."""
    columns: TTableSchemaColumns = {"idx": {"data_type": "text", "nullable": False}}
    if run.settings.delete_mode == "soft":
        columns["_deleted_at"] = {"data_type": "timestamp", "timezone": True, "nullable": True}
    return columns


def _tabulator(run: SyncRun, root: str) -> Tabulator:
    """``root``'s rows to Arrow tables, typed and written as this run decides."""
    return Tabulator(root, _columns(run), run.types, disposition=run.write_disposition)


def _merge(name: str) -> dict[str, Any]:
    # columns and keys travel with each batch (``Tabulator``): the root table and its child
    # tables have different ones
    return {"name": name, "write_disposition": "merge", "parallelized": True}


def _cursor_list(run: SyncRun, resource: Resource, pages: DltResource) -> DltResource:
    """A list read past the cursor the last run saved (followers); complete when read from
    its start."""
    name = resource.name

    @dlt.resource(**_merge(name))
    def cursor_list() -> Iterator[Any]:
        state = dlt.current.resource_state(name)
        resume = None if run.full else state.get("after")
        paginator = _paginator(run, resource, resume, state.get("total"))
        chain = Chain(name, resource.path, paginator, dict(resource.params))
        shape = shaping.shaper(name)
        tables = _tabulator(run, name)
        for page in walk(run.client, [chain], 1, urgent=True):
            yield from tables.add(shape(r, None) for r in page.items if tables.accept(r))
            if page.last:
                state["after"] = paginator.resume
                state["total"] = paginator.last_total  # rows before that cursor
        yield from tables.flush()
        if not paginator.resumed:
            run.mark_complete(name)

    return cursor_list


def _window(run: SyncRun, resource: Resource, pages: DltResource) -> DltResource:
    """Announcements: newest first by publication; a normal run reads the posts published
    since the newest seen, minus a look-back window, and every draft and scheduled post."""
    name = resource.name

    @dlt.resource(**_merge(name))
    def window() -> Iterator[Any]:
        state = dlt.current.resource_state(name)
        saved = None if run.full else state.get("published_high_water")
        high = shaping.parse_timestamp(saved, "saved state") if saved else None
        chains = _window_chains(run, resource, high)
        # a scheduled post is in both lists: keep the first copy (the set holds only the
        # window's and the drafts' idxs)
        seen: set[str] | None = set() if len(chains) > 1 else None
        newest = high
        # a post the service calls published but dated after this run started (a server
        # may say so of scheduled posts) must not move the window past posts not yet seen
        started = datetime.now(UTC)
        tables = _tabulator(run, name)
        shape = shaping.shaper(name)
        compare = WindowChanges(run, state)
        for page in walk(run.client, chains, len(chains), urgent=True):
            rows = []
            for row in page.items:
                if not tables.accept(row):
                    continue
                if seen is not None:
                    if row.get("idx") in seen:
                        continue
                    seen.add(str(row.get("idx")))
                row = shape(row, None)
                published = row.get("published_at")
                if row.get("is_published") is True and isinstance(published, datetime):
                    published = min(published, started)
                    newest = published if newest is None else max(newest, published)
                if compare.changed(row):
                    rows.append(row)
            yield from tables.add(rows)
        yield from tables.flush()
        compare.finish(newest, run.settings.announcement_lookback_days)
        if newest is not None:
            state["published_high_water"] = newest.isoformat()
        if high is None:
            run.mark_complete(name)

    return window


def _window_chains(run: SyncRun, resource: Resource, high: datetime | None) -> list[Chain]:
    """Everything in one list where no window is saved; else the posts published since it
    began, and the drafts and scheduled posts."""
    name, params = resource.name, dict(resource.params)
    if high is None:  # everything: published, drafts and scheduled posts in one list
        return [Chain(name, resource.path, _paginator(run, resource), params)]
    since = high - timedelta(days=run.settings.announcement_lookback_days)
    published = {**params, "published_after": since.strftime("%Y-%m-%dT%H:%M:%SZ")}
    drafts = {**params, "is_published": "false"}
    return [
        Chain(name, resource.path, _paginator(run, resource), published),
        Chain(name, resource.path, _paginator(run, resource), drafts),
    ]


class _PerIdea:
    """The per-idea fan-out of ``resource`` (comments, links by idea), called with each
    page of ideas.

    Polls new ideas and ideas whose signature moved (every idea on a full run), from the
    idea's saved cursor where the declaration keeps one (``idea_cursors``), and keeps
    ``{idea: pack_idea(cursor, signature, total)}`` in state (``total``: the items before
    the cursor). A resource the API also lists by type (``by_type``) keeps the rows'
    ``type`` values in state as ``seen_types``.
    """

    def __init__(self, run: SyncRun, resource: Resource) -> None:
        self.run = run
        self.resource = resource
        self.name = resource.name
        self.resume = resource.idea_cursors
        self.seen_types = resource.by_type
        self.shape = shaping.shaper(resource.name)

    def __call__(self, ideas_page: list[Row] | Row) -> Iterator[Any]:
        run, name = self.run, self.name
        state = dlt.current.resource_state(name)
        known = self._known(state)
        signatures: dict[str, str | None] = {}
        chains = [
            chain
            for idea in _as_list(ideas_page)
            if (chain := self._chain(idea, known, signatures)) is not None
        ]
        types: set[str] = set()
        # a transformer has no last call: each call yields all it fetched
        tables = _tabulator(run, name)
        for page in walk(run.client, chains, run.settings.max_concurrency):
            idx = page.chain.key
            assert idx is not None
            if page.missing:
                known.pop(idx, None)
                run.count_skipped(name)
                continue
            if self.seen_types:
                types.update(row["type"] for row in page.items if isinstance(row.get("type"), str))
            yield from tables.add(self.shape(r, idx) for r in page.items if tables.accept(r))
            if page.last:
                walked = page.chain.paginator
                # the cursor, the signature, and how many items lie before the cursor (the
                # list's total at its end), so the next resumed walk can end without an
                # empty page
                known[idx] = (
                    pack_idea(walked.resume, signatures[idx], walked.last_total)
                    if self.resume
                    else pack_idea(None, signatures[idx], None)
                )
        yield from tables.flush()
        if types:
            run.merge_into_list(state, "seen_types", types)

    def _known(self, state: Any) -> dict[str, Any]:
        """The per-idea entries of the state: rebuilt on a full run (ideas gone at the
        source drop out), and entries of earlier versions repacked, once per run."""
        run, name = self.run, self.name
        if run.full:

            def reset() -> None:
                state["ideas"] = {}
                if self.seen_types:
                    state["seen_types"] = []

            run.once(f"{name}:reset", reset)
        known: dict[str, Any] = state.setdefault("ideas", {})

        def repack() -> None:
            # entries saved by earlier versions as lists become packed strings
            for idx, entry in list(known.items()):
                if not isinstance(entry, str):
                    known[idx] = pack_idea(*unpack_idea(entry))

        run.once(f"{name}:repack", repack)
        return known

    def _chain(
        self, idea: Any, known: dict[str, Any], signatures: dict[str, str | None]
    ) -> Chain | None:
        """The list of one idea's rows to read, or None where nothing moved on it."""
        run = self.run
        idx = idea.get("idx") if isinstance(idea, dict) else None
        if not isinstance(idx, str):
            return None
        signature = idea_signature(idea)
        saved_cursor, saved_signature, before = unpack_idea(known.get(idx))
        if signature is not None and saved_signature == signature and not run.full:
            return None  # nothing moved on this idea since the last run
        signatures[idx] = signature
        cursor = saved_cursor if self.resume and not run.full else None
        paginator = _paginator(run, self.resource, cursor, before)
        filters = {**self.resource.params, "idea_idx": idx}
        return Chain(self.name, self.resource.path, paginator, filters, key=idx, skip_missing=True)


def _per_idea(run: SyncRun, resource: Resource, pages: DltResource) -> DltResource:
    """A resource listed per idea. One the API also lists by type (``by_type``) is read by
    the configured ``integration_types`` where there are some (``_by_type``); without,
    a full run (or one that knows no types yet) reads every idea's rows from the start and
    keeps the types it saw, and a normal run that knows types reads each of them from its
    saved cursor instead (``?type=``): one chain per type finds new rows on every idea,
    where per-idea polling found them only on ideas whose comments moved. A type first seen
    by a normal run's ideas waits for the next full run."""
    name = resource.name
    if resource.by_type and run.settings.integration_types:
        return _by_type(run, resource)
    poll = _PerIdea(run, resource)

    @dlt.transformer(data_from=pages, **_merge(name))
    def per_idea(ideas_page: list[Row] | Row) -> Iterator[Any]:
        if not resource.by_type:
            yield from poll(ideas_page)
            return
        state = dlt.current.resource_state(name)
        # decided once per run, before the per-idea calls (run in parallel) add seen types
        types: tuple[str, ...] = run.memo(
            f"{name}:types",
            lambda: () if run.full else tuple(state.get("seen_types") or ()),
        )
        if not types:
            yield from poll(ideas_page)
        elif run.claim(f"{name}:by-type"):
            # read by type, the per-idea entries of the last full run are not needed: they
            # would only weigh on the state (one per idea) until the next full run
            state.pop("ideas", None)
            yield from _walk_types(run, resource, state, types)

    return per_idea


def _by_type(run: SyncRun, resource: Resource) -> DltResource:
    """A resource read by the configured ``integration_types``, each from its cursor."""
    name = resource.name

    @dlt.resource(**_merge(name))
    def by_type() -> Iterator[Any]:
        state = dlt.current.resource_state(name)
        types = run.settings.integration_types
        if (yield from _walk_types(run, resource, state, types)):
            run.mark_complete(name)

    return by_type


def _walk_types(
    run: SyncRun, resource: Resource, state: Any, types: Iterable[str]
) -> Generator[Any, None, bool]:
    """Each type's list from its saved cursor (``?type=``); True if all from the start."""
    name = resource.name
    saved: dict[str, str | None] = state.get("types", {})
    cursors: dict[str, str | None] = {t: None if run.full else saved.get(t) for t in types}
    chains = [
        Chain(
            name,
            resource.path,
            _paginator(run, resource, cursors[t]),
            {**resource.params, "type": t},
            key=t,
        )
        for t in cursors
    ]
    shape = shaping.shaper(name)
    tables = _tabulator(run, name)
    for page in walk(run.client, chains, run.settings.max_concurrency, urgent=True):
        yield from tables.add(shape(r, None) for r in page.items if tables.accept(r))
        if page.last:
            assert page.chain.key is not None
            cursors[page.chain.key] = page.chain.paginator.resume
    yield from tables.flush()
    # types no longer asked for drop out of the state
    state["types"] = cursors
    return not any(chain.paginator.resumed for chain in chains)


def _whole_list(run: SyncRun, resource: Resource, pages: DltResource) -> DltResource:
    """A list read in full on every run (topics, statuses: a few pages), so always
    complete; where the declaration ``compares``, a normal run loads only the rows that
    changed (``changes.ListChanges``)."""
    name = resource.name

    @dlt.resource(**_merge(name))
    def whole_list() -> Iterator[Any]:
        chain = Chain(name, resource.path, _paginator(run, resource), dict(resource.params))
        shape = shaping.shaper(name)
        tables = _tabulator(run, name)
        compare = ListChanges(run, name) if resource.compares else None
        for page in walk(run.client, [chain], 1, urgent=True):
            rows = []
            for item in page.items:
                if not tables.accept(item):
                    if compare is not None:
                        compare.rejected(item)
                    continue
                row = shape(item, None)
                if compare is None or compare.changed(row):
                    rows.append(row)
            yield from tables.add(rows)
        yield from tables.flush()
        if compare is not None:
            compare.finish()
        run.mark_complete(name)

    return whole_list


def _idea_table(run: SyncRun, resource: Resource, pages: DltResource) -> DltResource:
    """The ``ideas`` table, from the pages of ideas the per-idea fan-out also reads."""
    name = resource.name

    @dlt.transformer(data_from=pages, **_merge(name))
    def idea_table(ideas_page: list[Row] | Row) -> Iterator[Any]:
        tables = _tabulator(run, name)
        accepted = [r for r in _as_list(ideas_page) if tables.accept(r)]
        changed = run.changed_ideas
        if changed is not None:  # only the new and changed ideas load (``changes``)
            accepted = changes.keep(dlt.current.resource_state(name), changed, accepted)
        yield from tables.add(accepted)
        yield from tables.flush()

    return idea_table


_READERS: dict[str, Callable[[SyncRun, Resource, DltResource], DltResource]] = {
    "cursor": _cursor_list,
    "window": _window,
    "per_idea": _per_idea,
    "full": _whole_list,
    "idea_list": _idea_table,
}


def _idea_pages(run: SyncRun, resource: Resource) -> DltResource:
    """Pages of shaped ideas (not a table): fed to the ideas table and the per-idea reads."""

    @dlt.resource(name="idea_pages", selected=False)
    def idea_pages() -> Iterator[list[Row]]:
        paginator = _paginator(run, resource)
        compare = IdeaChanges.begin(run)
        chain = Chain(resource.name, resource.path, paginator, dict(resource.params))
        try:
            for page in walk(run.client, [chain], 1, urgent=True):
                if page.items:
                    yield _shape_ideas(page.items, compare)
        except ApiError as exc:
            # the contract's "switched off" is a 404; 405 and 501 say the same thing
            if paginator.pages or exc.status not in (404, 405, 501):
                raise
            run.ideas_endpoint = False
            if compare is not None:
                compare.abandon()
            log.warning(
                "ideas: the service has no /ideas (HTTP %s); discovering ideas from "
                "announcements, integration links, earlier runs and the configured idea_idxs",
                exc.status,
            )
            yield from _discover_ideas(run)
            return
        run.ideas_endpoint = True
        if compare is not None:
            compare.finish()
        run.mark_complete(resource.name)

    return idea_pages


def _shape_ideas(items: list[Row], compare: IdeaChanges | None) -> list[Row]:
    """A page of ideas shaped; an item that cannot land stays as sent (``ideas`` rejects it
    whole). Each is compared with its kept fingerprint (``compare``)."""
    rows = []
    for item in items:
        if screening.problem("ideas", item) is None:
            row = shaping.idea(item)
            if compare is not None:
                compare.see(row)
        else:
            row = item
            if compare is not None:
                compare.rejected(item)
        rows.append(row)
    return rows


def _discover_ideas(run: SyncRun) -> Iterator[list[Row]]:
    """Every idea the service mentions anywhere, as ``{idx, name}`` rows (name if known):
    the configured ``idea_idxs``, the ideas each per-idea resource's state has seen, and
    those named in the lists of the resources that point at ideas (``_mentions``)."""
    names: dict[str, str | None] = dict.fromkeys(run.settings.idea_idxs)
    for resource in DECLARED:
        if resource.reading == "per_idea":
            for idx in dlt.current.resource_state(resource.name).get("ideas", {}):
                names.setdefault(idx, None)
    size = run.settings.page_size
    chains = list(_mentions(run))
    for page in walk(run.client, chains, run.settings.max_concurrency):
        for row in page.items:
            if not isinstance(row, dict):
                continue
            for idea in row.get("ideas") or ():
                if not (isinstance(idea, dict) and isinstance(idea.get("idx"), str)):
                    continue
                if isinstance(idea.get("name"), str) or idea["idx"] not in names:
                    names[idea["idx"]] = idea.get("name")
            if isinstance(row.get("idea_idx"), str):
                names.setdefault(row["idea_idx"], None)
    batch: list[Row] = []
    for idx, name in names.items():
        batch.append({"idx": idx, "name": name})
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _mentions(run: SyncRun) -> Iterator[Chain]:
    """The lists whose rows name ideas, read from their start: each resource with an
    ``ideas`` child table (announcements: ``ideas: [{idx, name}]``) and each per-idea
    resource the API also lists by type (integration links: ``idea_idx``), for every type
    configured or seen."""
    for resource in DECLARED:
        if "ideas" in resource.children:
            yield Chain("ideas", resource.path, _paginator(run, resource), dict(resource.params))
        elif resource.reading == "per_idea" and resource.by_type:
            state = dlt.current.resource_state(resource.name)
            types = run.settings.integration_types or tuple(state.get("seen_types") or ())
            for kind in types:
                filters = {**resource.params, "type": kind}
                yield Chain("ideas", resource.path, _paginator(run, resource), filters)


def _as_list(items: list[Row] | Row) -> list[Row]:
    return items if isinstance(items, list) else [items]
