"""``./run screenshot prefect``: the Prefect UI's page of a real flow run, as a PNG.

Starts a throwaway Prefect server (``tests.support.prefect_local``) and a tiny sandbox, runs
the flow
``feedback-sync`` twice (full, then incremental) against them, and has the project's
headless Chromium photograph the second run's page: ``docs/images/prefect-flow-run.png``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

OUTPUT = Path("docs/images/prefect-flow-run.png")


def main(argv: list[str]) -> int:
    png = Path(argv[0]) if argv else OUTPUT
    with tempfile.TemporaryDirectory(prefix="feedback-sync-shot-") as folder:
        tmp = Path(folder)
        from tests.support.prefect_local import LocalPrefect

        local = LocalPrefect(tmp / "prefect", {})
        local.home.mkdir()
        try:
            local.start_server()
            # the flow runs in this process, against that server
            os.environ.update({k: v for k, v in local.env.items() if k.startswith("PREFECT_")})
            os.environ["DO_NOT_TRACK"] = "1"
            run_id = _two_runs(local, tmp)
            ui = local.api_url.removesuffix("/api")
            _photograph(f"{ui}/runs/flow-run/{run_id}", png)
        finally:
            local.close()
    print(f"screenshot: {png}")
    return 0


def _two_runs(local: object, tmp: Path) -> str:
    from feedback_sync.sandbox.app import create_app
    from feedback_sync.sandbox.server import serve_in_thread

    with serve_in_thread(create_app("tiny", 1, api_key="screenshot-key")) as sandbox:
        os.environ.update(
            {
                "SOURCES__FEEDBACK__BASE_URL": sandbox.base_url,
                "SOURCES__FEEDBACK__API_KEY": "screenshot-key",
                "DESTINATION__DUCKDB__CREDENTIALS": str(tmp / "warehouse.duckdb"),
                "RUNTIME__DLTHUB_TELEMETRY": "false",
            }
        )
        from feedback_sync.flows.sync import feedback_sync
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

        with get_client(sync_client=True) as client:
            client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name="feedback-sync-duckdb-warehouse", limit=1)
            )
        pipelines = str(tmp / "pipelines")
        feedback_sync(mode="full", pipelines_dir=pipelines)
        state = feedback_sync(pipelines_dir=pipelines, return_state=True)
        return str(state.state_details.flow_run_id)


def _photograph(url: str, png: Path) -> None:
    from tests.support.browser import open_page

    with open_page(url, width=1400, height=1000) as visit:
        page = visit.page
        page.wait_for_load_state("networkidle")
        page.get_by_text("Completed").first.wait_for(timeout=30_000)
        time.sleep(2)  # the graph and the logs fill in after the first paint
        png.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(png), full_page=False)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
