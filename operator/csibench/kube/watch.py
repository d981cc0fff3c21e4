"""Watches that run in their own threads and stamp every event with the client's clock on arrival.

Per-object latency is "terminal event time - submit time" on the operator's clock, so the timestamp is taken
in the watch thread the moment the bytes carrying the event are read (``time.monotonic``), before any queueing
on the event loop. A watch lists first (delivering current objects as ADDED), then watches from the list's
resourceVersion with bookmarks, and relists after 410 Gone or a dropped connection (for example an API server
restart), so the caller's state converges without gaps.

Cost per event is what bounds the operator's CPU at 10,000 objects (every object produces several events on
several watches), so: the stream is read in large blocks straight from the socket and de-chunked here (urllib3
reads one HTTP chunk, i.e. one event, per call), everything one read delivered goes to the event loop as one
batch (one wake-up instead of one per event), JSON is decoded with orjson, and a watch may be given ``keep``, a
cheap test on the raw line, so that events of other runs and users on cluster-wide watches are never decoded
(their resourceVersion is still read, so the watch resumes where it was).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from csibench.kube.api import WatchSource, WatchStream
from csibench.kube.client import ApiError, Json
from csibench.kube.http import ChunkedDecoder
from csibench.kube.resources import Resource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchEvent:
    source: str  # which watch produced it, e.g. "pvcs"
    type: str  # ADDED, MODIFIED, DELETED, or SYNC (end of a list: obj["present"] holds "namespace/name" keys)
    obj: Json
    at: float  # time.monotonic() when the event arrived
    initial: bool = False  # from the initial list, not a live change
    route: tuple[object, ...] | None = None  # a shared watch's subscribers this event is for (None: everyone)


Sink = Callable[[list[WatchEvent]], None]  # one batch: the events one read delivered, in order
# Falsy: the raw event line is not the caller's business (never decoded); a tuple: decode it, for those only
# (WatchEvent.route); anything else truthy: decode it.
Keep = Callable[[bytes], object]
READ_BLOCK = 64 * 1024
_RESOURCE_VERSION = re.compile(rb'"resourceVersion":"([^"]*)"')


def body_blocks(response: Any) -> Iterator[bytes]:
    """The response body in blocks as large as the socket has: raw reads de-chunked here when the response is
    urllib3's chunked HTTP/1.1 stream; otherwise whatever its own ``stream()`` yields."""
    raw = getattr(response, "_fp", None)
    socket_file = getattr(raw, "fp", None)
    if getattr(raw, "chunked", False) and socket_file is not None and hasattr(socket_file, "read1"):
        decoder = ChunkedDecoder()
        while not decoder.done:
            data = socket_file.read1(READ_BLOCK)
            if not data:
                return
            body = decoder.feed(data)
            if body:
                yield body
        return
    yield from response.stream(None)


def _close(response: Any) -> None:
    """A watch connection whose body was read around urllib3 cannot be reused: close it, then hand it back."""
    with contextlib.suppress(Exception):
        if hasattr(response, "close"):
            response.close()
    response.release_conn()


class Watch:
    """One list+watch in a daemon thread; events go to ``sink`` on the event loop's thread."""

    def __init__(self, client: WatchSource, source: str, resource: Resource, namespace: str | None,
                 query: dict[str, str], loop: asyncio.AbstractEventLoop, sink: Sink, keep: Keep | None = None,
                 on_list: Callable[[], None] | None = None) -> None:
        self._client = client
        self._keep = keep
        self._on_list = on_list  # called in the watch thread before each list (a ``keep`` with memory resets)
        self.source = source
        self._path = resource.path(namespace)
        self._query = query
        self._loop = loop
        self._sink = sink
        self._stop = threading.Event()
        self._response: WatchStream | None = None
        self.synced = asyncio.Event()
        self.errors = 0
        self.decoded = 0  # events decoded and delivered (live, not from lists)
        self.skipped = 0  # events ``keep`` turned away undecoded
        self._pending: collections.deque[list[WatchEvent]] = collections.deque()  # batches not yet on the loop
        self._drain_scheduled = False
        self._thread = threading.Thread(target=self._run, name=f"csibench-watch-{source}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()

    def _emit(self, events: list[WatchEvent]) -> None:
        """Queue a batch for the loop; wake the loop only if no drain is pending (while the loop is busy, the
        batches of several reads go in one wake-up). Stamps were taken on arrival, so waiting costs no accuracy."""
        if events and not self._stop.is_set():
            self._pending.append(events)
            if not self._drain_scheduled:
                self._drain_scheduled = True
                self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        self._drain_scheduled = False  # first: a batch queued from now on schedules another drain
        try:
            while self._pending:
                self._sink(self._pending.popleft())
        finally:  # a sink that raised leaves the rest queued: deliver it on the next turn, not at the next event
            if self._pending and not self._drain_scheduled:
                self._drain_scheduled = True
                self._loop.call_soon(self._drain)

    def _run(self) -> None:
        try:
            self._run_until_stopped()
        finally:
            log.info("watch %s ended: %d events decoded, %d skipped undecoded, %d errors, %.2f s of CPU",
                     self.source, self.decoded, self.skipped, self.errors, time.thread_time())

    def _run_until_stopped(self) -> None:
        while not self._stop.is_set():
            try:
                version = self._list()
                self._loop.call_soon_threadsafe(self.synced.set)
                while not self._stop.is_set():
                    version = self._watch(version)
            except _Gone:
                continue
            except Exception as error:  # any failure: count it, back off, relist
                if self._stop.is_set():
                    return
                self.errors += 1
                log.warning("watch %s failed (%s); relisting", self.source, error)
                self._stop.wait(0.5)

    def _list(self) -> str:
        if self._on_list is not None:
            self._on_list()
        listing = self._client.request_sync("GET", self._path, query=self._query)
        at = time.monotonic()
        items = listing.get("items", [])
        # Objects deleted while the watch was down produce no DELETED event: SYNC lists who is still there.
        present = [f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in items]
        version = str(listing["metadata"]["resourceVersion"])  # in SYNC too: shared watches fence by it
        self._emit([*(WatchEvent(self.source, "ADDED", item, at, initial=True) for item in items),
                    WatchEvent(self.source, "SYNC", {"present": present, "resourceVersion": version}, at,
                               initial=True)])
        return version

    def _watch(self, version: str) -> str:
        query = {**self._query, "watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": "120"}
        response = self._client.stream(self._path, query)
        self._response = response
        try:
            if response.status >= 400:
                raise ApiError(response.status, "", response.data.decode(errors="replace")[:300])
            pending = b""
            for block in body_blocks(response):
                at = time.monotonic()
                lines = (pending + block).split(b"\n")
                pending = lines.pop()
                batch: list[WatchEvent] = []
                for line in lines:
                    if not line.strip():
                        continue
                    route = None
                    if self._keep is not None and b'"ERROR"' not in line[:32]:
                        kept = self._keep(line)
                        if not kept:
                            found = _RESOURCE_VERSION.search(line)  # metadata comes first: the object's own
                            version = found.group(1).decode() if found else version
                            self.skipped += 1
                            continue
                        route = kept if isinstance(kept, tuple) else None
                    event = orjson.loads(line)
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        self._emit(batch)  # what came before the error still happened
                        if obj.get("code") == 410:
                            raise _Gone()
                        raise ApiError(int(obj.get("code", 500)), obj.get("reason", ""), obj.get("message", ""))
                    version = obj["metadata"]["resourceVersion"]
                    if kind != "BOOKMARK":
                        batch.append(WatchEvent(self.source, kind, obj, at, route=route))
                self.decoded += len(batch)
                self._emit(batch)
            return version
        finally:
            self._response = None
            _close(response)


class _Gone(Exception):
    """The watch's resourceVersion is too old: relist."""
