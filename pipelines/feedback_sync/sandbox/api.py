"""The ``/v1`` routes: every operation of ``api-spec.md``, settled by ``api-contract.md``.

Handlers read the request, then touch the store under its lock without awaiting, so each
operation is atomic. Response wrapping follows the spec: ``{"data": ...}`` for single
resources except topic and status create/update (unwrapped), lists with ``pagination``,
deletes as ``{"success": true, "message": ...}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from feedback_sync.sandbox import validate
from feedback_sync.sandbox.errors import ApiError, bad_request, json_response
from feedback_sync.sandbox.pagination import (
    CursorError,
    Key,
    cursor_pagination,
    decode_cursor,
    encode_cursor,
    link_pagination,
    offset_page,
    previous_keys,
    take_page,
)
from feedback_sync.sandbox.queries import AnnouncementFilter, AnnouncementViews
from feedback_sync.sandbox.serialize import Serializer
from feedback_sync.sandbox.settings import Settings
from feedback_sync.sandbox.store import AnnouncementInput, FollowerInput, Store, Table

if TYPE_CHECKING:
    from feedback_sync.sandbox.state import SandboxState

Handler = Callable[[Request], Awaitable[Response]]
LINKS = "integration-links"


def deleted(resource: str) -> Response:
    return json_response({"success": True, "message": f"{resource} deleted"})


class V1:
    """The API's operations over one store and one set of switches."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state

    @property
    def store(self) -> Store:
        return self.state.store

    @property
    def settings(self) -> Settings:
        return self.state.settings

    @property
    def announcement_views(self) -> AnnouncementViews:
        return self.state.announcement_views

    @property
    def serializer(self) -> Serializer:
        settings = self.settings
        return Serializer(
            self.store,
            settings.timestamp_format,
            company_fields=settings.company_fields,
            number_drift=settings.number_drift,
        )

    def routes(self) -> list[Route]:
        def route(path: str, handler: Handler, method: str) -> Route:
            return Route(f"/v1{path}", handler, methods=[method])

        return [
            route("/followers", self.list_followers, "GET"),
            route("/followers", self.create_follower, "POST"),
            route("/followers/search", self.search_followers, "GET"),
            route("/followers/{idx}", self.update_follower, "POST"),
            route("/followers/{idx}", self.delete_follower, "DELETE"),
            route("/announcements", self.list_announcements, "GET"),
            route("/announcements", self.create_announcement, "POST"),
            route("/announcements/{idx}", self.get_announcement, "GET"),
            route("/announcements/{idx}", self.update_announcement, "POST"),
            route("/announcements/{idx}", self.delete_announcement, "DELETE"),
            route("/comments", self.list_comments, "GET"),
            route("/comments", self.create_comment, "POST"),
            route("/comments/{idx}", self.update_comment, "POST"),
            route("/comments/{idx}", self.delete_comment, "DELETE"),
            route("/topics", self.list_topics, "GET"),
            route("/topics", self.create_topic, "POST"),
            route("/topics/{idx}", self.update_topic, "POST"),
            route("/topics/{idx}", self.delete_topic, "DELETE"),
            route("/statuses", self.list_statuses, "GET"),
            route("/statuses", self.create_status, "POST"),
            route("/statuses/{idx}", self.update_status, "POST"),
            route("/statuses/{idx}", self.delete_status, "DELETE"),
            route("/integration-links", self.list_links, "GET"),
            route("/ideas", self.list_ideas, "GET"),
        ]

    def _cursor_list(
        self,
        request: Request,
        scope: str,
        keys: Any,
        render: Callable[[str], dict[str, Any]],
        *,
        newest_first: bool = False,
    ) -> Response:
        """One page of a cursor list, in the links' pagination shape for ``integration-links``."""
        params = request.query_params
        size = validate.limit(params)
        raw_after = params.get("after") or None
        after = _decode(scope, raw_after)
        page = take_page(keys, after, size, newest_first=newest_first)
        # the page_overlap switch: a page starts with the end of the one before it again
        again = previous_keys(keys, after, self.settings.page_overlap, newest_first=newest_first)
        body: dict[str, Any] = {"data": [render(key[1]) for key in [*again, *page.keys]]}
        # the total_offset switch: a count that disagrees with the items
        total = max(0, len(keys) + self.settings.total_offset)
        if scope == LINKS:
            body["pagination"] = link_pagination(scope, page, total)
            body["meta"] = []
        else:
            body["pagination"] = cursor_pagination(
                scope, page, total, raw_after, self.settings.last_page_after
            )
        return json_response(body)

    def _existing(self, table: Table[Any], resource: str, request: Request) -> str:
        """The path's idx, after checking it exists: an unknown idx is 404 before any 400."""
        idx: str = request.path_params["idx"]
        table.get(resource, idx)
        return idx

    # followers

    async def list_followers(self, request: Request) -> Response:
        include = self._include_attributes(request)
        with self.store.lock:
            by_idx, ser = self.store.followers.by_idx, self.serializer
            return self._cursor_list(
                request,
                "followers",
                self.store.followers.order,
                lambda idx: ser.follower(by_idx[idx], include),
            )

    async def search_followers(self, request: Request) -> Response:
        params = request.query_params
        email = params.get("email")
        if not email:
            raise bad_request("email is required")
        # a cursor list like the others: limit and after are checked the same way (400)
        size = validate.limit(params)
        resume = _decode("followers", params.get("after") or None)
        include = self._include_attributes(request)
        with self.store.lock:
            idx = self.store.email_index.get(email.strip().lower())
            matches = [self.store.followers.by_idx[idx]] if idx is not None else []
            found = [f for f in matches if resume is None or (f.created, f.idx) > resume][:size]
            after = None
            if found and self.settings.last_page_after == "cursor":
                after = encode_cursor("followers", (found[-1].created, found[-1].idx))
            return json_response(
                {
                    "data": [self.serializer.follower(f, include) for f in found],
                    "pagination": {"total": len(matches), "before": None, "after": after},
                }
            )

    def _include_attributes(self, request: Request) -> bool:
        wanted = validate.flag(request.query_params, "include_attributes") or False
        return wanted and self.settings.custom_attributes

    def _follower_input(self, body: dict[str, Any], *, create: bool) -> FollowerInput:
        data = FollowerInput(
            name=validate.required_str(body, "name")
            if create
            else validate.optional_str(body, "name"),
            email=validate.email(body, required=create),
            attributes=validate.attributes(body),
            companies=validate.companies(body),
        )
        if (data.attributes is not None or data.companies is not None) and not (
            self.settings.custom_attributes
        ):
            raise ApiError(
                403,
                "custom attributes are not enabled for this company: "
                "remove attributes and companies from the request",
            )
        return data

    async def create_follower(self, request: Request) -> Response:
        body = validate.json_body(await request.body())
        data = self._follower_input(body, create=True)
        with self.store.lock:
            follower = self.store.create_follower(data)
            return json_response({"data": self._follower_out(request, follower)})

    async def update_follower(self, request: Request) -> Response:
        raw = await request.body()
        with self.store.lock:
            idx = self._existing(self.store.followers, "follower", request)
            data = self._follower_input(validate.json_body(raw, optional=True), create=False)
            follower = self.store.update_follower(idx, data)
            return json_response({"data": self._follower_out(request, follower)})

    def _follower_out(self, request: Request, follower: Any) -> dict[str, Any]:
        return self.serializer.follower(follower, self._include_attributes(request))

    async def delete_follower(self, request: Request) -> Response:
        content = request.query_params.get("content") or "delete"
        if content not in ("delete", "reassign"):
            raise bad_request(f"content must be 'delete' or 'reassign', got {content!r}")
        with self.store.lock:
            self.store.delete_follower(request.path_params["idx"], content)
        return deleted("Follower")

    # announcements

    async def list_announcements(self, request: Request) -> Response:
        params = request.query_params
        categories = params.getlist("category_idxs[]") + params.getlist("category_idxs")
        with self.store.lock:
            known = self.store.categories
            flt = AnnouncementFilter(
                is_published=validate.flag(params, "is_published"),
                # unknown category idxs are dropped silently, as the spec says
                category_idxs=frozenset(c for c in categories if c in known)
                if categories
                else None,
                published_after=validate.moment(params, "published_after"),
                published_before=validate.moment(params, "published_before", end_of_day=True),
            )
            now = self.store.clock.now()
            keys = self.announcement_views.keys(flt, now)
            by_idx, ser = self.store.announcements.by_idx, self.serializer
            return self._cursor_list(
                request,
                "announcements",
                keys,
                lambda idx: ser.announcement(by_idx[idx], now),
                newest_first=self.settings.announcement_order == "newest_first",
            )

    def _announcement_input(self, body: dict[str, Any]) -> AnnouncementInput:
        return AnnouncementInput(
            name=validate.required_str(body, "name"),
            author_idx=validate.required_str(body, "author_idx"),
            content=validate.required_str(body, "content"),
            published_at=validate.published_at(body),
            idea_idxs=validate.str_list(body, "idea_idxs"),
            category_idxs=validate.str_list(body, "category_idxs"),
        )

    async def create_announcement(self, request: Request) -> Response:
        data = self._announcement_input(validate.json_body(await request.body()))
        with self.store.lock:
            announcement = self.store.create_announcement(data)
            return self._announcement_out(announcement)

    async def get_announcement(self, request: Request) -> Response:
        with self.store.lock:
            announcement = self.store.announcements.get("announcement", request.path_params["idx"])
            return self._announcement_out(announcement)

    async def update_announcement(self, request: Request) -> Response:
        raw = await request.body()
        with self.store.lock:
            idx = self._existing(self.store.announcements, "announcement", request)
            data = self._announcement_input(validate.json_body(raw))
            announcement = self.store.update_announcement(idx, data)
            return self._announcement_out(announcement)

    def _announcement_out(self, announcement: Any) -> Response:
        return json_response(
            {"data": self.serializer.announcement(announcement, self.store.clock.now())}
        )

    async def delete_announcement(self, request: Request) -> Response:
        with self.store.lock:
            self.store.delete_announcement(request.path_params["idx"])
        return deleted("Announcement")

    # comments

    async def list_comments(self, request: Request) -> Response:
        params = request.query_params
        idea_idx = params.get("idea_idx")
        if not idea_idx:
            raise bad_request("idea_idx is required")
        types = validate.included_types(params)
        with self.store.lock:
            store = self.store
            if idea_idx not in store.ideas.by_idx:
                raise ApiError(404, f"idea {idea_idx!r} not found")
            if types == {"comments", "notes"}:
                keys = store.comments_by_idea.get(idea_idx)
            else:
                kind = "note" if "notes" in types else "comment"
                keys = store.comments_by_idea_kind.get((idea_idx, kind))
            by_idx, ser = store.comments.by_idx, self.serializer
            return self._cursor_list(
                request, "comments", keys, lambda idx: ser.comment(by_idx[idx])
            )

    async def create_comment(self, request: Request) -> Response:
        body = validate.json_body(await request.body())
        author_idx = validate.required_str(body, "author_idx")
        message = validate.required_str(body, "message")
        idea_idx = validate.required_str(body, "idea_idx")
        is_private = validate.optional_bool(body, "is_private") or False
        with self.store.lock:
            comment = self.store.create_comment(
                author_idx=author_idx, idea_idx=idea_idx, message=message, is_private=is_private
            )
            return json_response({"data": self.serializer.comment(comment)})

    async def update_comment(self, request: Request) -> Response:
        raw = await request.body()
        with self.store.lock:
            idx = self._existing(self.store.comments, "comment", request)
            message = validate.required_str(validate.json_body(raw), "message")
            comment = self.store.update_comment(idx, message)
            return json_response({"data": self.serializer.comment(comment)})

    async def delete_comment(self, request: Request) -> Response:
        with self.store.lock:
            self.store.delete_comment(request.path_params["idx"])
        return deleted("Comment")

    # topics

    async def list_topics(self, request: Request) -> Response:
        params = request.query_params
        size = validate.limit(params)
        number = validate.page_number(params)
        with self.store.lock:
            keys, pagination = offset_page(self.store.topics.order, number, size)
            by_idx, ser = self.store.topics.by_idx, self.serializer
            data = [ser.topic(by_idx[key[1]]) for key in keys]
            return json_response({"data": data, "pagination": pagination})

    async def create_topic(self, request: Request) -> Response:
        name = validate.optional_str(
            validate.json_body(await request.body(), optional=True), "name"
        )
        with self.store.lock:
            return json_response(self.serializer.topic(self.store.create_topic(name)))

    async def update_topic(self, request: Request) -> Response:
        raw = await request.body()
        with self.store.lock:
            idx = self._existing(self.store.topics, "topic", request)
            name = validate.optional_str(validate.json_body(raw, optional=True), "name")
            topic = self.store.update_topic(idx, name)
            return json_response(self.serializer.topic(topic))

    async def delete_topic(self, request: Request) -> Response:
        with self.store.lock:
            self.store.delete_topic(request.path_params["idx"])
        return deleted("Topic")

    # statuses

    async def list_statuses(self, request: Request) -> Response:
        with self.store.lock:
            by_idx, ser = self.store.statuses.by_idx, self.serializer
            return self._cursor_list(
                request, "statuses", self.store.statuses.order, lambda idx: ser.status(by_idx[idx])
            )

    async def create_status(self, request: Request) -> Response:
        name = validate.required_str(validate.json_body(await request.body()), "name")
        with self.store.lock:
            return json_response(self.serializer.status(self.store.create_status(name)))

    async def update_status(self, request: Request) -> Response:
        raw = await request.body()
        with self.store.lock:
            idx = self._existing(self.store.statuses, "status", request)
            name = validate.optional_str(validate.json_body(raw, optional=True), "name")
            status = self.store.update_status(idx, name)
            return json_response(self.serializer.status(status))

    async def delete_status(self, request: Request) -> Response:
        with self.store.lock:
            self.store.delete_status(request.path_params["idx"])
        return deleted("Status")

    # integration links

    async def list_links(self, request: Request) -> Response:
        params = request.query_params
        idea_idx = params.get("idea_idx") or None
        link_type = params.get("type") or None
        if idea_idx is None and link_type is None:
            raise bad_request("at least one of idea_idx and type is required")
        with self.store.lock:
            store = self.store
            if idea_idx is not None and idea_idx not in store.ideas.by_idx:
                raise ApiError(404, f"idea {idea_idx!r} not found")
            if idea_idx is not None and link_type is not None:
                keys = store.links_by_idea_type.get((idea_idx, link_type))
            elif idea_idx is not None:
                keys = store.links_by_idea.get(idea_idx)
            else:
                keys = store.links_by_type.get(link_type)
            by_idx, ser = store.links.by_idx, self.serializer
            return self._cursor_list(request, LINKS, keys, lambda idx: ser.link(by_idx[idx]))

    # ideas (the sandbox's read-only extension)

    async def list_ideas(self, request: Request) -> Response:
        if not self.settings.ideas_endpoint:
            raise ApiError(404, "not found: /v1/ideas is not available on this service")
        with self.store.lock:
            by_idx, ser = self.store.ideas.by_idx, self.serializer
            return self._cursor_list(
                request, "ideas", self.store.ideas.order, lambda idx: ser.idea(by_idx[idx])
            )


def _decode(scope: str, raw: str | None) -> Key | None:
    if raw is None:
        return None
    try:
        return decode_cursor(scope, raw)
    except CursorError as exc:
        raise bad_request(f"after: {exc}") from None
