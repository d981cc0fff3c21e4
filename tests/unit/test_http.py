"""The lean HTTP client against a real local socket server: framing, keep-alive, idle closes, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from csibench.kube.http import HttpConnectionError, HttpPool, build_request

Handler = Callable[[bytes, asyncio.StreamWriter, int], Awaitable[bool]]  # (request head, writer, n) -> keep open


async def _serve(handler: Handler) -> tuple[asyncio.Server, str, list[int]]:
    connections: list[int] = []

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                served += 1
                if not await handler(head + body, writer, served):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}", connections


def _get(pool: HttpPool, path: str = "/api/v1/x") -> bytes:
    return build_request("GET", path, pool.netloc, {"Accept": "application/json"}, None)


def test_content_length_and_chunked_answers_on_one_kept_alive_connection() -> None:
    seen: list[bytes] = []

    async def handler(request: bytes, writer: asyncio.StreamWriter, served: int) -> bool:
        seen.append(request)
        if served == 1:
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
                         b'{"a":"b"}\r\n')
        else:  # chunked, the trailer's CRLF in a separate write (the client must not take it for an answer)
            writer.write(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"4\r\n{\"x\"\r\n3;ext=1\r\n:1}\r\n0\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"\r\n")
        await writer.drain()
        return True

    async def scenario() -> None:
        server, url, connections = await _serve(handler)
        pool = HttpPool(url, None, None, 4)
        body = b'{"kind":"DeleteOptions"}'
        first = await pool.request(build_request("POST", "/api/v1/namespaces/n/pods?dryRun=All", pool.netloc,
                                                 {"Content-Type": "application/json"}, body), 5)
        second = await pool.request(_get(pool), 5)
        await asyncio.sleep(0.1)
        third = await pool.request(_get(pool), 5)
        assert (first.status, first.body) == (201, b'{"a":"b"}\r\n')
        assert (second.status, second.body, second.retry_after) == (429, b'{"x":1}', "3")
        assert third.status == 429 and third.body == b'{"x":1}'
        assert len(connections) == 1  # all three on one kept-alive connection
        pool.close()
        server.close()

    asyncio.run(scenario())
    assert seen[0].startswith(b"POST /api/v1/namespaces/n/pods?dryRun=All HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Length: 24\r\n\r\n" + b'{"kind":"DeleteOptions"}' in seen[0]
    assert b"Content-Length" not in seen[1]


def test_an_idle_close_is_sent_again_on_a_new_connection_and_connection_close_is_honoured() -> None:
    async def handler(request: bytes, writer: asyncio.StreamWriter, served: int) -> bool:
        closing = b"/close" in request
        writer.write(b"HTTP/1.1 200 OK\r\n" + (b"Connection: close\r\n" if closing else b"") +
                     b"Content-Length: 2\r\n\r\nok")
        await writer.drain()
        return False  # the server closes every connection after one answer: the next reuse finds it closed

    async def scenario() -> None:
        server, url, connections = await _serve(handler)
        pool = HttpPool(url, None, None, 4)
        for _ in range(3):
            assert (await pool.request(_get(pool), 5)).body == b"ok"
            await asyncio.sleep(0.05)
        assert (await pool.request(_get(pool, "/close"), 5)).status == 200
        assert len(connections) == 4
        pool.close()
        server.close()

    asyncio.run(scenario())


def test_failures_are_connection_errors() -> None:
    async def silent(request: bytes, writer: asyncio.StreamWriter, served: int) -> bool:
        await asyncio.sleep(2)
        return False

    async def half(request: bytes, writer: asyncio.StreamWriter, served: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
        await writer.drain()
        return False

    async def scenario() -> None:
        server, url, _ = await _serve(silent)
        pool = HttpPool(url, None, None, 4)
        with pytest.raises(HttpConnectionError, match="read timeout"):
            await pool.request(_get(pool), 0.2)
        server.close()
        server, url, _ = await _serve(half)
        pool = HttpPool(url, None, None, 4)
        with pytest.raises(HttpConnectionError, match="closed"):
            await pool.request(_get(pool), 5)
        server.close()
        await server.wait_closed()
        with pytest.raises(HttpConnectionError, match="cannot connect"):
            await HttpPool(url, None, None, 4).request(_get(pool), 5)

    asyncio.run(scenario())


def test_nothing_can_break_the_framing() -> None:
    with pytest.raises(ValueError, match="line break"):
        build_request("GET", "/x", "h", {"Authorization": "Bearer abc\r\nX-Evil: 1"}, None)
    with pytest.raises(ValueError):
        build_request("GET", "/x HTTP/1.0\r\n", "h", {}, None)
    with pytest.raises(ValueError):
        build_request("GET", "/a b", "h", {}, None)


def test_no_answer_in_time_is_never_sent_again_and_a_slow_answer_is_not_a_timeout() -> None:
    """A hung server: the POST is written once (not once per idle connection). An answer whose bytes keep
    coming is not cut off by the read timeout, which counts from the last bytes received."""
    received: list[bytes] = []

    async def handler(request: bytes, writer: asyncio.StreamWriter, served: int) -> bool:
        received.append(request.split(b"\r\n", 1)[0])
        if request.startswith(b"POST"):
            await asyncio.sleep(3)  # never in time
        elif b"/slow" in request:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
            for byte in b"slow!":
                await writer.drain()
                await asyncio.sleep(0.15)
                writer.write(bytes([byte]))
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        return True

    async def scenario() -> None:
        server, url, _ = await _serve(handler)
        pool = HttpPool(url, None, None, 8)
        await asyncio.gather(*(pool.request(_get(pool), 5) for _ in range(3)))  # three idle connections
        received.clear()
        with pytest.raises(HttpConnectionError, match="read timeout"):
            await pool.request(build_request("POST", "/api/v1/namespaces/n/pods", pool.netloc, {}, b"{}"), 0.3)
        assert received == [b"POST /api/v1/namespaces/n/pods HTTP/1.1"]
        assert (await pool.request(_get(pool, "/slow"), 0.5)).body == b"slow!"  # 0.75 s in all, 0.15 s gaps
        pool.close()
        server.close()

    asyncio.run(scenario())


def test_a_host_header_never_carries_userinfo_and_keeps_ipv6_brackets() -> None:
    assert HttpPool("https://user:secret@api.example:6443/prefix", None, None, 1).netloc == "api.example:6443"
    assert HttpPool("https://[::1]:6443", None, None, 1).netloc == "[::1]:6443"
    assert HttpPool("https://[::1]:6443/k8s/clusters/c-1", None, None, 1).origin == "https://[::1]:6443"
