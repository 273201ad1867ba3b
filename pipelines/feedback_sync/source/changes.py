"""Which rows changed since the load that holds them: a normal run loads only those.

Ideas (``IdeaChanges``), topics and statuses (``ListChanges``), and the announcements a
normal run reads again (``WindowChanges``).

``/ideas`` is read whole on every run: the per-idea fan-out needs every idea's counts, and a
complete read is how ideas deleted at the service are found. Most ideas are as the
warehouse holds them already; loading them again cost a normal sync at ``large`` a sixth
of its time and most of its load step's memory (20,000 ideas and their topics merged to
change a few hundred).

Each idea's row has a fingerprint (``idea_entries.fingerprint``) kept in the ``ideas``
resource's state (``rows``: idx -> fingerprint), committed with the load like every cursor.
A normal run loads the ideas whose fingerprint is new or moved, and names the ideas the
listing no longer holds in ``SyncRun.gone``: their rows keep an earlier load's id, as
every unchanged idea's does, so the sync removes them by key instead of as "not in this
load" (``warehouse.reconcile``).

Every idea loads, and the fingerprints are made anew, on a full run, into a warehouse
without the ``ideas`` table, when no fingerprints were kept (a first run, or the first
after an upgrade), and when ideas are discovered without ``/ideas`` (those rows hold only
``idx`` and ``name``; the fingerprints are dropped). A run that does not load ideas
(``--resources`` without them) leaves the fingerprints as they are.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import dlt

from feedback_sync.source.context import SyncRun
from feedback_sync.source.idea_entries import ROWS, fingerprint

Row = dict[str, Any]
# the ``ideas`` state's flag: its fingerprints name every idea the warehouse may hold (a run
# that loaded every idea but could not remove what was gone clears it)
COMPLETE = "rows_complete"
# the fingerprint kept for a row that must load again on the next run whatever it holds: an
# item rejected now (its earlier row, if any, stays), or a key listed twice in one run
# (which copy the merge kept is not known)
RELOAD = ""


def _compares(run: SyncRun, table: str) -> bool:
    """Whether this run may leave unchanged rows of ``table`` as they are: a normal run, into
    a warehouse known to hold the table (the tables of Delta and other destinations are not
    listed: every row loads there)."""
    known = run.warehouse_tables
    return not run.full and known is not None and table in known


class IdeaChanges:
    """One run's comparison of the ideas listed with the fingerprints kept.

    ``begin`` (from the listing's generator, before its first page) decides whether this
    run compares; ``see`` and ``rejected`` take each listed item; ``finish`` (after the
    listing's last page) names the ideas gone and drops their fingerprints. The ``ideas``
    transformer loads the ideas in ``SyncRun.changed_ideas`` and keeps their new
    fingerprints (``keep``) as it accepts them.
    """

    def __init__(self, run: SyncRun, saved: dict[str, str], compare: bool) -> None:
        self.run = run
        self.saved = saved
        self.compare = compare
        # the ideas held before this run (read before any transformer writes) and seen now
        self.before: set[str] = set(saved) if compare else set()
        self.seen: set[str] = set()
        self.unchanged = 0
        # an item without a usable idx was listed: it may be any idea, so none is gone
        self.unkeyed = False
        run.changed_ideas = {}

    @classmethod
    def begin(cls, run: SyncRun) -> IdeaChanges | None:
        """The comparison for this run, or None where ideas do not load in it."""
        if "ideas" not in dlt.current.source().selected_resources:
            return None  # the fingerprints stay as the last load that held ideas left them
        state = dlt.current.resource_state("ideas")
        saved = state.get(ROWS)
        compare = _compares(run, "ideas") and state.get(COMPLETE) is True
        if not (compare and isinstance(saved, dict)):
            compare = False
            saved = state[ROWS] = {}
            state[COMPLETE] = True
        return cls(run, saved, compare)

    def see(self, row: Row) -> None:
        """A listed idea that can land (its row as shaped)."""
        idx: str = row["idx"]
        assert self.run.changed_ideas is not None
        if idx in self.seen:  # listed twice: both copies load, and again next run
            self.run.changed_ideas[idx] = RELOAD
            return
        mark = fingerprint(row)
        self.seen.add(idx)
        if self.saved.get(idx) == mark:
            self.unchanged += 1
        else:
            self.run.changed_ideas[idx] = mark

    def rejected(self, item: Any) -> None:
        """A listed item that cannot land (``screening``): its earlier row, if any, stays."""
        idx = item.get("idx") if isinstance(item, dict) else None
        if isinstance(idx, str) and idx:
            self.seen.add(idx)
            # known from now on (a later run finds it gone), never taken as unchanged
            self.saved.setdefault(idx, RELOAD)
        else:
            self.unkeyed = True

    def finish(self) -> None:
        """The listing ended: the ideas it no longer holds are gone (``SyncRun.gone``)."""
        if self.unchanged:
            self.run.count_unchanged("ideas", self.unchanged)
        if not self.compare:
            # every idea loaded: rows of another load are gone (``reconcile``), unless an
            # item without a key held the deletes back: rows the fingerprints do not name
            # may stay, and only a run that loads every idea again can find them gone
            if self.unkeyed:
                dlt.current.resource_state("ideas")[COMPLETE] = False
            return
        if self.unkeyed:
            # the sync removes nothing and says why (``base.warn_unknown_rejection``)
            self.run.gone["ideas"] = []
            return
        gone = sorted(self.before - self.seen)
        for idx in gone:
            self.saved.pop(idx, None)
        self.run.gone["ideas"] = gone

    def abandon(self) -> None:
        """Ideas are discovered instead (no ``/ideas``): all load, no fingerprints kept."""
        self.run.changed_ideas = None
        state = dlt.current.resource_state("ideas")
        state.pop(ROWS, None)
        state.pop(COMPLETE, None)


def keep(state: dict[str, Any], changed: dict[str, str], rows: list[Row]) -> list[Row]:
    """The ``rows`` to load (changed or new ideas), their fingerprints kept in ``state``.

    ``rows`` are those the ``ideas`` table accepted; the fingerprint is kept only for a
    row that loads, so an idea whose row was rejected keeps its earlier fingerprint. An
    idea listed twice keeps none (``RELOAD``): the next run loads it again.
    """
    saved: dict[str, str] = state.setdefault(ROWS, {})
    loading = []
    for row in rows:
        mark = changed.get(row["idx"])
        if mark is not None:
            saved[row["idx"]] = mark
            loading.append(row)
    return loading


class ListChanges:
    """Topics or statuses, read whole on every run: a normal run loads the rows that are new
    or changed and names the keys its read no longer found (``SyncRun.gone``), as for ideas.

    Loading every row again on every run cost a sync with nothing to do two merges (0.15-0.25
    s of 1.4-1.6 s at ``demo``). The resource's state keeps (``ROWS``) the fingerprint of
    every row the read found, made anew on each run (so it holds the list as last read), and
    ``COMPLETE``: whether those name every row the warehouse may hold. A run compares only
    where the last one left both (``begin`` of ``IdeaChanges`` says the same for ideas); a
    full run, a first run and a warehouse without the table load every row, and their
    reconcile removes rows of other loads.
    """

    def __init__(self, run: SyncRun, name: str) -> None:
        self.run = run
        self.name = name
        self.state = dlt.current.resource_state(name)
        saved = self.state.get(ROWS)
        if not (_compares(run, name) and self.state.get(COMPLETE) is True):
            saved = None
        self.compare = isinstance(saved, dict)
        self.saved: dict[str, str] = saved if isinstance(saved, dict) else {}
        # the fingerprints this run leaves: every key its read found
        self.found: dict[str, str] = {}
        self.unchanged = 0
        # an item without a usable idx was listed: it may be any row, so none is gone
        self.unkeyed = False

    def changed(self, row: Row) -> bool:
        """Whether a listed row that can land (as shaped) is new or changed: it loads."""
        idx: str = row["idx"]
        if idx in self.found:  # listed twice: both copies load, and again next run
            self.found[idx] = RELOAD
            return True
        mark = self.found[idx] = fingerprint(row)
        if self.compare and self.saved.get(idx) == mark:
            self.unchanged += 1
            return False
        return True

    def rejected(self, item: Any) -> None:
        """A listed item that cannot land (``screening``): its earlier row, if any, stays,
        with its earlier fingerprint; never taken as unchanged where it had none."""
        idx = item.get("idx") if isinstance(item, dict) else None
        if isinstance(idx, str) and idx:
            self.found.setdefault(idx, self.saved.get(idx, RELOAD))
        else:
            self.unkeyed = True

    def finish(self) -> None:
        """The list was read to its end: the fingerprints of what it holds are kept, and on a
        run that compared, the keys it no longer holds are gone."""
        self.state[ROWS] = self.found
        self.state[COMPLETE] = not self.unkeyed
        if self.unchanged:
            self.run.count_unchanged(self.name, self.unchanged)
        if self.compare:
            # an item without a key: the sync removes nothing and says why
            # (``base.warn_unknown_rejection``)
            self.run.gone[self.name] = (
                [] if self.unkeyed else sorted(set(self.saved) - set(self.found))
            )


class WindowChanges:
    """The announcements a normal run reads again (the look-back window, drafts and
    scheduled posts): those as last loaded are not loaded again.

    Announcements are read completely only on a full run, which loads every post (its
    reconcile removes what it did not load), so nothing here decides a delete. The
    ``announcements`` state keeps (``ROWS``) the fingerprints of the posts a later window
    reads: drafts, scheduled posts and posts published since this window's start, made
    anew on every run (a full run's included), so it holds about a window's posts.
    """

    def __init__(self, run: SyncRun, state: dict[str, Any]) -> None:
        self.run = run
        self.state = state
        saved = state.get(ROWS)
        compare = _compares(run, "announcements")
        self.saved: dict[str, str] = saved if compare and isinstance(saved, dict) else {}
        # every post read: its fingerprint, and when it was published (None: not a time)
        self.read: dict[str, tuple[str, datetime | None]] = {}
        self.unchanged = 0

    def changed(self, row: Row) -> bool:
        """Whether the post (as shaped, with a usable idx) is new or changed."""
        mark = RELOAD if row["idx"] in self.read else fingerprint(row)  # listed twice
        published = row.get("published_at")
        self.read[row["idx"]] = (mark, published if isinstance(published, datetime) else None)
        if mark != RELOAD and self.saved.get(row["idx"]) == mark:
            self.unchanged += 1
            return False
        return True

    def finish(self, newest: datetime | None, lookback_days: float) -> None:
        """The posts read are known; those a later window reads are kept in the state
        (``newest``: the newest publication seen, where the next window is measured from)."""
        since = newest - timedelta(days=lookback_days) if newest is not None else None
        self.state[ROWS] = {
            idx: mark
            for idx, (mark, published) in self.read.items()
            if published is None or since is None or published >= since
        }
        if self.unchanged:
            self.run.count_unchanged("announcements", self.unchanged)
