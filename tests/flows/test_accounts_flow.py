"""Several accounts on Prefect: the sync flow's ``account`` parameter, each account's Secret
block and writer limit, and the fan-out flow's checks before it starts any account (the
fan-out across workers, end to end: ``test_fanout_deploy.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from feedback_sync.flows import lineage
from feedback_sync.flows.fanout import (
    AccountOutcome,
    error_line,
    feedback_sync_accounts,
    report_markdown,
    startable,
)
from feedback_sync.flows.secrets import block_name
from feedback_sync.flows.sync import feedback_sync
from feedback_sync.sandbox.server import RunningSandbox
from feedback_sync.warehouse.target import make_target

from tests.flows.conftest import SECRET_KEY
from tests.flows.prefect_api import PrefectApi
from tests.sync.harness import Harness

ACCOUNT_NAMES = "SOURCES__FEEDBACK__ACCOUNT_NAMES"
WAREHOUSE_LIMIT = "feedback-sync-duckdb-warehouse"


def test_each_account_writes_under_the_limit_of_its_dataset(tmp_path: Path) -> None:
    """One DuckDB file takes one writer: its accounts share its limit, the one a project
    without accounts has always used. A server or a folder per account: a limit each."""
    duck = make_target(duckdb_path=tmp_path / "warehouse.duckdb")
    limits = {lineage.concurrency_limit(duck.for_account(a)) for a in ("acme", "globex")}
    assert limits == {lineage.concurrency_limit(duck)} == {"feedback-sync-duckdb-warehouse"}
    # ... while their artifacts (the row-count baseline among them) never mix
    assert lineage.artifact_key(duck.for_account("acme"), "rows") != lineage.artifact_key(
        duck.for_account("globex"), "rows"
    )
    pg = make_target(destination="postgres", dataset="feedback")
    assert lineage.concurrency_limit(pg) == "feedback-sync-postgres-feedback"
    assert [lineage.concurrency_limit(pg.for_account(a)) for a in ("acme", "big_co")] == [
        "feedback-sync-postgres-feedback-acme",
        "feedback-sync-postgres-feedback-big-co",
    ]
    delta = make_target(destination="delta", delta_dir=tmp_path / "lake")
    assert lineage.concurrency_limit(delta.for_account("acme")) == (
        "feedback-sync-delta-feedback-acme"
    )
    parquet = make_target(destination="parquet", parquet_dir=tmp_path / "parquet")
    assert lineage.concurrency_limit(parquet.for_account("acme")) == "feedback-sync-parquet-acme"


def test_the_fanout_starts_at_most_n_and_never_two_of_one_limit() -> None:
    shared = {"a": "duck", "b": "duck", "c": "duck"}
    assert startable(["a", "b", "c"], [], shared, 2) == ["a"]
    assert startable(["b", "c"], ["a"], shared, 2) == []
    apart = {"a": "pg-a", "b": "pg-b", "c": "pg-c", "d": "pg-d"}
    assert startable(["a", "b", "c", "d"], [], apart, 2) == ["a", "b"]
    assert startable(["c", "d"], ["a", "b"], apart, 2) == []
    assert startable(["c", "d"], ["b"], apart, 2) == ["c"]
    assert startable(["c", "d"], [], apart, 5) == ["c", "d"]
    # a later account whose limit is free goes before one that must wait
    mixed = {"a": "x", "b": "x", "c": "y"}
    assert startable(["b", "c"], ["a"], mixed, 3) == ["c"]


def test_each_account_has_a_secret_block_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLOWS__API_KEY_SECRET_BLOCK", raising=False)
    assert block_name() == "feedback-api-key"
    assert block_name("acme") == "feedback-api-key-acme"
    # a block's name takes no underscore
    assert block_name("big_co_eu") == "feedback-api-key-big-co-eu"
    monkeypatch.setenv("FLOWS__API_KEY_SECRET_BLOCK", "our-key")
    assert block_name("acme") == "our-key-acme"


def test_a_failed_runs_error_is_its_own_line() -> None:
    said = "Flow run encountered an exception: RuntimeError: the sync failed: no connection"
    assert error_line("Failed", said) == "the sync failed: no connection"
    assert error_line("Failed", "Flow run encountered an exception: x.y.Z: a\nb") == "a"
    assert error_line("Crashed", None) == "the run ended Crashed"
    assert error_line("Crashed", "Flow run infrastructure exited with non-zero status code 1.") == (
        "Flow run infrastructure exited with non-zero status code 1."
    )


def test_the_fanout_report_has_a_line_per_account(tmp_path: Path) -> None:
    target = make_target(duckdb_path=tmp_path / "warehouse.duckdb")
    outcomes = [
        AccountOutcome("acme", "COMPLETED", "acme-full", 4.2, 1234, 1234, 56),
        AccountOutcome("initech", "FAILED", "initech-full", 1.5, error="the sync | failed"),
    ]
    text = report_markdown(outcomes, target, "full run through `feedback-sync/account`", "-")
    lines = text.splitlines()
    assert "| acme | COMPLETED | 1,234 | 1,234 | 56 | 4.2 | acme-full |  |" in lines
    assert "| initech | FAILED |  |  |  | 1.5 | initech-full | the sync / failed |" in lines
    assert "1 of 2 accounts completed; failed: initech (run again:" in text
    assert "each account in its dataset `feedback_<account>`" in text


# --- the flows, on a Prefect test server ----------------------------------------------


@pytest.fixture
def accounts_env(
    flow_env: Path, secret_sandbox: RunningSandbox, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Two accounts configured by variables: acme served by the sandbox (its key from no
    file: a test gives it), globex's server never asked. The warehouse is
    ``data/warehouse.duckdb`` (where ``Harness`` reads)."""
    monkeypatch.setenv(
        "DESTINATION__DUCKDB__CREDENTIALS", str(flow_env / "data" / "warehouse.duckdb")
    )
    monkeypatch.delenv("SOURCES__FEEDBACK__BASE_URL")
    monkeypatch.delenv("SOURCES__FEEDBACK__API_KEY")
    monkeypatch.setenv(ACCOUNT_NAMES, '["acme", "globex"]')
    monkeypatch.setenv("SOURCES__FEEDBACK__ACCOUNTS__ACME__BASE_URL", secret_sandbox.base_url)
    monkeypatch.setenv("SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SOURCES__FEEDBACK__ACCOUNTS__GLOBEX__API_KEY", "globex-key-5678")
    monkeypatch.setenv("FLOWS__SYNC_RETRIES", "0")
    return flow_env


@pytest.fixture
def warehouse_limit(prefect_server: PrefectApi) -> str:
    """The writer limit of ``data/warehouse.duckdb``, created once per server."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(WAREHOUSE_LIMIT)
        except ObjectNotFound:
            client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=WAREHOUSE_LIMIT, limit=1)
            )
    return WAREHOUSE_LIMIT


@pytest.fixture
def acme_block(prefect_server: PrefectApi) -> Iterator[str]:
    """acme's key in its own Secret block."""
    from prefect.blocks.system import Secret

    block_id = Secret(value=SECRET_KEY).save("feedback-api-key-acme", overwrite=True)
    yield "feedback-api-key-acme"
    prefect_server.http.delete(f"block_documents/{block_id}")


def _run_id(state: Any) -> str:
    return str(state.state_details.flow_run_id)


def _one_line(state: Any) -> str:
    message = str(state.message)
    assert "\n" not in message and "Traceback" not in message, message
    return message


@pytest.mark.slow
def test_one_account_lands_in_its_dataset_with_its_own_block_key(
    accounts_env: Path,
    acme_block: str,
    warehouse_limit: str,
    prefect_server: PrefectApi,
    secret_sandbox: RunningSandbox,
) -> None:
    state = feedback_sync(
        account="acme", mode="full", pipelines_dir=str(accounts_env / "p"), return_state=True
    )
    assert state.is_completed(), state.message
    done = state.result()
    assert done["table_rows"]["followers"] > 0
    # what landed is acme's server's data, in acme's dataset of the shared file
    check = Harness(secret_sandbox, accounts_env / "data")
    check.dataset = "feedback_acme"
    try:
        check.assert_equals_truth()
    finally:
        check.close()
    said = "API key of account acme from the Prefect Secret block 'feedback-api-key-acme'"
    logs = prefect_server.logs_with(_run_id(state), said, WAREHOUSE_LIMIT)
    assert said in logs
    assert f"holding the writer slot '{WAREHOUSE_LIMIT}'" in logs  # the file's one limit
    # its artifacts are acme's; the report says why the models were not built
    warehouse = make_target(duckdb_path=accounts_env / "data" / "warehouse.duckdb")
    acme = warehouse.for_account("acme")
    (report,) = prefect_server.artifacts(lineage.artifact_key(acme, "report"))
    assert "dataset feedback_acme" in report["data"]
    assert "the staging views and marts over every account to the flow" in report["data"]
    assert SECRET_KEY not in prefect_server.everything()


@pytest.mark.slow
def test_the_sync_flow_refuses_what_names_no_account_it_can_sync(
    accounts_env: Path,
    warehouse_limit: str,
    prefect_server: PrefectApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # accounts configured, none named: the run says where the accounts are synced
    state = feedback_sync(return_state=True)
    assert state.is_failed()
    assert _one_line(state).endswith(
        "accounts are configured (acme, globex): give the parameter account, or run the "
        "flow feedback-sync-accounts, which starts one run per account"
    )
    state = feedback_sync(account="hooli", return_state=True)
    assert state.is_failed()
    assert _one_line(state).endswith(
        "the parameter account: no account 'hooli' is configured; configured: acme, globex"
    )
    # no block for acme and no key in its table: the run names both places
    state = feedback_sync(account="acme", pipelines_dir=str(accounts_env / "p"), return_state=True)
    assert state.is_failed()
    message = _one_line(state)
    assert "SOURCES__FEEDBACK__ACCOUNTS__ACME__API_KEY" in message
    assert "or in the Prefect Secret block 'feedback-api-key-acme'" in message
    assert "globex-key-5678" not in prefect_server.everything()
    # no accounts configured: an account named is refused
    monkeypatch.delenv(ACCOUNT_NAMES)
    for name in ("ACME__BASE_URL", "GLOBEX__BASE_URL", "GLOBEX__API_KEY"):
        monkeypatch.delenv(f"SOURCES__FEEDBACK__ACCOUNTS__{name}")
    state = feedback_sync(account="acme", return_state=True)
    assert state.is_failed()
    assert "the parameter account is 'acme', but no accounts are configured" in _one_line(state)


@pytest.mark.slow
def test_the_fanout_refuses_before_it_starts_any_account(
    accounts_env: Path, prefect_server: PrefectApi
) -> None:
    def refused(**parameters: Any) -> str:
        state = feedback_sync_accounts(return_state=True, **parameters)
        assert state.is_failed()
        return _one_line(state)

    assert refused(accounts=["acme", "hooli"]).endswith(
        "the parameter accounts: 'hooli' not configured; configured: acme, globex"
    )
    assert refused(accounts=[]).endswith(
        "the parameter accounts is empty: leave it unset for every account"
    )
    assert refused(max_parallel=0).endswith("max_parallel must be 1 or more, got 0")
    assert "sync_deployment must be <flow>/<deployment>" in refused(sync_deployment="account")
    assert refused().endswith(
        "sync_deployment: no deployment 'feedback-sync/account' on the Prefect server; "
        "deploy the flow feedback-sync under that name first (prefect.yaml)"
    )


@pytest.mark.slow
def test_the_fanout_names_every_missing_writer_limit(
    accounts_env: Path, prefect_server: PrefectApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into PostgreSQL each account writes under its own limit: the fan-out names those
    missing, with the commands, and starts nothing."""
    from feedback_sync.flows.sync import feedback_sync as sync_flow

    monkeypatch.setenv("DESTINATION__POSTGRES__CREDENTIALS", "postgresql://u:p@127.0.0.1:9/db")
    deployment = sync_flow.to_deployment(name="account-for-tests")
    deployment.apply()
    state = feedback_sync_accounts(
        destination="postgres",
        sync_deployment="feedback-sync/account-for-tests",
        return_state=True,
    )
    assert state.is_failed()
    message = _one_line(state)
    assert re.search(
        r"no global concurrency limit named 'feedback-sync-postgres-feedback', "
        r"'feedback-sync-postgres-feedback-acme', "
        r"'feedback-sync-postgres-feedback-globex' on the Prefect server .*; create each "
        r"once with: prefect gcl create feedback-sync-postgres-feedback --limit 1; "
        r"prefect gcl create feedback-sync-postgres-feedback-acme --limit 1; "
        r"prefect gcl create feedback-sync-postgres-feedback-globex --limit 1$",
        message,
    ), message
    names = ["acme-incremental", "globex-incremental"]
    assert not prefect_server.post("flow_runs/filter", {"flow_runs": {"name": {"any_": names}}})
