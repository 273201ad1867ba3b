"""Each warehouse has its own identity, working folder, cursors and run lock: two warehouses
synced on one machine by one user, from any folder, never resume from each other's state.

The sequence is the one that lost rows when every project on a machine shared dlt's
working folder: two project folders, each with its own DuckDB file (the default
``data/warehouse.duckdb``, relative to the folder the run starts in), one full sync each,
then normal syncs that alternate with changes at the server in between.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.app.sync import SyncOptions, SyncResult, run_sync
from feedback_sync.errors import WarehouseBusy
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread
from feedback_sync.warehouse import runlock
from feedback_sync.warehouse.target import Target, make_target

from tests.sync.harness import Harness
from tests.sync.test_resilience import Crash

# only what a normal run sees (docs/explanation/incremental.md): new followers, posts,
# comments, links and ideas, and any change to topics and statuses; so after every run each
# warehouse must equal the server's record exactly
CHANGES = {
    "followers": {"create": 4},
    "announcements": {"create": 2},
    "comments": {"create": 9},
    "integration_links": {"create": 2},
    "ideas": {"create": 2},
    "topics": {"create": 1, "update": 1},
    "statuses": {"update": 1},
}


@pytest.fixture
def second_account() -> Iterator[RunningSandbox]:
    """Another account: its own server, seed and key."""
    with serve_in_thread(create_app("tiny", 2, api_key="other-key")) as running:
        yield running


def _sync_in(
    folder: Path, harness: Harness, server: RunningSandbox | None = None, *, full: bool = False
) -> SyncResult:
    """A sync as the command line runs it in ``folder``: the warehouse is the default
    ``data/warehouse.duckdb`` there, and dlt's working folder is dlt's default."""
    folder.mkdir(exist_ok=True)
    here = Path.cwd()
    os.chdir(folder)
    try:
        settings = harness.settings()
        if server is not None:
            settings = harness.settings(base_url=server.base_url, api_key=server.api_key)
        return run_sync(
            make_target(),
            SyncOptions(full=full, settings=settings, out=io.StringIO(), models=False),
        )
    finally:
        os.chdir(here)


def _truth_of(folder: Path, harness: Harness, server: RunningSandbox) -> None:
    """The warehouse in ``folder`` holds exactly what ``server`` holds."""
    check = Harness(server, folder / "data")
    try:
        check.assert_equals_truth()
    finally:
        check.close()


def _alternate(
    harness: Harness, a: Path, b: Path, servers: tuple[RunningSandbox, RunningSandbox]
) -> None:
    _sync_in(a, harness, servers[0], full=True)
    _sync_in(b, harness, servers[1], full=True)
    seed = 40
    other = Harness(servers[1], b)
    try:
        for first, second in ((a, b), (b, a)):
            for folder in (first, second):
                seed += 1
                harness.mutate(seed=seed, counts=CHANGES)
                if servers[1] is not servers[0]:
                    other.mutate(seed=seed, counts=CHANGES)
                _sync_in(folder, harness, servers[0] if folder == a else servers[1])
                # right after its own run, each warehouse holds all its server holds
                _truth_of(folder, harness, servers[0] if folder == a else servers[1])
    finally:
        other.close()


@pytest.mark.slow
def test_two_warehouses_of_one_account_never_share_cursors(
    harness: Harness, tmp_path: Path
) -> None:
    _alternate(harness, tmp_path / "a", tmp_path / "b", (harness.server, harness.server))


@pytest.mark.slow
def test_two_warehouses_of_two_accounts_never_share_cursors(
    harness: Harness, tmp_path: Path, second_account: RunningSandbox
) -> None:
    _alternate(harness, tmp_path / "a", tmp_path / "b", (harness.server, second_account))


def test_each_warehouse_has_a_working_folder_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shared = tmp_path / "pipelines"
    folders = {
        "duckdb here": make_target(pipelines_dir=shared).working_root(),
        "duckdb other file": make_target(
            duckdb_path=Path("other.duckdb"), pipelines_dir=shared
        ).working_root(),
        "duckdb other dataset": make_target(dataset="second", pipelines_dir=shared).working_root(),
        "parquet": make_target(destination="parquet", pipelines_dir=shared).working_root(),
        "parquet elsewhere": make_target(
            destination="parquet", parquet_dir=Path("p2"), pipelines_dir=shared
        ).working_root(),
        "delta": make_target(destination="delta", pipelines_dir=shared).working_root(),
    }
    assert len(set(folders.values())) == len(folders), folders
    assert all(folder.parent == shared for folder in folders.values())
    # the same warehouse named another way (absolute, through a link) is the same folder
    (tmp_path / "link").symlink_to(tmp_path)
    for same in (tmp_path / "data" / "warehouse.duckdb", tmp_path / "link/data/warehouse.duckdb"):
        assert (
            make_target(duckdb_path=same, pipelines_dir=shared).working_root()
            == folders["duckdb here"]
        )


def test_postgres_databases_and_datasets_are_told_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    roots = set()
    for url, dataset in (
        ("postgresql://u:secret@db1:5432/warehouse", "feedback"),
        ("postgresql://u:secret@db1:5432/warehouse", "other"),
        ("postgresql://u:secret@db1:5432/scratch", "feedback"),
        ("postgresql://u:secret@db2:5432/warehouse", "feedback"),
    ):
        monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", url)
        root = make_target(
            destination="postgres", dataset=dataset, pipelines_dir=tmp_path
        ).working_root()
        assert "secret" not in str(root)
        roots.add(root)
    assert len(roots) == 4
    # the user is not part of the warehouse: another login to the same database is the same
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", "postgresql://v:x@db1:5432/scratch")
    assert make_target(destination="postgres", pipelines_dir=tmp_path).working_root() in roots
    # credentials field by field name the same server and database
    monkeypatch.delenv("DESTINATION__POSTGRES__CREDENTIALS")
    for field, value in (("HOST", "db3"), ("DATABASE", "warehouse"), ("USERNAME", "u")):
        monkeypatch.setenv(f"DESTINATION__POSTGRES__CREDENTIALS__{field}", value)
    fields = make_target(destination="postgres", pipelines_dir=tmp_path)
    assert fields.location() == "postgres://db3:5432/warehouse"
    assert fields.working_root() not in roots


def test_a_bucket_keeps_its_container_and_port_and_never_a_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    roots = set()
    for url in (
        "az://one@account.blob.core.windows.net/data",
        "az://two@account.blob.core.windows.net/data",
        "s3://bucket/data",
        "s3://user:secret@minio:9000/data",
    ):
        monkeypatch.setenv("DESTINATION__FILESYSTEM__BUCKET_URL", url)
        target = make_target(destination="delta", pipelines_dir=tmp_path)
        assert "secret" not in target.location() and "secret" not in str(target.working_root())
        assert "user" not in target.location()  # an S3 login is no part of where it is
        roots.add(target.working_root())
    assert len(roots) == 4


def test_the_lock_of_one_warehouse_leaves_another_free_and_names_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    one = make_target(duckdb_path=Path("a/data/warehouse.duckdb"))
    two = make_target(duckdb_path=Path("b/data/warehouse.duckdb"))
    same = make_target(duckdb_path=tmp_path / "a/data/warehouse.duckdb")  # named another way
    outcomes: dict[str, BaseException | None] = {}

    def another_run(name: str, target: Target) -> None:
        try:
            with runlock.hold(target, "sync"):
                outcomes[name] = None
        except WarehouseBusy as exc:
            outcomes[name] = exc

    with runlock.hold(one, "sync"):
        # from another thread, as another process would (a thread's own locks nest)
        for name, target in (("other warehouse", two), ("same warehouse", same)):
            thread = threading.Thread(target=another_run, args=(name, target))
            thread.start()
            thread.join()
    assert outcomes["other warehouse"] is None
    assert isinstance(outcomes["same warehouse"], WarehouseBusy)
    message = str(outcomes["same warehouse"])
    assert str(tmp_path / "a" / "data" / "warehouse.duckdb") in message
    assert str(tmp_path / "b") not in message
    assert "in use by another feedback-sync sync" in message


def test_the_working_folder_names_its_warehouse(tmp_path: Path, harness: Harness) -> None:
    harness.sync(full=True, models=False)
    marker = harness.target().working_root() / "warehouse.json"
    named = json.loads(marker.read_text())
    assert str((harness.tmp / "warehouse.duckdb").resolve()) in named["location"]
    assert named["dataset"] == "feedback"


# the first run after the upgrade: the working folder of an earlier version is
# ``<pipelines dir>/<pipeline name>``, shared by every warehouse of that kind


def _as_earlier_version(harness: Harness, target: Target | None = None) -> Path:
    """Puts ``target``'s working folder where an earlier version kept it (nothing of the
    folder per warehouse left); the old folder."""
    target = target or harness.target()
    root = target.working_root()
    legacy = harness.tmp / "pipelines" / target.pipeline_name
    assert not legacy.exists()
    os.replace(root / target.pipeline_name, legacy)
    shutil.rmtree(root)
    return legacy


def _resumed_from_cursors(harness: Harness) -> None:
    """The run since ``mark_requests`` read followers only after the saved cursor (a run
    that started over would ask for the first page)."""
    followers = [r for r in harness.requests() if r["path"] == "/v1/followers"]
    assert followers and all("after" in r["params"] for r in followers), followers


@pytest.mark.slow
def test_the_first_run_after_the_upgrade_takes_over_its_own_folder(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old folder is this warehouse's (its state is the one the warehouse committed
    last): the run moves it, and finishes what it owed, here the deletes of a full run
    that died after its load."""
    harness.sync(full=True, models=False)
    changes = harness.mutate(seed=13, counts={"followers": {"delete": 3, "create": 2}})
    destination = type(harness.target())

    def crash(*args: Any, **kwargs: Any) -> dict[str, int]:
        raise Crash("killed after the load, before the deletes")

    with monkeypatch.context() as patched:
        patched.setattr(destination, "reconcile", crash)
        with pytest.raises(Crash):
            harness.sync(full=True, models=False)
    legacy = _as_earlier_version(harness)
    harness.mutate(seed=14, counts={"followers": {"create": 3}, "comments": {"create": 4}})
    harness.target().pipeline()  # as status, report or check make it: they move nothing
    assert legacy.exists()
    harness.mark_requests()
    result = harness.sync(models=False)
    assert not legacy.exists()
    assert (harness.target().working_root() / "feedback_sync" / "state.json").exists()
    _resumed_from_cursors(harness)
    assert result.rows_removed.get("followers") == 3  # what the dead run owed
    harness.assert_equals_truth()
    assert not set(changes["followers"]["deleted"]) & {
        row[0] for row in harness.table_rows("followers")
    }


@pytest.mark.slow
def test_the_first_run_after_the_upgrade_leaves_another_warehouses_folder(
    harness: Harness, tmp_path: Path
) -> None:
    """Two warehouses shared the old folder, and the other ran last: this one starts a
    folder of its own from the state its warehouse holds (no re-read, no gap), and the
    other takes the old folder over on its own first run."""
    mine = harness.target()
    theirs = make_target(
        duckdb_path=tmp_path / "theirs.duckdb", pipelines_dir=tmp_path / "pipelines"
    )

    def sync(target: Target, *, full: bool = False) -> SyncResult:
        options = SyncOptions(
            full=full, settings=harness.settings(), out=io.StringIO(), models=False
        )
        return run_sync(target, options)

    sync(mine, full=True)
    sync(theirs, full=True)
    shutil.rmtree(mine.working_root())  # an earlier version had no folder of mine
    legacy = _as_earlier_version(harness, theirs)
    harness.mutate(seed=15, counts={"followers": {"create": 3}, "comments": {"create": 4}})

    harness.mark_requests()
    sync(mine)
    assert legacy.exists()  # not mine: left for the warehouse it belongs to
    _resumed_from_cursors(harness)
    harness.assert_equals_truth()

    harness.mark_requests()
    sync(theirs)
    assert not legacy.exists()
    _resumed_from_cursors(harness)
    with duckdb.connect(str(tmp_path / "theirs.duckdb"), read_only=True) as con:
        followers = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
    assert followers == {f["idx"] for f in harness.dump()["followers"]}


@pytest.mark.slow
def test_an_old_folder_with_a_pending_package_is_not_taken_over(harness: Harness) -> None:
    """A package pending in the old folder could be for any warehouse: it is left there,
    and the run reads again from the cursors its warehouse committed (nothing missed)."""
    harness.sync(full=True, models=False)
    harness.mutate(seed=16, counts={"followers": {"create": 2}})

    def die(pipeline: Any) -> None:
        raise Crash("killed between extract and load")

    with pytest.raises(Crash):
        harness.sync(after_extract=die, models=False)
    legacy = _as_earlier_version(harness)
    harness.mutate(seed=17, counts={"followers": {"create": 3}})
    harness.mark_requests()
    result = harness.sync(models=False)
    assert legacy.exists()
    assert result.recovered_packages == 0
    _resumed_from_cursors(harness)
    assert result.rows_loaded.get("followers") == 5  # both changes, from the committed cursor
    harness.assert_equals_truth()
