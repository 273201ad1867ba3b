"""Reading back what a Prefect server holds, through its REST API (what a user's UI shows).

Used to find materialization events, artifacts and logs, and to search everything a run
left on the server for a secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx


class PrefectApi:
    def __init__(self, api_url: str) -> None:
        self.http = httpx.Client(base_url=api_url.rstrip("/") + "/", timeout=30)

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        # a busy SQLite-backed server answers 503 (database locked); Prefect's own client
        # retries those, and so does this one
        for attempt in range(8):
            response = self.http.request(method, path, json=body)
            if response.status_code not in (429, 503) or attempt == 7:
                break
            time.sleep(0.5 * (attempt + 1))
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._send("POST", path, body or {})

    def get(self, path: str) -> Any:
        return self._send("GET", path)

    def events(self, prefix: str = "") -> list[dict[str, Any]]:
        """Every event whose name starts with ``prefix``."""
        body: dict[str, Any] = {
            "filter": {
                "occurred": {"since": "2000-01-01T00:00:00Z"},
                "order": "ASC",
                **({"event": {"prefix": [prefix]}} if prefix else {}),
            },
            "limit": 50,  # the server's page size
        }
        page = self.post("events/filter", body)
        found = list(page["events"])
        while page.get("next_page"):
            response = self.http.get(page["next_page"])
            response.raise_for_status()
            page = response.json()
            found += page["events"]
        return found

    def wait_for(
        self, what: Callable[[], list[dict[str, Any]]], enough: int, timeout: float = 30
    ) -> list[dict[str, Any]]:
        """``what()`` once it has ``enough`` items (events are recorded asynchronously)."""
        deadline = time.monotonic() + timeout
        found = what()
        while len(found) < enough and time.monotonic() < deadline:
            time.sleep(0.5)
            found = what()
        return found

    def materializations(self, flow_run_id: str) -> dict[str, dict[str, Any]]:
        """``{asset key: event}`` of the succeeded materializations of one flow run."""
        out = {}
        for event in self.events("prefect.asset.materialization.succeeded"):
            related = {r["prefect.resource.id"] for r in event.get("related", [])}
            if f"prefect.flow-run.{flow_run_id}" in related:
                out[event["resource"]["prefect.resource.id"]] = event
        return out

    def artifacts(self, key: str) -> list[dict[str, Any]]:
        """Every version of the keyed artifact, newest first."""
        result: list[dict[str, Any]] = self.post(
            "artifacts/filter",
            {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC"},
        )
        return result

    def logs(self, flow_run_id: str) -> list[str]:
        rows = self.post(
            "logs/filter",
            {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "limit": 200},
        )
        messages = [r["message"] for r in rows]
        offset = len(rows)
        while len(rows) == 200:
            rows = self.post(
                "logs/filter",
                {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "limit": 200, "offset": offset},
            )
            messages += [r["message"] for r in rows]
            offset += len(rows)
        return messages

    def logs_with(self, flow_run_id: str, *needles: str, timeout: float = 30) -> str:
        """The run's logs as text, once every needle is in them (or ``timeout`` passed):
        the run's log records reach the server in batches, after the run may have ended."""
        deadline = time.monotonic() + timeout
        text = "\n".join(self.logs(flow_run_id))
        while not all(n.lower() in text.lower() for n in needles) and time.monotonic() < deadline:
            time.sleep(0.5)
            text = "\n".join(self.logs(flow_run_id))
        return text

    def everything(self) -> str:
        """Every flow run, task run, deployment, artifact, log and event, as text: what a
        secret must never be found in (the Secret block that holds it is left out)."""
        parts = []
        flow_runs = self.post("flow_runs/filter", {"limit": 200})
        parts.append(json.dumps(flow_runs))
        parts.append(json.dumps(self.post("task_runs/filter", {"limit": 200})))
        parts.append(json.dumps(self.post("deployments/filter", {"limit": 200})))
        parts.append(json.dumps(self.post("artifacts/filter", {"limit": 200})))
        parts.append(json.dumps(self.post("variables/filter", {"limit": 200})))
        for run in flow_runs:
            parts += self.logs(run["id"])
        parts.append(json.dumps(self.events()))
        return "\n".join(parts)
