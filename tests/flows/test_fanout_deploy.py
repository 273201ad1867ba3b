"""Several accounts fanned out across workers, end to end: a real ``prefect server``, the
deployments of ``prefect.yaml``, two ``process`` workers and three accounts, one of whose
servers is down. Two land, the fan-out run fails naming the third; once its server is
back, a rerun lands it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from feedback_sync.flows.lineage import artifact_key
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.server import RunningSandbox, serve_in_thread
from feedback_sync.warehouse.target import make_target

from tests.flows.prefect_api import PrefectApi
from tests.support.prefect_local import LocalPrefect, free_port, wait_for_runs
from tests.sync.accounts import assert_account_equals_truth

pytestmark = pytest.mark.slow

KEYS = {"acme": "acme-key-FANOUT-1234", "globex": "globex-key-FANOUT-5678"}
DOWN_KEY = "initech-key-FANOUT-9999"
FANOUT = "feedback-sync-accounts/incremental"


@pytest.fixture
def servers() -> Iterator[dict[str, RunningSandbox]]:
    with (
        serve_in_thread(create_app("tiny", 1, api_key=KEYS["acme"])) as acme,
        serve_in_thread(create_app("tiny", 2, api_key=KEYS["globex"])) as globex,
    ):
        yield {"acme": acme, "globex": globex}


def _worker_env(tmp: Path, servers: dict[str, RunningSandbox], down_port: int) -> dict[str, str]:
    """Three accounts configured by variables alone; globex's key is in its Secret block,
    not here. Short timeouts, one retry of the sync task, no wait before it."""
    accounts = "SOURCES__FEEDBACK__ACCOUNTS__"
    return {
        "SOURCES__FEEDBACK__ACCOUNT_NAMES": json.dumps(["acme", "globex", "initech"]),
        f"{accounts}ACME__BASE_URL": servers["acme"].base_url,
        f"{accounts}ACME__API_KEY": KEYS["acme"],
        f"{accounts}GLOBEX__BASE_URL": servers["globex"].base_url,
        f"{accounts}INITECH__BASE_URL": f"http://127.0.0.1:{down_port}/v1",
        f"{accounts}INITECH__API_KEY": DOWN_KEY,
        "SOURCES__FEEDBACK__PAGE_SIZE": "7",
        "SOURCES__FEEDBACK__MAX_CONCURRENCY": "4",
        "SOURCES__FEEDBACK__TIMEOUT_SECONDS": "5",
        "SOURCES__FEEDBACK__MAX_RETRIES": "1",
        "DESTINATION__DUCKDB__CREDENTIALS": str(tmp / "data" / "warehouse.duckdb"),
        "DLT_DATA_DIR": str(tmp / "dlt"),
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "FLOWS__SYNC_RETRIES": "1",
        "FLOWS__SYNC_RETRY_DELAY_SECONDS": "0",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
    }


def _fan_out(api: PrefectApi) -> dict[str, Any]:
    """A run of the fan-out deployment, once it ended."""
    found = api.get(f"deployments/name/{FANOUT}")
    run = api.post(f"deployments/{found['id']}/create_flow_run", {})
    return wait_for_runs(api, [run["id"]], timeout=420)[run["id"]]


def _children(api: PrefectApi, parent: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{account: flow run}`` of the runs the fan-out run started, as its subflows."""
    tasks = api.post("task_runs/filter", {"flow_runs": {"id": {"any_": [parent["id"]]}}})
    runs = api.post(
        "flow_runs/filter",
        {"flow_runs": {"parent_task_run_id": {"any_": [t["id"] for t in tasks]}}},
    )
    return {r["parameters"]["account"]: r for r in runs}


def test_accounts_fan_out_over_two_workers_and_a_rerun_lands_the_failed_one(
    stack: LocalPrefect, servers: dict[str, RunningSandbox], tmp_path: Path
) -> None:
    api = PrefectApi(stack.api_url)
    try:
        _run_it(stack, api, servers, tmp_path)
    except BaseException:
        print(stack.logs()[-30000:])
        raise
    finally:
        api.close()


def _deploy(stack: LocalPrefect, api: PrefectApi) -> None:
    stack.cli("work-pool", "create", "feedback-sync", "--type", "process")
    # every account's dataset is in one DuckDB file: one writer limit for all
    stack.cli("gcl", "create", "feedback-sync-duckdb-warehouse", "--limit", "1")
    stack.cli("--no-prompt", "deploy", "--all")
    fanouts = api.post(
        "deployments/filter", {"flows": {"name": {"any_": ["feedback-sync-accounts"]}}}
    )
    assert {d["name"] for d in fanouts} == {"incremental", "full"}
    for deployment in fanouts:
        assert deployment["parameters"]["sync_deployment"] == "feedback-sync/account"
        # off until a project with accounts turns them on
        assert [s["active"] for s in deployment["schedules"]] == [False]
    account = api.get("deployments/name/feedback-sync/account")
    assert account["schedules"] == [] and account["global_concurrency_limit"] is None
    # globex's key is in its own Secret block, given through no command line or variable
    stack.python(
        "-c",
        "import os; from prefect.blocks.system import Secret; "
        "Secret(value=os.environ['GLOBEX_KEY']).save('feedback-api-key-globex')",
        env={"GLOBEX_KEY": KEYS["globex"]},
    )


def _run_it(
    stack: LocalPrefect, api: PrefectApi, servers: dict[str, RunningSandbox], tmp: Path
) -> None:
    _deploy(stack, api)
    down_port = free_port()
    env = _worker_env(tmp, servers, down_port)
    for _ in range(2):
        stack.start_worker("feedback-sync", env)

    first = _fan_out(api)
    assert first["state"]["type"] == "FAILED", first["state"]
    message = first["state"]["message"]
    assert "1 of 3 accounts failed: initech (" in message, message
    children = _children(api, first)
    assert {a: r["state"]["type"] for a, r in children.items()} == {
        "acme": "COMPLETED",
        "globex": "COMPLETED",
        "initech": "FAILED",
    }
    # each account's run went through the account deployment, under the fan-out run
    account_deployment = api.get("deployments/name/feedback-sync/account")["id"]
    assert {r["deployment_id"] for r in children.values()} == {account_deployment}
    for name in ("acme", "globex"):
        assert_account_equals_truth(tmp, servers[name], name)
    logs = api.logs_with(children["globex"]["id"], "Secret block 'feedback-api-key-globex'")
    assert "API key of account globex from the Prefect Secret block" in logs
    # the failed account's run retried its sync once ([flows] sync_retries), on its own
    tasks = api.post(
        "task_runs/filter", {"flow_runs": {"id": {"any_": [children["initech"]["id"]]}}}
    )
    assert [(t["name"].rsplit("-", 1)[0], t["run_count"]) for t in tasks] == [("sync", 2)]

    # the report: one line per account
    warehouse = make_target(duckdb_path=tmp / "data" / "warehouse.duckdb")
    report = api.artifacts(artifact_key(warehouse, "accounts"))[0]["data"]
    lines = {line.split(" | ")[0].strip("| "): line for line in report.splitlines()}
    assert "| COMPLETED |" in lines["acme"] and "| COMPLETED |" in lines["globex"]
    assert "| FAILED |" in lines["initech"] and "the sync failed: " in lines["initech"]
    assert "2 of 3 accounts completed; failed: initech" in report
    # the models over the accounts that completed, built once by the fan-out
    assert "Models over every account: built " in report
    assert "over 2 accounts (acme, globex)" in report
    assert "never synced: 1 account (initech)" in report

    # initech's server comes back on its address; the rerun lands it
    server = create_app("tiny", 3, api_key=DOWN_KEY)
    with serve_in_thread(server, port=down_port) as back:
        second = _fan_out(api)
        assert second["state"]["type"] == "COMPLETED", second["state"]
        again = _children(api, second)
        assert {r["state"]["type"] for r in again.values()} == {"COMPLETED"}
        assert_account_equals_truth(tmp, back, "initech")
    for name in ("acme", "globex"):
        assert_account_equals_truth(tmp, servers[name], name)
    report = api.artifacts(artifact_key(warehouse, "accounts"))[0]["data"]
    assert "3 of 3 accounts completed." in report
    assert "over 3 accounts (acme, globex, initech)" in report
    with duckdb.connect(str(tmp / "data" / "warehouse.duckdb"), read_only=True) as con:
        shown = con.execute("select distinct account from marts.idea_engagement order by 1")
        assert shown.fetchall() == [("acme",), ("globex",), ("initech",)]

    # the one-account push is not triggered by the fan-out's runs
    push = api.get("deployments/name/feedback-push/after-incremental")["id"]
    assert not api.post("flow_runs/filter", {"flow_runs": {"deployment_id": {"any_": [push]}}})
    # no account's key is anywhere: the server's records, what server and workers printed
    everything, printed = api.everything(), stack.logs()
    for key in (*KEYS.values(), DOWN_KEY):
        assert key not in everything and key not in printed, key
