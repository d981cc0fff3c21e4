"""The run's API client: plain JSON, rate-limited, asynchronous on the event loop, synchronous for threads.

Why not the generated API classes: at 10,000 objects, model deserialization costs more than the storage
under test on a fast array, and the engine only needs a few fields. Why not urllib3 for the engine's requests: the
operator's CPU per object-step is what a measuring tool must keep small (issue 18), and a request through
urllib3 in a worker thread cost about 0.65 ms of CPU here (about 850 Python calls: urllib3, http.client, the
email header parser) plus a thread hand-off and GIL contention among ``maxInFlight`` threads. The engine's
requests go through ``kube/http.py`` on the loop instead (keep-alive connections, one write per request, the
answer's head parsed in ``data_received``), or through aiohttp only for a configuration with an HTTP proxy. At
most ``maxInFlight`` requests are in flight. The synchronous path (``request_sync``, ``stream``) keeps urllib3 for
code that runs in threads: the watch threads, the CLI's helpers and the benchmarks' raw client. Configuration (TLS
files, tokens) is read when the client is built, which callers do off the loop.

Every request first takes a token from a QPS/burst bucket, like client-go's limiter; the time spent waiting is
summed, because a throttled client distorts results and the report must say so.
"""

from __future__ import annotations

import asyncio
import copy
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlencode

import aiohttp
import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from csibench.kube.http import HttpConnectionError, HttpPool, build_request
from csibench.metrics import METRICS

Json = dict[str, Any]
T = TypeVar("T")
SELF_SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class ApiError(RuntimeError):
    """A non-2xx answer from the API server, with its status code and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def refuses_the_object(self) -> bool:
        """The API server refuses the object itself (its schema or CEL: 422; an admission policy's denial), not the
        caller (a quota, missing rights): asking again with the same object will not help."""
        return self.status == 422 or (self.status == 403 and ADMISSION_DENIAL in self.message)


ADMISSION_DENIAL = "ValidatingAdmissionPolicy"  # a 403 that is a policy's verdict on the object, not on the caller


def load_configuration(kubeconfig: str | None = None) -> k8s_client.Configuration:
    """In-cluster service account when running in a pod, else the kubeconfig (``KUBECONFIG`` or the given path)."""
    configuration = k8s_client.Configuration()
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return configuration
        except k8s_config.ConfigException:
            pass
    k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, client_configuration=configuration)
    return configuration


RETRY_SECONDS = 90.0
READ_TIMEOUT_SECONDS = 60.0
SHARED_QPS, SHARED_BURST = 20.0, 40  # the shared watches' client: lists and reconnects only
# How long an Authorization header is reused before the configuration is asked again. Asking runs the
# kubeconfig loader's refresh hook (it re-derives the whole client configuration: about 0.3 ms, more than the
# rest of a request's CPU); a rotated ServiceAccount token is picked up within this time, long before the old
# one expires (the kubelet rotates projected tokens at 80% of a lifetime of at least 10 minutes).
AUTH_REFRESH_SECONDS = 30.0


def _parse(status: int, data: bytes, decode: bool = True) -> Json:
    """The answer as JSON; an ApiError for a non-2xx answer. ``decode=False``: a success's body is not needed
    (creates and deletes answer with the whole object, which the engine never reads), so it is not decoded."""
    if status >= 400:
        try:
            parsed = orjson.loads(data)
            message, reason = parsed.get("message", ""), parsed.get("reason", "")
        except (ValueError, AttributeError):
            message, reason = data.decode(errors="replace")[:500], ""
        raise ApiError(status, reason, message)
    parsed_ok: Json = orjson.loads(data) if data and decode else {}
    return parsed_ok


@dataclass
class RetrySchedule:
    """The retry policy both request loops (``_exchange_sync`` on a thread, ``request`` on the loop) consult, so
    they cannot drift: a connection failure or a 429/503 answer (an API server restarting or shedding load) is
    retried after ``FIRST_DELAY`` seconds, doubling up to ``MAX_DELAY`` (a longer Retry-After is honoured), for up
    to ``RETRY_SECONDS`` after the first attempt; any other answer is returned."""

    FIRST_DELAY: ClassVar[float] = 0.2
    MAX_DELAY: ClassVar[float] = 5.0

    deadline: float  # monotonic: no retry whose wait would end past it
    delay: float = FIRST_DELAY  # before the next retry

    @classmethod
    def start(cls) -> RetrySchedule:
        return cls(time.monotonic() + RETRY_SECONDS)

    def wait(self, status: int | None, retry_after: str | None) -> float | None:
        """How long to wait before retrying an attempt that failed to connect (``status`` None) or met 429/503;
        None: do not retry (an answer to return, or the retry budget is spent). A retry doubles the next delay."""
        if status is not None and status not in (429, 503):
            return None
        if time.monotonic() + self.delay > self.deadline:
            return None
        wait = max(self.delay, float(retry_after or 0)) if status is not None else self.delay
        self.delay = min(self.delay * 2, self.MAX_DELAY)
        return wait


def ssl_context(configuration: k8s_client.Configuration) -> ssl.SSLContext:
    """The TLS settings of a kubeconfig or in-cluster configuration, for aiohttp (reads files: not on a loop)."""
    if configuration.verify_ssl:
        context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


class TokenBucket:
    """client-go's flowcontrol: ``qps`` tokens per second, at most ``burst`` saved up. Thread-safe."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self.throttled_seconds = 0.0

    def reserve(self) -> float:
        """Take one token; return how long the caller must wait before using it."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
            self.throttled_seconds += wait
            return wait


class KubeClient:
    """Async facade: ``await client.request(...)`` takes a rate-limit token, then sends the request on the event loop
    (``kube/http.py``; aiohttp behind an HTTP proxy); blocking work runs on the client's threads."""

    def __init__(self, configuration: k8s_client.Configuration, qps: float, burst: int, max_in_flight: int,
                 run_label: str = "") -> None:
        configuration.connection_pool_maxsize = max_in_flight + 8
        self.run_label = run_label
        self.configuration = configuration
        self._pool = k8s_client.rest.RESTClientObject(configuration).pool_manager
        self._host = configuration.host.rstrip("/")
        self.limiter = TokenBucket(qps, burst)
        self.max_in_flight = max_in_flight
        self._executor = ThreadPoolExecutor(max_in_flight, thread_name_prefix="csibench-api")
        self._ssl = ssl_context(configuration) if self._host.startswith("https") else None
        self._session: aiohttp.ClientSession | None = None  # only with an HTTP proxy
        self._http: HttpPool | None = None
        self._in_flight: asyncio.Semaphore | None = None
        self._lock = threading.Lock()
        self.requests = 0
        self._authorization: str | None = None
        self._authorization_at = -AUTH_REFRESH_SECONDS

    @property
    def server(self) -> str:
        """The API server's URL: what clients that may share a watch have in common."""
        return self._host

    def shared(self) -> KubeClient:
        """A client of the same server and credentials for the operator's shared watches (kube/shared_watch.py),
        which outlive any one run's client; their few requests (one per list or reconnect) are not a run's.
        Reads TLS files: call it off the loop."""
        return KubeClient(copy.deepcopy(self.configuration), SHARED_QPS, SHARED_BURST, max_in_flight=2)

    async def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _authorization_header(self) -> str | None:
        now = time.monotonic()
        if now - self._authorization_at >= AUTH_REFRESH_SECONDS:
            # Runs the configuration's refresh hook: rotated ServiceAccount tokens are read again.
            self._authorization = self.configuration.get_api_key_with_prefix("BearerToken")
            self._authorization_at = now
        return self._authorization

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "csibench"}
        token = self._authorization_header()
        if token:
            headers["Authorization"] = token
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def url(self, path: str, query: dict[str, str] | None = None) -> str:
        return self._host + path + (f"?{urlencode(query)}" if query else "")

    def count_request(self) -> None:
        with self._lock:
            self.requests += 1

    def _throttle(self) -> None:
        wait = self.limiter.reserve()
        if wait > 0:
            if self.run_label:
                METRICS.add_throttle(self.run_label, wait)
            time.sleep(wait)

    def request_sync(self, method: str, path: str, body: Json | None = None, query: dict[str, str] | None = None,
                     content_type: str = "application/json", on_send: Callable[[float], None] | None = None,
                     timeout: float = 60.0, decode: bool = True) -> Json:
        """One request on the calling thread; ``on_send`` gets the monotonic time it first leaves (after throttling).

        Connection failures and 429/503 answers (an API server restarting or shedding load) are retried with
        backoff for up to ``RETRY_SECONDS`` (``RetrySchedule``); a create retried after a lost answer then meets
        409, which callers treat as success. The send time stays the first attempt's, so retries count in the
        object's latency.
        """
        return _parse(*self._exchange_sync(method, path, body, query, content_type, on_send, timeout), decode)

    def text_sync(self, path: str, query: dict[str, str] | None = None) -> str:
        """A GET whose answer is text, not JSON (``pods/log``); errors as ApiError."""
        status, data = self._exchange_sync("GET", path, None, query, "application/json", None, 60.0)
        if status >= 400:
            _parse(status, data)
        return bytes(data).decode(errors="replace")

    def _exchange_sync(self, method: str, path: str, body: Json | None, query: dict[str, str] | None,
                       content_type: str, on_send: Callable[[float], None] | None,
                       timeout: float) -> tuple[int, bytes]:
        """The status and body of one request after throttling and retries (see ``request_sync``)."""
        payload = orjson.dumps(body) if body is not None else None
        url, headers = self.url(path, query), self.headers(content_type if body is not None else None)
        retries = RetrySchedule.start()
        while True:
            self._throttle()
            self.count_request()
            if on_send is not None:
                on_send(time.monotonic())
                on_send = None
            try:
                response = self._pool.request(method, url, body=payload, headers=headers,
                                              timeout=urllib3.Timeout(connect=10, read=timeout),
                                              preload_content=True, retries=False)
                status, data, retry_after = response.status, response.data, response.headers.get("Retry-After")
            except urllib3.exceptions.HTTPError as error:
                status, data, retry_after, failure = None, b"", None, error
            METRICS.count_request(method, path, status or 0)
            wait = retries.wait(status, retry_after)
            if wait is None:
                if status is None:
                    raise ApiError(0, "ConnectionFailed", str(failure)) from failure
                return status, data
            time.sleep(wait)

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """A blocking function on the client's worker threads (never on the loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def _in_flight_on_loop(self) -> asyncio.Semaphore:
        if self._in_flight is None:
            self._in_flight = asyncio.Semaphore(self.max_in_flight)
        return self._in_flight

    def _session_on_loop(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False,
                                             limit=self.max_in_flight + 8)
            self._session = aiohttp.ClientSession(connector=connector,
                                                  timeout=aiohttp.ClientTimeout(total=None, connect=10,
                                                                                sock_read=READ_TIMEOUT_SECONDS))
        return self._session

    async def _send(self, method: str, url: str, payload: bytes | None,
                    headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        if self.configuration.proxy:  # the lean client speaks to the server directly only
            session = self._session_on_loop()
            async with session.request(method, url, data=payload, headers=headers, proxy=self.configuration.proxy,
                                       server_hostname=self.configuration.tls_server_name) as answer:
                return answer.status, await answer.read(), answer.headers.get("Retry-After")
        if self._http is None:
            self._http = HttpPool(self._host, self._ssl, self.configuration.tls_server_name, self.max_in_flight + 8)
        pool = self._http
        request = build_request(method, url[len(pool.origin):], pool.netloc, headers, payload)
        response = await pool.request(request, READ_TIMEOUT_SECONDS)
        return response.status, response.body, response.retry_after

    async def text(self, path: str, query: dict[str, str] | None = None) -> str:
        """``text_sync`` on the client's worker threads (a pod's log: rare and possibly large)."""
        return await self.run(self.text_sync, path, query)

    async def request(self, method: str, path: str, body: Json | None = None, query: dict[str, str] | None = None,
                      content_type: str = "application/json",
                      on_send: Callable[[float], None] | None = None, decode: bool = True) -> Json:
        """One request on the event loop, at most ``maxInFlight`` at once; ``on_send`` gets the monotonic time it
        first leaves (after waiting for a slot and for the rate limit), retries as ``request_sync`` does."""
        payload = orjson.dumps(body) if body is not None else None
        url, headers = self.url(path, query), self.headers(content_type if body is not None else None)
        retries = RetrySchedule.start()
        in_flight = self._in_flight_on_loop()
        while True:
            async with in_flight:
                wait = self.limiter.reserve()
                if wait > 0:
                    if self.run_label:
                        METRICS.add_throttle(self.run_label, wait)
                    await asyncio.sleep(wait)
                self.count_request()
                if on_send is not None:
                    on_send(time.monotonic())
                    on_send = None
                try:
                    status, data, retry_after = await self._send(method, url, payload, headers)
                except (TimeoutError, aiohttp.ClientError, HttpConnectionError) as error:
                    status, data, retry_after, failure = None, b"", None, error
            METRICS.count_request(method, path, status or 0)
            retry = retries.wait(status, retry_after)
            if retry is None:
                if status is None:
                    raise ApiError(0, "ConnectionFailed", str(failure) or type(failure).__name__) from failure
                return _parse(status, data, decode)
            await asyncio.sleep(retry)

    async def get(self, path: str, query: dict[str, str] | None = None) -> Json | None:
        try:
            return await self.request("GET", path, query=query)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def create(self, path: str, body: Json, on_send: Callable[[float], None] | None = None,
                     dry_run: bool = False) -> bool:
        """Create; a 409 (it already exists: a restarted run re-submitting) returns False, and the caller must
        prove the existing object is its own before treating it as created. True if new. ``dry_run`` asks the
        API server to validate and admit the object without storing it."""
        try:
            await self.request("POST", path, body, query={"dryRun": "All"} if dry_run else None, on_send=on_send,
                               decode=False)
            return True
        except ApiError as error:
            if error.status == 409 and error.reason == "AlreadyExists":
                return False
            raise

    async def delete(self, path: str, propagation: str = "Background", query: dict[str, str] | None = None,
                     on_send: Callable[[float], None] | None = None, uid: str | None = None,
                     grace_seconds: int | None = None) -> bool:
        """Delete (one object, or a collection with a query); a 404 counts as success. True if it deleted.

        With ``uid``, the API server deletes only the object with that uid (a precondition): the one the run saw
        carrying its label, never a namesake created since (that answers 409 Conflict)."""
        options: Json = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            await self.request("DELETE", path, options, query=query, on_send=on_send, decode=False)
            return True
        except ApiError as error:
            if error.status == 404:
                return False
            raise

    async def admits(self, method: str, path: str, body: Json) -> str | None:
        """Whether the API server would admit this DELETE (``body``: DeleteOptions) or merge PATCH, asked as a
        server-side dry run (``dryRun=All``: RBAC and admission policies judge it, nothing is changed): None when
        it would (or the object is gone), else what it said."""
        content_type = "application/merge-patch+json" if method == "PATCH" else "application/json"
        if method == "DELETE":
            # A DELETE with a body takes its options from the body alone: a dryRun query parameter beside it is
            # ignored and the object is deleted for real (seen: the provisioner's pod went before its step).
            body = {**body, "dryRun": ["All"]}
        try:
            await self.request(method, path, body, query={"dryRun": "All"}, content_type=content_type, decode=False)
        except ApiError as error:
            return None if error.status == 404 else f"{error.status} {error.reason}: {error.message}"
        return None

    async def can_i(self, verb: str, resource: str, namespace: str, group: str = "") -> bool:
        """Whether this client's identity may ``verb`` ``resource`` in ``namespace`` (a SelfSubjectAccessReview,
        which every authenticated identity may create); ``resource`` may name a subresource, ``deployments/scale``."""
        plural, _, subresource = resource.partition("/")
        attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": plural}
        if subresource:
            attributes["subresource"] = subresource
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {
            "resourceAttributes": attributes}}
        answer = await self.request("POST", SELF_SUBJECT_ACCESS_REVIEWS, review)
        return bool((answer.get("status") or {}).get("allowed"))

    async def merge_patch(self, path: str, body: Json, on_send: Callable[[float], None] | None = None) -> Json | None:
        """A JSON merge patch; None if the object is gone (404). A ``metadata.uid`` in the body makes it a
        precondition: the API server refuses (uid is immutable) a patch of a namesake with another uid."""
        try:
            return await self.request("PATCH", path, body, content_type="application/merge-patch+json",
                                      on_send=on_send)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def stream(self, path: str, query: dict[str, str]) -> urllib3.BaseHTTPResponse:
        """Open a streaming GET (a watch) on the calling thread; the caller reads and closes it."""
        self._throttle()
        self.count_request()
        response = self._pool.request("GET", self.url(path, query), headers=self.headers(), preload_content=False,
                                      timeout=urllib3.Timeout(connect=10, read=None))
        METRICS.count_request("WATCH", path, response.status)
        return response
