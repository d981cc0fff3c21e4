"""The run's API client: the token bucket (client-go's limiter), retries, and what counts as an answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
import urllib3
from kubernetes import client as k8s_client

from csibench.kube import client as client_module
from csibench.kube.client import ApiError, KubeClient, TokenBucket


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    bucket = TokenBucket(qps=10, burst=5)
    waits = [bucket.reserve() for _ in range(7)]
    assert waits[:5] == [0.0] * 5
    assert waits[5] == pytest.approx(0.1, abs=0.01) and waits[6] == pytest.approx(0.2, abs=0.01)
    assert bucket.throttled_seconds == pytest.approx(0.3, abs=0.02)


class FakeHTTPResponse:
    def __init__(self, status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        self.status = status
        self.data = json.dumps(body or {}).encode()
        self.headers = headers or {}


class ScriptedPool:
    """Answers requests from a script: a response, or an exception to raise (a dropped connection)."""

    def __init__(self, script: list[FakeHTTPResponse | Exception]) -> None:
        self.script = script
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, url: str, **_: Any) -> FakeHTTPResponse:
        self.calls.append((method, url))
        answer = self.script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client_with(script: list[FakeHTTPResponse | Exception]) -> tuple[KubeClient, ScriptedPool]:
    """A client whose HTTP layers (urllib3 for threads, aiohttp on the loop) answer from ``script``."""
    configuration = k8s_client.Configuration()
    configuration.host = "https://127.0.0.1:1"
    client = KubeClient(configuration, qps=1000, burst=1000, max_in_flight=2)
    pool = ScriptedPool(script)
    client._pool = pool  # type: ignore[assignment]  # the HTTP layer is what this test replaces

    async def send(method: str, url: str, payload: bytes | None,
                   headers: dict[str, str]) -> tuple[int, bytes, str | None]:
        try:
            answer = pool.request(method, url, body=payload)
        except urllib3.exceptions.HTTPError as error:
            raise aiohttp.ClientConnectionError(str(error)) from error
        return answer.status, answer.data, answer.headers.get("Retry-After")

    client._send = send  # type: ignore[method-assign]
    return client, pool


def test_overload_and_dropped_connections_are_retried_and_the_send_time_is_the_first_attempts() -> None:
    client, pool = client_with([FakeHTTPResponse(503), urllib3.exceptions.ProtocolError("reset"),
                                FakeHTTPResponse(429, headers={"Retry-After": "0"}),
                                FakeHTTPResponse(201, {"metadata": {"name": "x"}})])
    sent: list[float] = []
    answer = client.request_sync("POST", "/api/v1/namespaces/ns/pods", {"kind": "Pod"}, on_send=sent.append)
    assert answer == {"metadata": {"name": "x"}}
    assert len(pool.calls) == 4 and len(sent) == 1 and client.requests == 4
    asyncio.run(client.close())


def test_the_loop_path_retries_the_same_way_and_skips_decoding_what_it_discards() -> None:
    async def scenario() -> tuple[bool, KubeClient, ScriptedPool, list[float]]:
        client, pool = client_with([FakeHTTPResponse(503), urllib3.exceptions.ProtocolError("reset"),
                                    FakeHTTPResponse(201, {"metadata": {"name": "x"}})])
        sent: list[float] = []
        try:
            created = await client.create("/api/v1/namespaces/ns/pods", {"kind": "Pod"}, on_send=sent.append)
        finally:
            await client.close()
        return created, client, pool, sent

    created, client, pool, sent = asyncio.run(scenario())
    assert created and len(pool.calls) == 3 and len(sent) == 1 and client.requests == 3


Retried = tuple[list[float], int | None, int]  # the waits before each retry, the status it ended with, attempts


def _retried(monkeypatch: pytest.MonkeyPatch, script: list[FakeHTTPResponse | Exception], on_loop: bool,
             retry_seconds: float) -> Retried:
    """One request answered by ``script`` on the event loop (``request``) or a thread's (``request_sync``): the
    waits before each retry (recorded, not slept), the status it ended with (None: an answer), the attempts."""
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    async def on_the_loop(client: KubeClient) -> None:
        try:
            await client.request("POST", "/api/v1/namespaces/ns/pods", {"kind": "Pod"})
        finally:
            await client.close()

    client, pool = client_with(list(script))
    ended: int | None = None
    with monkeypatch.context() as patch:
        patch.setattr(client_module, "RETRY_SECONDS", retry_seconds)
        patch.setattr("csibench.kube.client.time.sleep", waits.append)
        patch.setattr("csibench.kube.client.asyncio.sleep", no_sleep)
        try:
            if on_loop:
                asyncio.run(on_the_loop(client))
            else:
                client.request_sync("POST", "/api/v1/namespaces/ns/pods", {"kind": "Pod"})
        except ApiError as error:
            ended = error.status
    if not on_loop:
        asyncio.run(client.close())
    return waits, ended, len(pool.calls)


def _waits_of_both_loops(monkeypatch: pytest.MonkeyPatch, script: list[FakeHTTPResponse | Exception],
                         retry_seconds: float = client_module.RETRY_SECONDS) -> tuple[Retried, Retried]:
    return (_retried(monkeypatch, script, False, retry_seconds), _retried(monkeypatch, script, True, retry_seconds))


def test_both_loops_wait_alike_before_each_retry_and_give_up_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """One retry policy (``RetrySchedule``) for the thread's and the loop's requests: the same waits (0.2 s
    doubling to 5 s, a longer Retry-After honoured), and the same attempt where the budget ends."""
    script: list[FakeHTTPResponse | Exception] = [
        FakeHTTPResponse(503), urllib3.exceptions.ProtocolError("reset"),
        FakeHTTPResponse(429, headers={"Retry-After": "1"}), *[FakeHTTPResponse(503)] * 4, FakeHTTPResponse(201)]
    sync, loop = _waits_of_both_loops(monkeypatch, script)
    assert sync == loop == ([0.2, 0.4, 1.0, 1.6, 3.2, 5.0, 5.0], None, 8)
    # A budget with room for the waits of 0.2 and 0.4 s, not 0.8: both return the third 503 as their answer.
    sync, loop = _waits_of_both_loops(monkeypatch, [FakeHTTPResponse(503)] * 4, retry_seconds=0.7)
    assert sync == loop == ([0.2, 0.4], 503, 3)


def test_conflicts_and_not_found_are_answers_not_errors() -> None:
    async def scenario() -> tuple[bool, bool, dict[str, Any] | None]:
        client, _ = client_with([FakeHTTPResponse(409, {"reason": "AlreadyExists", "message": "exists"}),
                                 FakeHTTPResponse(404, {"reason": "NotFound", "message": "gone"}),
                                 FakeHTTPResponse(404, {"reason": "NotFound", "message": "gone"})])
        try:
            return (await client.create("/api/v1/namespaces/ns/pods", {"kind": "Pod"}),
                    await client.delete("/api/v1/namespaces/ns/pods/p"),
                    await client.get("/api/v1/namespaces/ns/pods/p"))
        finally:
            await client.close()

    assert asyncio.run(scenario()) == (False, False, None)


def test_other_errors_carry_the_api_servers_status_reason_and_message() -> None:
    client, _ = client_with([FakeHTTPResponse(422, {"reason": "Invalid", "message": "spec.x: Required value"})])
    with pytest.raises(ApiError) as failure:
        client.request_sync("POST", "/api/v1/namespaces/ns/pods", {"kind": "Pod"})
    assert (failure.value.status, failure.value.reason) == (422, "Invalid")
    assert "Required value" in failure.value.message
    asyncio.run(client.close())


def body_sent(call: Callable[[KubeClient], Awaitable[object]]) -> dict[str, Any]:
    """The JSON body ``call`` made the client send (its one request answered 200 {})."""
    async def scenario() -> dict[str, Any]:
        client, _ = client_with([])
        captured: dict[str, Any] = {}

        async def capture(method: str, url: str, payload: bytes | None,
                          headers: dict[str, str]) -> tuple[int, bytes, str | None]:
            captured.update(orjson.loads(payload or b"{}"))
            return 200, b"{}", None
        client._send = capture  # type: ignore[method-assign]
        try:
            await call(client)
        finally:
            await client.close()
        return captured
    return asyncio.run(scenario())


def test_a_delete_with_a_uid_sends_it_as_a_precondition() -> None:
    sent = body_sent(lambda client: client.delete("/api/v1/namespaces/ns/pods/p", uid="u-1"))
    assert sent["preconditions"] == {"uid": "u-1"}


def test_a_dry_run_asks_with_dry_run_all_and_says_what_a_refusal_said() -> None:
    async def scenario() -> tuple[str | None, str | None, str | None, list[tuple[str, str]]]:
        client, pool = client_with([FakeHTTPResponse(200, {}),
                                    FakeHTTPResponse(403, {"reason": "Forbidden", "message": "policy says no"}),
                                    FakeHTTPResponse(404, {"reason": "NotFound", "message": "gone"})])
        try:
            return (await client.admits("DELETE", "/api/v1/namespaces/kube-system/pods/p", {"kind": "DeleteOptions"}),
                    await client.admits("PATCH", "/apis/apps/v1/namespaces/kube-system/deployments/d", {"spec": {}}),
                    await client.admits("DELETE", "/api/v1/namespaces/kube-system/pods/q", {}), pool.calls)
        finally:
            await client.close()

    admitted, refused, gone, calls = asyncio.run(scenario())
    assert admitted is None and gone is None and refused == "403 Forbidden: policy says no"
    assert [method for method, _ in calls] == ["DELETE", "PATCH", "DELETE"]
    assert all(url.endswith("?dryRun=All") for _, url in calls), calls


def test_a_dry_run_delete_says_so_in_its_body_where_the_api_server_reads_a_deletes_options() -> None:
    sent = body_sent(lambda client: client.admits("DELETE", "/api/v1/namespaces/kube-system/pods/p",
                                                  {"kind": "DeleteOptions", "preconditions": {"uid": "u"}}))
    assert sent == {"kind": "DeleteOptions", "preconditions": {"uid": "u"}, "dryRun": ["All"]}
