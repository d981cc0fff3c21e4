"""The simulated CSI driver: Identity, Controller and Node services over unix sockets, the array model behind them.

The real sidecars (external-provisioner, external-attacher, external-snapshotter, external-resizer) call the
Controller service on one socket, as they would a vendor's controller plugin; the simulated kubelet calls the Node
service on one socket per simulated node, as a kubelet calls the node plugin on its own node. Every call that
reaches the array goes through ``Backend.run`` (latency, jitter, concurrency, injected failures, hangs, ground
truth), keyed by the StorageClass the volume was provisioned from:

- CreateVolume learns the class from the claim it is for: the provisioner runs with ``--extra-create-metadata``
  and passes the claim's namespace and name, and the claim names its class. The volume ID then carries the class
  (``<claim uid>@<class>``), so every later call (attach, snapshot, stage, delete) finds its array from the ID
  alone, as a real driver finds the array from its own handles.
- Calls are idempotent, as the CSI spec requires: a repeated call for a volume that exists, is attached or is
  staged answers at once, and a call for an operation still in flight joins it (a sidecar retries after its
  ``--timeout``; the array keeps working on the first request meanwhile). So the array performs each operation
  once, and the ground truth counts what the storage did, not how often it was asked.
- Injected failures are answered with ``INTERNAL``, the code drivers return for an array-side error; the
  sidecars turn it into their own Warning events and retry with their own backoff.

Each volume has a data directory (``<data dir>/volumes/<volume ID>``); a snapshot copies it and a restore copies
the snapshot, and NodeStage/NodePublish link the kubelet's staging and target paths to it. A volume whose
capability asks for ``fs_type: ext4`` (the class's ``csi.storage.k8s.io/fstype``) keeps a formatted image of its
capacity in that directory instead, and the paths lead to the image (``volumes.py``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from localcluster.csi import csi_pb2 as csi
from localcluster.csi import csi_pb2_grpc as csi_grpc
from localcluster.simulator import qos, volumes
from localcluster.simulator.backend import Backend, InjectedFailure
from localcluster.simulator.config import (
    CROSS_ZONE_PARAMETERS,
    DRIVER_NAME,
    HOME_ZONE_PARAMETER,
    TOPOLOGY_KEY,
    ZONAL_PARAMETER,
    ZONE_LABEL,
    ZONES,
    Operation,
    class_of_handle,
    pv_name_of_handle,
    volume_handle,
    zone_of_node,
)

log = logging.getLogger("simulator.driver")
VENDOR_VERSION = "0.1.0"
DEFAULT_CAPACITY = 1 << 30
# Keys the sidecars add to CreateVolume / CreateSnapshot parameters with --extra-create-metadata.
PVC_NAME = "csi.storage.k8s.io/pvc/name"
PVC_NAMESPACE = "csi.storage.k8s.io/pvc/namespace"
SNAPSHOT_NAME = "csi.storage.k8s.io/volumesnapshot/name"
SNAPSHOT_NAMESPACE = "csi.storage.k8s.io/volumesnapshot/namespace"


@dataclass(frozen=True)
class VolumeRecord:
    volume_id: str
    name: str  # the CreateVolume name (external-provisioner's PV name, ``pvc-<claim uid>``)
    capacity: int
    source_snapshot: str | None
    source_volume: str | None = None  # the volume it was cloned from
    mutable: tuple[tuple[str, str], ...] = ()  # its mutable parameters (a VolumeAttributesClass's), sorted
    kind: str = "directory"  # what holds its data: "directory", "ext4" (an image, loop-mounted) or "block"
    zone: str | None = None  # a zonal class's volume: the zone it lives in (attachable only from there)
    home_zone: str | None = None  # a homeZone class's volume: any node may use it, another zone's at a cost
    cross_zone: tuple[tuple[str, int], ...] = ()  # the limits (qos.py) it is held to when staged in another zone


@dataclass(frozen=True)
class SnapshotRecord:
    snapshot_id: str
    source_volume_id: str
    size: int
    created: float


# The operations the array's audit counts per object: one of them done twice for one object is work repeated (a
# create after the object was deleted, a delete of what was created again); attach and mount repeat by design.
AUDITED: dict[Operation, str] = {operation: operation.value for operation in (
    Operation.CREATE_VOLUME, Operation.CLONE_VOLUME, Operation.DELETE_VOLUME, Operation.CREATE_SNAPSHOT,
    Operation.DELETE_SNAPSHOT)}


def snapshot_id_of(name: str, storage_class: str) -> str:
    """Snapshot IDs carry the class of their source volume, like volume IDs (pure)."""
    return f"{name}@{storage_class}"


class ArrayContext(Protocol):
    """What the driver needs from around it: the array behind a class, and a claim's class (the simulator's
    ``Context`` reads it from the cluster; the standalone driver has no cluster)."""

    def backend(self, storage_class: str) -> Backend: ...

    async def storage_class_of_claim(self, namespace: str, name: str) -> str | None: ...

    def run_of_claim(self, namespace: str, name: str) -> str: ...


class Driver:
    """What the array and the driver remember between calls, and the operations that change it."""

    def __init__(self, ctx: ArrayContext, data_dir: Path, max_volumes_per_node: int = 128,
                 default_class: str | None = None) -> None:
        self.ctx = ctx
        self.data_dir = data_dir
        # What each node plugin reports in NodeGetInfo (CSINode allocatable.count; the scheduler honours it), and
        # how many volumes it stages at most: one more is refused, as a driver out of slots on the node would.
        self.max_volumes_per_node = max_volumes_per_node
        # The class of a CreateVolume that names no claim (the standalone driver's one class); None: refused.
        self.default_class = default_class
        self.nodes: set[str] = set()  # node IDs with a node plugin (serve() fills it): attach elsewhere is NOT_FOUND
        self.attaching: dict[str, set[str]] = {}  # node ID -> volume IDs whose ControllerPublishVolume is running
        self.volumes: dict[str, VolumeRecord] = {}  # by volume ID: the array's own records
        self.volume_names: dict[str, str] = {}  # CreateVolume name -> volume ID
        self.deleted_volumes: set[str] = set()  # volume IDs
        self.snapshots: dict[str, SnapshotRecord] = {}  # by snapshot ID
        self.snapshot_names: dict[str, str] = {}  # CreateSnapshot name -> snapshot ID
        self.deleted_snapshots: set[str] = set()
        self.groups: dict[str, GroupSnapshotRecord] = {}  # by group snapshot ID
        self.published: set[tuple[str, str]] = set()  # (volume ID, node ID)
        self.read_only: set[tuple[str, str]] = set()  # (volume ID, node ID) published read-only
        self.staged: set[tuple[str, str]] = set()  # (volume ID, node ID)
        self.staging_paths: dict[tuple[str, str], str] = {}  # (volume ID, node ID) -> staging target path
        # (volume ID, node ID) -> target path -> the access mode it was published with
        self.targets: dict[tuple[str, str], dict[str, int]] = {}
        self._in_flight: dict[tuple[str, ...], asyncio.Task[None]] = {}
        # IDs whose delete the array acknowledged without doing it (a class's leakEvery): they stay on the array
        self.leaked_volumes: set[str] = set()
        self.leaked_snapshots: set[str] = set()
        # For the array's audit (``audit.py``): which run each volume and snapshot is for (CreateVolume or
        # CreateSnapshot name -> the run's uid, "" for none; kept after the object goes), and how often the array
        # did each create and delete (operation, object name): more than once is an operation done twice.
        self.owners: dict[str, str] = {}
        self.performed: Counter[tuple[str, str]] = Counter()
        # ... and when it began each time after the first (epoch seconds): which disruption made it do them twice
        self.repeated_at: dict[tuple[str, str], list[float]] = {}

    def volume_named(self, name: str) -> VolumeRecord | None:
        volume_id = self.volume_names.get(name)
        return self.volumes.get(volume_id) if volume_id else None

    def creating(self) -> list[str]:
        """The CreateVolume and CreateSnapshot names of the creates still in flight on the array."""
        return [key[1] for key in self._in_flight if key[0] in ("volume", "snapshot")]

    def object_name(self, identifier: str) -> str:
        """The CreateVolume or CreateSnapshot name of a volume or snapshot, from that name or its ID."""
        if identifier in self.owners:
            return identifier
        snapshot = identifier.split("@", 1)[0]
        return snapshot if snapshot in self.owners else self.name_of(identifier)

    def name_of(self, volume_id: str) -> str:
        """The name a volume goes by in the ground truth: its CreateVolume name, or the PV name its handle implies
        when the array has no record of it."""
        record = self.volumes.get(volume_id)
        return record.name if record else pv_name_of_handle(volume_id)

    async def perform(self, operation: Operation, key: tuple[str, ...], storage_class: str, obj: str,
                      done: Callable[[], None], io: Callable[[], object] | None = None, extra_delay: float = 0.0,
                      **facts: object) -> None:
        """Run one array operation, or join the same one still in flight; ``done`` records its effect when it
        succeeds, even if the caller gave up waiting (the array finishes what it started). ``io`` is the
        operation's blocking file work (copying data, formatting), run in a thread before ``done``; ``facts``
        go into the ground truth with the operation."""
        task = self._in_flight.get(key)
        if task is None:
            async def operate() -> None:
                run = self.owners.get(self.object_name(key[1]), "")  # whose object: a run's fault window is its own
                began = time.time()
                await self.ctx.backend(storage_class).run(operation, obj, extra_delay, run_uid=run, **facts)
                if operation in AUDITED:  # done (a failed attempt and its retry are one operation done once)
                    audited = (AUDITED[operation], self.object_name(key[1]))
                    self.performed[audited] += 1
                    if self.performed[audited] > 1:
                        self.repeated_at.setdefault(audited, []).append(began)
                if io is not None:
                    await asyncio.to_thread(io)
                done()

            task = asyncio.get_running_loop().create_task(operate(), name=f"{operation.value}:{obj}")
            self._in_flight[key] = task
            task.add_done_callback(lambda finished: self._finished(key, finished))
        await asyncio.shield(task)

    async def leaked_delete(self, operation: Operation, delete_key: tuple[str, ...], object_id: str, obj: str,
                            present: bool, leaked: set[str]) -> bool:
        """Answer a delete the array acknowledges without doing it, and say so (True); False: the caller deletes.
        It is one when the ID was leaked before (a sidecar's retry: answered as before, recorded once) or when it
        is a new delete of an object the array holds that its class leaks (``leakEvery``). A retry joining a
        delete still in flight is no new delete, so retries never shift which deletes leak."""
        key, storage_class = (f"{operation.value}-leak", object_id), class_of_handle(object_id)
        if object_id in leaked:
            await self.settle(key)
            return True
        if delete_key in self._in_flight or not present or not self.ctx.backend(storage_class).leaks_next(operation):
            return False
        leaked.add(object_id)
        await self.perform(operation, key, storage_class, obj, lambda: None, leaked=True)  # the array keeps it
        return True

    async def settle(self, key: tuple[str, ...]) -> None:
        """Wait for the operation in flight under ``key``, if any, whatever its outcome: an undo (detach,
        unstage, delete) that arrives while its do is still running must act on the do's result."""
        task = self._in_flight.get(key)
        if task is not None:
            await asyncio.wait([task])

    def _finished(self, key: tuple[str, ...], task: asyncio.Task[None]) -> None:
        self._in_flight.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved here too: the caller that started it may have given up

    def volume_dir(self, volume_id: str) -> Path:
        return self.data_dir / "volumes" / volume_id

    def snapshot_dir(self, snapshot_id: str) -> Path:
        return self.data_dir / "snapshots" / snapshot_id


async def _fail(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str) -> Any:
    await context.abort(code, message)


Handler = TypeVar("Handler", bound=Callable[[Any, Any, Any], Awaitable[Any]])


def _array_errors(handler: Handler) -> Handler:
    """Injected failures, and the array's own file work failing (a copy, mkfs), become INTERNAL errors, as a
    driver reports an array-side error: the sidecar or the kubelet shows the message and retries."""
    @functools.wraps(handler)
    async def wrapped(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await handler(self, request, context)
        except (InjectedFailure, OSError) as failure:
            await context.abort(grpc.StatusCode.INTERNAL, str(failure))

    return cast(Handler, wrapped)


async def _require(context: grpc.aio.ServicerContext, **present: bool) -> None:
    """Refuse a request that lacks a required field (INVALID_ARGUMENT), before any lookup or array operation, as
    the CSI spec asks; the fields are named in the message."""
    missing = [name for name, given in present.items() if not given]
    if missing:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{', '.join(missing)} missing in request")


def _unsupported_capability(capability: Any) -> str | None:
    """Why the array cannot serve a volume capability, or None when it can (pure): it takes every access mode
    (a directory or an image is shared as the kubelet asks), mount (no fs_type, or ext4) and block."""
    if capability.access_mode.mode == csi.VolumeCapability.AccessMode.UNKNOWN:
        return "access mode missing"
    if capability.HasField("mount"):
        try:
            volumes.check_fs_type(capability.mount.fs_type)
        except volumes.UnsupportedFsType as error:
            return str(error)
        return None
    return None if capability.HasField("block") else "access type (mount or block) missing"


def _zones_in(topologies: Any) -> list[str]:
    """The array's zones the topologies name, by its own key or the well-known one, in order (pure)."""
    found = [t.segments.get(TOPOLOGY_KEY) or t.segments.get(ZONE_LABEL) for t in topologies]
    return [zone for zone in found if zone in ZONES]


def _zone_for(request: Any) -> str | None:
    """Where a zonal volume goes (pure): the first zone the provisioner prefers that it allows (the requisite, when
    it gives one: the CSI spec's MUST), else the first it allows; without topology, the array's own first zone.
    None: it allows none of the array's zones."""
    wanted = request.accessibility_requirements
    allowed = _zones_in(wanted.requisite)
    if wanted.requisite and not allowed:
        return None
    preferred = [zone for zone in _zones_in(wanted.preferred) if not allowed or zone in allowed]
    return (preferred or allowed or [ZONES[0]])[0]


def _source_zone_allowed(zone: str, request: Any) -> str | None:
    """A clone's zone (pure): its source's, as a zonal disk is copied only within its zone, when the request allows
    it (no requisite allows any); None when it does not."""
    allowed = _zones_in(request.accessibility_requirements.requisite)
    return zone if not allowed or zone in allowed else None


def _kind_of(request: Any) -> str:
    """What will hold a new volume's data (pure): a raw device, an ext4 image, or a directory."""
    if any(c.HasField("block") for c in request.volume_capabilities):
        return "block"
    fs_type = next((c.mount.fs_type for c in request.volume_capabilities if c.HasField("mount")), "")
    return "ext4" if fs_type == "ext4" else "directory"


def _enforce(volume_dir: Path, limits: qos.Limits) -> None:
    """A modify's limits: set at once on the loop devices that containers have on the volume's image now (a
    running fio sees the new policy; with the cross-zone limits of the node it is staged on, when lower), then kept
    beside the data for the next mount; a host that cannot set them leaves the kept ones as they were."""
    held = qos.lower(limits, qos.cross_zone(volume_dir))
    for device in volumes.loop_devices_of(volumes.image_of(volume_dir)):
        qos.apply(device, held)
    qos.write(volume_dir, limits)


def home_zone_of(params: dict[str, str], kind: str) -> tuple[str | None, qos.Limits, str | None]:
    """A homeZone class's zone and cross-zone limits, and why they are refused (pure): the zone must be one of
    the array's, the limits whole numbers (``qos.parse``), and only an ext4 volume (a loop device) can be held
    to them; a class cannot be zonal and have a home zone at once."""
    home = params.get(HOME_ZONE_PARAMETER)
    named = {own: params[key] for key, own in CROSS_ZONE_PARAMETERS.items() if key in params}
    if home is None:
        return None, {}, (f"{', '.join(sorted(CROSS_ZONE_PARAMETERS))} need {HOME_ZONE_PARAMETER}" if named
                          else None)
    if home not in ZONES:
        return None, {}, f"{HOME_ZONE_PARAMETER} {home!r} is not one of the array's zones ({', '.join(ZONES)})"
    if params.get(ZONAL_PARAMETER) == "true":
        return None, {}, f"{HOME_ZONE_PARAMETER} and {ZONAL_PARAMETER} exclude each other"
    limits, refused = qos.parse(named)
    if refused:
        return None, {}, "cross-zone " + refused
    if limits and kind != "ext4":
        return None, {}, (f"cross-zone limits: the array throttles a volume's loop device, which only ext4 volumes "
                          f"have; this one is a {kind} volume")
    return home, limits, None


def _page(entries: list[Any], starting_token: str, max_entries: int) -> tuple[list[Any], str] | None:
    """One page of a listing: the token is the index of the page's first entry; None for a token that is not
    one (the caller answers ABORTED, as the CSI spec asks) (pure)."""
    start = int(starting_token) if starting_token.isdigit() else (0 if not starting_token else -1)
    if not 0 <= start <= len(entries):
        return None
    end = len(entries) if max_entries <= 0 else min(len(entries), start + max_entries)
    return entries[start:end], (str(end) if end < len(entries) else "")


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


# The mutable parameters (VolumeAttributesClass) the array takes: a QoS policy's name, which it records (the
# simulated latencies stay the class's), and the limits it enforces (``qos.py``: maxIOPS, maxMiBps, on the
# volume's loop device); a change is one array operation (modifyVolume), timed like the others.
MUTABLE_PARAMETERS = frozenset({"qosPolicy", *qos.PARAMETERS})


def _unsupported_mutable(parameters: Any, kind: str | None = None) -> str | None:
    """Why the array refuses these mutable parameters for a volume of ``kind`` (None: not known yet), or None
    (pure)."""
    unknown = sorted(set(parameters) - MUTABLE_PARAMETERS)
    if unknown:
        return f"mutable parameters {unknown} not supported (supported: {sorted(MUTABLE_PARAMETERS)})"
    empty = sorted(key for key, value in parameters.items() if not value)
    if empty:
        return f"mutable parameters {empty} have no value"
    limits, refused = qos.parse(dict(parameters))
    if refused:
        return refused
    if limits and kind is not None and kind != "ext4":
        return (f"{', '.join(sorted(limits))}: the array throttles a volume's loop device, which only ext4 volumes "
                f"(csi.storage.k8s.io/fstype: ext4) have; this one is a {kind} volume")
    return None


# What the array holds in all (GetCapacity): the simulator's arrays have no real limit; this is what they report.
ARRAY_CAPACITY = 1 << 50


class Identity(csi_grpc.IdentityServicer):
    """The plugin's identity, the same on the controller's socket and every node's, as a driver that runs one
    binary in both roles answers: the plugin offers a controller and a group controller service (on the
    controller's socket) and volume expansion."""

    async def GetPluginInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return csi.GetPluginInfoResponse(name=DRIVER_NAME, vendor_version=VENDOR_VERSION)

    async def GetPluginCapabilities(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        services = [csi.PluginCapability(service=csi.PluginCapability.Service(type=kind)) for kind in (
            csi.PluginCapability.Service.CONTROLLER_SERVICE, csi.PluginCapability.Service.GROUP_CONTROLLER_SERVICE,
            csi.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS)]
        # Volumes grow while pods use them, where the host lets a mounted ext4 filesystem grow (volumes.py).
        expansion = (csi.PluginCapability.VolumeExpansion.ONLINE if volumes.can_resize_online()
                     else csi.PluginCapability.VolumeExpansion.OFFLINE)
        online = csi.PluginCapability(volume_expansion=csi.PluginCapability.VolumeExpansion(type=expansion))
        return csi.GetPluginCapabilitiesResponse(capabilities=[*services, online])

    async def Probe(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        response = csi.ProbeResponse()
        response.ready.value = True
        return response


_RPC = csi.ControllerServiceCapability.RPC
# GET_CAPACITY is answered, but storage capacity tracking stays off in the local cluster (no --enable-capacity on
# the provisioner, no storageCapacity on the CSIDriver): the arrays have no limit worth scheduling around.
CONTROLLER_CAPABILITIES = (
    _RPC.CREATE_DELETE_VOLUME, _RPC.PUBLISH_UNPUBLISH_VOLUME, _RPC.CREATE_DELETE_SNAPSHOT, _RPC.EXPAND_VOLUME,
    _RPC.LIST_VOLUMES, _RPC.LIST_VOLUMES_PUBLISHED_NODES, _RPC.GET_VOLUME, _RPC.VOLUME_CONDITION,
    _RPC.LIST_SNAPSHOTS, _RPC.GET_SNAPSHOT, _RPC.GET_CAPACITY, _RPC.SINGLE_NODE_MULTI_WRITER, _RPC.MODIFY_VOLUME,
    _RPC.CLONE_VOLUME, _RPC.PUBLISH_READONLY,
)


class Controller(csi_grpc.ControllerServicer):
    """The controller plugin. Every call checks its required fields and the objects it names first: a refused
    call (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS) performs no array operation, so the ground truth counts
    only what the array did. Reads (List*, Get*, ValidateVolumeCapabilities) answer from the array's records and
    cost no operation."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def ControllerGetCapabilities(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return csi.ControllerGetCapabilitiesResponse(capabilities=[
            csi.ControllerServiceCapability(rpc=csi.ControllerServiceCapability.RPC(type=kind))
            for kind in CONTROLLER_CAPABILITIES])

    async def ValidateVolumeCapabilities(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _require(context, volume_id=bool(request.volume_id),
                       volume_capabilities=bool(request.volume_capabilities))
        if request.volume_id not in self.driver.volumes:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        reasons = [reason for reason in map(_unsupported_capability, request.volume_capabilities) if reason]
        if reasons:
            return csi.ValidateVolumeCapabilitiesResponse(message="; ".join(reasons))
        return csi.ValidateVolumeCapabilitiesResponse(confirmed=csi.ValidateVolumeCapabilitiesResponse.Confirmed(
            volume_context=request.volume_context, volume_capabilities=request.volume_capabilities,
            parameters=request.parameters))

    def _described(self, record: VolumeRecord) -> Any:
        volume = csi.Volume(volume_id=record.volume_id, capacity_bytes=record.capacity)
        if record.zone is not None:
            volume.accessible_topology.append(csi.Topology(segments={TOPOLOGY_KEY: record.zone}))
        if record.source_snapshot:
            volume.content_source.snapshot.snapshot_id = record.source_snapshot
        if record.source_volume:
            volume.content_source.volume.volume_id = record.source_volume
        return volume

    def _status(self, volume_id: str) -> Any:
        """Where a volume is attached, and whether the array still holds its data (its condition)."""
        present = self.driver.volume_dir(volume_id).is_dir()
        condition = csi.VolumeCondition(abnormal=not present, message="the array holds the volume's data" if present
                                        else "the volume's data directory is missing on the array")
        nodes = sorted(node for volume, node in self.driver.published if volume == volume_id)
        return nodes, condition

    @_array_errors
    async def CreateVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver = self.driver
        await _require(context, name=bool(request.name), volume_capabilities=bool(request.volume_capabilities))
        reasons = [reason for reason in map(_unsupported_capability, request.volume_capabilities) if reason]
        reasons += filter(None, [_unsupported_mutable(request.mutable_parameters, _kind_of(request))])
        if reasons:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "; ".join(reasons))
        required, limit = request.capacity_range.required_bytes, request.capacity_range.limit_bytes
        if required < 0 or limit < 0 or (limit and required > limit):
            return await _fail(context, grpc.StatusCode.OUT_OF_RANGE,
                               f"capacity range {required}-{limit or 'unlimited'} bytes cannot be met")
        params = dict(request.parameters)
        namespace, claim = params.get(PVC_NAMESPACE), params.get(PVC_NAME)
        if namespace and claim:
            storage_class = await driver.ctx.storage_class_of_claim(namespace, claim)
            run = driver.ctx.run_of_claim(namespace, claim)  # whose the volume is, for the array's audit
            if not storage_class:
                return await _fail(context, grpc.StatusCode.NOT_FOUND, f"claim {namespace}/{claim} not found")
            obj = f"{namespace}/{claim}"
        elif driver.default_class:
            storage_class, claim, obj, run = driver.default_class, "", request.name, ""
        else:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT,
                               f"{PVC_NAMESPACE} and {PVC_NAME} missing: run csi-provisioner with "
                               "--extra-create-metadata")
        source = request.volume_content_source
        snapshot: SnapshotRecord | None = None
        origin: VolumeRecord | None = None  # the volume a clone copies
        if source.HasField("volume"):
            origin = driver.volumes.get(source.volume.volume_id)
            if origin is None:
                return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {source.volume.volume_id} not found")
        if source.HasField("snapshot"):
            snapshot = driver.snapshots.get(source.snapshot.snapshot_id)
            if snapshot is None:
                return await _fail(context, grpc.StatusCode.NOT_FOUND,
                                   f"snapshot {source.snapshot.snapshot_id} not found")
        fs_type = next((c.mount.fs_type for c in request.volume_capabilities if c.HasField("mount")), "")
        restored = (driver.snapshot_dir(snapshot.snapshot_id) if snapshot
                    else driver.volume_dir(origin.volume_id) if origin else None)
        try:
            if restored is not None:
                volumes.check_restore(restored, fs_type,
                                      block=any(c.HasField("block") for c in request.volume_capabilities))
        except volumes.UnsupportedFsType as error:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, str(error))
        wanted = required or (min(DEFAULT_CAPACITY, limit) if limit else DEFAULT_CAPACITY)
        capacity = max(wanted, snapshot.size if snapshot else 0, origin.capacity if origin else 0)
        if limit and capacity > limit:
            return await _fail(context, grpc.StatusCode.OUT_OF_RANGE, f"the source holds {capacity} bytes, more "
                               f"than the limit of {limit}")
        source_id = snapshot.snapshot_id if snapshot else None
        origin_id = origin.volume_id if origin else None
        home, cross_zone, refused = home_zone_of(params, _kind_of(request))
        if refused:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, refused)
        zonal = params.get(ZONAL_PARAMETER) == "true"
        if zonal and origin is not None and origin.zone is not None:  # a zonal disk is cloned in its own zone
            zone = _source_zone_allowed(origin.zone, request)
            if zone is None:
                return await _fail(context, grpc.StatusCode.RESOURCE_EXHAUSTED, f"the source volume "
                                   f"{origin.volume_id} lives in {origin.zone}, which the request does not allow "
                                   f"({', '.join(_zones_in(request.accessibility_requirements.requisite))})")
        else:
            zone = _zone_for(request) if zonal else None
        if zonal and zone is None:
            return await _fail(context, grpc.StatusCode.RESOURCE_EXHAUSTED, "the array has no zone the request "
                               f"allows (its zones: {', '.join(ZONES)})")

        def conflict(record: VolumeRecord) -> str | None:
            allowed = _zones_in(request.accessibility_requirements.requisite)
            if record.zone is not None and allowed and record.zone not in allowed:
                return f"zone {record.zone}, asked {', '.join(allowed)}"
            if record.capacity < required or (limit and record.capacity > limit):
                return f"{record.capacity} bytes, asked {required}-{limit or 'unlimited'}"
            if (record.source_snapshot, record.source_volume) != (source_id, origin_id):
                return (f"content source {record.source_snapshot or record.source_volume or 'none'}, asked "
                        f"{source_id or origin_id or 'none'}")
            return None

        existing = driver.volume_named(request.name)
        if existing is None:
            volume_id = volume_handle(request.name.removeprefix("pvc-"), storage_class)
            record = VolumeRecord(volume_id, request.name, capacity, source_id, origin_id,
                                  tuple(sorted(request.mutable_parameters.items())), _kind_of(request), zone,
                                  home, tuple(sorted(cross_zone.items())))
            target = driver.volume_dir(volume_id)

            def created() -> None:
                target.mkdir(parents=True, exist_ok=True)
                driver.volumes[volume_id] = record
                driver.volume_names[request.name] = volume_id
                driver.deleted_volumes.discard(volume_id)

            operation = Operation.CLONE_VOLUME if restored is not None else Operation.CREATE_VOLUME
            restore: Callable[[], object] | None = (
                functools.partial(volumes.copy_data, restored, target)
                if restored is not None and volumes.holds_data(restored) else None)
            suffix = driver.ctx.backend(storage_class).model.corrupt_clone_suffix
            corrupting = restore is not None and bool(suffix) and claim.endswith(suffix) and not fs_type
            if suffix and claim.endswith(suffix) and fs_type:
                log.warning("clone %s: corruptCloneSuffix applies to directory volumes only; this one holds an "
                            "%s image and is left as it is", obj, fs_type)
            if restore is not None and corrupting:
                copy = restore

                def corrupt() -> None:  # the array's bug on purpose: the clone is not its snapshot
                    copy()
                    log.warning("clone %s: corrupted %s on purpose (corruptCloneSuffix)", obj,
                                volumes.corrupt_one_byte(target))
                restore = corrupt
            facts: dict[str, object] = {"volume": request.name}
            facts.update({"zone": zone} if zone is not None else {})
            facts.update({"homeZone": home} if home is not None else {})
            facts.update({"corrupted": True} if corrupting else {})
            facts.update({"sourceVolume": origin_id} if origin_id else {})
            driver.owners[request.name] = run
            await driver.perform(operation, ("volume", request.name), storage_class, obj, created, restore, 0.0,
                                 **facts)
            if volume_id in driver.volumes:  # its own limits, never a source's copied with its data
                qos.write(target, qos.parse(dict(request.mutable_parameters))[0])
            existing = driver.volume_named(request.name)
            assert existing is not None
        clash = conflict(existing)
        if clash:
            return await _fail(context, grpc.StatusCode.ALREADY_EXISTS,
                               f"volume {request.name} exists with {clash}")
        return csi.CreateVolumeResponse(volume=self._described(existing))

    @_array_errors
    async def DeleteVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver, volume_id = self.driver, request.volume_id
        await _require(context, volume_id=bool(volume_id))
        storage_class = class_of_handle(volume_id)
        name = driver.name_of(volume_id)
        await driver.settle(("volume", name))
        if not storage_class or volume_id in driver.deleted_volumes:
            return csi.DeleteVolumeResponse()

        if await driver.leaked_delete(Operation.DELETE_VOLUME, ("delete-volume", volume_id), volume_id, name,
                                      volume_id in driver.volumes, driver.leaked_volumes):
            return csi.DeleteVolumeResponse()

        def deleted() -> None:
            record = driver.volumes.pop(volume_id, None)
            if record is not None:
                driver.volume_names.pop(record.name, None)
            driver.deleted_volumes.add(volume_id)
            shutil.rmtree(driver.volume_dir(volume_id), ignore_errors=True)  # what is left: an empty directory

        await driver.perform(Operation.DELETE_VOLUME, ("delete-volume", volume_id), storage_class, name, deleted,
                             io=volumes.removal(driver.volume_dir(volume_id)))
        return csi.DeleteVolumeResponse()

    @_array_errors
    async def ControllerPublishVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver, pair = self.driver, (request.volume_id, request.node_id)
        await _require(context, volume_id=bool(request.volume_id), node_id=bool(request.node_id),
                       volume_capability=request.HasField("volume_capability"))
        storage_class = class_of_handle(request.volume_id)
        if not storage_class or request.volume_id not in driver.volumes:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        if request.node_id not in driver.nodes:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"node {request.node_id} not found")
        zone = driver.volumes[request.volume_id].zone
        if zone is not None and zone_of_node(request.node_id) != zone:  # a zonal disk attaches in its zone only
            return await _fail(context, grpc.StatusCode.FAILED_PRECONDITION, f"volume {request.volume_id} lives in "
                               f"{zone} and cannot attach to {request.node_id} in {zone_of_node(request.node_id)}")
        name = driver.name_of(request.volume_id)
        if pair in driver.published and (pair in driver.read_only) != request.readonly:
            return await _fail(context, grpc.StatusCode.ALREADY_EXISTS, f"volume {request.volume_id} is published "
                               f"to {request.node_id} {'read-only' if pair in driver.read_only else 'read-write'}")
        if pair not in driver.published:
            # The array's attach slows as the node fills: per volume of this array attached there or being
            # attached (counted when the call starts, so the i-th of a batch sees i - 1, however many calls run
            # at once; other arrays' volumes on the node do not count).
            attaching = driver.attaching.setdefault(request.node_id, set())
            before = len({v for v in {v for v, n in driver.published if n == request.node_id} | attaching
                          if v != request.volume_id and class_of_handle(v) == storage_class})
            model = driver.ctx.backend(storage_class).model
            per_volume = model.attach_latency_per_attached
            slow_node = model.node_attach_latency.get(request.node_id, 0.0)
            attaching.add(request.volume_id)
            try:
                def attached() -> None:
                    driver.published.add(pair)
                    if request.readonly:
                        driver.read_only.add(pair)

                await driver.perform(Operation.ATTACH, ("attach", *pair), storage_class,
                                     f"{name}:{request.node_id}", attached, io=None,
                                     extra_delay=before * per_volume + slow_node,
                                     **({"attachedBefore": before} if per_volume else {}),
                                     **({"nodeDelay": slow_node} if slow_node else {}))
            finally:
                attaching.discard(request.volume_id)
        return csi.ControllerPublishVolumeResponse(publish_context={"devicePath": f"/dev/sim/{name}"})

    @_array_errors
    async def ControllerUnpublishVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Detach from the node named, or from every node when none is (CSI: an empty node ID means all); a
        volume or node the array does not know is detached already."""
        driver = self.driver
        await _require(context, volume_id=bool(request.volume_id))
        nodes = [request.node_id] if request.node_id else sorted(
            {node for volume, node in driver.published if volume == request.volume_id}
            | {node for node, attaching in driver.attaching.items() if request.volume_id in attaching})
        for node in nodes:
            pair = (request.volume_id, node)
            await driver.settle(("attach", *pair))
            if pair in driver.published:
                def detached(pair: tuple[str, str] = pair) -> None:
                    driver.published.discard(pair)
                    driver.read_only.discard(pair)

                await driver.perform(Operation.DETACH, ("detach", *pair), class_of_handle(request.volume_id),
                                     f"{driver.name_of(request.volume_id)}:{node}", detached)
        return csi.ControllerUnpublishVolumeResponse()

    @_array_errors
    async def ControllerExpandVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """The array grows the volume (an image file grows as a device would); a filesystem on it (the ext4 class)
        still needs the node's NodeExpandVolume, a plain directory has nothing more to grow. The volume is found
        in the array's own records, whatever Kubernetes has (or has not) made of it."""
        driver, volume_id = self.driver, request.volume_id
        await _require(context, volume_id=bool(volume_id), capacity_range=request.HasField("capacity_range"))
        record = driver.volumes.get(volume_id)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {volume_id} not found")
        required, limit = request.capacity_range.required_bytes, request.capacity_range.limit_bytes
        if required <= 0 or (limit and limit < required):
            return await _fail(context, grpc.StatusCode.OUT_OF_RANGE,
                               f"capacity range {required}-{limit or 'unlimited'} bytes cannot be met")
        capability = request.volume_capability
        filesystem = capability.HasField("mount") and bool(capability.mount.fs_type)
        if required > record.capacity:
            def expanded() -> None:
                current = driver.volumes.get(volume_id)
                if current is not None and current.capacity < required:
                    driver.volumes[volume_id] = replace(current, capacity=required)

            grow = functools.partial(volumes.grow_device, driver.volume_dir(volume_id), required)
            await driver.perform(Operation.EXPAND_VOLUME, ("expand", volume_id, str(required)),
                                 class_of_handle(volume_id), record.name, expanded, io=grow)
        current = driver.volumes.get(volume_id)
        capacity = current.capacity if current is not None else required
        return csi.ControllerExpandVolumeResponse(capacity_bytes=capacity, node_expansion_required=filesystem)

    @_array_errors
    async def ControllerModifyVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Apply a VolumeAttributesClass's mutable parameters (``qosPolicy``): one array operation when they
        change what the volume has, none when it has them already."""
        driver, volume_id = self.driver, request.volume_id
        await _require(context, volume_id=bool(volume_id), mutable_parameters=bool(request.mutable_parameters))
        record = driver.volumes.get(volume_id)
        unsupported = _unsupported_mutable(request.mutable_parameters, record.kind if record is not None else None)
        if unsupported:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, unsupported)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {volume_id} not found")
        wanted = tuple(sorted({**dict(record.mutable), **dict(request.mutable_parameters)}.items()))
        if wanted != record.mutable:
            def modified() -> None:
                """Enforced first, then recorded: a limit that could not be set stays a failed modify, which the
                resizer retries, never a recorded one that is not kept."""
                current = driver.volumes.get(volume_id)
                if current is not None:
                    before, after = qos.parse(dict(current.mutable))[0], qos.parse(dict(wanted))[0]
                    if before or after:  # a change of name only needs no throttling host
                        _enforce(driver.volume_dir(volume_id), after)
                    driver.volumes[volume_id] = replace(current, mutable=wanted)

            await driver.perform(Operation.MODIFY_VOLUME, ("modify", volume_id, repr(wanted)),
                                 class_of_handle(volume_id), record.name, modified, parameters=dict(wanted))
        return csi.ControllerModifyVolumeResponse()

    async def ListVolumes(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.max_entries < 0:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "max_entries must not be negative")
        records = [self.driver.volumes[volume_id] for volume_id in sorted(self.driver.volumes)]
        page = _page(records, request.starting_token, request.max_entries)
        if page is None:
            return await _fail(context, grpc.StatusCode.ABORTED, f"starting token {request.starting_token!r} is "
                               "not one this driver gave")
        entries = []
        for record in page[0]:
            nodes, condition = self._status(record.volume_id)
            entries.append(csi.ListVolumesResponse.Entry(
                volume=self._described(record),
                status=csi.ListVolumesResponse.VolumeStatus(published_node_ids=nodes, volume_condition=condition)))
        return csi.ListVolumesResponse(entries=entries, next_token=page[1])

    async def ControllerGetVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _require(context, volume_id=bool(request.volume_id))
        record = self.driver.volumes.get(request.volume_id)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        nodes, condition = self._status(record.volume_id)
        return csi.ControllerGetVolumeResponse(volume=self._described(record), status=(
            csi.ControllerGetVolumeResponse.VolumeStatus(published_node_ids=nodes, volume_condition=condition)))

    async def GetCapacity(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        used = sum(record.capacity for record in self.driver.volumes.values())
        return csi.GetCapacityResponse(available_capacity=max(0, ARRAY_CAPACITY - used))

    @_array_errors
    async def CreateSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver = self.driver
        await _require(context, name=bool(request.name), source_volume_id=bool(request.source_volume_id))
        storage_class = class_of_handle(request.source_volume_id)
        snapshot_id = driver.snapshot_names.get(request.name)
        if snapshot_id is None:
            source = driver.volumes.get(request.source_volume_id)
            if not storage_class or source is None:
                return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.source_volume_id} not found")
            params = dict(request.parameters)
            obj = (f"{params[SNAPSHOT_NAMESPACE]}/{params[SNAPSHOT_NAME]}" if SNAPSHOT_NAME in params
                   else request.name)
            new_id = snapshot_id_of(request.name, storage_class)
            record = SnapshotRecord(new_id, request.source_volume_id, source.capacity, time.time())

            volume_dir = driver.volume_dir(request.source_volume_id)

            def taken() -> None:
                driver.snapshots[new_id] = record
                driver.snapshot_names[request.name] = new_id
                driver.deleted_snapshots.discard(new_id)

            copy = (functools.partial(volumes.copy_data, volume_dir, driver.snapshot_dir(new_id))
                    if volumes.holds_data(volume_dir) else None)
            driver.owners[request.name] = driver.owners.get(source.name, "")  # a snapshot of the run's volume
            await driver.perform(Operation.CREATE_SNAPSHOT, ("snapshot", request.name), storage_class, obj, taken,
                                 io=copy)
            snapshot_id = driver.snapshot_names[request.name]
        record = driver.snapshots[snapshot_id]
        if record.source_volume_id != request.source_volume_id:
            return await _fail(context, grpc.StatusCode.ALREADY_EXISTS, f"snapshot {request.name} exists, of "
                               f"volume {record.source_volume_id}, not {request.source_volume_id}")
        return csi.CreateSnapshotResponse(snapshot=self._snapshot(record))

    def _snapshot(self, record: SnapshotRecord) -> Any:
        group = next((g.group_id for g in self.driver.groups.values() if record.snapshot_id in g.snapshot_ids), "")
        return csi.Snapshot(size_bytes=record.size, snapshot_id=record.snapshot_id,
                            source_volume_id=record.source_volume_id, creation_time=_timestamp(record.created),
                            ready_to_use=True, group_snapshot_id=group)

    async def ListSnapshots(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.max_entries < 0:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "max_entries must not be negative")
        records = [self.driver.snapshots[snapshot_id] for snapshot_id in sorted(self.driver.snapshots)
                   if request.snapshot_id in ("", snapshot_id)]
        records = [r for r in records if request.source_volume_id in ("", r.source_volume_id)]
        page = _page(records, request.starting_token, request.max_entries)
        if page is None:
            return await _fail(context, grpc.StatusCode.ABORTED, f"starting token {request.starting_token!r} is "
                               "not one this driver gave")
        return csi.ListSnapshotsResponse(entries=[csi.ListSnapshotsResponse.Entry(snapshot=self._snapshot(record))
                                                  for record in page[0]], next_token=page[1])

    async def GetSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _require(context, snapshot_id=bool(request.snapshot_id))
        record = self.driver.snapshots.get(request.snapshot_id)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"snapshot {request.snapshot_id} not found")
        return csi.GetSnapshotResponse(snapshot=self._snapshot(record))

    @_array_errors
    async def DeleteSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver, snapshot_id = self.driver, request.snapshot_id
        await _require(context, snapshot_id=bool(snapshot_id))
        storage_class = class_of_handle(snapshot_id)
        await driver.settle(("snapshot", snapshot_id.rpartition("@")[0]))
        if not storage_class or snapshot_id in driver.deleted_snapshots:
            return csi.DeleteSnapshotResponse()

        if await driver.leaked_delete(Operation.DELETE_SNAPSHOT, ("delete-snapshot", snapshot_id), snapshot_id,
                                      snapshot_id, snapshot_id in driver.snapshots, driver.leaked_snapshots):
            return csi.DeleteSnapshotResponse()

        def deleted() -> None:
            driver.snapshots.pop(snapshot_id, None)
            driver.snapshot_names = {n: s for n, s in driver.snapshot_names.items() if s != snapshot_id}
            driver.deleted_snapshots.add(snapshot_id)
            shutil.rmtree(driver.snapshot_dir(snapshot_id), ignore_errors=True)  # what is left: an empty directory

        await driver.perform(Operation.DELETE_SNAPSHOT, ("delete-snapshot", snapshot_id), storage_class,
                             snapshot_id, deleted, io=volumes.removal(driver.snapshot_dir(snapshot_id)))
        return csi.DeleteSnapshotResponse()


GROUP_SNAPSHOT_NAME = "csi.storage.k8s.io/volumegroupsnapshot/name"
GROUP_SNAPSHOT_NAMESPACE = "csi.storage.k8s.io/volumegroupsnapshot/namespace"


@dataclass(frozen=True)
class GroupSnapshotRecord:
    group_id: str
    snapshot_ids: tuple[str, ...]  # one per member, in the order of the request's volumes
    created: float


def member_snapshot_id(group_name: str, volume_id: str, storage_class: str) -> str:
    """A member's snapshot ID: the group's name and the member volume's, with the class like every ID (pure)."""
    return snapshot_id_of(f"{group_name}.{volume_id.partition('@')[0]}", storage_class)


class GroupController(csi_grpc.GroupControllerServicer):
    """Volume group snapshots: one array operation takes every member at the same instant (crash-consistent, as a
    consistency group would), recorded once in the ground truth with its members; each member becomes a snapshot
    of its own that a clone can be restored from, and the group is deleted in one operation too."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def GroupControllerGetCapabilities(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        kind = csi.GroupControllerServiceCapability.RPC.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT
        return csi.GroupControllerGetCapabilitiesResponse(capabilities=[csi.GroupControllerServiceCapability(
            rpc=csi.GroupControllerServiceCapability.RPC(type=kind))])

    @_array_errors
    async def CreateVolumeGroupSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver = self.driver
        await _require(context, name=bool(request.name), source_volume_ids=bool(request.source_volume_ids))
        classes = {class_of_handle(volume_id) for volume_id in request.source_volume_ids}
        if len(classes) != 1 or "" in classes:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, "a group snapshot's volumes must all be "
                               f"on one array (one storage class), got {sorted(classes)}")
        (storage_class,) = classes
        group_id = snapshot_id_of(request.name, storage_class)
        if group_id not in driver.groups:
            params = dict(request.parameters)
            obj = (f"{params[GROUP_SNAPSHOT_NAMESPACE]}/{params[GROUP_SNAPSHOT_NAME]}"
                   if GROUP_SNAPSHOT_NAME in params else request.name)
            members = [(volume_id, member_snapshot_id(request.name, volume_id, storage_class))
                       for volume_id in request.source_volume_ids]
            sizes = {v.volume_id: v.capacity for v in driver.volumes.values()}

            def copies() -> None:  # after the operation's instant, so every member holds what was written by then
                for volume_id, snapshot_id in members:
                    if volumes.holds_data(driver.volume_dir(volume_id)):
                        volumes.copy_data(driver.volume_dir(volume_id), driver.snapshot_dir(snapshot_id))

            def taken() -> None:
                now = time.time()
                for volume_id, snapshot_id in members:
                    driver.snapshots[snapshot_id] = SnapshotRecord(snapshot_id, volume_id, sizes.get(volume_id, 0), now)
                    driver.deleted_snapshots.discard(snapshot_id)
                    driver.owners[snapshot_id.split("@", 1)[0]] = driver.owners.get(driver.name_of(volume_id), "")
                driver.groups[group_id] = GroupSnapshotRecord(group_id, tuple(s for _, s in members), now)

            await driver.perform(Operation.CREATE_GROUP_SNAPSHOT, ("group-snapshot", request.name), storage_class,
                                 obj, taken, io=copies, members=[pv_name_of_handle(v) for v, _ in members],
                                 groupSnapshotId=group_id)
        return csi.CreateVolumeGroupSnapshotResponse(group_snapshot=self._described(driver.groups[group_id]))

    def _described(self, group: GroupSnapshotRecord) -> Any:
        created = Timestamp()
        created.FromNanoseconds(int(group.created * 1e9))
        snapshots = []
        for snapshot_id in group.snapshot_ids:
            record = self.driver.snapshots.get(snapshot_id)
            if record is None:  # a member deleted on its own (DeleteSnapshot) is no longer part of it
                continue
            snapshots.append(csi.Snapshot(size_bytes=record.size, snapshot_id=snapshot_id,
                                          source_volume_id=record.source_volume_id, creation_time=created,
                                          ready_to_use=True, group_snapshot_id=group.group_id))
        return csi.VolumeGroupSnapshot(group_snapshot_id=group.group_id, snapshots=snapshots, creation_time=created,
                                       ready_to_use=True)

    @_array_errors
    async def GetVolumeGroupSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _require(context, group_snapshot_id=bool(request.group_snapshot_id))
        group = self.driver.groups.get(request.group_snapshot_id)
        if group is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND,
                               f"group snapshot {request.group_snapshot_id} not found")
        return csi.GetVolumeGroupSnapshotResponse(group_snapshot=self._described(group))

    @_array_errors
    async def DeleteVolumeGroupSnapshot(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver, group_id = self.driver, request.group_snapshot_id
        await _require(context, group_snapshot_id=bool(group_id))
        storage_class = class_of_handle(group_id)
        await driver.settle(("group-snapshot", group_id.rpartition("@")[0]))
        group = driver.groups.get(group_id)
        if not storage_class or group is None:
            return csi.DeleteVolumeGroupSnapshotResponse()  # never made, or deleted already
        members = tuple(dict.fromkeys([*group.snapshot_ids, *request.snapshot_ids]))

        def deleted() -> None:
            driver.groups.pop(group_id, None)
            for snapshot_id in members:
                driver.snapshots.pop(snapshot_id, None)
                driver.deleted_snapshots.add(snapshot_id)
                shutil.rmtree(driver.snapshot_dir(snapshot_id), ignore_errors=True)

        def removal() -> None:
            for snapshot_id in members:
                remove = volumes.removal(driver.snapshot_dir(snapshot_id))
                if remove is not None:
                    remove()

        await driver.perform(Operation.DELETE_GROUP_SNAPSHOT, ("delete-group-snapshot", group_id), storage_class,
                             group_id, deleted, io=removal, members=list(members))
        return csi.DeleteVolumeGroupSnapshotResponse()


def _link(path: str, target: Path) -> None:
    """Point ``path`` at ``target`` (the kubelet's staging or target path at the volume's data)."""
    link = Path(path)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        if link.is_symlink() and link.readlink() == target:
            return
        _unlink(path)
    link.symlink_to(target, target_is_directory=True)


def _unlink(path: str) -> None:
    link = Path(path)
    if link.is_symlink():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link, ignore_errors=True)


_NODE_RPC = csi.NodeServiceCapability.RPC
NODE_CAPABILITIES = (_NODE_RPC.STAGE_UNSTAGE_VOLUME, _NODE_RPC.EXPAND_VOLUME, _NODE_RPC.GET_VOLUME_STATS,
                     _NODE_RPC.VOLUME_CONDITION, _NODE_RPC.SINGLE_NODE_MULTI_WRITER)


class Node(csi_grpc.NodeServicer):
    """The node plugin of one simulated node. Staging is where the array works (MOUNT: log in, map, format and
    mount the device); publishing bind-mounts the staged volume into the pod, which costs the array nothing.
    Required fields are checked first and a refused call performs no array operation, as on the controller."""

    def __init__(self, driver: Driver, node_id: str) -> None:
        self.driver = driver
        self.node_id = node_id

    async def NodeGetInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return csi.NodeGetInfoResponse(node_id=self.node_id, max_volumes_per_node=self.driver.max_volumes_per_node,
                                       accessible_topology=csi.Topology(segments={
                                           TOPOLOGY_KEY: zone_of_node(self.node_id)}))

    async def NodeGetCapabilities(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return csi.NodeGetCapabilitiesResponse(capabilities=[
            csi.NodeServiceCapability(rpc=csi.NodeServiceCapability.RPC(type=kind)) for kind in NODE_CAPABILITIES])

    @_array_errors
    async def NodeStageVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver, pair = self.driver, (request.volume_id, self.node_id)
        await _require(context, volume_id=bool(request.volume_id),
                       staging_target_path=bool(request.staging_target_path),
                       volume_capability=request.HasField("volume_capability"))
        unsupported = _unsupported_capability(request.volume_capability)
        if unsupported:
            return await _fail(context, grpc.StatusCode.INVALID_ARGUMENT, unsupported)
        record = driver.volumes.get(request.volume_id)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        fs_type = request.volume_capability.mount.fs_type if request.volume_capability.HasField("mount") else ""
        block = request.volume_capability.HasField("block")
        staged_here = sum(1 for _, node in driver.staged if node == self.node_id)
        if pair not in driver.staged and staged_here >= driver.max_volumes_per_node:
            return await _fail(context, grpc.StatusCode.RESOURCE_EXHAUSTED, (
                f"node {self.node_id} has {staged_here} volumes staged, its limit (max_volumes_per_node) is "
                f"{driver.max_volumes_per_node}"))
        if pair not in driver.staged:
            volume_dir = driver.volume_dir(request.volume_id)
            data = (volumes.device_of(volume_dir) if block else volumes.image_of(volume_dir) if fs_type
                    else volume_dir)

            crossing = record.home_zone is not None and zone_of_node(self.node_id) != record.home_zone

            def staged() -> None:
                if record.home_zone is not None:  # the cross-zone limits of this node, or none in the home zone
                    qos.write(volume_dir, dict(record.cross_zone) if crossing else {},
                              qos.cross_zone_name(self.node_id))
                _link(request.staging_target_path, data)
                driver.staged.add(pair)
                driver.staging_paths[pair] = request.staging_target_path

            prepare = volumes.prepare_device if block else volumes.prepare_filesystem if fs_type else None
            formatted = (functools.partial(prepare, volume_dir, record.capacity, DEFAULT_CAPACITY)
                         if prepare is not None else None)
            facts = {"crossZone": True} if crossing else {}
            await driver.perform(Operation.MOUNT, ("stage", *pair), class_of_handle(request.volume_id),
                                 f"{record.name}:{self.node_id}", staged, io=formatted, **facts)
        return csi.NodeStageVolumeResponse()

    @_array_errors
    async def NodeExpandVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Grow the filesystem on a volume the controller grew (the ext4 class); a plain directory has none. The
        volume is found in the array's own records."""
        driver = self.driver
        await _require(context, volume_id=bool(request.volume_id), volume_path=bool(request.volume_path))
        record = driver.volumes.get(request.volume_id)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        capacity = max(request.capacity_range.required_bytes, record.capacity)
        capability = request.volume_capability
        if capability.HasField("mount") and capability.mount.fs_type:
            try:
                await asyncio.to_thread(volumes.grow_filesystem, driver.volume_dir(request.volume_id), capacity)
            except volumes.MountedFilesystem as error:  # what an offline-only node plugin answers (CSI spec)
                return await _fail(context, grpc.StatusCode.FAILED_PRECONDITION, str(error))
        return csi.NodeExpandVolumeResponse(capacity_bytes=capacity)

    async def NodePublishVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Link the pod's target path to the staged volume. A volume published SINGLE_NODE_SINGLE_WRITER (a
        ReadWriteOncePod claim) is published at one target path at most (FAILED_PRECONDITION otherwise)."""
        driver, pair = self.driver, (request.volume_id, self.node_id)
        await _require(context, volume_id=bool(request.volume_id), target_path=bool(request.target_path),
                       volume_capability=request.HasField("volume_capability"))
        if pair not in driver.staged:
            return await _fail(context, grpc.StatusCode.FAILED_PRECONDITION,
                               f"volume {request.volume_id} is not staged on {self.node_id}")
        mode = request.volume_capability.access_mode.mode
        single = csi.VolumeCapability.AccessMode.SINGLE_NODE_SINGLE_WRITER
        others = {path: m for path, m in driver.targets.get(pair, {}).items() if path != request.target_path}
        if others and (mode == single or single in others.values()):
            return await _fail(context, grpc.StatusCode.FAILED_PRECONDITION, f"volume {request.volume_id} is "
                               f"published at {min(others)} already, and single-writer allows one target path")
        _link(request.target_path, Path(request.staging_target_path or driver.staging_paths[pair]))
        driver.targets.setdefault(pair, {})[request.target_path] = mode
        return csi.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        await _require(context, volume_id=bool(request.volume_id), target_path=bool(request.target_path))
        _unlink(request.target_path)
        pair = (request.volume_id, self.node_id)
        targets = self.driver.targets.get(pair, {})
        targets.pop(request.target_path, None)
        if not targets:
            self.driver.targets.pop(pair, None)
        return csi.NodeUnpublishVolumeResponse()

    @_array_errors
    async def NodeUnstageVolume(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        driver, pair = self.driver, (request.volume_id, self.node_id)
        await _require(context, volume_id=bool(request.volume_id),
                       staging_target_path=bool(request.staging_target_path))
        await driver.settle(("stage", *pair))
        if pair in driver.staged:
            def unstaged() -> None:
                _unlink(request.staging_target_path)
                if (record := driver.volumes.get(request.volume_id)) is not None and record.home_zone is not None:
                    qos.write(driver.volume_dir(request.volume_id), {}, qos.cross_zone_name(self.node_id))
                driver.staged.discard(pair)
                driver.staging_paths.pop(pair, None)

            await driver.perform(Operation.UNMOUNT, ("unstage", *pair), class_of_handle(request.volume_id),
                                 f"{driver.name_of(request.volume_id)}:{self.node_id}", unstaged)
        return csi.NodeUnstageVolumeResponse()

    async def NodeGetVolumeStats(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Usage of a volume where it is published or staged on this node: its capacity, what its data takes on
        the host, and its condition (abnormal when the array lost its data directory). A read: no operation."""
        driver, pair = self.driver, (request.volume_id, self.node_id)
        await _require(context, volume_id=bool(request.volume_id), volume_path=bool(request.volume_path))
        record = driver.volumes.get(request.volume_id)
        if record is None:
            return await _fail(context, grpc.StatusCode.NOT_FOUND, f"volume {request.volume_id} not found")
        if request.volume_path not in {*driver.targets.get(pair, {}), driver.staging_paths.get(pair)}:
            return await _fail(context, grpc.StatusCode.NOT_FOUND,
                               f"volume {request.volume_id} is not published or staged at {request.volume_path}")
        volume_dir = driver.volume_dir(request.volume_id)
        used = min(await asyncio.to_thread(volumes.used_bytes, volume_dir), record.capacity)
        present = volume_dir.is_dir()
        condition = csi.VolumeCondition(abnormal=not present, message="the array holds the volume's data" if present
                                        else "the volume's data directory is missing on the array")
        usage = csi.VolumeUsage(unit=csi.VolumeUsage.BYTES, total=record.capacity, used=used,
                                available=record.capacity - used)
        return csi.NodeGetVolumeStatsResponse(usage=[usage], volume_condition=condition)


async def _listen(server: grpc.aio.Server, socket: Path) -> grpc.aio.Server:
    socket.parent.mkdir(parents=True, exist_ok=True)
    socket.unlink(missing_ok=True)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    return server


async def serve_controller(driver: Driver, socket: Path) -> grpc.aio.Server:
    """The controller plugin's server (identity, controller, group controller), listening on ``socket``."""
    server = grpc.aio.server()
    csi_grpc.add_IdentityServicer_to_server(Identity(), server)
    csi_grpc.add_ControllerServicer_to_server(Controller(driver), server)
    csi_grpc.add_GroupControllerServicer_to_server(GroupController(driver), server)
    return await _listen(server, socket)


async def serve_node(driver: Driver, node_id: str, socket: Path) -> grpc.aio.Server:
    """One node plugin's server (identity, node), listening on ``socket``; the node is one the array serves."""
    driver.nodes.add(node_id)
    server = grpc.aio.server()
    csi_grpc.add_IdentityServicer_to_server(Identity(), server)
    csi_grpc.add_NodeServicer_to_server(Node(driver, node_id), server)
    return await _listen(server, socket)


async def serve(driver: Driver, controller_socket: Path, node_sockets: dict[str, Path]) -> list[grpc.aio.Server]:
    """Start the controller plugin's server and one node plugin server per node; return them (running)."""
    driver.nodes.update(node_sockets)
    servers = [await serve_controller(driver, controller_socket)]
    servers += [await serve_node(driver, node_id, socket) for node_id, socket in node_sockets.items()]
    log.info("CSI driver %s serving: controller %s, nodes %s", DRIVER_NAME, controller_socket,
             ", ".join(str(path) for path in node_sockets.values()))
    return servers
