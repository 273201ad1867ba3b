"""The OpenAPI 3 document of the v1 API as the sandbox serves it (``GET /openapi.json``).

Written by hand from ``api-spec.md`` and ``api-contract.md`` (not generated from the code),
so that a schemathesis run checks the server against the documents, not against itself.
Timestamps accept either of the contract's formats, because the switches can change them.
"""

from __future__ import annotations

from typing import Any

TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z?$"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    schema["required"] = list(properties) if required is None else required
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


STRING = {"type": "string"}
# inline (not a $ref) where it must be nullable: OpenAPI 3.0 ignores siblings of $ref
SCHEMAS_TIMESTAMP = {"type": "string", "pattern": TIMESTAMP_PATTERN}
SCALAR = {"nullable": True, "oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}
ATTRIBUTES = {"type": "object", "additionalProperties": SCALAR}
TS = _ref("Timestamp")
EMBEDDED_PERSON = _obj({"idx": STRING, "name": STRING, "avatar": STRING})

SCHEMAS: dict[str, Any] = {
    "Timestamp": {
        "type": "string",
        "pattern": TIMESTAMP_PATTERN,
        "description": "UTC. `2025-03-04 05:06:07`, or `2025-03-04T05:06:07.123456Z` "
        "(integration links by default; any resource under the timestamp switches).",
    },
    "Error": _obj(
        {"error": {"type": "boolean"}, "message": STRING, "code": STRING},
    ),
    "DeleteResult": _obj({"success": {"type": "boolean"}, "message": STRING}),
    "CursorPagination": _obj(
        {
            "total": {"type": "integer", "minimum": 0},
            "before": _nullable(STRING),
            "after": _nullable(STRING),
        }
    ),
    "TopicPagination": _obj(
        {
            "total": {"type": "integer", "minimum": 0},
            "before": _nullable(STRING),
            "after": _nullable(STRING),
        }
    ),
    "LinkPagination": _obj(
        {
            "total": {"type": "integer", "minimum": 0},
            "count": {"type": "integer", "minimum": 0},
            "hasNextPage": {"type": "boolean"},
            "startCursor": _nullable(STRING),
            "endCursor": _nullable(STRING),
        }
    ),
    "Company": _obj(
        {
            "id": STRING,
            "name": STRING,
            "monthly_spend": {"type": "number"},
            "attributes": {"type": "object", "additionalProperties": True},
        },
        ["id", "name", "attributes"],
    ),
    "Follower": _obj(
        {
            "idx": STRING,
            "name": STRING,
            "email": STRING,
            "avatar": STRING,
            "attributes": {
                "type": "object",
                "additionalProperties": True,
                "description": "Only with include_attributes=true and custom attributes on.",
            },
            "companies": {"type": "array", "items": _ref("Company")},
            "created_at": TS,
            "updated_at": TS,
        },
        ["idx", "name", "email", "avatar", "created_at", "updated_at"],
    ),
    "Announcement": _obj(
        {
            "idx": STRING,
            "name": STRING,
            "slug": STRING,
            "excerpt": _nullable(STRING),
            "content": STRING,
            "content_html": STRING,
            "reaction_count": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "Reaction counts keyed by emoji.",
            },
            "is_published": {"type": "boolean"},
            "published_at": {**SCHEMAS_TIMESTAMP, "nullable": True},
            "created_at": TS,
            "updated_at": TS,
            "author": EMBEDDED_PERSON,
            "categories": {
                "type": "array",
                "items": _obj({"idx": STRING, "name": STRING, "color": STRING}),
            },
            "ideas": {"type": "array", "items": _obj({"idx": STRING, "name": STRING})},
        }
    ),
    "Comment": _obj(
        {
            "idx": STRING,
            "message": STRING,
            "content": {
                "type": "array",
                "items": _obj(
                    {
                        "type": STRING,
                        "children": {"type": "array", "items": _obj({"text": STRING})},
                    }
                ),
            },
            "content_html": STRING,
            "content_markdown": STRING,
            "is_private": {"type": "boolean"},
            "type": {"type": "string", "enum": ["comment", "note"]},
            "created_at": TS,
            "updated_at": TS,
            "follower": EMBEDDED_PERSON,
            "idea_id": {"type": "integer"},
            "attachments": {
                "type": "array",
                "items": _obj(
                    {
                        "idx": STRING,
                        "name": STRING,
                        "url": STRING,
                        "type": STRING,
                        "created_at": TS,
                        "updated_at": TS,
                    }
                ),
            },
        }
    ),
    "Topic": _obj(
        {
            "idx": STRING,
            "name": STRING,
            "idea_count": {"type": "integer", "minimum": 0},
            "order": {"type": "integer"},
            "created_at": TS,
            "updated_at": TS,
        }
    ),
    "Status": _obj(
        {
            "idx": STRING,
            "name": STRING,
            "color": {"type": "string", "pattern": "^#[0-9a-fA-F]{6}$"},
            "created_at": TS,
            "updated_at": TS,
        }
    ),
    "IntegrationLink": _obj(
        {
            "idx": STRING,
            "idea_idx": STRING,
            "type": STRING,
            "link_ref": STRING,
            "meta": {
                "type": "object",
                "properties": {"url": STRING},
                "required": ["url"],
                "additionalProperties": True,
            },
            "created_at": TS,
            "updated_at": TS,
        }
    ),
    "Idea": _obj(
        {
            "idx": STRING,
            "id": {"type": "integer"},
            "name": STRING,
            "status_idx": _nullable(STRING),
            "topic_idxs": {"type": "array", "items": STRING},
            "comment_count": {"type": "integer", "minimum": 0},
            "note_count": {"type": "integer", "minimum": 0},
            "created_at": TS,
            "updated_at": TS,
        }
    ),
    "CompanyInput": {
        "type": "object",
        "properties": {
            "id": STRING,
            "name": STRING,
            "monthly_spend": _nullable({"type": "number"}),
            "attributes": {"type": "object", "additionalProperties": True},
        },
        "required": ["id", "name"],
        "additionalProperties": True,
    },
    "FollowerCreate": {
        "type": "object",
        "properties": {
            "name": STRING,
            "email": STRING,
            "attributes": ATTRIBUTES,
            "companies": {"type": "array", "items": _ref("CompanyInput")},
        },
        "required": ["name", "email"],
    },
    "FollowerUpdate": {
        "type": "object",
        "properties": {
            "name": STRING,
            "email": STRING,
            "attributes": ATTRIBUTES,
            "companies": {"type": "array", "items": _ref("CompanyInput")},
        },
    },
    "AnnouncementWrite": {
        "type": "object",
        "properties": {
            "name": STRING,
            "author_idx": STRING,
            "content": STRING,
            "published_at": _nullable(STRING),
            "idea_idxs": {"type": "array", "items": STRING},
            "category_idxs": {"type": "array", "items": STRING},
        },
        "required": ["name", "author_idx", "content"],
    },
    "CommentCreate": {
        "type": "object",
        "properties": {
            "author_idx": STRING,
            "message": STRING,
            "idea_idx": STRING,
            "is_private": {"type": "boolean"},
        },
        "required": ["author_idx", "message", "idea_idx"],
    },
    "CommentUpdate": {
        "type": "object",
        "properties": {"message": STRING},
        "required": ["message"],
    },
    "NameOptional": {"type": "object", "properties": {"name": _nullable(STRING)}},
    "NameRequired": {"type": "object", "properties": {"name": STRING}, "required": ["name"]},
}


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


RATE_HEADERS = {
    "X-RateLimit-Limit": {"schema": {"type": "string"}, "description": "While a limit is set."},
    "X-RateLimit-Remaining": {"schema": {"type": "string"}, "description": "While a limit is set."},
}


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": RATE_HEADERS,
        "content": _json_content(_ref("Error")),
    }


RESPONSES: dict[str, Any] = {
    "BadRequest": _error("Invalid request; the message names the field."),
    "Unauthorized": _error("Missing or wrong API key."),
    "Forbidden": _error("Custom attributes are not enabled."),
    "NotFound": _error("Unknown idx."),
    "RateLimited": {
        "description": "Rate limited.",
        "headers": {
            "Retry-After": {"schema": {"type": "string"}, "required": True},
            **RATE_HEADERS,
        },
        "content": _json_content(_ref("Error")),
    },
    "ServerError": _error("Server fault."),
    "BadGateway": {
        "description": "A proxy's error page.",
        "content": {"text/html": {"schema": {"type": "string"}}},
    },
    "Unavailable": _error("Temporarily unavailable."),
}


def _ok(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "headers": RATE_HEADERS, "content": _json_content(schema)}


def _errors(*codes: str) -> dict[str, Any]:
    names = {"400": "BadRequest", "403": "Forbidden", "404": "NotFound"}
    common = {
        "401": "Unauthorized",
        "429": "RateLimited",
        "500": "ServerError",
        "502": "BadGateway",
        "503": "Unavailable",
    }
    chosen = {code: names[code] for code in codes} | common
    return {code: {"$ref": f"#/components/responses/{name}"} for code, name in chosen.items()}


def _wrapped(name: str) -> dict[str, Any]:
    return _obj({"data": _ref(name)})


def _list(name: str, pagination: str = "CursorPagination") -> dict[str, Any]:
    return _obj({"data": {"type": "array", "items": _ref(name)}, "pagination": _ref(pagination)})


def _param(
    name: str, where: str, schema: dict[str, Any], required: bool = False, description: str = ""
) -> dict[str, Any]:
    param: dict[str, Any] = {"name": name, "in": where, "required": required, "schema": schema}
    if description:
        param["description"] = description
    return param


LIMIT = _param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20})
AFTER = _param("after", "query", STRING, description="Cursor from pagination.after.")
INCLUDE_ATTRIBUTES = _param("include_attributes", "query", {"type": "boolean"})


def _path_idx(name: str) -> dict[str, Any]:
    return _param(name, "path", STRING, required=True)


def _body(name: str, required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": _json_content(_ref(name))}


def _operation(
    op_id: str,
    summary: str,
    responses: dict[str, Any],
    *,
    params: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": op_id, "summary": summary, "responses": responses}
    if params:
        operation["parameters"] = params
    if body:
        operation["requestBody"] = body
    return operation


def _paths() -> dict[str, Any]:
    deleted = _ok(_ref("DeleteResult"))
    return {
        "/followers": {
            "get": _operation(
                "listFollowers",
                "List followers",
                {"200": _ok(_list("Follower")), **_errors("400")},
                params=[LIMIT, AFTER, INCLUDE_ATTRIBUTES],
            ),
            "post": _operation(
                "createFollower",
                "Create a follower",
                {"200": _ok(_wrapped("Follower")), **_errors("400", "403")},
                params=[INCLUDE_ATTRIBUTES],
                body=_body("FollowerCreate"),
            ),
        },
        "/followers/search": {
            "get": _operation(
                "searchFollowers",
                "Find a follower by email (whole address, any case)",
                {"200": _ok(_list("Follower")), **_errors("400")},
                params=[_param("email", "query", STRING, required=True), INCLUDE_ATTRIBUTES],
            ),
        },
        "/followers/{followerIdx}": {
            "post": _operation(
                "updateFollower",
                "Update a follower (attributes and companies merge)",
                {"200": _ok(_wrapped("Follower")), **_errors("400", "403", "404")},
                params=[_path_idx("followerIdx"), INCLUDE_ATTRIBUTES],
                body=_body("FollowerUpdate", required=False),
            ),
            "delete": _operation(
                "deleteFollower",
                "Delete a follower",
                {"200": deleted, **_errors("400", "404")},
                params=[
                    _path_idx("followerIdx"),
                    _param(
                        "content",
                        "query",
                        {"type": "string", "enum": ["delete", "reassign"], "default": "delete"},
                    ),
                ],
            ),
        },
        "/announcements": {
            "get": _operation(
                "listAnnouncements",
                "List announcements",
                {"200": _ok(_list("Announcement")), **_errors("400")},
                params=[
                    _param("is_published", "query", {"type": "boolean"}),
                    LIMIT,
                    AFTER,
                    {
                        **_param("category_idxs[]", "query", {"type": "array", "items": STRING}),
                        "style": "form",
                        "explode": True,
                    },
                    _param(
                        "published_after",
                        "query",
                        STRING,
                        description="ISO 8601 date or date-time with a zone.",
                    ),
                    _param(
                        "published_before",
                        "query",
                        STRING,
                        description="ISO 8601 date or date-time with a zone.",
                    ),
                ],
            ),
            "post": _operation(
                "createAnnouncement",
                "Create an announcement",
                {"200": _ok(_wrapped("Announcement")), **_errors("400")},
                body=_body("AnnouncementWrite"),
            ),
        },
        "/announcements/{announcementIdx}": {
            "get": _operation(
                "getAnnouncement",
                "Get an announcement",
                {"200": _ok(_wrapped("Announcement")), **_errors("404")},
                params=[_path_idx("announcementIdx")],
            ),
            "post": _operation(
                "updateAnnouncement",
                "Update an announcement (whole shape)",
                {"200": _ok(_wrapped("Announcement")), **_errors("400", "404")},
                params=[_path_idx("announcementIdx")],
                body=_body("AnnouncementWrite"),
            ),
            "delete": _operation(
                "deleteAnnouncement",
                "Delete an announcement",
                {"200": deleted, **_errors("404")},
                params=[_path_idx("announcementIdx")],
            ),
        },
        "/comments": {
            "get": _operation(
                "listComments",
                "List the comments of an idea",
                {"200": _ok(_list("Comment")), **_errors("400", "404")},
                params=[
                    _param("idea_idx", "query", STRING, required=True),
                    LIMIT,
                    AFTER,
                    _param(
                        "included_types",
                        "query",
                        {
                            "type": "string",
                            "enum": [
                                "comments",
                                "notes",
                                "comments|notes",
                                "comments,notes",
                                "notes|comments",
                                "notes,comments",
                            ],
                            "default": "comments",
                        },
                    ),
                ],
            ),
            "post": _operation(
                "createComment",
                "Create a comment or private note",
                {"200": _ok(_wrapped("Comment")), **_errors("400")},
                body=_body("CommentCreate"),
            ),
        },
        "/comments/{commentIdx}": {
            "post": _operation(
                "updateComment",
                "Update a comment's message",
                {"200": _ok(_wrapped("Comment")), **_errors("400", "404")},
                params=[_path_idx("commentIdx")],
                body=_body("CommentUpdate"),
            ),
            "delete": _operation(
                "deleteComment",
                "Delete a comment",
                {"200": deleted, **_errors("404")},
                params=[_path_idx("commentIdx")],
            ),
        },
        "/topics": {
            "get": _operation(
                "listTopics",
                "List topics (offset is a 1-based page number)",
                {"200": _ok(_list("Topic", "TopicPagination")), **_errors("400")},
                params=[LIMIT, _param("offset", "query", {"type": "integer", "minimum": 1})],
            ),
            "post": _operation(
                "createTopic",
                "Create a topic",
                {"200": _ok(_ref("Topic")), **_errors("400")},
                body=_body("NameOptional", required=False),
            ),
        },
        "/topics/{topicIdx}": {
            "post": _operation(
                "updateTopic",
                "Rename a topic",
                {"200": _ok(_ref("Topic")), **_errors("400", "404")},
                params=[_path_idx("topicIdx")],
                body=_body("NameOptional", required=False),
            ),
            "delete": _operation(
                "deleteTopic",
                "Delete a topic",
                {"200": deleted, **_errors("404")},
                params=[_path_idx("topicIdx")],
            ),
        },
        "/statuses": {
            "get": _operation(
                "listStatuses",
                "List statuses",
                {"200": _ok(_list("Status")), **_errors("400")},
                params=[LIMIT, AFTER],
            ),
            "post": _operation(
                "createStatus",
                "Create a status",
                {"200": _ok(_ref("Status")), **_errors("400")},
                body=_body("NameRequired"),
            ),
        },
        "/statuses/{statusIdx}": {
            "post": _operation(
                "updateStatus",
                "Rename a status",
                {"200": _ok(_ref("Status")), **_errors("400", "404")},
                params=[_path_idx("statusIdx")],
                body=_body("NameOptional", required=False),
            ),
            "delete": _operation(
                "deleteStatus",
                "Delete a status (400 while ideas use it)",
                {"200": deleted, **_errors("400", "404")},
                params=[_path_idx("statusIdx")],
            ),
        },
        "/integration-links": {
            "get": _operation(
                "listIntegrationLinks",
                "List integration links by idea and/or type (at least one is required)",
                {
                    "200": _ok(
                        _obj(
                            {
                                "data": {"type": "array", "items": _ref("IntegrationLink")},
                                "pagination": _ref("LinkPagination"),
                                "meta": {"type": "array"},
                            }
                        )
                    ),
                    **_errors("400", "404"),
                },
                params=[
                    LIMIT,
                    _param(
                        "after",
                        "query",
                        STRING,
                        description="pagination.endCursor of the previous page.",
                    ),
                    _param("idea_idx", "query", STRING),
                    _param("type", "query", STRING),
                ],
            ),
        },
        "/ideas": {
            "get": _operation(
                "listIdeas",
                "List ideas (sandbox extension; may be switched off)",
                {"200": _ok(_list("Idea")), **_errors("400", "404")},
                params=[LIMIT, AFTER],
            ),
        },
    }


def openapi_document(server_url: str = "/v1") -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Feedback and Product-Update Service API (feedback-sync sandbox)",
            "version": "1.0.0",
            "description": "api-spec.md with the open points settled by api-contract.md.",
        },
        "servers": [{"url": server_url}],
        "security": [{"bearerAuth": []}, {"basicAuth": []}, {"apiKeyQuery": []}],
        "paths": _paths(),
        "components": {
            "schemas": SCHEMAS,
            "responses": RESPONSES,
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer"},
                "basicAuth": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "base64('<API_KEY>:'): the key, an empty password.",
                },
                "apiKeyQuery": {"type": "apiKey", "in": "query", "name": "api_key"},
            },
        },
    }
