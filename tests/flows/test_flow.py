"""The flow ``feedback-sync`` under a Prefect test server, against a live sandbox.

What a user sees in Prefect is read back through the server's REST API: materialization
events per asset, keyed artifacts, run logs, and that the API key is in none of it.
"""

from __future__ import annotations

import base64
import re
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from feedback_sync.app import cli
from feedback_sync.flows import lineage
from feedback_sync.flows.lineage import mart_sources
from feedback_sync.flows.push import feedback_push
from feedback_sync.flows.sync import feedback_sync
from feedback_sync.models.project import load_project
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.warehouse.target import make_target

from tests.flows.conftest import SECRET_KEY
from tests.flows.prefect_api import PrefectApi
from tests.sync.harness import COLUMNS, diff, landed_rows

MARTS = {m.name for m in load_project().models if m.layer == "marts"}

pytestmark = pytest.mark.slow


def _run(**parameters: Any) -> Any:
    return feedback_sync(return_state=True, **parameters)


def _key(folder: Path, kind: str, file: str = "flow.duckdb") -> str:
    return lineage.artifact_key(make_target(duckdb_path=folder / file), kind)


def _run_id(state: Any) -> str:
    return str(state.state_details.flow_run_id)


def _mutate(sandbox: RunningSandbox, seed: int, counts: dict[str, dict[str, int]]) -> None:
    response = httpx.post(
        f"{sandbox.root_url}/_sandbox/mutate",
        json={"seed": seed, **counts},
        timeout=30,
    )
    assert response.status_code == 200, response.text


def _task_runs(api: PrefectApi, flow_run_id: str) -> dict[str, dict[str, Any]]:
    runs = api.post("task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})
    return {r["name"].rsplit("-", 1)[0]: r for r in runs}


def test_the_flow_lands_what_the_cli_lands_and_reports_what_each_run_touched(
    flow_env: Path,
    prefect_server: PrefectApi,
    secret_sandbox: RunningSandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = _run(mode="full", pipelines_dir=str(flow_env / "p-flow"))
    assert first.is_completed(), first.message
    returned = first.result()

    # the CLI, same configuration, into another file
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(flow_env / "cli.duckdb"))
    assert cli.main(["sync", "--full", "--pipelines-dir", str(flow_env / "p-cli")]) == 0
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(flow_env / "flow.duckdb"))
    with (
        duckdb.connect(str(flow_env / "flow.duckdb"), read_only=True) as by_flow,
        duckdb.connect(str(flow_env / "cli.duckdb"), read_only=True) as by_cli,
    ):
        for table in COLUMNS:
            flow_rows = landed_rows(by_flow, table, f'feedback."{table}"')
            cli_rows = landed_rows(by_cli, table, f'feedback."{table}"')
            assert flow_rows == cli_rows, f"{table}: {diff(cli_rows, flow_rows)}"
            assert flow_rows, table
        marts = by_flow.execute(
            "select table_name from information_schema.tables where table_schema = 'marts'"
        ).fetchall()
        assert {m for (m,) in marts} == MARTS

    # every table and every mart was materialized, with lineage and metadata
    run_id = _run_id(first)
    events = prefect_server.wait_for(
        lambda: list(prefect_server.materializations(run_id).values()), len(COLUMNS) + len(MARTS)
    )
    by_key = {e["resource"]["prefect.resource.id"]: e for e in events}
    warehouse = f"duckdb://{(flow_env / 'flow.duckdb').resolve()}"
    companies = by_key[f"{warehouse}/feedback/followers__companies"]
    assert companies["payload"]["rows_loaded"] == returned["rows_loaded"]["followers__companies"]
    assert companies["payload"]["rows_now"] == returned["table_rows"]["followers__companies"]
    assert companies["payload"]["load_id"] == returned["load_id"]
    upstream = {
        r["prefect.resource.id"]
        for r in companies["related"]
        if r.get("prefect.resource.role") == "asset"
    }
    assert upstream == {f"{secret_sandbox.base_url}/followers"}
    followers_checks = by_key[f"{warehouse}/feedback/followers"]["payload"]["checks"]
    assert {c["check"] for c in followers_checks} == {
        "keys unique and not null",
        "row count",
        "freshness",
    }
    engagement = by_key[f"{warehouse}/marts/idea_engagement"]
    reads = {
        r["prefect.resource.id"]
        for r in engagement["related"]
        if r.get("prefect.resource.role") == "asset"
    }
    assert f"{warehouse}/feedback/ideas" in reads
    assert f"{warehouse}/feedback/followers__companies" in reads
    assert engagement["payload"]["checks"][0]["status"] == "passed"
    # the history: made from the loaded tables by the sync's history step, and its marts
    ideas_history = by_key[f"{warehouse}/feedback/ideas_history"]
    assert ideas_history["payload"]["versions_begun"] == returned["table_rows"]["ideas"]
    assert {
        r["prefect.resource.id"]
        for r in ideas_history["related"]
        if r.get("prefect.resource.role") == "asset"
    } == {f"{warehouse}/feedback/ideas", f"{warehouse}/feedback/ideas__topics"}
    stays = by_key[f"{warehouse}/marts/idea_status_history"]
    assert f"{warehouse}/feedback/ideas_history" in {
        r["prefect.resource.id"]
        for r in stays["related"]
        if r.get("prefect.resource.role") == "asset"
    }
    # each mart's data tests, passed, on its asset
    tests = [c for c in engagement["payload"]["checks"] if c["check"] == "data tests"]
    declared = sum(1 for t in load_project().tests if t.mart == "idea_engagement")
    assert [(c["status"], c["figure"]) for c in tests] == [("passed", f"{declared} passed")]

    # a change to comments only, and a run on a "fresh machine" (no local dlt state): it
    # resumes from the state the warehouse holds, and reports comments, not followers
    _mutate(secret_sandbox, 5, {"comments": {"create": 2}})
    second = _run(pipelines_dir=str(flow_env / "p-fresh"))
    assert second.is_completed(), second.message
    done = second.result()
    assert done["rows_loaded"]["comments"] >= 2
    assert done["rows_loaded"].get("followers", 0) == 0
    touched = prefect_server.wait_for(
        lambda: list(prefect_server.materializations(_run_id(second))), 1
    )
    time.sleep(2)  # let the rest of the run's events arrive before asserting absences
    touched = list(prefect_server.materializations(_run_id(second)))
    assert f"{warehouse}/feedback/comments" in touched
    assert f"{warehouse}/feedback/followers" not in touched
    changed = {t for t, n in {**done["rows_loaded"], **done["rows_removed"]}.items() if n}
    assert changed == {t for t in COLUMNS if f"{warehouse}/feedback/{t}" in touched}
    for mart, reads in mart_sources(load_project()).items():
        assert (f"{warehouse}/marts/{mart}" in touched) == bool(reads & changed), mart

    # keyed artifacts keep their history
    rows = prefect_server.artifacts(_key(flow_env, "rows"))
    assert len(rows) == 2
    assert len(prefect_server.artifacts(_key(flow_env, "baseline"))) == 2
    report = prefect_server.artifacts(_key(flow_env, "report"))
    assert len(report) == 2
    assert "## Checks" in report[0]["data"]
    assert "deletes not reconciled for" in report[0]["data"]

    # the sync's own lines are in the run's logs
    logs = prefect_server.logs_with(run_id, "sync: full run of followers", "full sync into DuckDB")
    assert "sync: full run of followers" in logs
    assert "full sync into DuckDB" in logs
    assert "checks: " in logs

    # and the key is nowhere on the server
    assert SECRET_KEY not in prefect_server.everything()


def test_a_failed_check_fails_the_run_naming_the_check_table_and_figure(
    flow_env: Path, prefect_server: PrefectApi, secret_sandbox: RunningSandbox
) -> None:
    assert _run(mode="full", pipelines_dir=str(flow_env / "p")).is_completed()
    _mutate(secret_sandbox, 9, {"followers": {"delete": 10}})
    state = _run(mode="full", pipelines_dir=str(flow_env / "p"), max_row_drop=0.1)
    assert state.is_failed()
    named = re.search(
        r"row count on followers: (\d+) rows, 40 after the previous successful run "
        r"\(-(\d+\.\d)%, limit -10%\) \(FAILED\)",
        str(state.message),
    )
    assert named, state.message
    assert float(named.group(2)) == round((40 - int(named.group(1))) / 40 * 100, 1)
    # the rows and the report were still published, and the failed check is on the asset
    events = prefect_server.wait_for(
        lambda: list(prefect_server.materializations(_run_id(state)).values()), 1
    )
    followers = [e for e in events if e["resource"]["prefect.resource.id"].endswith("/followers")]
    assert followers
    assert any(c["status"] == "FAILED" for c in followers[0]["payload"]["checks"])
    # the failed run did not move the baseline: the next run still compares with the last
    # successful run, and reports the drop again
    assert len(prefect_server.artifacts(_key(flow_env, "baseline"))) == 1
    assert len(prefect_server.artifacts(_key(flow_env, "rows"))) == 2
    again = _run(pipelines_dir=str(flow_env / "p"), max_row_drop=0.1)
    assert again.is_failed()
    assert "row count on followers" in str(again.message)


def test_only_transient_failures_are_retried(
    flow_env: Path,
    prefect_server: PrefectApi,
    secret_sandbox: RunningSandbox,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a wrong key: the service refuses (401); retrying cannot help
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", "not-the-key")
    refused = _run(pipelines_dir=str(flow_env / "p"))
    assert refused.is_failed()
    assert "HTTP 401" in str(refused.message)
    assert _task_runs(prefect_server, _run_id(refused))["sync"]["run_count"] == 1
    report = prefect_server.artifacts(_key(flow_env, "report"))[0]
    assert report["flow_run_id"] == _run_id(refused)
    assert "HTTP 401" in report["data"] and SECRET_KEY not in report["data"]

    # the service keeps answering 503: retries exhausted at the API are retried by Prefect
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", SECRET_KEY)
    monkeypatch.setenv("SOURCES__FEEDBACK__MAX_RETRIES", "0")
    response = httpx.post(
        f"{secret_sandbox.root_url}/_sandbox/settings",
        json={"faults": {"rate": 1.0, "kinds": ["503"], "seed": 1}},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    failing = _run(pipelines_dir=str(flow_env / "p"))
    assert failing.is_failed()
    assert "HTTP 503" in str(failing.message)
    assert _task_runs(prefect_server, _run_id(failing))["sync"]["run_count"] == 3
    assert not (flow_env / "flow.duckdb").exists() or _no_data(flow_env / "flow.duckdb")


@pytest.mark.parametrize("auth_method", ["query", "basic"])
def test_the_key_is_nowhere_in_prefect_in_the_other_auth_methods(
    flow_env: Path,
    prefect_server: PrefectApi,
    secret_sandbox: RunningSandbox,
    monkeypatch: pytest.MonkeyPatch,
    auth_method: str,
) -> None:
    """Bearer is swept above; ``query`` puts the key in every URL, ``basic`` sends it
    base64-encoded. Faults make the client log retries, URLs included."""
    monkeypatch.setenv("SOURCES__FEEDBACK__AUTH_METHOD", auth_method)
    response = httpx.post(
        f"{secret_sandbox.root_url}/_sandbox/settings",
        json={"faults": {"rate": 0.15, "kinds": ["500", "429"], "seed": 4}},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    state = _run(mode="full", pipelines_dir=str(flow_env / "p"))
    assert state.is_completed(), state.message
    logs = prefect_server.logs_with(_run_id(state), "retry")
    assert "retry" in logs.lower()  # the retries were logged, with their addresses
    if auth_method == "query":
        assert "api_key=***" in logs
    everything = prefect_server.everything()
    encoded = base64.b64encode(f"{SECRET_KEY}:".encode()).decode()
    assert SECRET_KEY not in everything and encoded not in everything


def _no_data(path: Path) -> bool:
    with duckdb.connect(str(path), read_only=True) as con:
        return not con.execute(
            "select 1 from information_schema.tables where table_schema = 'feedback' "
            "and table_name = 'followers'"
        ).fetchall()


def test_a_missing_writer_limit_fails_before_anything_is_written(
    flow_env: Path, prefect_server: PrefectApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(flow_env / "other.duckdb"))
    state = _run(pipelines_dir=str(flow_env / "p"))
    assert state.is_failed()
    assert "prefect gcl create feedback-sync-duckdb-other --limit 1" in str(state.message)
    assert not (flow_env / "other.duckdb").exists()
    report = prefect_server.artifacts(_key(flow_env, "report", "other.duckdb"))
    assert "prefect gcl create feedback-sync-duckdb-other" in report[0]["data"]


def test_the_push_flow_names_the_command_when_its_writer_limit_is_missing(
    flow_env: Path, prefect_server: PrefectApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESTINATION__DUCKDB__CREDENTIALS", str(flow_env / "other.duckdb"))
    state = feedback_push(apply=True, return_state=True)
    assert state.is_failed()
    assert "prefect gcl create feedback-sync-duckdb-other --limit 1" in str(state.message)
    assert not (flow_env / "other.duckdb").exists()


def test_the_key_comes_from_a_secret_block_when_one_exists(
    flow_env: Path, prefect_server: PrefectApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.blocks.system import Secret

    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", "stale-key-from-the-environment")
    monkeypatch.setenv("FLOWS__API_KEY_SECRET_BLOCK", "feedback-key-for-tests")
    block_id = Secret(value=SECRET_KEY).save("feedback-key-for-tests", overwrite=True)
    try:
        state = _run(resources=["topics", "statuses"], pipelines_dir=str(flow_env / "p"))
        assert state.is_completed(), state.message
        said = "API key from the Prefect Secret block 'feedback-key-for-tests'"
        logs = prefect_server.logs_with(_run_id(state), said)
        assert said in logs
        assert SECRET_KEY not in prefect_server.everything()
    finally:
        prefect_server.http.delete(f"block_documents/{block_id}")
