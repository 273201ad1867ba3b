"""End to end, as a user runs it: a real ``prefect server``, the ``feedback-sync`` pool and
writer limit, ``prefect --no-prompt deploy --all`` from ``prefect.yaml``, a ``process``
worker, and runs of the deployments against a live sandbox.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from feedback_sync.flows.lineage import artifact_key, concurrency_limit
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.warehouse.target import make_target

from tests.flows.conftest import SECRET_KEY
from tests.flows.prefect_api import PrefectApi
from tests.support.prefect_local import ROOT, LocalPrefect, wait_for_runs
from tests.sync.harness import COLUMNS, diff, expected_rows, landed_rows

pytestmark = pytest.mark.slow

LIMIT = "feedback-sync-duckdb-e2e"


def _create_run(api: PrefectApi, deployment: str) -> str:
    found = api.get(f"deployments/name/{deployment}")
    run = api.post(f"deployments/{found['id']}/create_flow_run", {})
    return str(run["id"])


def _triggered_push(api: PrefectApi, push_id: str, count: int) -> dict[str, Any]:
    """The newest of the push deployment's runs once there are ``count``, completed."""
    pushes = api.wait_for(
        lambda: api.post("flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [push_id]}}}),
        count,
        timeout=90,
    )
    assert len(pushes) >= count, "the completed incremental run did not trigger the push"
    newest = max(pushes, key=lambda r: r["created"])
    done = wait_for_runs(api, [newest["id"]])[newest["id"]]
    assert done["state"]["type"] == "COMPLETED", done["state"]
    return done


def _pushed_names(sandbox: RunningSandbox) -> list[str]:
    dump = httpx.get(f"{sandbox.root_url}/_sandbox/dump", timeout=60).json()
    return [f["name"] for f in dump["followers"] if f["email"] == "pushed@example.net"]


def _slot_held(api: PrefectApi, flow_run_id: str) -> tuple[datetime, datetime]:
    """From the start of the run's sync to the end of its checks: when it held the slot.

    Prefect records task runs from the events its worker sends, which may be written after
    the flow run is seen completed (under CI's load the checks' run was not there yet):
    both are waited for."""

    def ended() -> list[dict[str, Any]]:
        tasks = api.post("task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
        named = {"sync", "data checks"}
        return [t for t in tasks if t["name"].rsplit("-", 1)[0] in named and t.get("end_time")]

    by_name = {t["name"].rsplit("-", 1)[0]: t for t in api.wait_for(ended, 2, timeout=60)}
    start = datetime.fromisoformat(by_name["sync"]["start_time"])
    end = datetime.fromisoformat(by_name["data checks"]["end_time"])
    return start, end


def test_deployments_from_prefect_yaml_run_on_a_worker_and_serialize(
    stack: LocalPrefect, secret_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    api = PrefectApi(stack.api_url)
    try:
        _run_it(stack, api, secret_sandbox, tmp_path)
    except BaseException:
        print(stack.logs()[-20000:])
        raise
    finally:
        api.close()


def _run_it(stack: LocalPrefect, api: PrefectApi, sandbox: RunningSandbox, tmp: Path) -> None:
    # the freshness alarm, with a short window, applied twice: one automation
    for _ in range(2):
        stack.python("-m", "feedback_sync.flows.alarm", "--within", "10")
    automations = api.post("automations/filter", {})
    assert [a["name"] for a in automations] == ["feedback-sync freshness"]

    stack.cli("work-pool", "create", "feedback-sync", "--type", "process")
    stack.cli("gcl", "create", LIMIT, "--limit", "1")
    stack.cli("--no-prompt", "deploy", "--all")
    # the one-account deployments (feedback-sync-accounts': test_fanout_deploy.py)
    ours = {"flows": {"name": {"any_": ["feedback-sync", "feedback-push"]}}}
    deployments = {d["name"]: d for d in api.post("deployments/filter", ours)}
    assert set(deployments) == {"incremental", "full", "after-incremental", "account"}
    # deploying everything schedules no write to the live API: the push previews
    assert deployments["after-incremental"]["parameters"] == {"apply": False}
    incremental, full = deployments["incremental"], deployments["full"]
    assert incremental["work_pool_name"] == "feedback-sync"
    assert incremental["parameters"]["mode"] == "incremental"
    assert full["parameters"]["mode"] == "full"
    assert {"feedback-sync", "incremental"} <= set(incremental["tags"])
    assert incremental["schedules"][0]["schedule"]["cron"] == "7 * * * *"
    assert full["schedules"][0]["schedule"]["cron"] == "37 2 * * *"
    for deployment in (incremental, full):
        limit = deployment["global_concurrency_limit"]
        assert limit is not None and limit["limit"] == 1
        assert deployment["concurrency_options"]["collision_strategy"] == "ENQUEUE"

    # what the push after each incremental run sends: one new follower
    curated = tmp / "curated"
    curated.mkdir()
    (curated / "accounts.csv").write_text("email,name\npushed@example.net,Pushed Person\n")
    worker_env = {
        "PUSH__CURATED_DIR": str(curated),
        "SOURCES__FEEDBACK__BASE_URL": sandbox.base_url,
        "SOURCES__FEEDBACK__API_KEY": SECRET_KEY,
        "DESTINATION__DUCKDB__CREDENTIALS": str(tmp / "e2e.duckdb"),
        "DLT_DATA_DIR": str(tmp / "dlt"),
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
    }
    stack.start_worker("feedback-sync", worker_env)

    first = _create_run(api, "feedback-sync/incremental")
    runs = wait_for_runs(api, [first])
    assert runs[first]["state"]["type"] == "COMPLETED", runs[first]["state"]

    # its completion triggers feedback-push/after-incremental: as deployed, a preview
    push_id = deployments["after-incremental"]["id"]
    previewed = _triggered_push(api, push_id, 1)
    assert previewed["parameters"] == {"apply": False}
    assert api.artifacts(artifact_key(make_target(duckdb_path=tmp / "e2e.duckdb"), "push-preview"))
    assert not _pushed_names(sandbox), "a push deployed by default wrote to the API"

    # the opt-in of docs/how-to/prefect.md: apply: true in prefect.yaml, deployed again
    opted = tmp / "prefect.yaml"
    yaml_text = (ROOT / "prefect.yaml").read_text()
    assert yaml_text.count("      apply: false") == 1
    opted.write_text(yaml_text.replace("      apply: false", "      apply: true"))
    stack.cli("--no-prompt", "deploy", "--name", "after-incremental", "--prefect-file", str(opted))
    second = _create_run(api, "feedback-sync/incremental")
    assert wait_for_runs(api, [second])[second]["state"]["type"] == "COMPLETED"
    applied = _triggered_push(api, push_id, 2)
    assert applied["parameters"] == {"apply": True}
    assert _pushed_names(sandbox) == ["Pushed Person"]

    # two overlapping runs, of both deployments: they take turns, and both succeed
    response = httpx.post(
        f"{sandbox.root_url}/_sandbox/mutate",
        json={
            "seed": 3,
            "followers": {"create": 2, "update": 2, "delete": 1},
            "comments": {"create": 3, "update": 2},
        },
        timeout=30,
    )
    assert response.status_code == 200
    # the server kept slow until both runs are running, so the first cannot end before the
    # worker has started the second process (at tiny scale a run can, and on a loaded
    # machine one process may start seconds after the other); then both go on at full speed
    settings = f"{sandbox.root_url}/_sandbox/settings"
    slow = httpx.post(settings, json={"latency_ms": 2000}, timeout=30)
    assert slow.status_code == 200, slow.text
    pair = [_create_run(api, "feedback-sync/full"), _create_run(api, "feedback-sync/incremental")]
    running = api.wait_for(
        lambda: api.post(
            "flow_runs/filter",
            {"flow_runs": {"id": {"any_": pair}, "start_time": {"is_null_": False}}},
        ),
        2,
        timeout=120,
    )
    fast = httpx.post(settings, json={"latency_ms": 0}, timeout=30)
    assert fast.status_code == 200, fast.text
    assert len(running) == 2, "the worker did not start both runs"
    runs = wait_for_runs(api, pair)
    for run_id in pair:
        assert runs[run_id]["state"]["type"] == "COMPLETED", runs[run_id]["state"]
    # both flow runs were running at the same time (one waited for the slot) ...
    starts = [datetime.fromisoformat(runs[r]["start_time"]) for r in pair]
    ends = [datetime.fromisoformat(runs[r]["end_time"]) for r in pair]
    assert max(starts) < min(ends), "the runs did not overlap: nothing was serialized"
    # ... and their writes did not
    (a_start, a_end), (b_start, b_end) = (_slot_held(api, r) for r in pair)
    assert a_end <= b_start or b_end <= a_start, "the two runs wrote the warehouse at once"

    # the warehouse equals the server's data (the full run reconciled its deletes); the
    # pushes the incremental runs triggered are done first (they write the server)
    later = api.post("flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [push_id]}}})
    wait_for_runs(api, [r["id"] for r in later])
    dump = httpx.get(f"{sandbox.root_url}/_sandbox/dump", timeout=60).json()
    truth = expected_rows(dump)
    with duckdb.connect(str(tmp / "e2e.duckdb"), read_only=True) as con:
        for table in COLUMNS:
            landed = landed_rows(con, table, f'feedback."{table}"')
            assert landed == truth[table], f"{table}: {diff(truth[table], landed)}"

    # artifacts (one version per run) and asset events
    warehouse = make_target(duckdb_path=tmp / "e2e.duckdb")
    assert len(api.artifacts(artifact_key(warehouse, "rows"))) == 4
    assert len(api.artifacts(artifact_key(warehouse, "report"))) == 4
    assert api.artifacts(artifact_key(warehouse, "push-preview"))
    assert api.artifacts(artifact_key(warehouse, "push-results"))
    materialized = api.wait_for(lambda: list(api.materializations(first)), len(COLUMNS))
    assert any(key.endswith("/feedback/followers") for key in materialized)

    # the alarm fired while nothing had completed
    fired = api.wait_for(lambda: _alarm_events(api), 1, timeout=30)
    assert fired, "the freshness automation never fired"

    # the key is nowhere: not in the server's records, nor in what server and worker printed
    assert SECRET_KEY not in api.everything()
    assert SECRET_KEY not in stack.logs()


def _alarm_events(api: PrefectApi) -> list[dict[str, Any]]:
    return [e for e in api.events("prefect.automation.triggered")]


USER_PROJECT = """
name: my-project
prefect-version: 3.9.1
deployments:
  - name: hourly
    entrypoint: feedback_sync.flows.sync:feedback_sync
    parameters:
      mode: full
      checks: false
    work_pool:
      name: mine
"""


def test_a_users_own_project_deploys_the_installed_flow_by_module(
    stack: LocalPrefect, secret_sandbox: RunningSandbox, tmp_path: Path
) -> None:
    """A Prefect project of the user's, outside this repository: its prefect.yaml names the
    installed package's flow by module (no flows/ folder, no copy of this code), and a
    worker started there runs it."""
    project = tmp_path / "my-project"
    project.mkdir()
    (project / "prefect.yaml").write_text(USER_PROJECT)
    warehouse = project / "warehouse.duckdb"
    api = PrefectApi(stack.api_url)
    try:
        stack.cli("work-pool", "create", "mine", "--type", "process", cwd=project)
        limit = concurrency_limit(make_target(duckdb_path=warehouse))
        stack.cli("gcl", "create", limit, "--limit", "1", cwd=project)
        stack.cli("--no-prompt", "deploy", "--all", cwd=project)
        (deployment,) = api.post("deployments/filter", {})
        assert deployment["entrypoint"] == "feedback_sync.flows.sync:feedback_sync"
        stack.start_worker(
            "mine",
            {
                "SOURCES__FEEDBACK__BASE_URL": secret_sandbox.base_url,
                "SOURCES__FEEDBACK__API_KEY": SECRET_KEY,
                "DESTINATION__DUCKDB__CREDENTIALS": str(warehouse),
                "DLT_DATA_DIR": str(tmp_path / "dlt"),
                "PREFECT_WORKER_QUERY_SECONDS": "1",
                "PREFECT_WORKER_PREFETCH_SECONDS": "1",
            },
            cwd=project,
        )
        run = _create_run(api, "feedback-sync/hourly")
        state = wait_for_runs(api, [run])[run]["state"]
        assert state["type"] == "COMPLETED", state
    except BaseException:
        print(stack.logs()[-20000:])
        raise
    finally:
        api.close()
    with duckdb.connect(str(warehouse), read_only=True) as con:
        (followers,) = con.execute("select count(*) from feedback.followers").fetchone() or (0,)
    assert followers > 0
