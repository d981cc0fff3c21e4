"""A lean HTTP/1.1 client on the event loop, for the engine's requests to the API server.

Why not aiohttp (which it replaces for them): profiled over 3000 volumes (docs/benchmarks.md), aiohttp's
request machinery (session, connector, request and response objects, timers, tracing hooks) was about 40% of
the operator's CPU, more than everything else the operator does per object. The engine's requests are the
simplest HTTP there is: one server, keep-alive connections, small JSON bodies, no redirects, cookies,
compression or proxies. Here a request is one write of prebuilt bytes and one parse of the answer's head
(status line, Content-Length or chunked coding, Connection, Retry-After) in ``data_received``.

Failures are connection failures (``HttpConnectionError``): refused, reset, closed before a whole answer,
or no bytes of the answer for the read timeout; the caller's retry policy decides. A reused keep-alive
connection that the server had closed while it was idle fails before any byte of an answer arrives; such a
request is sent again at once on a new connection (as browsers and Go's net/http do), so an idle close never
costs an object a retry delay in its latency. A timeout is never sent again here: the server may be working on
the request. Configurations that need an HTTP proxy keep aiohttp (kube/client.py).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

CONNECT_TIMEOUT_SECONDS = 10.0


_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


def _chunk_size(line: bytes) -> int:
    """A chunk's size line (hex digits, then maybe ``;extensions``); ValueError for anything else (``int`` would
    also take signs, ``0x`` and underscores)."""
    field = line.split(b";", 1)[0].strip()
    if not _HEX.fullmatch(field):
        raise ValueError(f"bad chunk size {field[:20]!r}")
    return int(field, 16)


class ChunkedDecoder:
    """HTTP/1.1 chunked transfer coding, decoded from raw blocks of any size and split anywhere (pure)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._left = 0  # data bytes still to come in the current chunk
        self._crlf = 0  # bytes of the CRLF after a chunk's data still to skip
        self.done = False  # the last (zero-size) chunk was seen

    def feed(self, data: bytes) -> bytes:
        """The body bytes ``data`` completes; partial framing waits for the next block."""
        if not self._buffer and not self._left and not self._crlf:
            # The common case on a watch: a read brings exactly one whole chunk (one event, flushed alone).
            end = data.find(b"\r\n")
            if end > 0 and data.endswith(b"\r\n"):
                size = _chunk_size(data[:end])
                if size and end + size + 4 == len(data):
                    return data[end + 2:end + 2 + size]
        buffer, position, out = self._buffer + data, 0, []
        while not self.done:
            if self._left:
                take = min(self._left, len(buffer) - position)
                out.append(buffer[position:position + take])
                position += take
                self._left -= take
                if self._left:
                    break
                self._crlf = 2
            if self._crlf:
                skip = min(self._crlf, len(buffer) - position)
                position += skip
                self._crlf -= skip
                if self._crlf:
                    break
            end = buffer.find(b"\r\n", position)
            if end < 0:
                break
            size = _chunk_size(buffer[position:end])
            position = end + 2
            if size == 0:
                self.done = True
            self._left = size
        self._buffer = buffer[position:]
        return b"".join(out)


class HttpConnectionError(OSError):
    """No complete answer: the connection failed, closed early, or the answer did not come in time."""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    retry_after: str | None = None


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.answered = False  # some byte of an answer came since the last request was sent
        self.timed_out = False
        self.last_data = 0.0  # loop time of the last bytes received (the read timeout is one of inactivity)
        self._buffer = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._reset()

    def _reset(self) -> None:
        self._status: int | None = None
        self._length: int | None = None
        self._chunks: ChunkedDecoder | None = None
        self._body: list[bytes] = []
        self._keep_alive = True
        self._retry_after: str | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            return  # nothing asked: whatever this is (a late CRLF of a chunked trailer), it is not an answer
        self.answered = True
        self.last_data = asyncio.get_running_loop().time()
        self._buffer += data
        try:
            self._parse()
        except (ValueError, IndexError) as error:
            self._fail(HttpConnectionError(f"malformed HTTP answer: {error}"))
            self.close()

    def eof_received(self) -> bool:
        self.closed = True
        self._fail(HttpConnectionError("the server closed the connection before answering"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(HttpConnectionError(f"connection lost: {exc}" if exc else "connection closed"))

    # -- requests -----------------------------------------------------------------------------------------
    def send(self, request: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self.answered = False
        self.last_data = asyncio.get_running_loop().time()
        self._buffer.clear()  # nothing left over from an earlier answer is part of this one
        self._reset()
        self.transport.write(request)
        return self._waiter

    def time_out(self) -> None:
        self.timed_out = True
        self._fail(HttpConnectionError("no answer within the read timeout"))
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def reusable(self) -> bool:
        return self._keep_alive and not self.closed

    def _fail(self, error: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def _parse(self) -> None:
        if self._status is None:
            while self._buffer.startswith(b"\r\n"):  # the end of a previous chunked answer's trailer
                del self._buffer[:2]
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self._buffer[:end]).split(b"\r\n")
            del self._buffer[:end + 4]
            status = int(lines[0].split(b" ", 2)[1])
            if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
                self._parse()
                return
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip()
            self._status = status
            self._keep_alive = headers.get(b"connection", b"").lower() != b"close"
            retry_after = headers.get(b"retry-after")
            self._retry_after = retry_after.decode() if retry_after is not None else None
            if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
                self._chunks = ChunkedDecoder()
            elif b"content-length" in headers:
                if not headers[b"content-length"].isdigit():
                    raise ValueError(f"Content-Length {headers[b'content-length']!r}")
                self._length = int(headers[b"content-length"])
            elif status in (204, 304):
                self._length = 0
            else:
                raise ValueError("an answer with neither Content-Length nor chunked coding")
        if self._chunks is not None:
            self._body.append(self._chunks.feed(bytes(self._buffer)))
            self._buffer.clear()
            if self._chunks.done:
                self._complete(b"".join(self._body))
        elif self._length is not None and len(self._buffer) >= self._length:
            body = bytes(self._buffer[:self._length])
            del self._buffer[:self._length]
            self._complete(body)

    def _complete(self, body: bytes) -> None:
        waiter, self._waiter = self._waiter, None
        assert self._status is not None
        if waiter is not None and not waiter.done():
            waiter.set_result(Response(self._status, body, self._retry_after))


class HttpPool:
    """Keep-alive connections to one server, opened on demand, at most ``limit`` kept idle."""

    def __init__(self, url: str, ssl_context: ssl.SSLContext | None, server_hostname: str | None,
                 limit: int) -> None:
        parts = urlsplit(url)
        self.origin = f"{parts.scheme}://{parts.netloc}"  # what precedes a request's target in a URL
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl_context if parts.scheme == "https" else None
        self._server_hostname = (server_hostname or self._host) if self._ssl is not None else None
        self._limit = limit
        self._idle: list[_Connection] = []
        host = f"[{self._host}]" if ":" in self._host else self._host  # an IPv6 literal keeps its brackets
        self.netloc = f"{host}:{parts.port}" if parts.port else host  # the Host header: never userinfo

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(loop.create_connection(
                _Connection, self._host, self._port, ssl=self._ssl, server_hostname=self._server_hostname),
                CONNECT_TIMEOUT_SECONDS)
        except (OSError, TimeoutError, ssl.SSLError) as error:
            raise HttpConnectionError(f"cannot connect to {self.netloc}: {error}") from error
        return connection

    async def request(self, request: bytes, timeout: float) -> Response:
        """Send one prebuilt request; the answer, or HttpConnectionError."""
        while self._idle:
            connection = self._idle.pop()
            if connection.closed:
                continue
            try:
                return await self._exchange(connection, request, timeout)
            except HttpConnectionError:
                if connection.answered or connection.timed_out:
                    raise  # an answer began, or none came in time: not an idle close, the caller decides
                # closed while idle (the close arrived before any answer): send it again on a new connection
        return await self._exchange(await self._connect(), request, timeout)

    async def _exchange(self, connection: _Connection, request: bytes, timeout: float) -> Response:
        loop = asyncio.get_running_loop()
        timers: list[asyncio.TimerHandle] = []

        def check() -> None:  # the read timeout counts from the last bytes received, as aiohttp's sock_read
            quiet = loop.time() - connection.last_data
            if quiet >= timeout:
                connection.time_out()
            else:
                timers.append(loop.call_later(timeout - quiet, check))

        timers.append(loop.call_later(timeout, check))
        try:
            response = await connection.send(request)
        except BaseException:
            connection.close()
            raise
        finally:
            timers[-1].cancel()
        if connection.reusable and len(self._idle) < self._limit:
            self._idle.append(connection)
        else:
            connection.close()
        return response

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()


def build_request(method: str, target: str, netloc: str, headers: dict[str, str], body: bytes | None) -> bytes:
    """The bytes of one request. ``target`` is an escaped path with its query; nothing in it or in a header
    may break the framing (a token with a line break would inject headers): such a request is refused."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {netloc}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    if " " in target or any(c in line for line in lines for c in "\r\n\0"):
        raise ValueError("a request target or header carries a line break, a NUL or (the target) a space")
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b"")
