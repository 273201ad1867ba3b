"""The peer: dlt's generic ``rest_api`` source, configured declaratively, into DuckDB.

Configured the way dlt's documentation shows a user: one dict naming the client, the
paginators and one resource per endpoint, per-idea lists as child resources that resolve
``idea_idx`` from the ``ideas`` resource, merge on ``idx``, and ``pipeline.run`` into DuckDB
with dlt's defaults. It reads everything (the benchmark compares full reads).

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
from typing import Any

import dlt
from dlt.sources.rest_api import rest_api_source

CURSOR = {
    "type": "cursor",
    "cursor_path": "pagination.after",
    "cursor_param": "after",
    "stop_after_empty_page": True,
}


def config(base_url: str, api_key: str, page_size: int = 100) -> dict[str, Any]:
    """The declarative configuration of every endpoint the full sync reads."""
    by_idea = "{resources.ideas.idx}"  # a child resource: one request chain per idea
    return {
        "client": {
            "base_url": base_url + "/",
            "auth": {"type": "bearer", "token": api_key},
            "paginator": CURSOR,
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
            },
            "announcements",
            "ideas",
            "statuses",
            {
                "name": "topics",
                "endpoint": {
                    "path": "topics",
                    "paginator": {
                        "type": "page_number",
                        "page_param": "offset",
                        "base_page": 1,
                        "total_path": None,
                        "stop_after_empty_page": True,
                    },
                },
            },
            {
                "name": "comments",
                "endpoint": {
                    "path": "comments",
                    "params": {"idea_idx": by_idea, "included_types": "comments,notes"},
                },
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
    pipeline.run(
        rest_api_source(config(args.base_url, args.api_key)),
        loader_file_format=args.loader_file_format,
    )
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
