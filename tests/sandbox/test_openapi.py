"""The served OpenAPI document is valid, covers every operation, and the server keeps to it.

schemathesis generates requests for every operation from the document (valid and invalid
inputs) and checks each answer: no 5xx, a documented status, content type, headers and a
body that conforms to the documented schema.
"""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from feedback_sync.sandbox.app import create_app
from feedback_sync.sandbox.testing import TEST_API_KEY
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

APP = create_app("tiny", 1, api_key=TEST_API_KEY)
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)
OPERATIONS = {
    ("GET", "/followers"),
    ("POST", "/followers"),
    ("GET", "/followers/search"),
    ("POST", "/followers/{followerIdx}"),
    ("DELETE", "/followers/{followerIdx}"),
    ("GET", "/announcements"),
    ("POST", "/announcements"),
    ("GET", "/announcements/{announcementIdx}"),
    ("POST", "/announcements/{announcementIdx}"),
    ("DELETE", "/announcements/{announcementIdx}"),
    ("GET", "/comments"),
    ("POST", "/comments"),
    ("POST", "/comments/{commentIdx}"),
    ("DELETE", "/comments/{commentIdx}"),
    ("GET", "/topics"),
    ("POST", "/topics"),
    ("POST", "/topics/{topicIdx}"),
    ("DELETE", "/topics/{topicIdx}"),
    ("GET", "/statuses"),
    ("POST", "/statuses"),
    ("POST", "/statuses/{statusIdx}"),
    ("DELETE", "/statuses/{statusIdx}"),
    ("GET", "/integration-links"),
    ("GET", "/ideas"),
}


def test_the_document_lists_every_operation_of_the_spec() -> None:
    document = APP.state and SCHEMA.raw_schema
    listed = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert listed == OPERATIONS


# schemathesis's own ``SCHEMA.parametrize()`` gives every operation's test one node id (the
# operation only in its name), and pytest-xdist, which hands tests out by node id, then ran
# one operation of 24 under ``./run test``; pytest's own parametrize names each
@pytest.mark.parametrize(
    ("method", "path"), sorted(OPERATIONS), ids=[f"{m} {p}" for m, p in sorted(OPERATIONS)]
)
def test_every_operation_keeps_to_the_document(method: str, path: str) -> None:
    operation = SCHEMA[path][method]

    @hypothesis.given(case=operation.as_strategy())
    @hypothesis.settings(
        max_examples=30,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
        database=None,
    )
    def keeps_to_the_document(case: schemathesis.Case) -> None:
        case.call_and_validate(
            headers={"Authorization": f"Bearer {TEST_API_KEY}"},
            checks=[
                not_a_server_error,
                status_code_conformance,
                content_type_conformance,
                response_headers_conformance,
                response_schema_conformance,
            ],
        )

    keeps_to_the_document()
