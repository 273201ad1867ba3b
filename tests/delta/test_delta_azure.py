"""The Delta-on-object-storage tests of test_delta_objectstore.py, in an Azure container
(``az://``) on Azurite: the same syncs, models, copies and owed deletes, configured through
dlt's settings for an Azure account (tests/support/objectstore.py names what only the emulator
needs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.delta.test_delta_objectstore import (
    bucket_harness,
    test_deletes_owed_by_a_crashed_run_are_finished_in_object_storage,
    test_full_normal_and_full_again_in_object_storage,
)
from tests.support.objectstore import AzureStore
from tests.sync.harness import Harness

__all__ = [
    "test_deletes_owed_by_a_crashed_run_are_finished_in_object_storage",
    "test_full_normal_and_full_again_in_object_storage",
]


@pytest.fixture
def in_bucket(
    harness: Harness, azure_store: AzureStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Harness:
    """The harness with its Delta tables in the Azure container."""
    return bucket_harness(harness, azure_store, monkeypatch, tmp_path.name)
