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

``full=True`` reads everything from the start. Resources read from start to end are listed
in ``SyncRun.complete``; the sync removes (or marks) their rows that were not seen.
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
    Chain,
    CursorPaginator,
    LinkCursorPaginator,
    PageNumberPaginator,
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
from feedback_sync.source.resources import SOURCE_NAME

__all__ = ["RESOURCES", "SyncRun", "feedback"]

log = logging.getLogger("feedback_sync")

Row = dict[str, Any]
# both list forms the comments list accepts; the contract's is the comma
INCLUDED_TYPES = "comments,notes"


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
    pages = _idea_pages(run)
    links = _links_by_type(run) if run.settings.integration_types else _links_by_idea(run, pages)
    return [
        _followers(run),
        _announcements(run),
        _comments(run, pages),
        _small_list(run, "topics", PageNumberPaginator),
        _small_list(run, "statuses", CursorPaginator),
        links,
        _ideas(run, pages),
        pages,
    ]


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


def _followers(run: SyncRun) -> DltResource:
    @dlt.resource(**_merge("followers"))
    def followers() -> Iterator[Any]:
        state = dlt.current.resource_state("followers")
        resume = None if run.full else state.get("after")
        paginator = CursorPaginator(run.settings.page_size, resume, state.get("total"))
        chain = Chain("followers", "followers", paginator, {"include_attributes": "true"})
        tables = _tabulator(run, "followers")
        for page in walk(run.client, [chain], 1, urgent=True):
            yield from tables.add(shaping.follower(r) for r in page.items if tables.accept(r))
            if page.last:
                state["after"] = paginator.resume
                state["total"] = paginator.last_total  # followers before that cursor
        yield from tables.flush()
        if not paginator.resumed:
            run.mark_complete("followers")

    return followers


def _announcements(run: SyncRun) -> DltResource:
    @dlt.resource(**_merge("announcements"))
    def announcements() -> Iterator[Any]:
        state = dlt.current.resource_state("announcements")
        saved = None if run.full else state.get("published_high_water")
        high = shaping.parse_timestamp(saved, "saved state") if saved else None
        size = run.settings.page_size
        if high is None:
            # everything: published, drafts and scheduled posts in one list
            chains = [Chain("announcements", "announcements", CursorPaginator(size))]
        else:
            since = high - timedelta(days=run.settings.announcement_lookback_days)
            window = {"published_after": since.strftime("%Y-%m-%dT%H:%M:%SZ")}
            chains = [
                Chain("announcements", "announcements", CursorPaginator(size), window),
                Chain(
                    "announcements",
                    "announcements",
                    CursorPaginator(size),
                    {"is_published": "false"},
                ),
            ]
        # a scheduled post is in both lists: keep the first copy (the set holds only the
        # window's and the drafts' idxs)
        seen: set[str] | None = set() if len(chains) > 1 else None
        newest = high
        # a post the service calls published but dated after this run started (a server
        # may say so of scheduled posts) must not move the window past posts not yet seen
        started = datetime.now(UTC)
        tables = _tabulator(run, "announcements")
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
                row = shaping.announcement(row)
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
            run.mark_complete("announcements")

    return announcements


def _per_idea_poll(
    run: SyncRun,
    resource: str,
    path: str,
    paginator: type[Paginator],
    filters: dict[str, str],
    shape: Callable[[Row, str], Row],
    *,
    resume: bool,
    seen_types: bool = False,
) -> Callable[[list[Row] | Row], Iterator[Any]]:
    """The per-idea fan-out (comments, links by idea), called with each page of ideas.

    Polls new ideas and ideas whose signature moved (every idea on a full run), from the
    idea's saved cursor when ``resume``, and keeps ``{idea: pack_idea(cursor, signature,
    total)}`` in state (``total``: the items before the cursor; no cursor or total without
    ``resume``).
    With ``seen_types``, the rows' ``type`` values are kept in state as ``seen_types``.
    """

    def poll(ideas_page: list[Row] | Row) -> Iterator[Any]:
        state = dlt.current.resource_state(resource)
        if run.full:
            # a full run rebuilds the per-idea state: ideas gone at the source drop out
            def reset() -> None:
                state["ideas"] = {}
                if seen_types:
                    state["seen_types"] = []

            run.once(f"{resource}:reset", reset)
        known: dict[str, Any] = state.setdefault("ideas", {})

        def repack() -> None:
            # entries saved by earlier versions as lists become packed strings
            for idx, entry in list(known.items()):
                if not isinstance(entry, str):
                    known[idx] = pack_idea(*unpack_idea(entry))

        run.once(f"{resource}:repack", repack)
        signatures: dict[str, str | None] = {}
        chains = []
        for idea in _as_list(ideas_page):
            idx = idea.get("idx") if isinstance(idea, dict) else None
            if not isinstance(idx, str):
                continue
            signature = idea_signature(idea)
            saved_cursor, saved_signature, before = unpack_idea(known.get(idx))
            if signature is not None and saved_signature == signature and not run.full:
                continue  # nothing moved on this idea since the last run
            signatures[idx] = signature
            cursor = saved_cursor if resume and not run.full else None
            pages = paginator(run.settings.page_size, cursor, before)
            chains.append(Chain(resource, path, pages, {**filters, "idea_idx": idx}, idx, True))
        types: set[str] = set()
        # a transformer has no last call: each call yields all it fetched
        tables = _tabulator(run, resource)
        for page in walk(run.client, chains, run.settings.max_concurrency):
            idx = page.chain.key
            assert idx is not None
            if page.missing:
                known.pop(idx, None)
                run.count_skipped(resource)
                continue
            if seen_types:
                types.update(row["type"] for row in page.items if isinstance(row.get("type"), str))
            yield from tables.add(shape(r, idx) for r in page.items if tables.accept(r))
            if page.last:
                walked = page.chain.paginator
                # the cursor, the signature, and how many items lie before the cursor (the
                # list's total at its end), so the next resumed walk can end without an
                # empty page
                known[idx] = (
                    pack_idea(walked.resume, signatures[idx], walked.last_total)
                    if resume
                    else pack_idea(None, signatures[idx], None)
                )
        yield from tables.flush()
        if types:
            run.merge_into_list(state, "seen_types", types)

    return poll


def _comments(run: SyncRun, ideas: DltResource) -> DltResource:
    poll = _per_idea_poll(
        run,
        "comments",
        "comments",
        CursorPaginator,
        {"included_types": INCLUDED_TYPES},
        shaping.comment,
        resume=True,
    )

    @dlt.transformer(data_from=ideas, **_merge("comments"))
    def comments(ideas_page: list[Row] | Row) -> Iterator[Any]:
        yield from poll(ideas_page)

    return comments


def _links_by_idea(run: SyncRun, ideas: DltResource) -> DltResource:
    """Links without configured ``integration_types``: per idea, or by the types seen.

    A full run (or one that knows no types yet) reads every idea's links from the start
    and keeps the link types it saw. A normal run that knows types reads each of them from
    its saved cursor instead (``?type=``, like configured types): one chain per type finds
    new links on every idea, where per-idea polling found them only on ideas whose comments
    moved. A type first seen by a normal run's ideas waits for the next full run.
    """
    # an idea's links are read from its start (usually one page): no cursor to keep
    shape = shaping.plain("integration_links")
    poll = _per_idea_poll(
        run,
        "integration_links",
        "integration-links",
        LinkCursorPaginator,
        {},
        lambda row, idx: shape(row),
        resume=False,
        seen_types=True,
    )

    @dlt.transformer(data_from=ideas, **_merge("integration_links"))
    def integration_links(ideas_page: list[Row] | Row) -> Iterator[Any]:
        state = dlt.current.resource_state("integration_links")
        # decided once per run, before the per-idea calls (run in parallel) add seen types
        types: tuple[str, ...] = run.memo(
            "integration_links:types",
            lambda: () if run.full else tuple(state.get("seen_types") or ()),
        )
        if not types:
            yield from poll(ideas_page)
        elif run.claim("integration_links:by-type"):
            # read by type, the per-idea entries of the last full run are not needed: they
            # would only weigh on the state (one per idea) until the next full run
            state.pop("ideas", None)
            yield from _walk_link_types(run, state, types)

    return integration_links


def _links_by_type(run: SyncRun) -> DltResource:
    @dlt.resource(**_merge("integration_links"))
    def integration_links() -> Iterator[Any]:
        state = dlt.current.resource_state("integration_links")
        types = run.settings.integration_types
        if (yield from _walk_link_types(run, state, types)):
            run.mark_complete("integration_links")

    return integration_links


def _walk_link_types(run: SyncRun, state: Any, types: Iterable[str]) -> Generator[Any, None, bool]:
    """Each link type's list from its saved cursor (``?type=``); True if all from the start."""
    saved: dict[str, str | None] = state.get("types", {})
    cursors: dict[str, str | None] = {t: None if run.full else saved.get(t) for t in types}
    chains = [
        Chain(
            "integration_links",
            "integration-links",
            LinkCursorPaginator(run.settings.page_size, cursors[t]),
            {"type": t},
            t,
        )
        for t in cursors
    ]
    shape = shaping.plain("integration_links")
    tables = _tabulator(run, "integration_links")
    for page in walk(run.client, chains, run.settings.max_concurrency, urgent=True):
        yield from tables.add(shape(r) for r in page.items if tables.accept(r))
        if page.last:
            assert page.chain.key is not None
            cursors[page.chain.key] = page.chain.paginator.resume
    yield from tables.flush()
    # types no longer asked for drop out of the state
    state["types"] = cursors
    return not any(chain.paginator.resumed for chain in chains)


def _small_list(run: SyncRun, name: str, paginator: type[Paginator]) -> DltResource:
    """Topics and statuses: read in full on every run (a few pages), so always complete; a
    normal run loads only the rows that changed (``changes.ListChanges``)."""

    @dlt.resource(**_merge(name))
    def small_list() -> Iterator[Any]:
        chain = Chain(name, name, paginator(run.settings.page_size))
        shape = shaping.plain(name)
        tables = _tabulator(run, name)
        compare = ListChanges(run, name)
        for page in walk(run.client, [chain], 1, urgent=True):
            rows = []
            for item in page.items:
                if not tables.accept(item):
                    compare.rejected(item)
                    continue
                row = shape(item)
                if compare.changed(row):
                    rows.append(row)
            yield from tables.add(rows)
        yield from tables.flush()
        compare.finish()
        run.mark_complete(name)

    return small_list


def _ideas(run: SyncRun, pages: DltResource) -> DltResource:
    """The ``ideas`` table, from the pages of ideas the per-idea fan-out also reads."""

    @dlt.transformer(data_from=pages, **_merge("ideas"))
    def ideas(ideas_page: list[Row] | Row) -> Iterator[Any]:
        tables = _tabulator(run, "ideas")
        accepted = [r for r in _as_list(ideas_page) if tables.accept(r)]
        changed = run.changed_ideas
        if changed is not None:  # only the new and changed ideas load (``changes``)
            accepted = changes.keep(dlt.current.resource_state("ideas"), changed, accepted)
        yield from tables.add(accepted)
        yield from tables.flush()

    return ideas


def _idea_pages(run: SyncRun) -> DltResource:
    """Pages of shaped ideas (not a table): fed to ``ideas``, ``comments`` and links."""

    @dlt.resource(name="idea_pages", selected=False)
    def idea_pages() -> Iterator[list[Row]]:
        paginator = CursorPaginator(run.settings.page_size)
        compare = IdeaChanges.begin(run)
        try:
            for page in walk(run.client, [Chain("ideas", "ideas", paginator)], 1, urgent=True):
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
        run.mark_complete("ideas")

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
    """Every idea the service mentions anywhere, as ``{idx, name}`` rows (name if known)."""
    names: dict[str, str | None] = dict.fromkeys(run.settings.idea_idxs)
    for resource in ("comments", "integration_links"):
        for idx in dlt.current.resource_state(resource).get("ideas", {}):
            names.setdefault(idx, None)
    size = run.settings.page_size
    chains = [Chain("ideas", "announcements", CursorPaginator(size))]
    types = run.settings.integration_types or tuple(
        dlt.current.resource_state("integration_links").get("seen_types") or ()
    )
    chains += [
        Chain("ideas", "integration-links", LinkCursorPaginator(size), {"type": t}) for t in types
    ]
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


def _as_list(items: list[Row] | Row) -> list[Row]:
    return items if isinstance(items, list) else [items]
