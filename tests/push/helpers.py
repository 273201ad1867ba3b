"""Helpers for the push tests: curated files from the sandbox's own data, runs, and the
write requests the server saw."""

from __future__ import annotations

import csv
import io
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from feedback_sync.push.run import PushOptions, PushResult, run_push
from feedback_sync.push.settings import PushSettings

from tests.sync.harness import Harness

BOT = "feedback-bot@example.net"
NEW = "dana.whitfield@example.net"
ACCOUNT_COLUMNS = ["email", "name", "company_id", "company_name", "monthly_spend", "plan"]


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    if columns is None:
        columns = list(dict.fromkeys(c for row in rows for c in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({c: "" if row.get(c) is None else row[c] for c in columns})


def followers_with_companies(dump: dict[str, Any], n: int) -> list[dict[str, Any]]:
    companies = {c["id"]: c for c in dump["companies"]}
    out = []
    for follower in dump["followers"]:
        ids = follower.get("company_ids") or [c["id"] for c in follower.get("companies") or []]
        if ids:
            out.append({**follower, "_companies": [companies[i] for i in ids]})
        if len(out) == n:
            break
    return out


def accounts(dump: dict[str, Any], n: int = 3, bump: float = 100.0) -> list[dict[str, Any]]:
    """Rows for ``curated.accounts``: ``n`` existing followers, each first company's spend
    raised by ``bump`` and its plan set to "scale"; a new follower; the notes' author."""
    rows: list[dict[str, Any]] = []
    for follower in followers_with_companies(dump, n):
        company = follower["_companies"][0]
        spend = (company.get("monthly_spend") or 0) + bump
        rows.append(
            {
                "email": follower["email"].upper() if not rows else follower["email"],
                "name": follower["name"],
                "company_id": company["id"],
                "company_name": company["name"],
                "monthly_spend": f"{spend:.2f}",
                "plan": "scale",
            }
        )
    rows.append(
        {
            "email": NEW,
            "name": "Dana Whitfield",
            "company_id": "acct-900001",
            "company_name": "Whitfield & Co",
            "monthly_spend": "3200.50",
            "plan": "business",
        }
    )
    rows.append({"email": BOT, "name": "Revenue bot"})
    return rows


def push(
    harness: Harness,
    curated: Path,
    *,
    apply: bool = False,
    targets: list[str] | None = None,
    force: bool = False,
    share: float = 0.5,
    min_rows: int = 10,
    **overrides: Any,
) -> PushResult:
    settings = PushSettings(
        curated_dir=curated,
        note_author_email=BOT,
        max_change_share=share,
        max_change_min_rows=min_rows,
        sample_size=3,
    )
    harness.mark_requests()
    return run_push(
        harness.target(),
        PushOptions(targets=targets, apply=apply, force=force),
        settings=harness.settings(**overrides),
        push_settings=settings,
        out=io.StringIO(),
    )


def writes(harness: Harness) -> list[dict[str, Any]]:
    """The write requests (POST, DELETE) the server saw since the last ``push``."""
    return [r for r in harness.requests() if r["method"] in ("POST", "DELETE")]


def write_counts(harness: Harness) -> Counter[tuple[str, str]]:
    return Counter((r["method"], r["path"].split("/")[2]) for r in writes(harness))


def write_count(harness: Harness) -> int:
    """The write requests the server saw since the last ``mark_requests``."""
    return sum(1 for r in harness.requests() if r["method"] in ("POST", "DELETE"))


def kill_during_writes(
    harness: Harness, command: list[str], env: dict[str, str], moments: tuple[int, ...]
) -> int:
    """Runs ``command`` once per moment and SIGKILLs it as soon as the server holds that
    many of its writes (the n-th write is at the server, its answer never journaled).
    Returns how many runs were killed (a run that ended first was not)."""
    kills = 0
    for moment in moments:
        harness.mark_requests()
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            if write_count(harness) >= moment:
                process.send_signal(signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.01)
        process.wait(timeout=60)
        time.sleep(0.5)  # the server finishes the writes it had
    return kills
