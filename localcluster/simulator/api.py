"""A small asyncio client for the Kubernetes REST API, with list+watch informers, for the simulator.

The simulator must keep up with 10,000 volumes while playing six roles, so it talks plain JSON over one
aiohttp session (no model classes, no threads) and keeps an in-memory cache per watched resource, the way
client-go informers do: list, then watch from the list's resourceVersion, relist on 410 Gone.

A role that writes an object takes the API server's answer into the cache at once (``Informer.observe``, what
client-go's mutation cache does): the watch event of that write arrives later, and a reconcile that ran in
between would otherwise act on the object as it was before the write and repeat a backend operation. The cache
never goes back to an older resourceVersion, so the watch events still in flight cannot undo the write.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import ssl
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

log = logging.getLogger("simulator.api")
Obj = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """Where a resource lives in the REST API."""

    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool
    kind: str

    @property
    def api_version(self) -> str:
        return self.prefix.removeprefix("/apis/").removeprefix("/api/")

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


PVC = Resource("/api/v1", "persistentvolumeclaims", True, "PersistentVolumeClaim")
PV = Resource("/api/v1", "persistentvolumes", False, "PersistentVolume")
POD = Resource("/api/v1", "pods", True, "Pod")
NODE = Resource("/api/v1", "nodes", False, "Node")
EVENT = Resource("/api/v1", "events", True, "Event")
CONFIG_MAP = Resource("/api/v1", "configmaps", True, "ConfigMap")
LEASE = Resource("/apis/coordination.k8s.io/v1", "leases", True, "Lease")
STORAGE_CLASS = Resource("/apis/storage.k8s.io/v1", "storageclasses", False, "StorageClass")
CSI_DRIVER = Resource("/apis/storage.k8s.io/v1", "csidrivers", False, "CSIDriver")
CSI_NODE = Resource("/apis/storage.k8s.io/v1", "csinodes", False, "CSINode")
VOLUME_ATTACHMENT = Resource("/apis/storage.k8s.io/v1", "volumeattachments", False, "VolumeAttachment")
SNAPSHOT = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshots", True, "VolumeSnapshot")
SNAPSHOT_CONTENT = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshotcontents", False,
                            "VolumeSnapshotContent")
SNAPSHOT_CLASS = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshotclasses", False, "VolumeSnapshotClass")


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message  # the API server's words, as a kubelet quotes them (``serviceaccounts "x" not found``)


def key_of(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def now_rfc3339(micro: bool = False) -> str:
    stamp = dt.datetime.now(dt.UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


class Client:
    """JSON REST calls with the kubeconfig's bearer token and CA."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self._ssl = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self._headers = {"Authorization": f"Bearer {user['token']}", "Accept": "application/json"}
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=64)
        self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._session:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use Client as an async context manager"
        return self._session

    async def request(self, method: str, path: str, body: Obj | None = None, content_type: str = "application/json",
                      params: dict[str, str] | None = None) -> Obj:
        data = json.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if body is not None else None
        async with self.session.request(method, self.server + path, data=data, headers=headers,
                                        params=params) as response:
            text = await response.text()
            if response.status >= 400:
                try:
                    message = json.loads(text).get("message", text)
                except ValueError:
                    message = text
                raise ApiError(response.status, message)
            return json.loads(text) if text else {}

    async def get(self, path: str) -> Obj | None:
        try:
            return await self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def create(self, resource: Resource, body: Obj, namespace: str | None = None) -> Obj | None:
        """Create; None when it already exists (409), which callers treat as success."""
        try:
            return await self.request("POST", resource.path(namespace), body)
        except ApiError as error:
            if error.status == 409:
                return None
            raise

    async def patch(self, path: str, body: Obj, strategic: bool = False) -> Obj | None:
        kind = "application/strategic-merge-patch+json" if strategic else "application/merge-patch+json"
        try:
            return await self.request("PATCH", path, body, content_type=kind)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    async def delete(self, path: str, body: Obj | None = None) -> Obj | None:
        """Delete; the answer is the object while finalizers hold it, a Status (or the last state of the object)
        once it is gone, None when it was already gone (404) or a precondition failed (409)."""
        try:
            return await self.request("DELETE", path, body)
        except ApiError as error:
            if error.status not in (404, 409):
                raise
            return None

    async def watch_lines(self, path: str, resource_version: str,
                          selectors: dict[str, str] | None = None) -> AsyncIterator[Obj]:
        """The watch events on ``path`` from ``resource_version`` (with ``selectors``: labelSelector,
        fieldSelector), one JSON object each, until the server ends the watch (at most 300 s)."""
        params = {**(selectors or {}), "watch": "true", "resourceVersion": resource_version,
                  "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
        async with self.session.get(self.server + path, params=params) as response:
            if response.status >= 400:
                raise ApiError(response.status, await response.text())
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)


Handler = Callable[[str, Obj], None]


def resource_version(obj: Obj) -> int:
    """The object's resourceVersion as a number (etcd's revision; -1 if absent or not a number)."""
    try:
        return int(obj["metadata"].get("resourceVersion") or -1)
    except (KeyError, ValueError):
        return -1


class Informer:
    """A cache of one resource kept current by list+watch; handlers get (event type, object) synchronously."""

    def __init__(self, client: Client, resource: Resource, keep: Callable[[Obj], bool] | None = None,
                 label_selector: str | None = None) -> None:
        self.client = client
        self.resource = resource
        self._selectors = {"labelSelector": label_selector} if label_selector else {}
        self.cache: dict[str, Obj] = {}
        self.handlers: list[Handler] = []
        self._removed: dict[str, str] = {}  # key -> uid that our own delete removed, until its DELETED event
        self.synced = asyncio.Event()
        self._keep = keep

    def get(self, key: str) -> Obj | None:
        return self.cache.get(key)

    def observe(self, obj: Obj | None) -> None:
        """Take the API server's answer to our own create, update or patch into the cache (no handlers run)."""
        if not obj or obj.get("kind") == "Status" or "metadata" not in obj:
            return
        if self._keep is None or self._keep(obj):
            self._store(key_of(obj), obj)

    def observe_deleted(self, obj: Obj, answer: Obj | None) -> None:
        """Our own delete of ``obj`` returned ``answer``: still there (finalizers) or gone from the cache now."""
        meta = (answer or {}).get("metadata") or {}
        if answer and answer.get("kind") != "Status" and (meta.get("finalizers") or meta.get(
                "deletionGracePeriodSeconds")):
            self.observe(answer)
            return
        key, uid = key_of(obj), obj["metadata"].get("uid", "")
        cached = self.cache.get(key)
        if cached is not None and cached["metadata"].get("uid", "") == uid:
            del self.cache[key]
        self._removed[key] = uid

    def _store(self, key: str, obj: Obj) -> None:
        """Cache ``obj`` unless the cache holds a newer version of it, or our own delete already removed it."""
        if self._removed.get(key) == obj["metadata"].get("uid"):
            return
        cached = self.cache.get(key)
        if (cached is not None and cached["metadata"].get("uid") == obj["metadata"].get("uid")
                and resource_version(cached) > resource_version(obj)):
            return
        self.cache[key] = obj

    def _dispatch(self, event_type: str, obj: Obj) -> None:
        if self._keep is not None and not self._keep(obj):
            return
        key = key_of(obj)
        if event_type == "DELETED":
            cached = self.cache.get(key)
            if cached is None or cached["metadata"].get("uid") == obj["metadata"].get("uid"):
                self.cache.pop(key, None)
            if self._removed.get(key) == obj["metadata"].get("uid"):
                del self._removed[key]
        else:
            self._store(key, obj)
        for handler in self.handlers:
            try:
                handler(event_type, obj)
            except Exception:
                log.exception("handler of %s failed on %s", self.resource.plural, key)

    async def run(self) -> None:
        while True:
            try:
                query = f"?{urllib.parse.urlencode(self._selectors)}" if self._selectors else ""
                listing = await self.client.request("GET", self.resource.path() + query)
                listed = resource_version(listing)
                seen: dict[str, str] = {}
                for item in listing.get("items", []):
                    item.setdefault("kind", self.resource.kind)
                    item.setdefault("apiVersion", self.resource.api_version)
                    seen[key_of(item)] = item["metadata"].get("uid", "")
                    self._dispatch("ADDED", item)
                # Gone unless our own write put a version newer than this listing into the cache.
                for gone in [k for k, obj in self.cache.items() if k not in seen and resource_version(obj) <= listed]:
                    self._dispatch("DELETED", self.cache[gone])
                self._removed = {k: uid for k, uid in self._removed.items() if seen.get(k) == uid}
                self.synced.set()
                version = listing["metadata"]["resourceVersion"]
                while True:
                    async for event in self.client.watch_lines(self.resource.path(), version, self._selectors):
                        kind, obj = event["type"], event["object"]
                        if kind == "ERROR":
                            raise ApiError(int(obj.get("code", 500)), obj.get("message", "watch error"))
                        version = obj["metadata"]["resourceVersion"]
                        if kind != "BOOKMARK":
                            self._dispatch(kind, obj)
            except asyncio.CancelledError:
                raise
            except ApiError as error:
                if error.status != 410:
                    log.warning("watch %s: %s; relisting", self.resource.plural, error)
                    await asyncio.sleep(0.5)
            except (aiohttp.ClientError, TimeoutError, ValueError) as error:
                log.warning("watch %s interrupted (%s); relisting", self.resource.plural, error)
                await asyncio.sleep(0.5)
