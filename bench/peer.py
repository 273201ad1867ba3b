"""The peer: dlt's generic ``rest_api`` source, configured to do the sync's work, into DuckDB.

Configured as dlt's documentation shows a user: one dict naming the client, the paginators
and one resource per endpoint, per-idea lists as child resources that resolve ``idea_idx``
from the ``ideas`` resource, merge on ``idx``, and ``pipeline.run`` into DuckDB; plus two
paginator subclasses and three ``map`` steps, so that it does the sync's work.
It reads everything (the benchmark compares full reads), and is held to the sync's work:

- **the same requests**: pages of 100 (the sync's ``page_size``); comments and notes in one
  listing per idea; each idea's links by ``idea_idx``; and a list ends where the sync's
  ends. dlt's cursor paginator stops on an empty page, a missing cursor or a ``has_more``
  flag, not on the ``total`` the API sends, so it would ask for one empty page at the end of
  every list (202 more requests at ``small``); ``TotalCursorPaginator`` and
  ``ShortPagePaginator`` stop as the sync does: a short page that brings the count to the
  total ends a cursor list, and a short page ends the topics' page numbers.
- **the same tables and rows**: ``max_table_nesting=1`` and ``json`` hints where the sync
  keeps JSON (comments' rich ``content``, links' ``meta``, companies' ``attributes`` past
  the first level), and ``processing_steps`` that make the sync's three reshaped child
  tables (followers' attributes as key/value rows, announcements' reactions as rows,
  ideas' topic idxs as ``ideas__topics``). Comments carry their idea as ``idea_idx`` (from
  the parent, as dlt's ``include_from_parent`` names it, renamed).

What it cannot match: dlt's child resources add ``_dlt_parent_id``/``_dlt_root_id``
columns where the sync keys child rows by the parent's idx, and dlt infers timestamps
from strings (``iso_timestamp`` detection) where the sync parses them per field.

    python -m bench.peer --base-url URL --api-key KEY --db FILE --pipelines-dir DIR
                         [--loader-file-format parquet]

``--loader-file-format parquet`` is the tuned variant (``peer_pq``): dlt's normalizer writes
Parquet files, which DuckDB loads whole, instead of insert statements.

Prints ``{"rows": N, "tables": {...}}`` (rows landed per table, dlt's own tables excluded).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, cast

import dlt
import orjson
from dlt.sources.helpers.rest_client.paginators import (
    JSONResponseCursorPaginator,
    PageNumberPaginator,
)
from dlt.sources.rest_api import rest_api_source

if TYPE_CHECKING:
    from dlt.sources.rest_api.typing import RESTAPIConfig

PAGE_SIZE = 100  # the sync's default page_size


class TotalCursorPaginator(JSONResponseCursorPaginator):
    """``pagination.after`` cursors, ending where the sync's ``CursorPaginator`` ends: on
    an empty page, a missing cursor, or a short page that brings the count to ``total``."""

    def __init__(self, cursor_path: str = "pagination.after", page_size: int = PAGE_SIZE):
        super().__init__(cursor_path=cursor_path, cursor_param="after")
        self.page_size = page_size
        self._seen = 0

    def init_request(self, request: Any) -> None:
        # dlt copies the paginator for each list it walks; a reused one starts afresh too
        self._seen = 0
        self._has_next_page = True
        super().init_request(request)

    def update_state(self, response: Any, data: list[Any] | None = None) -> None:
        # one parse of the answer, as dlt's own cursor paginator does
        pagination = response.json().get("pagination") or {}
        n = len(data or ())
        self._seen += n
        cursor = pagination.get(str(self.cursor_path).rsplit(".", 1)[-1])
        total = pagination.get("total")
        self._next_reference = cursor or None
        if n == 0 or (n < self.page_size and isinstance(total, int) and self._seen >= total):
            self._has_next_page = False


class ShortPagePaginator(PageNumberPaginator):
    """Topics' page numbers (``offset``, from 1), ending on a short page as the sync does."""

    def __init__(self, page_size: int = PAGE_SIZE):
        super().__init__(page_param="offset", base_page=1, total_path=None)
        self.page_size = page_size

    def update_state(self, response: Any, data: list[Any] | None = None) -> None:
        super().update_state(response, data)
        if len(data or ()) < self.page_size:
            self._has_next_page = False


def _attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": value, "value_type": "string"}
    if value is None:
        return {"key": key, "value": None, "value_type": "null"}
    kind = (
        "boolean"
        if isinstance(value, bool)
        else "number"
        if isinstance(value, int | float)
        else "array"
        if isinstance(value, list)
        else "object"
    )
    return {"key": key, "value": orjson.dumps(value).decode(), "value_type": kind}


def follower(row: dict[str, Any]) -> dict[str, Any]:
    attributes = row.pop("attributes", None)
    if isinstance(attributes, dict):
        row["attributes"] = [_attribute(str(k), v) for k, v in attributes.items()]
    return row


def announcement(row: dict[str, Any]) -> dict[str, Any]:
    reactions = row.pop("reaction_count", None)
    if isinstance(reactions, dict):
        row["reactions"] = [{"reaction": k, "count": v} for k, v in reactions.items()]
    return row


def idea(row: dict[str, Any]) -> dict[str, Any]:
    topics = row.pop("topic_idxs", None)
    if isinstance(topics, list):
        row["topics"] = [{"topic_idx": t} for t in topics]
    return row


def comment(row: dict[str, Any]) -> dict[str, Any]:
    row["idea_idx"] = row.pop("_ideas_idx", None)
    return row


def config(base_url: str, api_key: str, page_size: int = PAGE_SIZE) -> dict[str, Any]:
    """The declarative configuration of every endpoint the full sync reads."""
    by_idea = "{resources.ideas.idx}"  # a child resource: one request chain per idea
    json_column = {"data_type": "json"}
    return {
        "client": {
            "base_url": base_url + "/",
            "auth": {"type": "bearer", "token": api_key},
            "paginator": TotalCursorPaginator(page_size=page_size),
        },
        "resource_defaults": {
            "primary_key": "idx",
            "write_disposition": "merge",
            "endpoint": {"data_selector": "data", "params": {"limit": page_size}},
        },
        "resources": [
            {
                "name": "followers",
                "endpoint": {"path": "followers", "params": {"include_attributes": "true"}},
                "processing_steps": [{"map": follower}],
            },
            {
                "name": "announcements",
                "endpoint": {"path": "announcements"},
                "processing_steps": [{"map": announcement}],
            },
            {
                "name": "ideas",
                "endpoint": {"path": "ideas"},
                "processing_steps": [{"map": idea}],
            },
            "statuses",
            {
                "name": "topics",
                "endpoint": {
                    "path": "topics",
                    "paginator": ShortPagePaginator(page_size),
                },
            },
            {
                "name": "comments",
                "endpoint": {
                    "path": "comments",
                    "params": {"idea_idx": by_idea, "included_types": "comments,notes"},
                },
                "include_from_parent": ["idx"],
                "columns": {"content": json_column},
                "processing_steps": [{"map": comment}],
            },
            {
                "name": "integration_links",
                "endpoint": {
                    "path": "integration-links",
                    "params": {"idea_idx": by_idea},
                    "paginator": {
                        "type": "cursor",
                        "cursor_path": "pagination.endCursor",
                        "cursor_param": "after",
                        "has_more_path": "pagination.hasNextPage",
                    },
                },
                "columns": {"meta": json_column},
            },
        ],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peer", allow_abbrev=False)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--db", required=True, help="the DuckDB file to load into")
    parser.add_argument("--pipelines-dir", required=True)
    parser.add_argument(
        "--loader-file-format",
        choices=["insert_values", "parquet"],
        help="dlt's loader file format (default: dlt's, insert statements into DuckDB)",
    )
    args = parser.parse_args(argv)
    pipeline = dlt.pipeline(
        pipeline_name="feedback_rest_api_peer",
        destination=dlt.destinations.duckdb(args.db),
        dataset_name="feedback",
        pipelines_dir=args.pipelines_dir,
    )
    source = rest_api_source(cast("RESTAPIConfig", config(args.base_url, args.api_key)))
    source.max_table_nesting = 1  # the sync's: lists on a row become child tables, no deeper
    pipeline.run(source, loader_file_format=args.loader_file_format)
    tables: dict[str, int] = {}
    with pipeline.sql_client() as client:
        names = client.execute_sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'feedback' "
            "AND table_name NOT LIKE '\\_dlt\\_%' ESCAPE '\\' ORDER BY 1"
        )
        for (name,) in names or ():
            rows = client.execute_sql(f'SELECT count(*) FROM feedback."{name}"')
            tables[name] = int(rows[0][0]) if rows else 0
    print(json.dumps({"rows": sum(tables.values()), "tables": tables}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
