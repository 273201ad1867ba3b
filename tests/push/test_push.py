"""The reverse sync against the live sandbox: preview, apply, idempotence, the service's
refusals, faults between send and journal, and validation."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.errors import ConfigError
from feedback_sync.push.kinds.base import marked_key

from tests.push.helpers import BOT, NEW, accounts, push, write_counts, write_csv, writes
from tests.sync.harness import Harness


@pytest.fixture
def synced(harness: Harness, tmp_path: Path) -> Path:
    """A full sync done; returns the curated folder (empty)."""
    harness.sync(full=True)
    return tmp_path / "curated"


def _notes(dump: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in dump["comments"] if marked_key(c["message"], "idea_notes")]


def _follower(dump: dict[str, Any], email: str) -> dict[str, Any]:
    found = [f for f in dump["followers"] if f["email"].lower() == email.lower()]
    assert len(found) == 1, f"{len(found)} followers with {email}"
    return found[0]


@pytest.mark.slow
def test_round_trip_preview_apply_sync(harness: Harness, synced: Path) -> None:
    dump = harness.dump()
    rows = accounts(dump)
    write_csv(synced / "accounts.csv", rows)

    preview = push(harness, synced)
    assert writes(harness) == [], "a preview sends no write request"
    counts = preview.counts(preview.plans[[p.spec.name for p in preview.plans].index("followers")])
    assert counts["create"] == 2 and counts["update"] == 3, preview.report()
    assert "companies[" in preview.report() and "--apply" in preview.report()
    assert preview.exit_code() == 0

    applied = push(harness, synced, apply=True)
    assert applied.exit_code() == 0, applied.report()
    seen = write_counts(harness)
    assert seen[("POST", "followers")] == 5
    assert seen[("POST", "comments")] >= 1  # the notes

    after = harness.dump()
    for row in rows[:3]:
        follower = _follower(after, row["email"])
        company = next(c for c in follower["companies"] if c["id"] == row["company_id"])
        assert company["monthly_spend"] == float(row["monthly_spend"])
        assert company["attributes"]["plan"] == "scale"
    new = _follower(after, NEW)
    assert new["companies"][0]["monthly_spend"] == 3200.5
    bot = _follower(after, BOT)
    notes = _notes(after)
    assert notes and all(n["follower"]["idx"] == bot["idx"] and n["is_private"] for n in notes)
    assert len({marked_key(n["message"], "idea_notes") for n in notes}) == len(notes)

    harness.sync(full=True)
    for con in harness.connect():
        landed = con.execute(
            "select f.email, c.monthly_spend, c.company_attributes ->> 'plan' "
            "from staging.followers f join staging.follower_companies c using (follower_idx) "
            "where c.company_id = 'acct-900001'"
        ).fetchall()
        assert landed == [(NEW, 3200.5, "business")]
        journal = con.execute(
            "select state, count(*) from push._push_rows group by state order by state"
        ).fetchall()
        assert dict(journal)["confirmed"] == dict(journal)["intent"]
        runs = con.execute(
            "select applied, status from push._push_runs order by started_at"
        ).fetchall()
        assert runs == [(False, "preview"), (True, "ok")]


@pytest.mark.slow
def test_second_run_sends_zero_writes(harness: Harness, synced: Path) -> None:
    write_csv(synced / "accounts.csv", accounts(harness.dump()))
    assert push(harness, synced, apply=True).exit_code() == 0
    assert writes(harness)

    again = push(harness, synced, apply=True)  # the warehouse copy is stale: re-read
    assert writes(harness) == [], again.report()
    assert again.totals()["unchanged"] > 0 and again.exit_code() == 0

    harness.sync(full=True)
    # the copy is fresh: nothing is even re-read (the notes would change now: the pushed
    # spend moved the marts' figures)
    fresh = push(harness, synced, apply=True, targets=["followers"])
    assert writes(harness) == [] and fresh.reads == 0, fresh.report()
    assert fresh.counts(fresh.plans[0]) == Counter(unchanged=5)


@pytest.mark.slow
def test_mapping_change_touches_only_changed_rows(harness: Harness, synced: Path) -> None:
    rows = accounts(harness.dump())
    write_csv(synced / "accounts.csv", rows)
    push(harness, synced, apply=True, targets=["followers"])
    harness.sync(full=True)
    # a new mapped column, filled for two followers only
    for row in rows:
        row["attr__tier"] = "gold" if row["email"] in (rows[1]["email"], NEW) else None
    write_csv(synced / "accounts.csv", rows, [*rows[0]])
    result = push(harness, synced, apply=True, targets=["followers"])
    sent = writes(harness)
    assert len(sent) == 2, result.report()
    step = next(s for s in result.plans[0].steps if s.action == "update")
    assert step.request is not None and step.request.body == {"attributes": {"tier": "gold"}}
    tiers = {f["email"].lower(): f["attributes"].get("tier") for f in harness.dump()["followers"]}
    assert tiers[rows[1]["email"].lower()] == "gold" and tiers[NEW] == "gold"


@pytest.mark.slow
def test_custom_attributes_disabled_is_learned_once(harness: Harness, synced: Path) -> None:
    write_csv(synced / "accounts.csv", accounts(harness.dump()))
    harness.switches(custom_attributes=False)
    result = push(harness, synced, apply=True, targets=["followers"])
    statuses = Counter(r["status"] for r in harness.requests() if r["method"] == "POST")
    assert statuses[403] == 1, statuses
    assert result.custom_attributes_disabled and "learned from" in result.custom_attributes_disabled
    counts = result.counts(result.plans[0])
    # updates that only changed companies cannot land; the new customer lands without its
    # company (rejected: not all of it landed); the bot, with nothing custom, lands whole
    assert counts == Counter(rejected=4, create=1), result.report()
    assert result.exit_code() == 1
    assert {f["email"] for f in harness.dump()["followers"]} >= {NEW, BOT}
    for con in harness.connect():
        rejected = con.execute(
            "select count(*) from push._push_rows where state = 'rejected' and http_status = 403"
        ).fetchone()
        assert rejected is not None and rejected[0] >= 4


@pytest.mark.slow
def test_429_storm_lands_everything_once(harness: Harness, synced: Path) -> None:
    write_csv(synced / "accounts.csv", accounts(harness.dump()))
    harness.switches(
        faults={
            "script": [{"kind": "429", "count": 12, "path_prefix": "/v1/", "method": "POST"}],
            # a 1 s pause each: "Retry-After: 0" means the client's own backoff (up to 30 s
            # a retry; test_client_writes.py covers it), which would make this storm minutes
            "retry_after_seconds": 1,
        }
    )
    result = push(harness, synced, apply=True, targets=["followers"], max_retries=20)
    assert result.exit_code() == 0, result.report()
    assert result.retries >= 12
    statuses = Counter(r["status"] for r in writes(harness))
    assert statuses[429] == 12 and statuses[200] == 5
    emails = [f["email"].lower() for f in harness.dump()["followers"]]
    assert len(emails) == len(set(emails))


@pytest.mark.parametrize("fault", ["drop", "500", "truncate"])
@pytest.mark.slow
def test_create_with_unknown_outcome_is_looked_up_not_duplicated(
    harness: Harness, synced: Path, fault: str
) -> None:
    write_csv(synced / "accounts.csv", [{"email": BOT, "name": "Revenue bot"}])
    push(harness, synced, apply=True, targets=["followers"])
    harness.sync(full=True)
    # every note create meets the fault once: "drop" and "truncate" after the server
    # acted, "500" before
    harness.switches(
        faults={
            "script": [{"kind": fault, "count": 3, "path_prefix": "/v1/comments", "method": "POST"}]
        }
    )
    result = push(harness, synced, apply=True, targets=["idea_notes"])
    assert result.exit_code() == 0, result.report()
    notes = _notes(harness.dump())
    keys = [marked_key(n["message"], "idea_notes") for n in notes]
    planned = [s.key for s in result.plans[0].steps if s.action == "create"]
    assert sorted(keys) == sorted(planned), "every note exactly once"


def test_invalid_rows_are_reported_and_the_valid_ones_go(harness: Harness, synced: Path) -> None:
    rows = accounts(harness.dump())
    rows += [
        {"email": "bob@@example.com", "name": "Bob"},
        {
            "email": "carol@example.com",
            "name": "Carol",
            "company_id": "acct-1",
            "company_name": "C",
            "monthly_spend": "lots",
        },
        {"email": "dup@example.com", "name": "Dup", "company_id": "acct-2", "company_name": "D"},
        {"email": "DUP@example.com", "name": "Dup", "company_id": "acct-2", "company_name": "D"},
        {"email": "eve@example.com", "name": "Eve", "company_id": "acct-3"},
        {"email": "noname@example.com"},
    ]
    write_csv(synced / "accounts.csv", rows)
    write_csv(
        synced / "releases.csv",
        [
            {
                "release_key": "r1",
                "name": "One",
                "content": "Body",
                "author_idx": harness.dump()["users"][0]["idx"],
                "idea_idxs": "ide_nope",
            },
            {
                "release_key": "r2",
                "name": "Two",
                "content": "Body",
                "author_idx": harness.dump()["users"][0]["idx"],
                "published_at": "soon",
            },
        ],
    )
    result = push(harness, synced, apply=True, targets=["followers", "announcements"])
    report = result.report()
    assert result.exit_code() == 1
    assert result.totals()["invalid"] == 7, report
    for reason in (
        "not a valid email",
        "must be a number",
        "duplicate key",
        "company_name is required",
        "unknown idea",
        "ISO 8601",
        "name is required to create",
    ):
        assert reason in report, reason
    assert Counter((r["method"], r["status"]) for r in writes(harness)) == Counter(
        {("POST", 200): 5}
    )
    emails = {f["email"] for f in harness.dump()["followers"]}
    assert "carol@example.com" not in emails and NEW in emails


def test_safety_limits_refuse_unless_forced(harness: Harness, synced: Path) -> None:
    rows = accounts(harness.dump())
    write_csv(synced / "accounts.csv", rows)
    push(harness, synced, apply=True, targets=["followers"])
    for row in rows:
        if row.get("monthly_spend"):
            row["monthly_spend"] = "1.00"  # every row the target pushed changes
    write_csv(synced / "accounts.csv", rows)
    refused = push(harness, synced, apply=True, targets=["followers"], share=0.25, min_rows=0)
    assert refused.plans[0].refused and "more than the limit of 25%" in refused.report()
    assert writes(harness) == [] and refused.exit_code() == 1
    small = push(harness, synced, targets=["followers"], share=0.25, min_rows=10)
    assert not small.plans[0].refused, "5 rows are below the limit's minimum"
    forced = push(
        harness, synced, apply=True, targets=["followers"], share=0.25, min_rows=0, force=True
    )
    assert forced.exit_code() == 0 and len(writes(harness)) == 4

    write_csv(synced / "accounts.csv", [], ["email"])
    empty = push(harness, synced, apply=True, targets=["followers"])
    assert "desired set is empty" in empty.report() and writes(harness) == []


def test_bad_configuration_is_a_config_error(harness: Harness, synced: Path) -> None:
    write_csv(synced / "accounts.csv", [{"email": "a@example.com", "monthly_spnd": "1"}])
    with pytest.raises(ConfigError, match=r"unknown column.*monthly_spnd"):
        push(harness, synced)
    with pytest.raises(ConfigError, match="unknown push target"):
        push(harness, synced, targets=["nope"])
    (synced / "accounts.csv").unlink()
    with pytest.raises(ConfigError, match="no curated input accounts"):
        push(harness, synced, targets=["followers"])


def test_topics_renamed_by_key_and_adopted_by_name(harness: Harness, synced: Path) -> None:
    topics = harness.dump()["topics"]
    write_csv(
        synced / "topics.csv",
        [
            {"topic_key": "first", "name": topics[0]["name"]},  # adopted by its name
            {"topic_key": "second", "name": "Renamed", "idx": topics[1]["idx"]},
            {"topic_key": "new", "name": "Brand new"},
        ],
        ["topic_key", "name", "idx"],
    )
    result = push(harness, synced, apply=True, targets=["topics"])
    assert Counter(s.action for s in result.plans[0].steps) == Counter(
        unchanged=1, update=1, create=1
    )
    names = [t["name"] for t in harness.dump()["topics"]]
    assert (
        "Renamed" in names and names.count("Brand new") == 1 and names.count(topics[0]["name"]) == 1
    )
    write_csv(
        synced / "topics.csv",
        [
            {"topic_key": "first", "name": "First renamed"},
            {"topic_key": "second", "name": "Renamed again"},
            {"topic_key": "ghost", "name": "Ghost", "idx": "top_nope"},
        ],
        ["topic_key", "name", "idx"],
    )
    again = push(harness, synced, apply=True, targets=["topics"], force=True)
    renamed = {t["idx"]: t["name"] for t in harness.dump()["topics"]}
    # the journal remembers each key's idx: the adopted one and the one named by idx
    assert renamed[topics[0]["idx"]] == "First renamed"
    assert renamed[topics[1]["idx"]] == "Renamed again"
    assert "Ghost" not in renamed.values()
    assert "idx top_nope does not exist at the service" in again.report()


def test_journal_lives_in_the_warehouse(harness: Harness, synced: Path) -> None:
    write_csv(synced / "accounts.csv", accounts(harness.dump()))
    push(harness, synced, apply=True, targets=["followers"])
    path = harness.target().duckdb_file()
    with duckdb.connect(str(path), read_only=True) as con:
        columns = [r[0] for r in con.execute("describe push._push_rows").fetchall()]
        assert {
            "action",
            "key",
            "payload_hash",
            "http_status",
            "message",
            "idx",
            "recorded_at",
        } <= set(columns)
        created = con.execute(
            "select key, idx from push._push_rows "
            "where action = 'create' and state = 'confirmed' order by key"
        ).fetchall()
        assert [k for k, _ in created] == sorted([BOT, NEW]) and all(
            i.startswith("flw_") for _, i in created
        )


def _targets_with(tmp: Path, target: str, header: str, value: str) -> Path:
    """A copy of sql/push where one target's header line says ``value``."""
    import shutil

    from feedback_sync.push.targets import PUSH_DIR

    folder = tmp / "push-sql"
    shutil.copytree(PUSH_DIR, folder)
    path = folder / f"{target}.sql"
    lines = [
        f"-- {header}: {value}" if line.startswith(f"-- {header}:") else line
        for line in path.read_text().splitlines()
    ]
    path.write_text("\n".join(lines) + "\n")
    return folder


def test_deletes_only_when_opted_in_and_only_what_it_pushed(
    harness: Harness, synced: Path, tmp_path: Path
) -> None:
    import io

    from feedback_sync.push.run import PushOptions, run_push
    from feedback_sync.push.settings import PushSettings

    def run(push_dir: Path | None = None) -> Any:
        harness.mark_requests()
        return run_push(
            harness.target(),
            PushOptions(targets=["followers"], apply=True, force=True, push_dir=push_dir),
            settings=harness.settings(),
            push_settings=PushSettings(curated_dir=synced, note_author_email=BOT),
            out=io.StringIO(),
        )

    rows = accounts(harness.dump())
    write_csv(synced / "accounts.csv", rows)
    run()
    gone = [r for r in rows if r["email"] != NEW]
    write_csv(synced / "accounts.csv", gone)
    run()  # the default target does not delete
    assert not [w for w in writes(harness) if w["method"] == "DELETE"]
    reassigning = _targets_with(tmp_path, "followers", "delete", "reassign")
    result = run(reassigning)
    deletes = [w for w in writes(harness) if w["method"] == "DELETE"]
    assert len(deletes) == 1 and deletes[0]["params"]["content"] == ["reassign"], result.report()
    assert NEW not in {f["email"] for f in harness.dump()["followers"]}
    assert len(harness.dump()["followers"]) >= 40, "followers it never pushed stay"
    run(reassigning)
    assert writes(harness) == [], "a deleted key is not deleted again"


@pytest.mark.slow
def test_a_note_whose_author_failed_is_held_then_lands_next_run(
    harness: Harness, synced: Path
) -> None:
    write_csv(synced / "accounts.csv", [{"email": BOT, "name": "Revenue bot"}])
    # the author's create keeps failing with a 500 (the service did not make it)
    harness.switches(
        faults={
            "script": [
                {"kind": "500", "count": 4, "path_prefix": "/v1/followers", "method": "POST"}
            ]
        }
    )
    first = push(harness, synced, apply=True, targets=["followers", "idea_notes"], max_retries=1)
    notes = next(p for p in first.plans if p.spec.name == "idea_notes")
    held = [s for s in notes.steps if "held" in (s.action, s.outcome)]
    assert held and all(
        f"its author {BOT} did not land" in (s.message or s.reason or "") for s in held
    ), first.report()
    assert first.exit_code() == 1
    assert not [w for w in writes(harness) if w["path"] == "/v1/comments"]
    harness.switches(faults={"script": []})
    second = push(harness, synced, apply=True, targets=["followers", "idea_notes"])
    assert second.exit_code() == 0, second.report()
    assert len(_notes(harness.dump())) == len(held), "the held notes land on the next run"
    assert [f["email"] for f in harness.dump()["followers"]].count(BOT) == 1


@pytest.mark.parametrize("mode", ["insert", "update"])
def test_modes_insert_and_update(harness: Harness, synced: Path, tmp_path: Path, mode: str) -> None:
    import io

    from feedback_sync.push.run import PushOptions, run_push
    from feedback_sync.push.settings import PushSettings

    write_csv(synced / "accounts.csv", accounts(harness.dump()))
    harness.mark_requests()
    result = run_push(
        harness.target(),
        PushOptions(
            targets=["followers"],
            apply=True,
            push_dir=_targets_with(tmp_path, "followers", "mode", mode),
        ),
        settings=harness.settings(),
        push_settings=PushSettings(curated_dir=synced, note_author_email=BOT),
        out=io.StringIO(),
    )
    counts = result.counts(result.plans[0])
    sent = Counter(w["path"] for w in writes(harness))
    if mode == "insert":  # the two new followers; the three existing ones are left alone
        assert counts == Counter(create=2, unchanged=3) and sent == Counter({"/v1/followers": 2})
    else:  # the three existing ones; the new ones are reported, not created
        assert counts == Counter(update=3, invalid=2), result.report()
        assert "mode update never creates" in result.report()
        assert sum(sent.values()) == 3


@pytest.mark.slow
def test_an_update_that_timed_out_is_not_sent_twice(harness: Harness, synced: Path) -> None:
    """The server applies a stalled update after the client gave up on it: resending it
    would apply it twice. The run reports it; the next run reads it back and sends nothing."""
    rows = accounts(harness.dump())
    write_csv(synced / "accounts.csv", rows)
    harness.switches(
        faults={
            "stall_seconds": 1.0,
            "script": [
                {"kind": "stall", "count": 1, "path_prefix": "/v1/followers/", "method": "POST"}
            ],
        }
    )
    first = push(harness, synced, apply=True, targets=["followers"], timeout_seconds=0.5)
    assert first.exit_code() == 1
    (unknown,) = [s for s in first.plans[0].steps if s.outcome == "unknown"]
    assert "not sent again now" in (unknown.message or "")
    time.sleep(1.0)  # the stalled update lands at the server
    updates = [r for r in writes(harness) if r["path"].startswith("/v1/followers/")]
    assert len(updates) == 3
    assert len({r["body_sha256"] for r in updates}) == 3  # each sent once
    second = push(harness, synced, apply=True, targets=["followers"])
    assert second.exit_code() == 0, second.report()
    assert writes(harness) == []
    after = harness.dump()
    for row in rows[:3]:
        company = next(
            c for c in _follower(after, row["email"])["companies"] if c["id"] == row["company_id"]
        )
        assert company["monthly_spend"] == float(row["monthly_spend"])
