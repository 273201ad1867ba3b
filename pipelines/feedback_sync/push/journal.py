"""The push journal, in the warehouse (schema ``push``), so its history lives with the data.

With accounts configured, each account's journal is a schema of its own, ``push_<account>``
(``scope.Scope.journal_schema``), with the same tables: one account's run never reads
another's runs, intents or snapshot.

- ``push._push_runs``: one row per run (preview or apply): counts, status, message.
- ``push._push_rows``: one row per step of an apply and per invalid or held row: the
  target, the key, the action, the state, the payload and its hash, the HTTP status and
  server message, the idx assigned, and the time. A write is journaled twice: ``intent``
  (committed before the request leaves) and then its outcome (``confirmed``, ``rejected``,
  ``unknown``, ``recovered`` or ``absent``), under the same ``seq``.
- ``push._push_snapshot``: per target and key, the idx and what the service last confirmed
  (fields, hash, time). It moves only after the server confirmed a write.

An intent without an outcome is what a crash leaves; the next run looks the object up
(``kinds.Kind.lookup``) before anything is planned, so it is never created twice.

The journal's SQL is written in what DuckDB and PostgreSQL both accept: it lives in either
warehouse (``feedback_sync.warehouse.engines``).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from feedback_sync.warehouse.engines import Engine

SCHEMA = "push"


def ddl(schema: str) -> str:
    """The journal's tables in ``schema``."""
    return _DDL.replace("{schema}", schema)


# the comment before each table says what one row is: the tables reference
# (docs/reference/tables.md, written by ./run docs) is made from it
_DDL = """
create schema if not exists {schema};
-- one row per push run (a preview or an apply): its targets, counts, status and message
create table if not exists {schema}._push_runs (
    run_id varchar, started_at timestamptz, finished_at timestamptz, applied boolean,
    forced boolean, targets varchar[], status varchar, creates bigint, updates bigint,
    deletes bigint, unchanged bigint, invalid bigint, rejected bigint, held bigint,
    message varchar
);
-- one row per step of an apply (a write is journaled as its intent, then its outcome,
-- under the same seq) and per invalid or held row
create table if not exists {schema}._push_rows (
    run_id varchar, seq bigint, target varchar, key varchar, action varchar, state varchar,
    idx varchar, payload_hash varchar, payload json, http_status integer, message varchar,
    recorded_at timestamptz
);
-- one row per target and key: the idx and what the service last confirmed (it moves only
-- after the server confirmed a write)
create table if not exists {schema}._push_snapshot (
    target varchar, key varchar, idx varchar, payload_hash varchar, fields json,
    confirmed_at double precision, deleted boolean, desired_hash varchar
);
"""
DDL = ddl(SCHEMA)


def payload_hash(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fields_hash(fields: dict[tuple[str, ...], Any]) -> str:
    """A record's desired fields, hashed: equal when every mapped value is."""
    return payload_hash(sorted((list(k), v) for k, v in fields.items()))


def _fields_json(fields: dict[tuple[str, ...], Any] | None) -> str | None:
    if fields is None:
        return None
    return json.dumps({".".join(k): v for k, v in fields.items()}, ensure_ascii=False, default=str)


@dataclass
class Known:
    """A key the push wrote before: its idx, and when the server last confirmed it."""

    idx: str | None
    confirmed_at: float
    payload_hash: str | None
    deleted: bool
    # the desired fields the server last confirmed (``fields_hash``)
    desired_hash: str | None = None


class About(Protocol):
    """What a journal row is about: a target's key and the action planned for it (a plan's
    ``Step``, or an earlier run's ``Pending`` intent)."""

    @property
    def target(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def action(self) -> str: ...


@dataclass
class Pending:
    """An intent a crashed run left without an outcome."""

    run_id: str
    seq: int
    target: str
    key: str
    action: str
    idx: str | None
    payload: Any


class Journal:
    """Writes the journal in ``schema``; thread-safe (one lock around the one connection)."""

    def __init__(self, con: Engine, schema: str = SCHEMA) -> None:
        self.con = con
        self.schema = schema
        self._lock = threading.Lock()
        self._seq = 0
        self.run_id = ""
        con.execute(ddl(schema))

    def start(self, applied: bool, forced: bool, targets: list[str]) -> str:
        self.run_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
        with self._lock:
            self.con.execute(
                f"update {self.schema}._push_runs set status = 'crashed', "
                "message = 'the run stopped before it finished' where status = 'running'"
            )
            self.con.execute(
                f"insert into {self.schema}._push_runs "
                "(run_id, started_at, applied, forced, targets, status) "
                "values (?, now(), ?, ?, ?, 'running')",
                [self.run_id, applied, forced, targets],
            )
        return self.run_id

    def finish(self, status: str, counts: dict[str, int], message: str | None) -> None:
        with self._lock:
            self.con.execute(
                f"update {self.schema}._push_runs set finished_at = now(), status = ?, "
                "creates = ?, updates = ?, deletes = ?, unchanged = ?, invalid = ?, "
                "rejected = ?, held = ?, message = ? where run_id = ?",
                [
                    status,
                    *(
                        counts.get(c, 0)
                        for c in (
                            "create",
                            "update",
                            "delete",
                            "unchanged",
                            "invalid",
                            "rejected",
                            "held",
                        )
                    ),
                    message,
                    self.run_id,
                ],
            )

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def row(
        self,
        seq: int,
        about: About,
        state: str,
        *,
        idx: str | None = None,
        payload: Any = None,
        status: int | None = None,
        message: str | None = None,
    ) -> None:
        """One journal row, committed before this returns."""
        with self._lock:
            self._insert_row(
                seq, about, state, idx=idx, payload=payload, status=status, message=message
            )

    def _insert_row(
        self,
        seq: int,
        about: About,
        state: str,
        *,
        idx: str | None,
        payload: Any,
        status: int | None,
        message: str | None,
    ) -> None:
        self.con.execute(
            f"insert into {self.schema}._push_rows values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now())",
            [
                self.run_id,
                seq,
                about.target,
                about.key,
                about.action,
                state,
                idx,
                payload_hash(payload) if payload is not None else None,
                json.dumps(payload, ensure_ascii=False, default=str)
                if payload is not None
                else None,
                status,
                message,
            ],
        )

    def confirm(
        self,
        seq: int,
        about: About,
        *,
        idx: str | None,
        payload: Any,
        desired: dict[tuple[str, ...], Any] | None,
        message: str | None = None,
    ) -> None:
        """The server confirmed a write: its outcome row and the snapshot move together, in
        one transaction (a crash leaves both or neither)."""
        with self._lock:
            self.con.execute("begin transaction")
            try:
                self._insert_row(
                    seq, about, "confirmed", idx=idx, payload=payload, status=200, message=message
                )
                self._snapshot(
                    about.target,
                    about.key,
                    idx=idx,
                    payload=payload,
                    desired=desired,
                    at=time.time(),
                    deleted=about.action == "delete",
                )
                self.con.execute("commit")
            except BaseException:
                self.con.execute("rollback")
                raise

    def adopt(
        self,
        target: str,
        key: str,
        idx: str,
        desired: dict[tuple[str, ...], Any] | None,
        *,
        recent: bool = False,
    ) -> None:
        """A key matched an object the push did not (knowingly) write: already right, taken
        over by name or idx, or found after a crash (``recent``: the warehouse copy is older
        than it, so the next plan reads it from the service). Remembered by idx."""
        at = time.time() if recent else 0.0
        with self._lock:
            self._snapshot(
                target, key, idx=idx, payload=None, desired=desired, at=at, deleted=False
            )

    def _snapshot(
        self,
        target: str,
        key: str,
        *,
        idx: str | None,
        payload: Any,
        desired: dict[tuple[str, ...], Any] | None,
        at: float,
        deleted: bool,
    ) -> None:
        self.con.execute(
            f"delete from {self.schema}._push_snapshot where target = ? and key = ?", [target, key]
        )
        self.con.execute(
            f"insert into {self.schema}._push_snapshot values (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                target,
                key,
                idx,
                payload_hash(payload) if payload is not None else None,
                _fields_json(desired),
                at,
                deleted,
                fields_hash(desired) if desired is not None else None,
            ],
        )

    def known(self, target: str) -> dict[str, Known]:
        rows = self.con.execute(
            "select key, idx, confirmed_at, payload_hash, deleted, desired_hash "
            f"from {self.schema}._push_snapshot where target = ?",
            [target],
        )
        return {k: Known(idx, float(at), h, bool(d), dh) for k, idx, at, h, d, dh in rows}

    def pending(self, target: str) -> list[Pending]:
        """Intents of earlier runs that never got an outcome."""
        rows = self.con.execute(
            f"""
            select i.run_id, i.seq, i.target, i.key, i.action, i.idx,
                   cast(i.payload as varchar) as payload
            from {self.schema}._push_rows as i
            where i.target = ? and i.state = 'intent' and i.run_id <> ?
              and not exists (
                select 1 from {self.schema}._push_rows as o
                where o.run_id = i.run_id and o.seq = i.seq and o.state <> 'intent')
            order by i.run_id, i.seq
            """,
            [target, self.run_id],
        )
        return [
            Pending(
                run_id=r,
                seq=int(s),
                target=t,
                key=k,
                action=a,
                idx=idx,
                payload=json.loads(p) if p else None,
            )
            for r, s, t, k, a, idx, p in rows
        ]

    def resolve(self, pending: Pending, state: str, idx: str | None, message: str) -> None:
        """Closes an earlier run's intent (``recovered``: it landed; ``absent``: it did not)."""
        with self._lock:
            self.con.execute(
                f"insert into {self.schema}._push_rows "
                "values (?, ?, ?, ?, ?, ?, ?, null, null, null, ?, now())",
                [
                    pending.run_id,
                    pending.seq,
                    pending.target,
                    pending.key,
                    pending.action,
                    state,
                    idx,
                    message,
                ],
            )
