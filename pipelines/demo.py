"""``feedback-sync demo``: what the project can show today, end to end on loopback.

Starts the reference server at ``demo`` scale, reads every list's size through the API,
applies a seeded 1% change at the server, reads the sizes again and prints what changed
and what was asked. (The forward sync and the SQL models join the demo when they land.)
"""

from __future__ import annotations

import time

import httpx

from sandbox.app import create_app
from sandbox.server import serve_in_thread

LISTS: dict[str, tuple[str, dict[str, str]]] = {
    "followers": ("/followers", {}),
    "announcements": ("/announcements", {}),
    "topics": ("/topics", {}),
    "statuses": ("/statuses", {}),
    "ideas": ("/ideas", {}),
}


def _totals(client: httpx.Client) -> dict[str, int]:
    totals = {}
    for name, (path, params) in LISTS.items():
        response = client.get(path, params={**params, "limit": 1})
        response.raise_for_status()
        totals[name] = int(response.json()["pagination"]["total"])
    return totals


def run(scale: str = "demo", seed: int = 1) -> int:
    started = time.perf_counter()
    print(f"demo: starting the reference server (scale {scale!r}, seed {seed}) ...", flush=True)
    app = create_app(scale, seed)
    with serve_in_thread(app) as server:
        print(f"demo: serving {server.base_url}", flush=True)
        headers = {"Authorization": f"Bearer {server.api_key}"}
        with (
            httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as api,
            httpx.Client(base_url=f"{server.root_url}/_sandbox", timeout=60) as control,
        ):
            before = _totals(api)
            changes = control.post("/mutate", json={"seed": seed, "fraction": 0.01}).json()
            after = _totals(api)
            served = control.get("/requests").json()["requests"]
    width = max(len(name) for name in LISTS)
    print(
        f"\n{'list':<{width}}  {'before':>10} {'after':>8}  {'created':>8} {'updated':>8} "
        f"{'deleted':>8}"
    )
    for name in LISTS:
        c = changes.get(name, {"created": [], "updated": [], "deleted": []})
        print(
            f"{name:<{width}}  {before[name]:>10,} {after[name]:>8,}  {len(c['created']):>8} "
            f"{len(c['updated']):>8} {len(c['deleted']):>8}"
        )
    for name in LISTS:
        c = changes.get(name, {"created": [], "updated": [], "deleted": []})
        extra = after[name] - (before[name] + len(c["created"]) - len(c["deleted"]))
        if extra and name == "followers":
            print(
                f"({extra:+} follower: the one 'Anonymous' follower, made when a deleted "
                "follower's comments were reassigned with content=reassign)"
            )
        elif extra:
            print(f"({name}: {extra:+} beyond the batch)")
    v1 = [r for r in served if r["path"].startswith("/v1")]
    print(
        f"\ndemo: done in {time.perf_counter() - started:.1f}s; the server answered "
        f"{len(v1)} API requests ({sum(r['status'] == 200 for r in v1)} OK)."
    )
    print("Next: `./run feedback-sync sandbox --scale demo` serves the same data on a port.")
    return 0
