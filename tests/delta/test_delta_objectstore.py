"""Delta tables in object storage: ``--destination delta`` with
``DESTINATION__FILESYSTEM__BUCKET_URL=s3://...`` against an S3-compatible server, and
``az://...`` against Azurite, both on loopback (tests/support/objectstore.py), configured through
dlt's own settings. The models read the tables through delta-rs with the same credentials
(no DuckDB extension, no second secret), and the store's secret key appears nowhere a run
leaves anything."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from deltalake import DeltaTable
from feedback_sync.app.report import write as write_report
from feedback_sync.sandbox.server import RunningSandbox

from tests.delta.test_delta import assert_same_models
from tests.support.objectstore import AzureStore, Store
from tests.sync.harness import Harness
from tests.sync.test_full_and_incremental import CHANGES


def bucket_harness(
    harness: Harness, store: Store | AzureStore, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> Harness:
    """The harness with its Delta tables under ``prefix`` in ``store``'s bucket."""
    for name, value in store.dlt_env(prefix).items():
        monkeypatch.setenv(name, value)
    harness.destination = "delta"
    harness.delta_uri = f"{store.bucket_url(prefix)}/feedback"
    harness.delta_storage = store.storage_options()
    harness.delta_store = store
    return harness


@pytest.fixture
def in_bucket(
    harness: Harness, object_store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Harness:
    """The harness with its Delta tables in the S3-compatible bucket (test_delta_azure.py
    runs the same tests in an Azure container)."""
    return bucket_harness(harness, object_store, monkeypatch, tmp_path.name)


def _versions(h: Harness) -> dict[str, int]:
    with duckdb.connect(str(h.target().models_file()), read_only=True) as con:
        rows = con.execute("select name, version from _delta_snapshot.versions").fetchall()
    return dict(rows)


@pytest.mark.slow
def test_full_normal_and_full_again_in_object_storage(
    in_bucket: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = in_bucket.sync(full=True)
    assert f"into Delta tables in {in_bucket.delta_uri}" in in_bucket.last_output
    in_bucket.assert_equals_truth()
    assert first.models is not None and first.models_error is None, first.models_error
    prefix = tmp_path.name + "/feedback/"
    store = in_bucket.delta_store
    logs = [k for k in store.keys(prefix) if "/_delta_log/" in k]
    assert {k.split("/")[2] for k in logs} >= {"followers", "comments", "ideas__topics"}
    # nothing but the local models file outside the bucket
    local = [p.relative_to(tmp_path) for p in (tmp_path / "delta").rglob("*") if p.is_file()]
    assert local == [Path("delta/models.duckdb")]
    # the models equal DuckDB's from the same data
    # (Delta keeps no history: DuckDB's is off too, for the same work)
    in_bucket.sync(full=True, destination="duckdb", history_ideas=False, history_companies=False)
    assert_same_models(in_bucket.target("duckdb").duckdb_file(), in_bucket.target().models_file())

    # one table changed: only its copy in the models file is refreshed
    copied_before = _versions(in_bucket)
    versions_before = {
        name: DeltaTable(
            f"{in_bucket.delta_uri}/{name}", storage_options=in_bucket.delta_storage
        ).version()
        for name in copied_before
    }
    in_bucket.mutate(seed=3, counts={"topics": {"update": 1}})
    caplog.set_level(logging.INFO, logger="feedback_sync")
    in_bucket.sync(models=True)
    changed = {
        name
        for name, version in versions_before.items()
        if DeltaTable(
            f"{in_bucket.delta_uri}/{name}", storage_options=in_bucket.delta_storage
        ).version()
        != version
    }
    assert "topics" in changed and "followers" not in changed
    copied = {
        r.getMessage().split()[3] for r in caplog.records if "copying Delta table" in r.message
    }
    assert copied == changed
    after = _versions(in_bucket)
    assert {n for n in after if after[n] != copied_before[n]} == changed

    in_bucket.mutate(seed=5, counts=CHANGES)
    truth = in_bucket.dump()
    normal = in_bucket.sync()
    assert normal.rows_removed.get("topics") == 1
    full = in_bucket.sync(full=True)
    in_bucket.assert_equals_truth(truth)
    assert full.rows_removed["followers"] == 2
    assert full.rows_removed["comments"] >= 3
    report = write_report(in_bucket.target(), tmp_path / "report.html")
    assert report.charts == 6


@pytest.mark.slow
def test_deletes_owed_by_a_crashed_run_are_finished_in_object_storage(
    in_bucket: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that loaded and crashed before its deletes: the next run (not a full one) asks
    the bucket whether that load landed, and finishes them."""
    in_bucket.sync(full=True, models=False)
    changes = in_bucket.mutate(seed=4, counts={"followers": {"delete": 2}})

    def crash(*args: object, **kwargs: object) -> dict[str, int]:
        raise RuntimeError("killed after the load")

    destination = type(in_bucket.target())  # the deletes are the destination's own step
    reconcile = destination.reconcile
    monkeypatch.setattr(destination, "reconcile", crash)
    with pytest.raises(RuntimeError, match="killed after the load"):
        in_bucket.sync(full=True, models=False)
    monkeypatch.setattr(destination, "reconcile", reconcile)
    resumed = in_bucket.sync(models=False)
    assert "finishing what the previous run left" in in_bucket.last_output
    assert resumed.rows_removed["followers"] == 2
    for con in in_bucket.connect():
        landed = {r[0] for r in con.execute("select idx from feedback.followers").fetchall()}
        assert not landed & set(changes["followers"]["deleted"])
    in_bucket.assert_equals_truth(tables=["followers", "followers__companies"])


@pytest.mark.slow
def test_the_cli_into_object_storage_leaves_the_secret_key_nowhere(
    live_sandbox: RunningSandbox, object_store: Store, tmp_path: Path
) -> None:
    prefix = tmp_path.name
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DESTINATION__"))}
    env.update(
        SOURCES__FEEDBACK__BASE_URL=live_sandbox.base_url,
        SOURCES__FEEDBACK__API_KEY=live_sandbox.api_key,
        **object_store.dlt_env(prefix),
    )
    common = ["--destination", "delta", "--pipelines-dir", str(tmp_path / "pipelines")]
    common += ["--delta-dir", str(tmp_path / "delta")]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "feedback_sync.app.cli", *args, *common],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )

    sync = cli("sync", "--full")
    assert sync.returncode == 0, sync.stdout + sync.stderr
    assert "models: built" in sync.stdout
    status = cli("status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "followers" in status.stdout
    report = cli("report", "--output", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stdout + report.stderr
    # (moto checks no signatures, so a refused key is not tested here)
    secret = object_store.secret_key
    for done in (sync, status, report):
        assert secret not in done.stdout and secret not in done.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    stored = object_store.keys(prefix)
    assert any("_dlt_pipeline_state" in k for k in stored)
    for key in stored:
        assert secret.encode() not in object_store.read(key), key
