"""The floor: a minimal httpx client that fetches a list of pages and discards the bodies.

The list is every request a full sync made (read from the sandbox's request log), so the
floor pulls exactly the pages the sync pulls, with the sync's bound on requests in flight
(``max_concurrency``, 8 by default) and the same HTTP client library. Unlike the sync it
knows every URL up front (no waiting for a cursor), parses nothing and keeps nothing: no
real client can be faster against the same server.

    python -m bench.raw_fetch --root URL --api-key KEY --urls FILE [--concurrency 8]

Prints ``{"requests": N, "bytes": B}``; exits 1 if any answer was not a 200.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.raw_fetch", allow_abbrev=False)
    parser.add_argument("--root", required=True, help="the server root (before /v1)")
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--urls", required=True, help="a file of paths with query, one a line")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    paths = Path(args.urls).read_text().split()
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    with httpx.Client(
        base_url=args.root,
        headers={"Authorization": f"Bearer {args.api_key}", "Accept": "application/json"},
        timeout=60,
        limits=limits,
    ) as client:

        def fetch(path: str) -> tuple[int, int]:
            response = client.get(path)
            return response.status_code, len(response.content)

        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            results = list(pool.map(fetch, paths))
    failed = [
        (path, status) for path, (status, _) in zip(paths, results, strict=True) if status != 200
    ]
    if failed:
        print(f"raw fetch: {len(failed)} answers were not 200, first {failed[0]}", file=sys.stderr)
        return 1
    print(json.dumps({"requests": len(paths), "bytes": sum(size for _, size in results)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
