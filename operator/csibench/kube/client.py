"""The run's API client: plain JSON over the kubernetes client's connection pool, rate-limited, in threads.

Why not the generated API classes: at 10,000 objects, model deserialization costs more than the storage
under test on a fast array, and the engine only needs a few fields. Why threads: the ``kubernetes`` client is
synchronous and must never block the event loop, so each request runs on a bounded pool of worker threads
(``maxInFlight``). Every request first takes a token from a QPS/burst bucket, like client-go's limiter; the
time spent waiting is summed, because a throttled client distorts results and the report must say so.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import urlencode

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from csibench.metrics import METRICS

Json = dict[str, Any]
T = TypeVar("T")


class ApiError(RuntimeError):
    """A non-2xx answer from the API server, with its status code and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


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


def _parse(response: urllib3.BaseHTTPResponse) -> Json:
    data = response.data
    if response.status >= 400:
        try:
            parsed = json.loads(data)
            message, reason = parsed.get("message", ""), parsed.get("reason", "")
        except ValueError:
            message, reason = data.decode(errors="replace")[:500], ""
        raise ApiError(response.status, reason, message)
    parsed_ok: Json = json.loads(data) if data else {}
    return parsed_ok


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
    """Async facade: ``await client.request(...)`` runs the HTTP call on a worker thread after rate limiting."""

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
        self._lock = threading.Lock()
        self.requests = 0

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "csibench"}
        token = self.configuration.get_api_key_with_prefix("BearerToken")  # refreshes rotated SA tokens
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
                     timeout: float = 60.0) -> Json:
        return _parse(self._send(method, path, body, query, content_type, on_send, timeout))

    def text_sync(self, path: str, query: dict[str, str] | None = None) -> str:
        """A GET whose answer is text, not JSON (``pods/log``); errors as ApiError."""
        response = self._send("GET", path, None, query, "application/json", None, 60.0)
        if response.status >= 400:
            _parse(response)
        return bytes(response.data).decode(errors="replace")

    def _send(self, method: str, path: str, body: Json | None, query: dict[str, str] | None, content_type: str,
              on_send: Callable[[float], None] | None, timeout: float) -> urllib3.BaseHTTPResponse:
        """One request on the calling thread; ``on_send`` gets the monotonic time it first leaves (after throttling).

        Connection failures and 429/503 answers (an API server restarting or shedding load) are retried with
        backoff for up to ``RETRY_SECONDS``; a create retried after a lost answer then meets 409, which callers
        treat as success. The send time stays the first attempt's, so retries count in the object's latency.
        """
        payload = json.dumps(body).encode() if body is not None else None
        deadline = time.monotonic() + RETRY_SECONDS
        delay = 0.2
        while True:
            self._throttle()
            self.count_request()
            if on_send is not None:
                on_send(time.monotonic())
                on_send = None
            try:
                response = self._pool.request(method, self.url(path, query), body=payload,
                                              headers=self.headers(content_type if body is not None else None),
                                              timeout=urllib3.Timeout(connect=10, read=timeout),
                                              preload_content=True, retries=False)
            except urllib3.exceptions.HTTPError as error:
                METRICS.count_request(method, path, 0)
                if time.monotonic() + delay > deadline:
                    raise ApiError(0, "ConnectionFailed", str(error)) from error
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            METRICS.count_request(method, path, response.status)
            if response.status in (429, 503) and time.monotonic() + delay < deadline:
                time.sleep(max(delay, float(response.headers.get("Retry-After", "0") or 0)))
                delay = min(delay * 2, 5.0)
                continue
            return response

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    async def request(self, method: str, path: str, body: Json | None = None, query: dict[str, str] | None = None,
                      content_type: str = "application/json",
                      on_send: Callable[[float], None] | None = None) -> Json:
        return await self.run(self.request_sync, method, path, body, query, content_type, on_send)

    async def text(self, path: str, query: dict[str, str] | None = None) -> str:
        return await self.run(self.text_sync, path, query)

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
            await self.request("POST", path, body, query={"dryRun": "All"} if dry_run else None, on_send=on_send)
            return True
        except ApiError as error:
            if error.status == 409 and error.reason == "AlreadyExists":
                return False
            raise

    async def delete(self, path: str, propagation: str = "Background", query: dict[str, str] | None = None,
                     on_send: Callable[[float], None] | None = None, uid: str | None = None) -> bool:
        """Delete (one object, or a collection with a query); a 404 counts as success. True if it deleted.

        With ``uid``, the API server deletes only the object with that uid (a precondition): the one the run saw
        carrying its label, never a namesake created since (that answers 409 Conflict)."""
        options: Json = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        try:
            await self.request("DELETE", path, options, query=query, on_send=on_send)
            return True
        except ApiError as error:
            if error.status == 404:
                return False
            raise

    async def merge_patch(self, path: str, body: Json) -> Json | None:
        try:
            return await self.request("PATCH", path, body, content_type="application/merge-patch+json")
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
