"""End-to-end test harness: a live sandbox, a sync into a temporary DuckDB file, and the
server's ground truth (``/_sandbox/dump``) turned into the rows each table should hold.

The expected rows are derived here, independently of ``feedback_sync.source.shaping``, from
the dump's API-shaped records.
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.app.sync import SyncOptions, SyncResult, run_sync
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.source.screening import REJECTED_TABLE
from feedback_sync.warehouse.target import Target, make_target

Rows = Counter[tuple[Any, ...]]

# table -> the columns compared, in the order ``expected_rows`` builds them
COLUMNS: dict[str, tuple[str, ...]] = {
    "followers": ("idx", "name", "email", "avatar", "created_at", "updated_at"),
    "followers__companies": ("follower_idx", "id", "name", "monthly_spend", "attributes"),
    "followers__attributes": ("follower_idx", "key", "value", "value_type"),
    "announcements": (
        "idx",
        "name",
        "slug",
        "excerpt",
        "content",
        "content_html",
        "is_published",
        "published_at",
        "created_at",
        "updated_at",
        "author__idx",
        "author__name",
        "author__avatar",
    ),
    "announcements__categories": ("announcement_idx", "idx", "name", "color"),
    "announcements__ideas": ("announcement_idx", "idx", "name"),
    "announcements__reactions": ("announcement_idx", "reaction", "count"),
    "comments": (
        "idx",
        "message",
        "content",
        "content_html",
        "content_markdown",
        "is_private",
        "type",
        "created_at",
        "updated_at",
        "idea_id",
        "idea_idx",
        "follower__idx",
        "follower__name",
        "follower__avatar",
    ),
    "comments__attachments": (
        "comment_idx",
        "idx",
        "name",
        "url",
        "type",
        "created_at",
        "updated_at",
    ),
    "topics": ("idx", "name", "idea_count", "order", "created_at", "updated_at"),
    "statuses": ("idx", "name", "color", "created_at", "updated_at"),
    "integration_links": (
        "idx",
        "idea_idx",
        "type",
        "link_ref",
        "meta",
        "created_at",
        "updated_at",
    ),
    "ideas": (
        "idx",
        "id",
        "name",
        "status_idx",
        "comment_count",
        "note_count",
        "created_at",
        "updated_at",
    ),
    "ideas__topics": ("idea_idx", "topic_idx"),
}
JSON_COLUMNS = {
    ("followers__companies", "attributes"),
    ("comments", "content"),
    ("integration_links", "meta"),
}
TIME_COLUMNS = {"created_at", "updated_at", "published_at"}


def ts(value: str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(value).astimezone(UTC)


def canon(value: Any) -> str | None:
    """JSON in one canonical spelling; an empty object counts as absent."""
    if isinstance(value, str):
        value = json.loads(value)
    if value is None or value == {}:
        return None
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _attribute(value: Any) -> tuple[str | None, str]:
    if isinstance(value, str):
        return value, "string"
    if value is None:
        return None, "null"
    kind = (
        "boolean"
        if isinstance(value, bool)
        else "number"
        if isinstance(value, int | float)
        else "array"
        if isinstance(value, list)
        else "object"
    )
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")), kind


def expected_rows(dump: dict[str, Any]) -> dict[str, Rows]:
    """What every table must hold, from the server's ground truth."""
    out: dict[str, Rows] = {table: Counter() for table in COLUMNS}
    for f in dump["followers"]:
        out["followers"][
            (f["idx"], f["name"], f["email"], f["avatar"], ts(f["created_at"]), ts(f["updated_at"]))
        ] += 1
        for c in f.get("companies") or ():
            out["followers__companies"][
                (f["idx"], c["id"], c["name"], c.get("monthly_spend"), canon(c.get("attributes")))
            ] += 1
        for key, value in (f.get("attributes") or {}).items():
            out["followers__attributes"][(f["idx"], key, *_attribute(value))] += 1
    for a in dump["announcements"]:
        out["announcements"][
            (
                a["idx"],
                a["name"],
                a["slug"],
                a["excerpt"],
                a["content"],
                a["content_html"],
                a["is_published"],
                ts(a["published_at"]),
                ts(a["created_at"]),
                ts(a["updated_at"]),
                a["author"]["idx"],
                a["author"]["name"],
                a["author"]["avatar"],
            )
        ] += 1
        for c in a["categories"]:
            out["announcements__categories"][(a["idx"], c["idx"], c["name"], c["color"])] += 1
        for i in a["ideas"]:
            out["announcements__ideas"][(a["idx"], i["idx"], i["name"])] += 1
        for emoji, count in a["reaction_count"].items():
            out["announcements__reactions"][(a["idx"], emoji, count)] += 1
    for c in dump["comments"]:
        out["comments"][
            (
                c["idx"],
                c["message"],
                canon(c["content"]),
                c["content_html"],
                c["content_markdown"],
                c["is_private"],
                c["type"],
                ts(c["created_at"]),
                ts(c["updated_at"]),
                c["idea_id"],
                c["idea_idx"],
                c["follower"]["idx"],
                c["follower"]["name"],
                c["follower"]["avatar"],
            )
        ] += 1
        for a in c["attachments"]:
            out["comments__attachments"][
                (
                    c["idx"],
                    a["idx"],
                    a["name"],
                    a["url"],
                    a["type"],
                    ts(a["created_at"]),
                    ts(a["updated_at"]),
                )
            ] += 1
    for t in dump["topics"]:
        out["topics"][
            (
                t["idx"],
                t["name"],
                t["idea_count"],
                t["order"],
                ts(t["created_at"]),
                ts(t["updated_at"]),
            )
        ] += 1
    for s in dump["statuses"]:
        out["statuses"][
            (s["idx"], s["name"], s["color"], ts(s["created_at"]), ts(s["updated_at"]))
        ] += 1
    for link in dump["integration_links"]:
        out["integration_links"][
            (
                link["idx"],
                link["idea_idx"],
                link["type"],
                link["link_ref"],
                canon(link["meta"]),
                ts(link["created_at"]),
                ts(link["updated_at"]),
            )
        ] += 1
    for i in dump["ideas"]:
        out["ideas"][
            (
                i["idx"],
                i["id"],
                i["name"],
                i["status_idx"],
                i["comment_count"],
                i["note_count"],
                ts(i["created_at"]),
                ts(i["updated_at"]),
            )
        ] += 1
        for topic in i["topic_idxs"]:
            out["ideas__topics"][(i["idx"], topic)] += 1
    return out


def _normalize(table: str, row: tuple[Any, ...], whole_seconds: bool = False) -> tuple[Any, ...]:
    values = []
    for name, value in zip(COLUMNS[table], row, strict=True):
        if (table, name) in JSON_COLUMNS:
            value = canon(value)
        elif name in TIME_COLUMNS and isinstance(value, datetime):
            value = value.astimezone(UTC)
            if whole_seconds:
                value = value.replace(microsecond=0)
        values.append(value)
    return tuple(values)


def truncate_times(rows: Rows, table: str) -> Rows:
    """The same rows with timestamps cut to whole seconds (the plain format has no more)."""
    return Counter({_normalize(table, row, True): n for row, n in rows.items()})


def fold_variants(row: dict[str, Any], column: str, json_text: bool = False) -> Any:
    """A column's value as sent: the column's own, or the one of its type variants
    (``<column>__v_<type>``) that holds it; a JSON variant (and the column itself, when
    ``json_text``) is read back as JSON."""
    if row.get(column) is not None:
        return json.loads(row[column]) if json_text else row[column]
    for name, value in row.items():
        if name.startswith(f"{column}__v_") and value is not None:
            return json.loads(value) if name.endswith("__v_json") else value
    return None


def landed_rows(con: duckdb.DuckDBPyConnection, table: str, source: str, where: str = "") -> Rows:
    """Rows of ``table`` read from ``source`` (a qualified table or a ``read_parquet``), each
    compared column read together with its type variants."""
    present = [d[0] for d in con.execute(f"select * from {source} limit 0").description]
    wanted = [c for c in present if any(c == w or c.startswith(f"{w}__v_") for w in COLUMNS[table])]
    cols = ", ".join(f'"{c}"' for c in wanted)
    rows = con.execute(f"select {cols} from {source} {where}").fetchall()
    return Counter(
        _normalize(
            table,
            tuple(fold_variants(dict(zip(wanted, row, strict=True)), c) for c in COLUMNS[table]),
        )
        for row in rows
    )


def diff(expected: Rows, actual: Rows, limit: int = 3) -> str:
    missing = list((expected - actual).elements())[:limit]
    extra = list((actual - expected).elements())[:limit]
    return (
        f"{sum((expected - actual).values())} missing, e.g. {missing}; "
        f"{sum((actual - expected).values())} unexpected, e.g. {extra}"
    )


class Intercept(httpx.BaseTransport):
    """A real network transport, except for requests ``answer`` returns a response for."""

    def __init__(
        self,
        answer: Callable[[httpx.Request], httpx.Response | None] = lambda request: None,
        rewrite: Callable[[httpx.Request, dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._answer = answer
        self._rewrite = rewrite
        self._inner = httpx.HTTPTransport()
        self.intercepted = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._answer(request)
        if response is not None:
            self.intercepted += 1
            return response
        response = self._inner.handle_request(request)
        if self._rewrite is None or response.status_code != 200:
            return response
        body = self._rewrite(request, json.loads(response.read()))
        return httpx.Response(200, json=body)

    def close(self) -> None:
        self._inner.close()


def error(status: int, message: str, code: str) -> httpx.Response:
    return httpx.Response(status, json={"error": True, "message": message, "code": code})


class _Collect(logging.Handler):
    """dlt's warnings during one sync (a warning that fires is a bug to fix)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.WARNING:
            self.warnings.append(record.getMessage())


class PostgresReader:
    """A psycopg2 connection read like a DuckDB one: ``execute(sql)`` returns a cursor with
    ``description`` and ``fetchall()``; a missing table reads as DuckDB's would fail."""

    def __init__(self, dsn: str) -> None:
        import psycopg2

        self._con = psycopg2.connect(dsn)
        self._con.autocommit = True

    def execute(self, sql: str, params: Any = None) -> Any:
        cursor = self._con.cursor()
        cursor.execute(sql.replace("?", "%s") if params else sql, params)
        return cursor

    def close(self) -> None:
        self._con.close()


class Harness:
    """One live sandbox, one warehouse under ``tmp``, and helpers to drive and inspect both."""

    def __init__(self, server: RunningSandbox, tmp: Path) -> None:
        self.server = server
        self.tmp = tmp
        self.control = httpx.Client(base_url=f"{server.root_url}/_sandbox", timeout=60)
        self.overrides: dict[str, Any] = {}
        self.log_mark = 0
        self.last_output = ""
        self.dlt_warnings: list[str] = []
        # where sync(), connect() and the truth checks go unless told otherwise
        self.destination = "duckdb"
        # the dataset read (an account's: ``feedback_<account>``)
        self.dataset = "feedback"
        # the PostgreSQL database read (default: DESTINATION__POSTGRES__CREDENTIALS)
        self.postgres_dsn: str | None = None
        # where the Delta tables are read (default: the local folder) and delta-rs's
        # storage options for it (an object store's address and keys)
        self.delta_uri: str | None = None
        self.delta_storage: dict[str, str] | None = None
        self.delta_store: Any = (
            None  # the object store the tables are in (tests/support/objectstore.py)
        )

    def close(self) -> None:
        self.control.close()

    def settings(self, **overrides: Any) -> FeedbackSettings:
        values: dict[str, Any] = {
            "base_url": self.server.base_url,
            "api_key": self.server.api_key,
            "page_size": 7,
            "max_concurrency": 4,
            "timeout_seconds": 5,
            **self.overrides,
            **overrides,
        }
        return FeedbackSettings.validate(**values)

    def target(self, destination: str | None = None) -> Target:
        destination = destination or self.destination
        return make_target(
            destination=destination,
            duckdb_path=self.tmp / "warehouse.duckdb" if destination == "duckdb" else None,
            parquet_dir=self.tmp / "parquet",
            pipelines_dir=self.tmp / "pipelines",
            delta_dir=self.tmp / "delta",
        )

    def sync(
        self,
        *,
        full: bool = False,
        destination: str | None = None,
        resources: list[str] | None = None,
        after_extract: Callable[[Any], None] | None = None,
        transport: httpx.BaseTransport | None = None,
        models: bool = True,
        **overrides: Any,
    ) -> SyncResult:
        out = io.StringIO()
        caught = _Collect()
        dlt_logger = logging.getLogger("dlt")
        dlt_logger.addHandler(caught)
        try:
            options = SyncOptions(
                full=full,
                resources=resources,
                settings=self.settings(**overrides),
                out=out,
                progress_every=3600,
                after_extract=after_extract,
                transport=transport,
                models=models,
            )
            return run_sync(self.target(destination), options)
        finally:
            dlt_logger.removeHandler(caught)
            self.dlt_warnings = caught.warnings
            self.last_output = out.getvalue()

    def dump(self) -> dict[str, Any]:
        response = self.control.get("/dump")
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def switches(self, **changes: Any) -> None:
        response = self.control.post("/settings", json=changes)
        assert response.status_code == 200, response.text

    def mutate(
        self, seed: int, counts: dict[str, dict[str, int]] | None = None, **body: Any
    ) -> dict[str, Any]:
        """Seeded changes at the server: ``counts`` per resource, or ``fraction=...``."""
        response = self.control.post("/mutate", json={"seed": seed, **(counts or {}), **body})
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()
        return data

    def mark_requests(self) -> None:
        self.log_mark = self.control.get("/requests").json()["last_seq"]

    def requests(self) -> list[dict[str, Any]]:
        """The API requests the server answered since ``mark_requests``."""
        entries = self.control.get("/requests", params={"since": self.log_mark}).json()
        return [e for e in entries["requests"] if e["path"].startswith("/v1/")]

    def connect(self, destination: str | None = None) -> Iterator[Any]:
        """A read connection: DuckDB's, or for ``postgres`` one with DuckDB's ``execute``."""
        destination = destination or self.destination
        if destination == "postgres":
            pg = PostgresReader(
                self.postgres_dsn or os.environ["DESTINATION__POSTGRES__CREDENTIALS"]
            )
            try:
                yield pg
            finally:
                pg.close()
            return
        if destination == "delta":
            con = self._delta_connection()
            try:
                yield con
            finally:
                con.close()
            return
        path = self.target(destination).duckdb_file()
        assert path is not None
        con = duckdb.connect(str(path), read_only=True)
        try:
            yield con
        finally:
            con.close()

    def _delta_connection(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with ``feedback.<table>`` for each Delta table, as delta-rs
        itself reads it (not by the file lists the models use)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        uri = self.delta_uri or str(self.tmp / "delta" / "feedback")
        con = duckdb.connect()
        con.execute("create schema feedback")
        for name in [*COLUMNS, REJECTED_TABLE]:
            try:
                table = DeltaTable(f"{uri}/{name}", storage_options=self.delta_storage)
            except TableNotFoundError:
                continue
            con.register(f"_delta_{name}", table.to_pyarrow_table())
            con.execute(f'create view feedback."{name}" as select * from "_delta_{name}"')
        return con

    def table_rows(self, table: str, *, destination: str | None = None, where: str = "") -> Rows:
        destination = destination or self.destination
        if destination == "parquet":
            with duckdb.connect() as con:
                file = self.tmp / "parquet" / f"{table}.parquet"
                return landed_rows(con, table, f"read_parquet('{file}')", where)
        for con in self.connect(destination):
            return landed_rows(con, table, f'"{self.dataset}"."{table}"', where)
        raise AssertionError("unreachable")

    def assert_equals_truth(
        self,
        dump: dict[str, Any] | None = None,
        *,
        destination: str | None = None,
        tables: list[str] | None = None,
        where: str = "",
        whole_seconds: bool = False,
    ) -> None:
        truth = expected_rows(dump or self.dump())
        problems = []
        for table in tables or list(COLUMNS):
            actual = self.table_rows(table, destination=destination, where=where)
            if whole_seconds:
                actual, truth[table] = (
                    truncate_times(actual, table),
                    truncate_times(truth[table], table),
                )
            if actual != truth[table]:
                problems.append(f"{table}: {diff(truth[table], actual)}")
        assert not problems, "\n".join(problems)
