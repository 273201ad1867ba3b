"""The flow ``feedback-sync`` into the warehouses for teams that outgrew one machine: Delta
tables (a folder here; a bucket is the same code after the load) and PostgreSQL. The run
completes with its checks, each asset is keyed by where it lives (server and database, or
folder), and no secret reaches Prefect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from feedback_sync.flows.lineage import concurrency_limit
from feedback_sync.flows.sync import feedback_sync
from feedback_sync.warehouse.target import Target, make_target

from tests.flows.conftest import SECRET_KEY
from tests.flows.prefect_api import PrefectApi
from tests.support.postgres import Server
from tests.sync.harness import COLUMNS

pytestmark = pytest.mark.slow


def _writer_limit(target: Target) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name=concurrency_limit(target), limit=1)
        )


def _materialized(api: PrefectApi, state: Any) -> dict[str, Any]:
    """The run's materialization events, once every asset the run says it reported has one
    (events reach the server asynchronously: a count alone returned before the last)."""
    run_id = str(state.state_details.flow_run_id)
    reported = state.result()["assets"]
    assert len(reported) > len(COLUMNS), reported
    events = api.wait_for(lambda: list(api.materializations(run_id).values()), len(reported))
    by_key = {e["resource"]["prefect.resource.id"]: e for e in events}
    assert set(by_key) == set(reported)
    return by_key


def test_the_flow_into_delta_tables(flow_env: Path, prefect_server: PrefectApi) -> None:
    lake = flow_env / "lake"
    _writer_limit(make_target(destination="delta", delta_dir=lake))
    state = feedback_sync(
        mode="full",
        destination="delta",
        delta_dir=str(lake),
        pipelines_dir=str(flow_env / "p"),
        return_state=True,
    )
    assert state.is_completed(), state.message
    done = state.result()
    assert done["table_rows"]["followers"] > 0
    by_key = _materialized(prefect_server, state)
    followers = by_key[f"file://{lake.resolve()}/feedback/followers"]
    assert followers["payload"]["rows_now"] == done["table_rows"]["followers"]
    checks = {c["check"]: c for c in followers["payload"]["checks"]}
    assert set(checks) == {"keys unique and not null", "row count", "freshness"}
    assert checks["keys unique and not null"]["figure"].startswith("0 null and 0 duplicate idx")
    assert "newest created_at 20" in checks["freshness"]["figure"]
    mart = by_key[f"duckdb://{(lake / 'models.duckdb').resolve()}/marts/idea_engagement"]
    reads = {
        r["prefect.resource.id"]
        for r in mart["related"]
        if r.get("prefect.resource.role") == "asset"
    }
    assert f"file://{lake.resolve()}/feedback/ideas" in reads
    assert SECRET_KEY not in prefect_server.everything()


def test_the_flow_into_postgres(
    flow_env: Path,
    prefect_server: PrefectApi,
    postgres_server: Server,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", postgres_dsn)
    _writer_limit(make_target(destination="postgres"))
    state = feedback_sync(
        mode="full", destination="postgres", pipelines_dir=str(flow_env / "p"), return_state=True
    )
    assert state.is_completed(), state.message
    done = state.result()
    by_key = _materialized(prefect_server, state)
    database = postgres_dsn.rsplit("/", 1)[-1]
    server = f"postgres://{postgres_server.host}:{postgres_server.port}/{database}"
    followers = by_key[f"{server}/feedback/followers"]
    assert followers["payload"]["rows_now"] == done["table_rows"]["followers"]
    assert f"{server}/marts/idea_engagement" in by_key
    run_id = str(state.state_details.flow_run_id)
    # logs reach the server asynchronously: wait for the checks' line
    checked = prefect_server.wait_for(
        lambda: [line for line in prefect_server.logs(run_id) if "checks: " in line], 1
    )
    assert checked, prefect_server.logs(run_id)
    everything = prefect_server.everything()
    assert SECRET_KEY not in everything
    assert postgres_server.password not in everything
