"""Watches that run in their own threads and stamp every event with the client's clock on arrival.

Per-object latency is "terminal event time - submit time" on the operator's clock, so the timestamp is taken
in the watch thread the moment the event's line is read (``time.monotonic``), before any queueing on the event
loop. A watch lists first (delivering current objects as ADDED), then watches from the list's
resourceVersion with bookmarks, and relists after 410 Gone or a dropped connection (for example an API server
restart), so the caller's state converges without gaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from csibench.kube.client import ApiError, Json, KubeClient
from csibench.kube.resources import Resource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WatchEvent:
    source: str  # which watch produced it, e.g. "pvcs"
    type: str  # ADDED, MODIFIED, DELETED, or SYNC (end of a list: obj["present"] holds "namespace/name" keys)
    obj: Json
    at: float  # time.monotonic() when the event arrived
    initial: bool = False  # from the initial list, not a live change


Sink = Callable[[WatchEvent], None]


class Watch:
    """One list+watch in a daemon thread; events go to ``sink`` on the event loop's thread."""

    def __init__(self, client: KubeClient, source: str, resource: Resource, namespace: str | None,
                 query: dict[str, str], loop: asyncio.AbstractEventLoop, sink: Sink) -> None:
        self._client = client
        self.source = source
        self._path = resource.path(namespace)
        self._query = query
        self._loop = loop
        self._sink = sink
        self._stop = threading.Event()
        self._response: Any = None
        self.synced = asyncio.Event()
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name=f"csibench-watch-{source}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()

    def _emit(self, event: WatchEvent) -> None:
        if not self._stop.is_set():
            self._loop.call_soon_threadsafe(self._sink, event)

    def _run(self) -> None:
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
        listing = self._client.request_sync("GET", self._path, query=self._query)
        at = time.monotonic()
        items = listing.get("items", [])
        for item in items:
            self._emit(WatchEvent(self.source, "ADDED", item, at, initial=True))
        # Objects deleted while the watch was down produce no DELETED event: SYNC lists who is still there.
        present = [f"{i['metadata'].get('namespace', '')}/{i['metadata']['name']}" for i in items]
        self._emit(WatchEvent(self.source, "SYNC", {"present": present}, at, initial=True))
        return str(listing["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        query = {**self._query, "watch": "true", "resourceVersion": version, "allowWatchBookmarks": "true",
                 "timeoutSeconds": "120"}
        response = self._client.stream(self._path, query)
        self._response = response
        try:
            if response.status >= 400:
                raise ApiError(response.status, "", response.data.decode(errors="replace")[:300])
            buffer = b""
            for chunk in response.stream(None):
                at = time.monotonic()
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            raise _Gone()
                        raise ApiError(int(obj.get("code", 500)), obj.get("reason", ""), obj.get("message", ""))
                    version = obj["metadata"]["resourceVersion"]
                    if kind != "BOOKMARK":
                        self._emit(WatchEvent(self.source, kind, obj, at))
            return version
        finally:
            self._response = None
            response.release_conn()


class _Gone(Exception):
    """The watch's resourceVersion is too old: relist."""
