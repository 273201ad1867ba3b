"""Applies the freshness alarm (``flows/freshness.yaml``) to the Prefect server.

``python -m feedback_sync.flows.alarm [--notify BLOCK] [--within SECONDS] [--file PATH]``:
creates the
automation, or updates the one of the same name in place (applying twice never makes two).
``--notify type/name`` replaces the file's action with a notification through that block
(``prefect block ls`` lists them); ``--within`` overrides the window.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

FILE = Path(__file__).with_name("freshness.yaml")


def read(path: Path, within: float | None, notify: str | None) -> dict[str, Any]:
    """The automation as the file describes it, with the command line's overrides."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"feedback_sync.flows.alarm: cannot read {path}: {exc}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("trigger"), dict):
        raise SystemExit(
            f"feedback_sync.flows.alarm: {path} must hold one automation with a trigger"
        )
    if within is not None:
        spec["trigger"]["within"] = within
    if notify is not None:
        spec["actions"] = [
            {
                "type": "send-notification",
                "block_document_id": str(_block_id(notify)),
                "subject": "feedback-sync is stale",
                "body": (
                    "No feedback-sync flow run has completed within "
                    f"{spec['trigger']['within']} seconds ({{{{ automation.name }}}})."
                ),
            }
        ]
    return spec


def _block_id(slug: str) -> UUID:
    """The id of the block document ``slug`` (``<block type>/<block name>``) on the server,
    read as ``Block.load`` reads it, without making the block (its class need not be
    installed here)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    if "/" not in slug:
        raise SystemExit(
            f"feedback_sync.flows.alarm: --notify wants <block type>/<block name>, got {slug!r}"
        )
    block_type, name = slug.split("/", 1)
    try:
        with get_client(sync_client=True) as client:
            document = client.read_block_document_by_name(name=name, block_type_slug=block_type)
    except ObjectNotFound:
        raise SystemExit(
            f"feedback_sync.flows.alarm: no block {slug!r} on the server: Unable to find block "
            f"document named {name} for block type {block_type}"
        ) from None
    return document.id


def apply(spec: dict[str, Any]) -> tuple[UUID, bool]:
    """Creates or updates the automation named ``spec["name"]``; ``(id, created)``."""
    from prefect.client.orchestration import get_client
    from prefect.events.schemas.automations import AutomationCore

    automation = AutomationCore.model_validate(spec)
    with get_client(sync_client=True) as client:
        existing = client.read_automations_by_name(automation.name)
        if existing:
            client.update_automation(existing[0].id, automation)
            return existing[0].id, False
        return client.create_automation(automation), True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m feedback_sync.flows.alarm", description=__doc__, allow_abbrev=False
    )
    parser.add_argument("--file", type=Path, default=FILE, help="the automation (YAML)")
    parser.add_argument("--within", type=float, help="the window in seconds (>= 10)")
    parser.add_argument("--notify", metavar="TYPE/NAME", help="a notification block")
    args = parser.parse_args(argv)
    spec = read(args.file, args.within, args.notify)
    try:
        automation_id, created = apply(spec)
    except ValueError as exc:  # pydantic's validation error names the field
        print(
            f"feedback_sync.flows.alarm: {args.file} is not a valid automation: {exc}",
            file=sys.stderr,
        )
        return 2
    print(f"{'created' if created else 'updated'} automation {spec['name']!r} ({automation_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
