"""One HTTP client per run: auth, a shared rate limit, bounded concurrency, and retries.

Every request of a run goes through ``FeedbackClient.get_json`` (reads) or
``FeedbackClient.send_json`` (the reverse sync's writes). It is the one place that
classifies failures:

- 429, 5xx, timeouts, dropped connections and bodies that are not a JSON object are retried
  with exponential backoff and "equal" jitter (a wait between half and all of
  ``0.5 s * 2**(attempt-1)``, capped at 30 s), honouring a positive ``Retry-After`` (a 429's
  pause holds back every thread, not only the one that met it), up to ``max_retries``
  retries;
- a write that is not idempotent (a create) is retried only when the service cannot have
  acted on it: a 429 (refused before any work), or a connection that never opened. Any other
  failure (timeout, dropped connection, 5xx, unreadable answer) raises ``OutcomeUnknown``:
  the caller looks the object up before it creates again;
- until the service has answered once, requests go one at a time; a connection that cannot
  be opened before then is retried ``FIRST_CONTACT_RETRIES`` times only, then raises
  ``Unreachable`` naming the base URL: a wrong port or host fails within seconds;
- requests are paced to ``requests_per_second``, and to 80% of the limit the service states
  in ``X-RateLimit-Limit`` (when lower);
- 404 raises ``NotFound`` (callers decide whether that is fatal);
- any other answer outside 2xx raises ``ApiError`` at once.

The client is thread-safe: the source's resources and the per-idea fan-out share it.
Tests swap the network through ``transport`` (``httpx.MockTransport``, an in-process app,
or nothing for a real server).
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import math
import random
import socket
import ssl
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from feedback_sync.api.http_helper import HelperTransport, let_go, proxied, wants_helper
from feedback_sync.api.settings import FeedbackSettings
from feedback_sync.errors import ApiError, NotFound, OutcomeUnknown, RetriesExhausted, Unreachable
from feedback_sync.internals import transport_for_url
from feedback_sync.redaction import SCRUBBER, install_log_filters, redact_url

log = logging.getLogger("feedback_sync")

USER_AGENT = "feedback-sync/0.1 (+dlt)"
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 30.0
# a Retry-After beyond this is not waited for: the run fails and says so
MAX_RETRY_AFTER_SECONDS = 300.0
# until the service has answered once, a connection it refuses (or a host that does not
# resolve) is tried this many more times only: a wrong base URL fails in about a second,
# not after max_retries backoffs on every resource
FIRST_CONTACT_RETRIES = 2
# a service that states its limit (X-RateLimit-Limit) is asked at this share of it:
# requests leave evenly, but delays on the way (a busy machine at either end, a proxy) can
# bunch them; at 90% a loaded CI machine once saw 21 arrive within a second against a
# limit of 20, so 80% leaves room for a quarter-second of bunching
ANNOUNCED_LIMIT_SHARE = 0.8
# each pool of shared request threads (fan-out, urgent lists) has at most this many per
# request allowed in flight. dlt runs a per-idea resource for a few pages of ideas at once,
# each walk keeping max_concurrency requests waiting: a full sync at `small` and `medium`
# used 32 and 40 fan-out threads at the default 8, under this ceiling of 64; threads are
# made only as they are needed, and one over the ceiling waits its turn, never fails
THREADS_PER_SLOT = 8

Params = Mapping[str, str | int]


class Slots:
    """At most ``n`` requests in flight; an urgent request takes the next free slot first.

    The lists read one page after another (followers, announcements, ...) are urgent: each
    waits for its last page before asking for the next, so behind the per-idea fan-out's
    queue they would crawl, and the longest of them would finish the run alone.
    """

    def __init__(self, n: int) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._urgent = threading.Condition(self._lock)
        self._normal = threading.Condition(self._lock)
        self._urgent_waiting = 0

    def acquire(self, urgent: bool) -> None:
        with self._lock:
            if urgent:
                self._urgent_waiting += 1
                try:
                    while self._free == 0:
                        self._urgent.wait()
                finally:
                    self._urgent_waiting -= 1
            else:
                while self._free == 0 or self._urgent_waiting:
                    self._normal.wait()
            self._free -= 1

    def release(self) -> None:
        with self._lock:
            self._free += 1
            if self._urgent_waiting:
                self._urgent.notify()
            else:
                self._normal.notify()


class RateLimiter:
    """Spaces requests ``1 / rate`` seconds apart across threads; ``pause`` holds everyone.

    ``rate`` is the configured limit (None: none). ``announce`` takes the limit the service
    states on its answers (``X-RateLimit-Limit``, requests per second): the pace is then
    ``ANNOUNCED_LIMIT_SHARE`` of it, or the configured rate when that is lower, so a run
    stays under a service's limit without being told it.

    Spacing alone is not a bound: threads that slept past their slots (a busy machine, a
    pause for garbage collection) wake together and send at once. ``admit``, called as a
    request leaves, also holds it until fewer than ``floor(rate)`` requests left in the
    last second, so no one second ever carries more than the pace.
    """

    def __init__(self, rate: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._configured = rate
        self._announced: float | None = None
        self._interval = 1.0 / rate if rate else 0.0
        self._clock = clock
        self._lock = threading.Lock()
        self._next = 0.0
        self._last: float | None = None  # the last slot handed out
        self._sent: deque[float] = deque()  # when the requests of the last second left

    @property
    def rate(self) -> float | None:
        """Requests per second the limiter paces to (None: unpaced)."""
        return 1.0 / self._interval if self._interval else None

    def announce(self, limit: float) -> None:
        """The service says it allows ``limit`` requests per second."""
        if limit == self._announced or not limit > 0:
            return
        with self._lock:
            self._announced = limit
            rates = [limit * ANNOUNCED_LIMIT_SHARE]
            if self._configured:
                rates.append(self._configured)
            self._interval = 1.0 / min(rates)
            if self._last is not None:  # the requests already sent count at the new pace
                self._next = max(self._next, self._last + self._interval)

    def reserve(self) -> float:
        """Takes the next slot; returns how long the caller must wait for it."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._next)
            self._last = slot
            self._next = slot + self._interval
            return slot - now

    def admit(self) -> float:
        """Records a request leaving now, or returns how long to wait before asking again
        (the last second already carried ``floor(rate)`` requests)."""
        with self._lock:
            if not self._interval:
                return 0.0
            now = self._clock()
            while self._sent and self._sent[0] <= now - 1.0:
                self._sent.popleft()
            if len(self._sent) < max(1, math.floor(1.0 / self._interval)):
                self._sent.append(now)
                return 0.0
            return self._sent[0] + 1.0 - now

    def pause(self, seconds: float) -> None:
        """No request starts for ``seconds`` from now (a 429's ``Retry-After``)."""
        with self._lock:
            self._next = max(self._next, self._clock() + seconds)


@dataclass
class RequestStats:
    """What a run asked of the service; safe to read while it runs."""

    requests: int = 0
    retries: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    by_resource: Counter[str] = field(default_factory=Counter)
    rows_by_resource: Counter[str] = field(default_factory=Counter)
    # over the lists whose place this run knows (read from their start, or resumed where
    # the count before the cursor was saved): the items they hold (their answers'
    # ``pagination.total``), and how many of them lie behind this run (``paging.walk``)
    total_by_resource: Counter[str] = field(default_factory=Counter)
    done_by_resource: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, resource: str, status: int | None) -> None:
        with self._lock:
            self.requests += 1
            self.by_resource[resource] += 1
            if status is not None:
                self.statuses[status] += 1

    def count_retry(self) -> None:
        with self._lock:
            self.retries += 1

    def count_rows(self, resource: str, rows: int) -> None:
        with self._lock:
            self.rows_by_resource[resource] += rows

    def count_list(self, resource: str, total: int, before: int) -> None:
        """A list whose place is known began: it holds ``total`` items, ``before`` of them
        before where this run started reading."""
        with self._lock:
            self.total_by_resource[resource] += total
            self.done_by_resource[resource] += before

    def count_done(self, resource: str, rows: int) -> None:
        """``rows`` more of a list whose place is known were read."""
        with self._lock:
            self.done_by_resource[resource] += rows


class _Retryable(Exception):
    """Internal: one attempt failed in a way worth another try.

    ``unsent``: the service cannot have acted on the request (a 429, or a connection that
    never opened), so even a create may be sent again.
    """

    def __init__(
        self,
        status: int | None,
        detail: str,
        retry_after: float | None = None,
        *,
        unsent: bool = False,
        not_api: bool = False,
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after
        self.unsent = unsent or status == 429
        self.not_api = not_api  # a 2xx that is not JSON at all (an HTML page, say)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    """Internal: one call of ``get_json`` or ``send_json``, as each of its attempts sends it.

    ``check`` names what is wrong with a 2xx body's shape (None: nothing); ``urgent`` takes
    the next free slot first (``Slots``); ``idempotent``: sending it twice leaves the
    service as sending it once, so it is retried like a read.
    """

    method: str
    path: str
    params: Params
    resource: str
    idempotent: bool
    body: Mapping[str, Any] | None = None
    check: Callable[[dict[str, Any]], str | None] | None = None
    urgent: bool = False


class FeedbackClient:
    """A thread-safe client for the Feedback API v1 (``get_json`` and ``send_json`` are the
    only ways out).

    With ``helper`` (the sync's reads), the exchanges run in a helper process where the
    ``http_process`` setting allows (``http_helper``); ``transport`` (tests) overrides it.
    """

    def __init__(
        self,
        settings: FeedbackSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        helper: bool = False,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        install_log_filters()  # a library user's pipeline has no entry point that did
        SCRUBBER.register(settings.api_key)
        self.stats = RequestStats()
        # the service answered at least once (any status): connection failures are then
        # taken for a passing fault, not for a wrong address
        self._reached = False
        # the service answered with the API's JSON at least once: a 2xx page that is not
        # JSON is then a passing fault, not an address that is not the API
        self._spoke_json = False
        # until then one request at a time: a wrong address fails once, not once per
        # thread, and the first answer's X-RateLimit-Limit paces all that follow
        self._first_contact = threading.Lock()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._limiter = RateLimiter(settings.requests_per_second)
        self._slots = Slots(settings.max_concurrency)
        self._threads: dict[bool, ThreadPoolExecutor] = {}  # urgent or not -> its threads
        self._threads_lock = threading.Lock()
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        self._key_param: dict[str, str] = {}
        if settings.auth_method == "bearer":
            headers["Authorization"] = f"Bearer {settings.api_key}"
        elif settings.auth_method == "basic":
            token = base64.b64encode(f"{settings.api_key}:".encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        else:
            self._key_param = {"api_key": settings.api_key}
        limits = httpx.Limits(
            max_connections=settings.max_concurrency,
            max_keepalive_connections=settings.max_concurrency,
        )
        started: HelperTransport | None = None
        if transport is None and helper and wants_helper(settings.http_process):
            if proxied(settings.base_url):
                # httpx takes proxies from the environment only for its own transports
                let_go()
            else:
                transport = started = HelperTransport.start(limits)
        elif helper:
            let_go()  # one the command line started ahead, not wanted after all
        self._http = httpx.Client(
            base_url=settings.base_url + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_seconds),
            limits=limits,
            transport=transport,
            follow_redirects=False,
        )
        # httpx's own choice of transport per URL, None in an httpx without it (``_exchange``)
        self._transport_for = transport_for_url(self._http)
        # the helper's own path for the reads: their headers as httpx makes them for any
        # URL of the service's host, and the timeouts
        self._helper: HelperTransport | None = None
        if started is not None:
            probe = self._http.build_request("GET", settings.base_url + "/")
            self._helper = started
            self._helper_headers = probe.headers.raw
            self._helper_timeout = probe.extensions.get("timeout")

    def threads(self, urgent: bool = False) -> ThreadPoolExecutor:
        """The threads requests are sent from (``paging.walk``), shared by every walk of
        the client and made on first use: a run's walks (one per page of ideas for each
        per-idea resource) reuse them instead of starting threads of their own. Threads
        are added only when none is idle; their number is not the bound on requests in
        flight (``Slots`` is). Urgent requests have threads of their own: in one shared
        queue they would wait behind the fan-out's before reaching ``Slots``, where they
        go first."""
        with self._threads_lock:
            pool = self._threads.get(urgent)
            if pool is None:
                pool = self._threads[urgent] = ThreadPoolExecutor(
                    max_workers=THREADS_PER_SLOT * self.settings.max_concurrency,
                    thread_name_prefix="feedback-list" if urgent else "feedback-fetch",
                )
            return pool

    def close(self) -> None:
        with self._threads_lock:
            for pool in self._threads.values():
                # requests still running (after a failure) finish on their own
                pool.shutdown(wait=False, cancel_futures=True)
            self._threads.clear()
        self._http.close()

    def __enter__(self) -> FeedbackClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self, path: str, params: Params) -> str:
        """The request as messages show it: full URL, key redacted."""
        query = {**params, **self._key_param}
        url = httpx.URL(self.settings.base_url + "/" + path.lstrip("/"), params=query)
        return redact_url(str(url))

    def get_json(
        self,
        path: str,
        params: Params,
        *,
        resource: str,
        check: Callable[[dict[str, Any]], str | None] | None = None,
        urgent: bool = False,
    ) -> dict[str, Any]:
        """GETs ``path`` (relative to the base URL) and returns the JSON object it answered.

        ``check`` inspects a 2xx body and names what is wrong with its shape (or returns
        None); a body that fails it is retried like a truncated one. ``urgent`` requests
        take the next free slot before the others (``Slots``).

        Raises:
            NotFound: the service answered 404.
            ApiError: another 4xx, or a redirect; never retried.
            RetriesExhausted: retryable failures past ``max_retries``.
        """
        return self._call(
            _Request(
                method="GET",
                path=path,
                params=params,
                resource=resource,
                idempotent=True,
                check=check,
                urgent=urgent,
            )
        )

    def send_json(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        resource: str,
        idempotent: bool,
        params: Params | None = None,
    ) -> dict[str, Any]:
        """Sends a write (``POST`` or ``DELETE``) and returns the JSON object it answered.

        ``idempotent``: sending it twice leaves the service as sending it once (an update
        that sets fields, a delete); such a write is retried like a read. A create is not:
        it is sent again only when the service cannot have acted on it (see the module).

        Raises:
            OutcomeUnknown: a create failed in a way that may have happened after the service
                acted on it (timeout, dropped connection, 5xx, unreadable answer).
            NotFound: the service answered 404.
            ApiError: another 4xx (400, 403, ...), or a redirect; never retried.
            RetriesExhausted: retryable failures past ``max_retries``.
        """
        return self._call(
            _Request(
                method=method,
                path=path,
                params=params or {},
                resource=resource,
                idempotent=idempotent,
                body=body,
                urgent=True,
            )
        )

    def _call(self, request: _Request) -> dict[str, Any]:
        """``request`` until it is answered, retried as the module says."""
        attempt = 0
        while True:
            try:
                return self._attempt(request)
            except _Retryable as failure:
                attempt += 1
                delay, allowed = self._retry(request, failure, attempt)
                self.stats.count_retry()
                log.warning(
                    "%s: retry %d/%d in %.2fs after %s",
                    request.resource,
                    attempt,
                    allowed,
                    delay,
                    f"{failure.detail}: {request.method} "
                    + self.describe(request.path, request.params),
                )
                if failure.retry_after is not None:
                    self._limiter.pause(delay)
                self._sleep(delay)

    def _retry(self, request: _Request, failure: _Retryable, attempt: int) -> tuple[float, int]:
        """How long to wait before retrying ``request`` after its ``attempt``-th failure,
        and how many retries it is allowed; raises where it is not retried."""
        resource, method = request.resource, request.method
        url = self.describe(request.path, request.params)
        if not request.idempotent and not failure.unsent:
            raise OutcomeUnknown(
                resource,
                method,
                url,
                failure.status,
                f"the service may or may not have acted on it: {failure.detail}",
            ) from None
        first_contact = failure.unsent and failure.status is None and not self._reached
        not_api = failure.not_api and not self._spoke_json
        allowed = (
            min(FIRST_CONTACT_RETRIES, self.settings.max_retries)
            if first_contact or not_api
            else self.settings.max_retries
        )
        if not_api and attempt > allowed:
            raise Unreachable(
                resource,
                method,
                url,
                failure.status,
                f"{redact_url(self.settings.base_url)} answered {attempt} times with "
                f"{failure.detail}, never with the API's JSON; check the base URL "
                f"({self.settings.variable('base_url')}): the API's address ends in /v1",
            ) from None
        if first_contact and attempt > allowed:
            raise Unreachable(
                resource,
                method,
                url,
                None,
                f"no connection to {redact_url(self.settings.base_url)} in {attempt} "
                f"attempts ({failure.detail}); check the base URL "
                f"({self.settings.variable('base_url')}) and that the service is up",
            ) from None
        if attempt > self.settings.max_retries:
            raise RetriesExhausted(
                resource,
                method,
                url,
                failure.status,
                f"gave up after {attempt} attempts; last: {failure.detail}",
            ) from None
        delay = self._backoff(attempt, failure.retry_after)
        if delay is None:
            raise RetriesExhausted(
                resource,
                method,
                url,
                failure.status,
                f"the service asked to wait {failure.retry_after:.0f}s (Retry-After), "
                f"more than the {MAX_RETRY_AFTER_SECONDS:.0f}s this client waits",
            ) from None
        return delay, allowed

    def wait_before_retry(self, attempt: int) -> None:
        """Waits as the client's own retries do after ``attempt`` failures, and counts a
        retry: for a caller that sends a create again after making sure it did not land."""
        self.stats.count_retry()
        self._sleep(self._backoff(attempt, None) or 0.0)

    def _backoff(self, attempt: int, retry_after: float | None) -> float | None:
        if retry_after is not None:
            if retry_after > MAX_RETRY_AFTER_SECONDS:
                return None
            # a little jitter on top, so paused threads do not return in lockstep
            return retry_after + self._rng.uniform(0, 0.25)
        ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
        return self._rng.uniform(ceiling / 2, ceiling)

    def _attempt(self, request: _Request) -> dict[str, Any]:
        query = {**request.params, **self._key_param}
        content = None if request.body is None else _dumps(request.body)
        headers = {"Content-Type": "application/json"} if content is not None else None
        probing = not self._reached
        if probing:
            self._first_contact.acquire()
            if self._reached:  # another thread's request was answered meanwhile
                self._first_contact.release()
                probing = False
        try:
            # after the gate: the first answer may have brought the pace
            wait = self._limiter.reserve()
            if wait > 0:
                self._sleep(wait)
            response, raw = self._send(request, query, content, headers)
        finally:
            if probing:
                self._first_contact.release()
        return self._classify(request, response, raw)

    def _send(
        self,
        request: _Request,
        query: Mapping[str, str | int],
        content: bytes | None,
        headers: dict[str, str] | None,
    ) -> tuple[httpx.Response, bytes]:
        """One exchange in a free slot; failures that may be passing become ``_Retryable``."""
        status: int | None = None
        self._slots.acquire(request.urgent)
        try:
            while (wait := self._limiter.admit()) > 0:
                self._sleep(wait)
            try:
                url = self._url(request.path, query)
                response, body = self._exchange(request.method, url, content, headers)
                status = response.status_code
                self._note_limit(response.headers.get("X-RateLimit-Limit"))
                self._reached = True
                return response, body
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                # the request never left: no connection was made
                detail = f"could not connect: {_why_unconnected(exc)}"
                raise _Retryable(None, detail, unsent=True) from None
            except httpx.TimeoutException as exc:
                raise _Retryable(None, f"timed out ({type(exc).__name__})") from None
            except httpx.TransportError as exc:
                raise _Retryable(None, f"connection failed ({type(exc).__name__})") from None
            finally:
                self.stats.count(request.resource, status)
        finally:
            self._slots.release()

    def _exchange(
        self, method: str, url: str, content: bytes | None, headers: dict[str, str] | None
    ) -> tuple[httpx.Response, bytes]:
        """One request and its whole body, through the transport httpx picks for the URL
        (its proxies from the environment included), without the client's layers this
        client does not use: redirects (never followed), auth flows (the key is a header
        or a parameter already), event hooks, and its cookie jar. The API authenticates
        by key and the spec has no cookies, yet httpx parses every answer into its jar:
        0.06-0.15 ms of a request's 0.7-0.9 ms of client CPU (1,500 requests to the
        sandbox), about 5% of a full sync's. The transport is httpx's own (private) choice
        (``internals.transport_for_url``); an httpx without it takes the client's path."""
        if self._http.is_closed:  # a request of a walk that ended, after ``close``
            raise RuntimeError("the client was closed")  # as httpx's own send says
        if self._helper is not None and method == "GET" and content is None and not headers:
            # the helper's own path for a read: no httpx request built for it here
            return self._helper.get(url, self._helper_headers, self._helper_timeout)
        request = self._http.build_request(method, url, content=content, headers=headers)
        if self._transport_for is None:  # an httpx without it: its whole path, cookies and all
            response = self._http.send(request)
            return response, response.content
        response = self._transport_for(request.url).handle_request(request)
        try:
            body = response.read()
        finally:
            response.close()
        return response, body

    def _url(self, path: str, query: Mapping[str, str | int]) -> str:
        """The request's whole URL as text, the one httpx makes of ``path`` and ``params``
        (its own query encoding, ``httpx.QueryParams``). Given a path and params, httpx
        parses the path on its own and merges it into ``base_url`` on every request, a
        third of its cost per request before any byte is sent."""
        url = f"{self.settings.base_url}/{path.lstrip('/')}"
        return f"{url}?{httpx.QueryParams(query)}" if query else url

    def _classify(self, request: _Request, response: httpx.Response, body: bytes) -> dict[str, Any]:
        status = response.status_code
        if status == 429 or (status >= 500 and status != 501):  # 501: not implemented, for good
            retry_after = _retry_after(response.headers.get("Retry-After"))
            message = _server_message(body, self._scrub)
            raise _Retryable(status, f"HTTP {status} {message}", retry_after)
        if 200 <= status < 300:
            try:
                data = parse_json(body)
            except ValueError:  # orjson's and json's decode errors both are ValueErrors
                kind = response.headers.get("Content-Type", "no content type").split(";")[0]
                # a cut JSON body is a passing fault; a page that never was JSON may be an
                # address that is not the API at all
                cut_json = body.lstrip()[:1] in (b"{", b"[")
                raise _Retryable(
                    status,
                    f"HTTP {status} with a body that is not JSON ({kind})",
                    not_api=not cut_json,
                ) from None
            if not isinstance(data, dict):
                raise _Retryable(status, f"HTTP {status} with a JSON body that is not an object")
            self._spoke_json = True
            problem = request.check(data) if request.check else None
            if problem:
                raise _Retryable(status, f"HTTP {status} with an unexpected body: {problem}")
            return data
        url = self.describe(request.path, request.params)
        message = _server_message(body, self._scrub)
        if status == 404:
            raise NotFound(request.resource, request.method, url, status, message)
        raise ApiError(request.resource, request.method, url, status, message)

    def _note_limit(self, header: str | None) -> None:
        if not header:
            return
        try:
            limit = float(header)
        except ValueError:
            return  # a garbled header is no reason to fail a run
        if math.isfinite(limit):
            self._limiter.announce(limit)

    def _scrub(self, text: str) -> str:
        """Whatever the server echoed, the key does not travel on in a message."""
        return text.replace(self.settings.api_key, "***")


# orjson reads an integer beyond 64 bits as a float (2**64 + 1 -> 1.8446744073709552e19)
# without a word. Every integer of up to 19 digits fits its range (unsigned up to
# 18446744073709551615) but a negative one below -9223372036854775808: so a body holding 20
# digits in a row, or a minus sign and 19, may hold such a number (or only a long id in a
# string: then it is parsed slowly, never wrongly). Found with bytes.translate, digits to
# "0" and all else but "-" to a space, and two substring searches: 12x faster than a
# regular expression, which cost a third of orjson's own parse (issue 17's profile)
_DIGIT_RUNS = bytes(48 if 48 <= c <= 57 else (45 if c == 45 else 32) for c in range(256))
_TWENTY_DIGITS = b"0" * 20
_MINUS_NINETEEN = b"-" + b"0" * 19


def parse_json(body: bytes) -> Any:
    """The body as JSON, every number exactly as sent.

    orjson (fast) parses integers beyond 64 bits as floats, losing digits; a body with a
    run of 20 digits, or of 19 after a minus sign, anywhere (most often an id inside a
    string) is parsed by the standard library instead, whose integers are exact at any
    size. A number too big for a double (``1e400``) is refused as orjson refuses it, not
    read as infinity.

    Raises:
        ValueError: the body is not JSON.
    """
    runs = body.translate(_DIGIT_RUNS)
    if _TWENTY_DIGITS not in runs and _MINUS_NINETEEN not in runs:
        return orjson.loads(body)
    return json.loads(body, parse_float=_finite_float)


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"number is infinity when parsed as double: {text[:40]}")
    return number


def _dumps(body: Mapping[str, Any]) -> bytes:
    """A request body as JSON; integers past 64 bits (which orjson refuses) exactly too."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False).encode()


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date. None (the client's own
    exponential backoff) when absent, garbled, zero or in the past: "retry now" honoured
    as such would spend every retry of a request within a second or two (dlt had that
    bug, dlt-hub/dlt#4036)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if not seconds > 0:  # also nan
        return None
    return seconds


def _server_message(body: bytes, scrub: Callable[[str], str]) -> str:
    """What the server said: the error body's ``message`` (and ``code``), else a short excerpt.

    ``scrub`` runs on the whole text before it is cut or quoted, so a secret the server
    echoed cannot survive half-cut at the excerpt's edge.
    """
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        code = data.get("code")
        message = f"{data['message']} ({code})" if isinstance(code, str) else data["message"]
        return scrub(message)
    text = scrub(body.decode("utf-8", "replace")).strip()[:200]
    return repr(text) if text else "(empty body)"


def _why_unconnected(exc: BaseException) -> str:
    """Why no connection was made, from the OS error under httpx's (no address in it)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, socket.gaierror):
            return "the host name does not resolve (DNS)"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed ({cause.reason or type(cause).__name__})"
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__
