"""A small in-memory API server with just enough controllers for the engine's unit tests (no cluster).

It implements ``KubeApi`` (``csibench/kube/api.py``), the surface the engine uses (get, create, delete, merge
patch, list and watch streams read by the real ``Watch`` threads), over a dict of objects, with resource
versions and watch events; mypy checks that it fits wherever a test hands it to the engine. Its controllers
bind claims (creating a PV that points back with the claim's uid), make pods Ready, make snapshots ready (with
a content), remove PVs and contents after their claims and snapshots, and delete a namespace's objects with it,
each after a configurable delay. Failures are injected per object name. It is not Kubernetes: integration tests
use the real control plane; this keeps engine logic testable in seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import hashlib
import itertools
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from csibench.kube.client import ApiError, Json, TokenBucket

Key = tuple[str, str, str]  # (plural, namespace or "", name)
FAKE_DRIVER = "fake.csi.example.com"  # the driver the fake's PVs and snapshot contents name
CLUSTER_SCOPED = {"namespaces", "persistentvolumes", "nodes", "storageclasses", "volumeattachments",
                  "volumesnapshotcontents", "volumesnapshotclasses", "csidrivers", "csinodes",
                  "volumegroupsnapshotcontents", "volumegroupsnapshotclasses", "volumeattributesclasses"}


@dataclass
class Behaviour:
    """How the fake cluster's controllers act; delays in seconds."""

    bind_delay: float = 0.01
    ready_delay: float = 0.01
    snapshot_delay: float = 0.01
    snapshot_cut_delay: float = 0.0  # bound (finalizer on) to readyToUse: the array still taking the snapshot
    release_delay: float = 0.01  # PV / content removal after its claim / snapshot is gone
    resize_delay: float = 0.01  # a bound claim's larger request reaches status.capacity (resizer and kubelet)
    resize_fails: set[str] = field(default_factory=set)  # claim names whose expansion gets VolumeResizeFailed
    modify_infeasible: set[str] = field(default_factory=set)  # VolumeAttributesClass names the driver refuses
    pod_termination: float = 0.0  # a deleted pod stays (terminating) this long
    start_delay: float = 0.0  # from a pod's volumes attached (at ready_delay) to the pod Ready (stage, publish, start)
    ignore_pinning: bool = False  # a kubelet-less scheduler that puts every pod on node-0, whatever its affinity
    never_bind: set[str] = field(default_factory=set)  # claim names that stay Pending
    volume_zone: Callable[[str], str | None] = lambda claim: None  # a claim's PV's zone (its node affinity names it)
    pv_delay: float = 0.0  # a bound claim's PV is made this much later (the PV watch lagging the claims')
    provisioning_fails: set[str] = field(default_factory=set)  # claim names that get a ProvisioningFailed warning
    refuse_create: Callable[[str, str], ApiError | None] = lambda plural, name: None  # like a quota
    snapshots_served: bool = True
    # Plurals whose finalizers nothing removes (a snapshot of a driver no sidecar serves): a delete of such an
    # object with finalizers only marks it deleted, and it stays
    finalizers_kept: frozenset[str] = frozenset()
    group_snapshots_served: bool = True
    # Run-to-completion pods (restartPolicy Never, the data path's): (exit code, log) for a pod, as its container
    # would have ended. Default: fio's JSON for the pod's --rw, with made-up numbers.
    workload: Callable[[Json], tuple[int, str]] = field(default_factory=lambda: fake_fio)


SNAPSHOT_BOUND_FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"  # the controller's
GROUP_BOUND_FINALIZER = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection"
GROUP_HANDLE = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"  # on a member's content
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # the API server refuses a larger body (413)
MAX_OBJECT_BYTES = 1536 * 1024  # etcd refuses a larger value ("etcdserver: request is too large")


def _pinned(pod: Json) -> bool:
    return bool((pod["spec"].get("affinity") or {}).get("nodeAffinity") or pod["spec"].get("nodeName"))


def _pinned_node(pod: Json) -> str:
    """The node a pod's required node affinity names by metadata.name (a moved pod), else the one its preferred
    affinity names (a data-path pod: no filter forbids it here), else node-0."""
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    terms += [p["preference"] for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
    for term in terms:
        for match in term.get("matchFields") or []:
            if match.get("key") == "metadata.name" and match.get("values"):
                return str(match["values"][0])
    return "node-0"


def claim_names(pod: Json) -> list[str]:
    """The claims a pod mounts: its persistentVolumeClaim volumes', and its generic ephemeral volumes' (named
    ``<pod>-<volume>`` by the ephemeral-volume controller)."""
    pod_name = pod["metadata"]["name"]
    volumes = (pod.get("spec") or {}).get("volumes") or []
    return [v["persistentVolumeClaim"]["claimName"] if v.get("persistentVolumeClaim") else f"{pod_name}-{v['name']}"
            for v in volumes if v.get("persistentVolumeClaim") or v.get("ephemeral")]


def _requested(claim: Json) -> str | None:
    """A claim's requested storage."""
    requested: str | None = ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage")
    return requested


def fake_checksums(pod: Json, corrupt: bool = False) -> tuple[int, str]:
    """sha256sum of fio's two files on the pod's claim: a volume and its clone (``-v00001``, ``-c00001``) hold the
    same data; ``corrupt`` changes the second file's."""
    claim = pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    lines = []
    for number in (0, 1):
        data = f"{claim[-5:]}/{number}{'!' if corrupt and number == 1 else ''}"
        lines.append(f"{hashlib.sha256(data.encode()).hexdigest()}  csibench.{number}.0")
    return 0, "\n".join(lines) + "\n"


def fake_fio(pod: Json, read_bw: float = 100 * 2**20, write_bw: float = 50 * 2**20) -> tuple[int, str]:
    """fio --output-format=json+ --group_reporting, as a pod's log shows it (only the fields csibench reads); a
    checksum pod's sha256sum."""
    if "sha256sum" in " ".join(pod["spec"]["containers"][0]["command"]):
        return fake_checksums(pod)
    args = dict(a.removeprefix("--").split("=", 1) for a in pod["spec"]["containers"][0]["command"][1:] if "=" in a)
    rw = args.get("rw", "read")
    reads, writes = rw in ("read", "randread", "randrw"), rw in ("write", "randwrite", "randrw")
    bs = int(args.get("bs", "4096"))

    jobs = int(args.get("numjobs", "1"))
    limits = [int(x or 0) * jobs for x in args.get("rate_iops", "0,0").split(",")]  # fio's 0: not limited

    def direction(on: bool, bw: float, limit: int = 0) -> Json:  # 98 completions at 250 us, 2 at 900 us
        if limit and bw / bs > limit:  # --rate_iops: fio holds each job to its rate
            bw = float(limit * bs)
        return {"bw_bytes": bw if on else 0, "iops": bw / bs if on else 0,
                "clat_ns": {"percentile": {"50.000000": 250000, "99.000000": 900000} if on else {},
                            "max": 900000 if on else 0, "bins": {"250000": 98, "900000": 2} if on else {}}}
    job = {"jobname": args.get("name"), "error": 0, "job options": {"numjobs": args.get("numjobs", "1")},
           "read": direction(reads, read_bw, limits[0]), "write": direction(writes, write_bw, limits[-1])}
    return 0, json.dumps({"fio version": "fio-3.33", "jobs": [job]}, indent=2)


class FakeResponse:
    """A watch stream: newline-delimited JSON events until shut down or the watch times out."""

    def __init__(self, events: queue.Queue[bytes | None], on_close: Callable[[], None]) -> None:
        self.status = 200
        self.data = b""
        self._events = events
        self._on_close = on_close

    def stream(self, amt: int | None = None, /) -> Iterator[bytes]:
        """Every event line (``amt``, a block size for urllib3, is not needed: each event is one item)."""
        while True:
            line = self._events.get()
            if line is None:
                return
            yield line

    def shutdown(self) -> None:
        self._events.put(None)

    def release_conn(self) -> None:
        self._on_close()


@dataclass
class _Watcher:
    plural: str
    namespace: str
    labels: dict[str, str]
    warnings_only: bool
    events: queue.Queue[bytes | None]


class FakeKube:
    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self.objects: dict[Key, Json] = {}
        self.lock = threading.RLock()
        self._version = itertools.count(1)
        self._watchers: list[_Watcher] = []
        self._history: list[tuple[int, str, str, bytes, Json]] = []  # for watches that start from a version
        self.log: list[tuple[str, str]] = []  # (verb, path) of every request, in order
        self.pod_logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its container's log
        self.status_writes: list[Json] = []  # a BenchmarkRun's status as stored after each status patch, in order
        self.status_patches: list[Json] = []  # the status patches themselves
        self.collection_deletes: list[tuple[str, str]] = []  # (path, label selector) of each delete of a collection
        self.timeline: list[tuple[str, Any]] = []  # ("status", status) and ("POST"/"DELETE", path), in order
        self.pod_events: list[tuple[str, str]] = []  # ("running" | "patched", pod name), in order
        self.pod_patches: list[tuple[str, Json]] = []  # (pod name, merge patch body), in order
        self.limiter = TokenBucket(1000, 1000)
        self.max_in_flight = 16
        self.requests = 0
        self.list_failures = 0  # the next N list requests fail (to test watch start-up failures)
        self.denied: set[tuple[str, str, str]] = set()  # (verb, resource, namespace) a SelfSubjectAccessReview denies
        # (method, path) -> what an admission policy says of a dry run of it (None: admitted)
        self.refused_by_admission: dict[tuple[str, str], str] = {}
        self.unbound_snapshot_deletes: list[str] = []  # snapshots deleted before their bound finalizer was on
        self.unready_snapshot_deletes: list[str] = []  # snapshots deleted while still being taken (bound, not ready)
        self.unready_group_deletes: list[str] = []  # group snapshots deleted while being taken (the array keeps them)
        self.created: list[tuple[str, Json]] = []  # (collection path, body) of every create, in order
        self.attaches: list[tuple[str, str]] = []  # (PV, node) attached, in order (the attach/detach controller)
        self.groups_made_over_members: list[str] = []  # group snapshots made while a namesake's members linger
        self.loop: asyncio.AbstractEventLoop | None = None
        self.seed_cluster()

    @property
    def server(self) -> str:
        return f"fake:{id(self)}"

    def shared(self) -> FakeKube:
        return self

    # -- set-up ---------------------------------------------------------------------------------------------
    def seed_cluster(self) -> None:
        for index in range(3):
            self.put("nodes", "", {"metadata": {"name": f"node-{index}"}, "status": {
                "conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"pods": "110"}}})
        self.put("storageclasses", "", {"metadata": {"name": "sim"}, "provisioner": "sim.csibench.io",
                                        "volumeBindingMode": "Immediate", "parameters": {"latency": "0"},
                                        "allowVolumeExpansion": True})
        self.put("volumesnapshotclasses", "", {"metadata": {"name": "snap"}, "driver": "sim.csibench.io"})
        self.put("volumegroupsnapshotclasses", "", {"metadata": {"name": "group"}, "driver": "sim.csibench.io"})
        for name in ("gold", "bronze"):
            self.put("volumeattributesclasses", "", {"metadata": {"name": name}, "driverName": "sim.csibench.io",
                                                     "parameters": {"qosPolicy": name}})
        self.put("volumeattributesclasses", "", {"metadata": {"name": "foreign"}, "driverName": "other.example.com"})
        self.put("namespaces", "", {"metadata": {"name": "runs"}})

    def node_names(self) -> list[str]:
        with self.lock:  # read from the fake's timer threads while the engine's requests change the objects
            return sorted(name for (plural, _, name) in self.objects if plural == "nodes")

    def cordoned(self, node: str) -> bool:
        with self.lock:
            return (self.objects.get(("nodes", "", node), {}).get("spec") or {}).get("unschedulable") is True

    def put(self, plural: str, namespace: str, obj: Json, event: str = "ADDED") -> Json:
        with self.lock:
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", "2026-12-01T00:00:00Z")
            if namespace:
                meta["namespace"] = namespace
            meta["resourceVersion"] = str(next(self._version))
            self.objects[(plural, namespace, meta["name"])] = obj
            self._notify(plural, namespace, event, obj)
            return obj

    def remove(self, plural: str, namespace: str, name: str, uid: str | None = None) -> Json | None:
        """Remove an object (only the one with ``uid``, if given: a namesake created since stays)."""
        with self.lock:
            found = self.objects.get((plural, namespace, name))
            if found is None or (uid is not None and found["metadata"]["uid"] != uid):
                return None
            obj = self.objects.pop((plural, namespace, name), None)
            if obj is not None:
                obj["metadata"]["resourceVersion"] = str(next(self._version))
                self._notify(plural, namespace, "DELETED", obj)
        if obj is not None and plural == "pods":
            self._later(self.behaviour.release_delay, self._detach_unused)
            self._later(self.behaviour.release_delay, lambda: self._collect_garbage_of(namespace, obj))
        return obj

    def named(self, plural: str, namespace: str = "") -> dict[str, Json]:
        with self.lock:
            return {k[2]: v for k, v in self.objects.items() if k[0] == plural and k[1] == namespace}

    # -- the KubeApi surface ----------------------------------------------------------------------------------
    def close(self) -> None:
        with self.lock:
            for watcher in self._watchers:
                watcher.events.put(None)

    async def get(self, path: str, query: dict[str, str] | None = None) -> Json | None:
        self._count("GET", path)
        return self._read(path, query)

    async def create(self, path: str, body: Json, on_send: Callable[[float], None] | None = None,
                     dry_run: bool = False) -> bool:
        self._count("POST", path + ("?dryRun" if dry_run else ""))
        if not dry_run:
            self.timeline.append(("POST", f"{path}/{body['metadata'].get('name', '')}"))
            self.created.append((path, copy.deepcopy(body)))
        if on_send is not None:
            on_send(time.monotonic())
        plural, namespace, _name, _sub = self.parse(path)
        name = body["metadata"].get("name") or f"{body['metadata'].get('generateName', 'x')}{uuid.uuid4().hex[:5]}"
        refused = self.behaviour.refuse_create(plural, name)
        if refused is not None:
            raise refused
        if dry_run:
            return True
        with self.lock:
            if (plural, namespace, name) in self.objects:
                return False
            if namespace and ("namespaces", "", namespace) not in self.objects:
                raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
            obj = json.loads(json.dumps(body))
            obj["metadata"]["name"] = name
            self.put(plural, namespace, obj)
        self._react_to_create(plural, namespace, obj)
        return True

    async def delete(self, path: str, propagation: str = "Background", query: dict[str, str] | None = None,
                     on_send: Callable[[float], None] | None = None, uid: str | None = None,
                     grace_seconds: int | None = None) -> bool:
        self._count("DELETE", path)
        self.timeline.append(("DELETE", path))
        if on_send is not None:
            on_send(time.monotonic())
        plural, namespace, name, _sub = self.parse(path)
        if name is None:  # a collection
            self.collection_deletes.append((path, (query or {}).get("labelSelector", "")))
            labels = _labels_of((query or {}).get("labelSelector", ""))
            for obj_name, obj in list(self.named(plural, namespace).items()):
                if _matches(obj, labels):
                    self._delete_one(plural, namespace, obj_name)
            return True
        with self.lock:
            found = self.objects.get((plural, namespace, name))
            if found is None:
                return False
            if uid is not None and found["metadata"]["uid"] != uid:
                raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
        self._delete_one(plural, namespace, name)
        return True

    async def admits(self, method: str, path: str, body: Json) -> str | None:
        self._count(f"{method} (dry run)", path)
        return self.refused_by_admission.get((method, path))

    async def can_i(self, verb: str, resource: str, namespace: str, group: str = "") -> bool:
        self._count("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
        return (verb, resource, namespace) not in self.denied

    async def merge_patch(self, path: str, body: Json, on_send: Callable[[float], None] | None = None) -> Json | None:
        self._count("PATCH", path)
        if on_send is not None:
            on_send(time.monotonic())
        plural, namespace, name, sub = self.parse(path)
        sent = len(json.dumps(body))
        if sent > MAX_REQUEST_BYTES:  # the API server's limit on a request's body
            raise ApiError(413, "RequestEntityTooLarge", "the request is too large")
        with self.lock:
            key = (plural, namespace, name or "")
            obj = self.objects.get(key)
            if obj is None:
                return None
            if sent + len(json.dumps(obj)) > MAX_OBJECT_BYTES:  # maybe over etcd's limit on one value: merge to see
                merged = copy.deepcopy(obj)
                _merge(merged, body)
                if len(json.dumps(merged)) > MAX_OBJECT_BYTES:
                    raise ApiError(500, "InternalError", "etcdserver: request is too large")
            uid = (body.get("metadata") or {}).get("uid")
            if uid is not None and uid != obj["metadata"]["uid"]:  # the API server: metadata.uid is immutable
                raise ApiError(422, "Invalid", f'{plural} "{name}" is invalid: metadata.uid: field is immutable')
            if sub == "status":
                self.status_patches.append(json.loads(json.dumps(body["status"])))
                _merge(obj.setdefault("status", {}), body["status"])
                self.status_writes.append(json.loads(json.dumps(obj["status"])))
                self.timeline.append(("status", self.status_writes[-1]))
            else:
                requested = _requested(obj) if plural == "persistentvolumeclaims" else None
                attributes = (obj.get("spec") or {}).get("volumeAttributesClassName")
                _merge(obj, {k: v for k, v in body.items() if k != "status"})
                if plural == "pods":
                    self.pod_events.append(("patched", name or ""))
                    self.pod_patches.append((name or "", copy.deepcopy(body)))
                if plural == "pods" and (obj.get("status") or {}).get("phase") == "Running":
                    self._run_to_completion(namespace, obj)  # a start time it waited for may have come
                if requested is not None and _requested(obj) != requested and obj.get("status", {}).get("capacity"):
                    self._resize(namespace, obj)
                wanted = (obj.get("spec") or {}).get("volumeAttributesClassName")
                if plural == "persistentvolumeclaims" and wanted and wanted != attributes:
                    self._modify(namespace, obj, wanted)
            self.put(plural, namespace, obj, "MODIFIED")
            return obj

    def _run_to_completion(self, namespace: str, pod: Json) -> None:
        """A Running pod that runs once (restartPolicy Never) does its work and ends, unless it still waits for
        the annotation its downwardAPI volume shows it (then it ends when that is set)."""
        awaited = awaited_annotation(pod)
        if pod["spec"].get("restartPolicy") != "Never" or \
                (awaited is not None and awaited not in (pod["metadata"].get("annotations") or {})):
            return
        code, log = self.behaviour.workload(pod)
        self.pod_logs[(namespace, pod["metadata"]["name"])] = log
        pod["status"] = {"phase": "Succeeded" if code == 0 else "Failed"}

    def request_sync(self, method: str, path: str, body: Json | None = None,
                     query: dict[str, str] | None = None) -> Json:
        """Only reads (the watch threads list through here); a missing object is a 404, as from the server."""
        self._count(method, path)
        found = self._read(path, query)
        if found is None:
            raise ApiError(404, "NotFound", f"{path} not found")
        return found

    async def text(self, path: str, query: dict[str, str] | None = None) -> str:
        """pods/log: what the pod's container wrote (404 for a pod that never ran)."""
        self._count("GET", path)
        _plural, namespace, name, _sub = self.parse(path)
        found = self.pod_logs.get((namespace, name or ""))
        if found is None:
            raise ApiError(404, "NotFound", f"{path} not found")
        return found

    def _read(self, path: str, query: dict[str, str] | None) -> Json | None:
        if path == "/version":
            return {"gitVersion": "v1.36.3-fake"}
        if path == "/apis/snapshot.storage.k8s.io/v1":
            return {"kind": "APIResourceList"} if self.behaviour.snapshots_served else None
        if path == "/apis/groupsnapshot.storage.k8s.io/v1":
            return {"kind": "APIResourceList"} if self.behaviour.group_snapshots_served else None
        plural, namespace, name, _sub = self.parse(path)
        with self.lock:
            if name is not None:
                if plural == "serviceaccounts" and name == "default":
                    exists = ("namespaces", "", namespace) in self.objects
                    return {"metadata": {"name": "default", "namespace": namespace}} if exists else None
                found = self.objects.get((plural, namespace, name))
                return json.loads(json.dumps(found)) if found is not None else None
            if self.list_failures > 0:
                self.list_failures -= 1
                raise ApiError(500, "InternalError", "injected list failure")
            labels = _labels_of((query or {}).get("labelSelector", ""))
            items = [json.loads(json.dumps(o)) for k, o in self.objects.items()
                     if k[0] == plural and (not namespace or k[1] == namespace) and _matches(o, labels)
                     and _field_ok(o, (query or {}).get("fieldSelector", ""))]
            return {"items": items, "metadata": {"resourceVersion": str(next(self._version))}}

    def stream(self, path: str, query: dict[str, str]) -> FakeResponse:
        self._count("WATCH", path)
        plural, namespace, _name, _sub = self.parse(path)
        watcher = _Watcher(plural, namespace, _labels_of(query.get("labelSelector", "")),
                           query.get("fieldSelector", "") == "type=Warning", queue.Queue())
        since = int(query.get("resourceVersion") or 0)
        with self.lock:  # like the API server: every change after the listed version, then live ones
            for version, event_plural, event_namespace, line, obj in self._history:
                if version > since and self._wants(watcher, event_plural, event_namespace, obj):
                    watcher.events.put(line)
            self._watchers.append(watcher)

        def closed() -> None:
            with self.lock, contextlib.suppress(ValueError):
                self._watchers.remove(watcher)
        return FakeResponse(watcher.events, closed)

    # -- helpers ---------------------------------------------------------------------------------------------
    def _count(self, verb: str, path: str) -> None:
        with self.lock:
            self.requests += 1
            self.log.append((verb, path))

    @staticmethod
    def parse(path: str) -> tuple[str, str, str | None, str | None]:
        """'/api/v1/namespaces/ns/pods/p/status' -> ('pods', 'ns', 'p', 'status')."""
        path = path.split("?", 1)[0]
        parts = [unquote(p) for p in path.strip("/").split("/")]
        parts = parts[2:] if parts[0] == "api" else parts[3:]
        namespace = ""
        if len(parts) > 2 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        plural = parts[0]
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        if plural in CLUSTER_SCOPED:
            namespace = ""
        return plural, namespace, name, sub

    def _notify(self, plural: str, namespace: str, event: str, obj: Json) -> None:
        line = json.dumps({"type": event, "object": _as_served(plural, obj)}, separators=(",", ":"),
                          sort_keys=plural in CUSTOM_RESOURCES).encode() + b"\n"
        self._history.append((int(obj["metadata"]["resourceVersion"]), plural, namespace, line, obj))
        for watcher in self._watchers:
            if self._wants(watcher, plural, namespace, obj):
                watcher.events.put(line)

    @staticmethod
    def _wants(watcher: _Watcher, plural: str, namespace: str, obj: Json) -> bool:
        return (watcher.plural == plural and (not watcher.namespace or watcher.namespace == namespace)
                and _matches(obj, watcher.labels) and (not watcher.warnings_only or obj.get("type") == "Warning"))

    def _later(self, delay: float, action: Callable[[], object]) -> None:
        """Controllers act on their own threads, as the cluster's would, whatever the engine's event loop does."""
        timer = threading.Timer(delay, action)
        timer.daemon = True
        timer.start()

    def _react_to_create(self, plural: str, namespace: str, obj: Json) -> None:
        name, behaviour = obj["metadata"]["name"], self.behaviour
        if plural == "persistentvolumeclaims":
            if name in behaviour.provisioning_fails:
                self._later(behaviour.bind_delay, lambda: self.warn(obj, "ProvisioningFailed", "injected failure"))
            elif name not in behaviour.never_bind:
                self._later(behaviour.bind_delay, lambda: self._bind(namespace, name))
        elif plural == "persistentvolumes" and (ref := (obj.get("spec") or {}).get("claimRef")):
            # The PV controller's volume sync: a pre-bound PV binds the Pending claim that names it.
            claim = self.objects.get(("persistentvolumeclaims", ref.get("namespace", ""), ref.get("name", "")))
            if claim is not None and (claim.get("spec") or {}).get("volumeName") == name and \
                    (claim.get("status") or {}).get("phase") != "Bound":
                self._later(behaviour.bind_delay, lambda: self._bind(ref["namespace"], ref["name"]))
        elif plural == "pods":
            uid = obj["metadata"]["uid"]
            self._make_ephemeral_claims(namespace, obj)
            self._later(behaviour.ready_delay, lambda: self._ready(namespace, name, uid))
        elif plural == "volumesnapshots" and not obj["metadata"].get("ownerReferences"):
            uid = obj["metadata"]["uid"]
            self._later(behaviour.snapshot_delay, lambda: self._snapshot_ready(namespace, name, uid))
        elif plural == "volumegroupsnapshots":
            if any(ref.get("name") == name for member in self.named("volumesnapshots", namespace).values()
                   for ref in member["metadata"].get("ownerReferences") or []):
                self.groups_made_over_members.append(name)  # upstream's controller would adopt them: stuck
            self._later(behaviour.snapshot_delay, lambda: self._group_snapshot_ready(namespace, obj))

    def _make_ephemeral_claims(self, namespace: str, pod: Json) -> None:
        """The controller-manager's ephemeral-volume controller: a claim per generic ephemeral volume, from its
        template (labels included), named ``<pod>-<volume>`` and owned by the pod."""
        owner = {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        for volume in pod["spec"].get("volumes") or []:
            template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
            if template is None:
                continue
            claim = {"metadata": {**copy.deepcopy(template.get("metadata") or {}),
                                  "name": f"{pod['metadata']['name']}-{volume['name']}", "ownerReferences": [owner]},
                     "spec": copy.deepcopy(template["spec"])}
            self.put("persistentvolumeclaims", namespace, claim)
            self._react_to_create("persistentvolumeclaims", namespace, claim)

    def _collect_garbage_of(self, namespace: str, pod: Json) -> None:
        """The garbage collector: a deleted pod's owned claims (its ephemeral volumes') are deleted."""
        uid = pod["metadata"]["uid"]
        owned = [name for name, claim in self.named("persistentvolumeclaims", namespace).items()
                 if any(ref.get("uid") == uid for ref in claim["metadata"].get("ownerReferences") or [])]
        for name in owned:
            self._delete_one("persistentvolumeclaims", namespace, name)

    def _modify(self, namespace: str, claim: Json, wanted: str) -> None:
        """The resizer's modify controller on a claim whose VolumeAttributesClass changed: InProgress, then the
        class in effect; a class in ``modify_infeasible`` is refused (Infeasible, and the resizer's Warning)."""
        name, uid, delay = claim["metadata"]["name"], claim["metadata"]["uid"], self.behaviour.resize_delay

        def status(**fields: Any) -> Callable[[Json], None]:
            def change(obj: Json) -> None:
                if obj["metadata"]["uid"] == uid:  # not a namesake made since (a restore's)
                    obj.setdefault("status", {}).update(fields)
                    if "currentVolumeAttributesClassName" in fields:
                        obj["status"].pop("modifyVolumeStatus", None)
            return change

        progress = {"targetVolumeAttributesClassName": wanted, "status": "InProgress"}
        self._update("persistentvolumeclaims", namespace, name, status(modifyVolumeStatus=progress))
        if wanted in self.behaviour.modify_infeasible:
            refused = {"targetVolumeAttributesClassName": wanted, "status": "Infeasible"}
            self._later(delay, lambda: self.warn(claim, "VolumeModifyFailed", "rpc error: code = InvalidArgument "
                                                 "desc = injected: the class's parameters are refused"))
            self._later(delay, lambda: self._update("persistentvolumeclaims", namespace, name,
                                                    status(modifyVolumeStatus=refused)))
            return
        self._later(delay, lambda: self._update("persistentvolumeclaims", namespace, name,
                                                status(currentVolumeAttributesClassName=wanted)))

    def _resize(self, namespace: str, claim: Json) -> None:
        """The resizer and the kubelet on a claim whose request grew: a filesystem claim passes through
        FileSystemResizePending (the controller's half done, the node's to come) and its capacity says the new size
        once a pod mounts it (the kubelet's half; with no pod it stays pending, as on a cluster); a block claim
        gets there at once; a claim in ``resize_fails`` gets VolumeResizeFailed."""
        name, delay = claim["metadata"]["name"], self.behaviour.resize_delay
        if name in self.behaviour.resize_fails:
            self._later(delay, lambda: self.warn(claim, "VolumeResizeFailed", "injected expansion failure"))
            return

        uid = claim["metadata"]["uid"]

        def node_pending(obj: Json) -> None:
            if obj["metadata"]["uid"] == uid:  # not a namesake made since (a restore's)
                obj["status"].update(conditions=[{"type": "FileSystemResizePending", "status": "True"}],
                                     allocatedResourceStatuses={"storage": "NodeResizePending"})

        def finished(obj: Json) -> None:
            if obj["metadata"]["uid"] == uid:
                obj["status"].update(capacity={"storage": _requested(obj)})
                obj["status"].pop("conditions", None)
                obj["status"].pop("allocatedResourceStatuses", None)

        def node_half() -> None:
            if self._mounted(namespace, name):
                self._update("persistentvolumeclaims", namespace, name, finished)
        if (claim.get("spec") or {}).get("volumeMode") == "Block":
            self._later(delay, lambda: self._update("persistentvolumeclaims", namespace, name, finished))
            return
        self._later(delay, lambda: self._update("persistentvolumeclaims", namespace, name, node_pending))
        self._later(2 * delay, node_half)

    def _mounted(self, namespace: str, claim: str) -> bool:
        """A pod of the namespace mounts the claim."""
        with self.lock:
            return any(key[0] == "pods" and key[1] == namespace and claim in claim_names(pod)
                       for key, pod in self.objects.items())

    def warn_repeated(self, obj: Json, reason: str, message: str) -> None:
        """A Warning the event recorder aggregates: one Event per object, reason and message, its count growing."""
        meta = obj["metadata"]
        name = f"{meta['name']}.{hashlib.sha256((meta['uid'] + reason + message).encode()).hexdigest()[:8]}"
        existing = self.objects.get(("events", meta.get("namespace", ""), name))
        if existing is None:
            self.put("events", meta.get("namespace", ""), {
                "metadata": {"name": name}, "type": "Warning", "reason": reason, "message": message, "count": 1,
                "involvedObject": {"uid": meta["uid"], "name": meta["name"]}})
        else:
            self._update("events", meta.get("namespace", ""), name,
                         lambda event: event.__setitem__("count", event["count"] + 1))

    def warn(self, obj: Json, reason: str, message: str) -> None:
        meta = obj["metadata"]
        self.put("events", meta.get("namespace", ""), {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:6]}"}, "type": "Warning", "reason": reason,
            "message": message, "involvedObject": {"uid": meta["uid"], "name": meta["name"]}})

    def _update(self, plural: str, namespace: str, name: str, change: Callable[[Json], None]) -> None:
        """Apply a controller's change to an object that still exists, as a MODIFIED event."""
        with self.lock:
            obj = self.objects.get((plural, namespace, name))
            if obj is not None:
                change(obj)
                self.put(plural, namespace, obj, "MODIFIED")

    def _bind(self, namespace: str, name: str) -> None:
        def bind_static(claim: Json) -> None:  # the PV controller: a claim naming a PV made for it (pre-bound)
            if ("persistentvolumes", "", claim["spec"]["volumeName"]) in self.objects:
                claim["status"] = {"phase": "Bound", "capacity": {"storage": _requested(claim)}}

        def bind(claim: Json) -> None:
            if claim.get("spec", {}).get("volumeName"):
                bind_static(claim)
                return
            pv = f"pvc-{claim['metadata']['uid']}"
            zone = self.behaviour.volume_zone(name)
            affinity = {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}} if zone else {}
            body = {"metadata": {"name": pv}, "spec": {"claimRef": {
                "namespace": namespace, "name": name, "uid": claim["metadata"]["uid"]}, **affinity,
                "csi": {"driver": FAKE_DRIVER, "volumeHandle": f"handle-{pv}"}}}
            if self.behaviour.pv_delay:
                self._later(self.behaviour.pv_delay, lambda: self.put("persistentvolumes", "", body))
            else:
                self.put("persistentvolumes", "", body)
            claim.setdefault("spec", {})["volumeName"] = pv
            claim["status"] = {"phase": "Bound", "capacity": {"storage": _requested(claim)}}
        self._update("persistentvolumeclaims", namespace, name, bind)

    def _ready(self, namespace: str, name: str, uid: str) -> None:
        """The pod of this uid scheduled, attached and running. A timer of a pod deleted since does nothing, even
        when a namesake exists by now (a moved pod's successor): it must not run that one on its own node."""
        pod_now = self.objects.get(("pods", namespace, name))
        if pod_now is None or pod_now["metadata"]["uid"] != uid:
            return
        if self._claims_binding(namespace, pod_now):
            # A pod runs only once its claims are bound (the scheduler binds a WaitForFirstConsumer claim first):
            # on a busy machine a claim's bind timer can fire after the pod's.
            self._later(0.01, lambda: self._ready(namespace, name, uid))
            return
        if any(claim in self.behaviour.provisioning_fails for claim in claim_names(pod_now)):
            return  # the scheduler keeps it Pending: "pod has unbound immediate PersistentVolumeClaims"
        node = _pinned_node(pod_now) if not self.behaviour.ignore_pinning else "node-0"
        if node == "node-0" and not _pinned(pod_now):  # the scheduler passes over a cordoned node
            node = next((n for n in self.node_names() if not self.cordoned(n)), node)
        if self._held_elsewhere(namespace, pod_now, node):
            # ReadWriteOnce: the attach/detach controller says Multi-Attach (one Event, its count growing) and
            # tries again until the old node's attachment is gone.
            self.warn_repeated(pod_now, "FailedAttachVolume", "Multi-Attach error for volume: Volume is already "
                               "exclusively attached to one node and can't be attached to another")
            self._later(0.02, lambda: self._ready(namespace, name, uid))
            return
        if self.behaviour.start_delay > 0:  # scheduled (bound to its node) before its volumes attach
            self._update_if_same("pods", namespace, name, uid,
                                 lambda pod: pod["spec"].__setitem__("nodeName", node))
        self._attach(namespace, pod_now, node)

        def ready(pod: Json) -> None:
            pod["spec"]["nodeName"] = node
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            self.pod_events.append(("running", pod["metadata"]["name"]))
            self._run_to_completion(namespace, pod)
        if self.behaviour.start_delay > 0:
            self._later(self.behaviour.start_delay, lambda: self._update_if_same("pods", namespace, name, uid, ready))
            return
        self._update_if_same("pods", namespace, name, uid, ready)

    def _claims_binding(self, namespace: str, pod: Json) -> bool:
        """Whether a claim of the pod exists, is not bound yet and will be (its bind timer has not fired)."""
        behaviour = self.behaviour
        for name in claim_names(pod):
            claim = self.objects.get(("persistentvolumeclaims", namespace, name))
            if claim is not None and (claim.get("status") or {}).get("phase") != "Bound" and \
                    name not in behaviour.never_bind and name not in behaviour.provisioning_fails:
                return True
        return False

    def _attach(self, namespace: str, pod: Json, node: str) -> None:
        """The attach/detach controller and external-attacher: an attached VolumeAttachment per bound claim of the
        pod on its node, before the pod runs (``attaches`` counts them)."""
        for claim_name in claim_names(pod):
            claim = self.objects.get(("persistentvolumeclaims", namespace, claim_name))
            pv = ((claim or {}).get("spec") or {}).get("volumeName")
            if pv and ("volumeattachments", "", f"csi-{pv}-{node}") not in self.objects:
                self.attaches.append((pv, node))
                self.put("volumeattachments", "", {"metadata": {"name": f"csi-{pv}-{node}"}, "spec": {
                    "attacher": "sim.csibench.io", "nodeName": node, "source": {"persistentVolumeName": pv}},
                    "status": {"attached": True}})

    def _held_elsewhere(self, namespace: str, pod: Json, node: str) -> bool:
        """A single-node volume of the pod (not ReadWriteMany or ReadOnlyMany) is attached to another node."""
        volumes = set(self._volumes_of(namespace, pod, single_node_only=True))
        with self.lock:
            return any(va["spec"]["source"]["persistentVolumeName"] in volumes and va["spec"]["nodeName"] != node
                       for (plural, _, _), va in self.objects.items() if plural == "volumeattachments")

    def _detach_unused(self) -> None:
        """Detach what no pod on the attachment's node mounts any more."""
        with self.lock:
            used = {(pv, pod["spec"].get("nodeName")) for (plural, namespace, _), pod in self.objects.items()
                    if plural == "pods" for pv in self._volumes_of(namespace, pod)}
            stale = [name for (plural, _, name), va in self.objects.items() if plural == "volumeattachments"
                     and (va["spec"]["source"]["persistentVolumeName"], va["spec"]["nodeName"]) not in used]
        for name in stale:
            self.remove("volumeattachments", "", name)

    def _volumes_of(self, namespace: str, pod: Json, single_node_only: bool = False) -> list[str]:
        claims = [self.objects.get(("persistentvolumeclaims", namespace, claim)) or {} for claim in claim_names(pod)]
        shared = {"ReadWriteMany", "ReadOnlyMany"}
        return [pv for claim in claims if not (single_node_only and shared & set(
                    (claim.get("spec") or {}).get("accessModes") or []))
                if (pv := (claim.get("spec") or {}).get("volumeName"))]

    def _snapshot_ready(self, namespace: str, name: str, uid: str) -> None:
        """The snapshot-controller's content, then the binding and its bound finalizer. Like the real controller, it
        may already be creating the content when the snapshot is deleted unbound: the content is created all the
        same, and nothing would ever delete it (``unbound_snapshot_deletes`` counts such deletes)."""
        snapshot_now = self.objects.get(("volumesnapshots", namespace, name)) or {}
        given = ((snapshot_now.get("spec") or {}).get("source") or {}).get("volumeSnapshotContentName")
        if given:  # pre-provisioned: bound to the content made for it, whose handle csi-snapshotter checked
            def bound_given(snapshot: Json) -> None:
                if ("volumesnapshotcontents", "", given) in self.objects:
                    snapshot["status"] = {"readyToUse": True, "boundVolumeSnapshotContentName": given}
            self._update_if_same("volumesnapshots", namespace, name, uid, bound_given)
            return
        content = f"snapcontent-{uid}"
        self.put("volumesnapshotcontents", "", {"metadata": {"name": content}, "spec": {
            "driver": FAKE_DRIVER, "deletionPolicy": "Delete",
            "volumeSnapshotRef": {"namespace": namespace, "name": name, "uid": uid}},
            "status": {"snapshotHandle": f"handle-{content}"}})

        cut = self.behaviour.snapshot_cut_delay

        def bound(snapshot: Json) -> None:
            snapshot["status"] = {"readyToUse": cut == 0, "boundVolumeSnapshotContentName": content}
            snapshot["metadata"].setdefault("finalizers", []).append(SNAPSHOT_BOUND_FINALIZER)

        def ready(snapshot: Json) -> None:
            snapshot["status"]["readyToUse"] = True
        self._update_if_same("volumesnapshots", namespace, name, uid, bound)
        if cut:
            self._later(cut, lambda: self._update_if_same("volumesnapshots", namespace, name, uid, ready))

    def _update_if_same(self, plural: str, namespace: str, name: str, uid: str, change: Callable[[Json], None]) -> None:
        with self.lock:
            current = self.objects.get((plural, namespace, name))
            if current is not None and current["metadata"]["uid"] == uid:  # not a namesake created since
                self._update(plural, namespace, name, change)

    def _group_snapshot_ready(self, namespace: str, group: Json) -> None:
        """The snapshot-controller's group content, then one member snapshot and content per selected claim (named
        after the group's uid and the volume, owned by the group, unlabelled), then the group ready and bound."""
        meta, uid = group["metadata"], group["metadata"]["uid"]
        selector = group["spec"]["source"]["selector"]["matchLabels"]
        content = f"groupsnapcontent-{uid}"
        self.put("volumegroupsnapshotcontents", "", {"metadata": {"name": content}, "spec": {
            "volumeGroupSnapshotRef": {"namespace": namespace, "name": meta["name"], "uid": uid}}})

        def taken(obj: Json) -> None:  # csi-snapshotter writes the storage's answer
            obj["status"] = {"volumeGroupSnapshotHandle": f"group-{uid}", "readyToUse": True}
        self._update("volumegroupsnapshotcontents", "", content, taken)
        for claim_name, claim in self.named("persistentvolumeclaims", namespace).items():
            if not _matches(claim, selector):
                continue
            digest = hashlib.sha256(f"{uid}{claim['spec'].get('volumeName', '')}".encode()).hexdigest()
            member, member_content = f"snapshot-{digest}", f"snapcontent-{digest}"
            self.put("volumesnapshotcontents", "", {"metadata": {"name": member_content, "annotations": {
                GROUP_HANDLE: content}}, "spec": {"volumeSnapshotRef": {"namespace": namespace, "name": member}}})
            self.put("volumesnapshots", namespace, {"metadata": {"name": member, "ownerReferences": [
                {"kind": "VolumeGroupSnapshot", "name": meta["name"], "uid": uid}],
                "finalizers": [SNAPSHOT_BOUND_FINALIZER]},
                "spec": {"source": {"persistentVolumeClaimName": claim_name}},
                "status": {"readyToUse": True, "boundVolumeSnapshotContentName": member_content}})

        def ready(obj: Json) -> None:
            if obj["metadata"]["uid"] == uid:
                obj["status"] = {"readyToUse": True, "boundVolumeGroupSnapshotContentName": content}
                obj["metadata"].setdefault("finalizers", []).append(GROUP_BOUND_FINALIZER)
        self._update("volumegroupsnapshots", namespace, meta["name"], ready)

    def _delete_group_members(self, namespace: str, group: Json) -> None:
        """As the snapshot-controller: the group goes at once, its members and contents after it."""
        delay, uid = self.behaviour.release_delay, group["metadata"]["uid"]
        for name, member in self.named("volumesnapshots", namespace).items():
            if any(ref.get("uid") == uid for ref in member["metadata"].get("ownerReferences") or []):
                self._later(delay, functools.partial(self.remove, "volumesnapshots", namespace, name))
                content: str = (member.get("status") or {}).get("boundVolumeSnapshotContentName", "")
                self._later(2 * delay, functools.partial(self.remove, "volumesnapshotcontents", "", content))
        group_content = (group.get("status") or {}).get("boundVolumeGroupSnapshotContentName", "")
        self._later(delay, lambda: self.remove("volumegroupsnapshotcontents", "", group_content))

    def _reclaimed(self, plural: str, name: str, policy: str) -> bool:
        """Whether the PV or content goes with its claim or snapshot: not when it is Retain (it stays, Released)."""
        found = self.objects.get((plural, "", name)) or {}
        return bool((found.get("spec") or {}).get(policy, "Delete") != "Retain")

    def _delete_one(self, plural: str, namespace: str, name: str) -> None:
        if plural == "pods" and self.behaviour.pod_termination > 0:
            def terminating(pod: Json) -> None:
                pod["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:01Z"
            self._update(plural, namespace, name, terminating)
            uid = self.objects[(plural, namespace, name)]["metadata"]["uid"]
            self._later(self.behaviour.pod_termination, lambda: self.remove(plural, namespace, name, uid))
            return
        kept = self.objects.get((plural, namespace, name))
        if plural in self.behaviour.finalizers_kept and kept is not None and kept["metadata"].get("finalizers"):
            def marked(obj: Json) -> None:
                obj["metadata"].setdefault("deletionTimestamp", "2026-12-01T00:00:01Z")
            self._update(plural, namespace, name, marked)
            return
        obj = self.remove(plural, namespace, name)
        if obj is None:
            return
        if plural == "volumegroupsnapshots":
            if not (obj.get("status") or {}).get("readyToUse"):
                self.unready_group_deletes.append(name)
            self._delete_group_members(namespace, obj)
        if plural == "volumesnapshots" and SNAPSHOT_BOUND_FINALIZER not in (obj["metadata"].get("finalizers") or []):
            self.unbound_snapshot_deletes.append(name)
        elif plural == "volumesnapshots" and not (obj.get("status") or {}).get("readyToUse"):
            self.unready_snapshot_deletes.append(name)
        delay = self.behaviour.release_delay
        if plural == "persistentvolumeclaims" and (obj.get("spec") or {}).get("volumeName"):
            if self._reclaimed("persistentvolumes", obj["spec"]["volumeName"], "persistentVolumeReclaimPolicy"):
                self._later(delay, lambda: self.remove("persistentvolumes", "", obj["spec"]["volumeName"]))
        elif plural == "volumesnapshots" and (obj.get("status") or {}).get("boundVolumeSnapshotContentName"):
            content = obj["status"]["boundVolumeSnapshotContentName"]
            if self._reclaimed("volumesnapshotcontents", content, "deletionPolicy"):
                self._later(delay, lambda: self.remove("volumesnapshotcontents", "", content))
        elif plural == "namespaces":
            for key in [k for k in list(self.objects) if k[1] == name]:
                self._delete_one(key[0], key[1], key[2])


def awaited_annotation(pod: Json) -> str | None:
    """The annotation a pod's container waits for before it starts its work: the one its downwardAPI volume
    shows it (the data path's start barrier), if any."""
    for volume in pod["spec"].get("volumes") or []:
        for item in (volume.get("downwardAPI") or {}).get("items") or []:
            path = (item.get("fieldRef") or {}).get("fieldPath", "")
            if path.startswith("metadata.annotations['"):
                return str(path.removeprefix("metadata.annotations['").removesuffix("']"))
    return None


def _merge(target: Json, patch: Json) -> None:
    """JSON merge patch (RFC 7386): null deletes, objects merge, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


_ABSENT, _PRESENT = object(), object()  # a selector's "!key" and "key"


def _labels_of(selector: str) -> dict[str, Any]:
    """A label selector of equalities, "key" (exists) and "!key" (does not exist), as ``_matches`` reads it."""
    wanted: dict[str, Any] = {}
    for part in filter(None, selector.split(",")):
        if "=" in part:
            key, value = part.split("=", 1)
            wanted[key] = value
        elif part.startswith("!"):
            wanted[part[1:]] = _ABSENT
        else:
            wanted[part] = _PRESENT
    return wanted


def _matches(obj: Json, labels: dict[str, Any]) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    return all((k not in have) if v is _ABSENT else (k in have) if v is _PRESENT else have.get(k) == v
               for k, v in labels.items())


def _field_ok(obj: Json, selector: str) -> bool:
    """The field selectors csibench sends (each "path=value" of a comma-separated list must hold): Warning events
    (of one object), Running pods (preflight discovery), one object by name."""
    for part in filter(None, selector.split(",")):
        path, _, value = part.partition("=")
        found: Any = obj
        for key in path.split("."):
            found = found.get(key) if isinstance(found, dict) else None
        if str(found) != value:
            return False
    return True


# Custom resources are written by the API server with every object's keys sorted; built-in kinds in Go struct
# order (kind, apiVersion, metadata with its name first, then the rest).
CUSTOM_RESOURCES = {"volumesnapshots", "volumesnapshotcontents", "benchmarkruns", "volumegroupsnapshots",
                    "volumegroupsnapshotcontents"}


def _as_served(plural: str, obj: Json) -> Json:
    """The object in the API server's field order for a built-in kind (custom resources: sorted on dumping), as
    the watch threads' raw-line tests (engine/relevance.py) meet it."""
    meta = obj.get("metadata") or {}
    ordered_meta = {**({"name": meta["name"]} if "name" in meta else {}), **meta}
    head: Json = {key: obj[key] for key in ("kind", "apiVersion") if key in obj}
    return {**head, "metadata": ordered_meta, **{k: v for k, v in obj.items() if k not in head and k != "metadata"}}
