"""The resource registry (source/resources.py) is the one declaration: the dlt source, the
declared types, the parent keys and the status lines all follow it."""

from __future__ import annotations

import pytest
from feedback_sync.app.status import describe_state
from feedback_sync.source.resources import (
    BY_NAME,
    COMPLETE_WHEN_FULL,
    KEY,
    LIST_INDEX,
    NAMES,
    PARENT_KEYS,
    RESOURCES,
)
from feedback_sync.source.types import DECLARED


def test_the_source_has_exactly_the_registered_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCES__FEEDBACK__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("SOURCES__FEEDBACK__API_KEY", "not-used")
    from feedback_sync.source import feedback

    source = feedback(full=True)
    assert list(source.selected_resources) == list(NAMES)  # and in the run's order


def test_every_table_is_declared_from_the_registry() -> None:
    for resource in RESOURCES:
        assert KEY in resource.columns
        assert PARENT_KEYS[resource.name] == resource.parent_key
        for table, columns in resource.tables().items():
            assert DECLARED[table] == columns
            if table != resource.name:
                assert list(columns)[:2] == [resource.parent_key, LIST_INDEX]
    registered = {t for r in RESOURCES for t in r.tables()}
    assert set(DECLARED) - registered == {"rejected_rows"}  # the sync's own table


def test_a_full_run_completes_what_is_read_per_idea() -> None:
    assert {"comments", "integration_links"} == COMPLETE_WHEN_FULL


@pytest.mark.parametrize(
    ("resource", "state", "line"),
    [
        ("followers", {"after": "c"}, "resumes after the saved cursor"),
        ("announcements", {}, "no window yet"),
        ("comments", {"ideas": {}}, "0 ideas tracked, 0 with a saved cursor"),
        ("integration_links", {"ideas": {"ide_1": 1}}, "1 ideas tracked"),
        ("integration_links", {"types": {"zendesk": "c"}}, "zendesk: cursor saved"),
        ("topics", {}, "read in full on every run"),
        ("ideas", {}, "read in full on every run"),
        (
            "ideas",
            {"rows": {"ide_1": "AAAAAAAAAAA", "ide_2": "AAAAAAAAAAB"}},
            "read in full on every run; loads only what changed (2 rows known)",
        ),
    ],
)
def test_status_lines_follow_how_a_resource_is_read(
    resource: str, state: dict[str, object], line: str
) -> None:
    assert resource in BY_NAME
    assert describe_state(resource, state) == line
