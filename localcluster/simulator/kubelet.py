"""The kubelet's part for pods on simulated nodes: mount attached volumes, report Running, unmount on delete.

A pod goes Running and Ready only after every CSI volume it uses is attached (its VolumeAttachment says so)
and mounted: NodeStageVolume then NodePublishVolume on the driver's node plugin of the pod's node, over CSI,
with the staging and target paths a kubelet uses under its root directory. Teardown is NodeUnpublishVolume then
NodeUnstageVolume. A failed call becomes a ``FailedMount`` / ``FailedUnmount`` Warning event with the kubelet's
wording and is retried with backoff. Waiting is event-driven: a pod whose volume is not attached yet is
parked on that (volume, node) pair and woken by the VolumeAttachment's update, so the simulator adds no
polling delay to what the operator measures. A deleted pod is unmounted, then removed with grace period 0,
as a kubelet does; only then does the attach/detach controller detach. A pod removed from the API at once (its
``terminationGracePeriodSeconds`` is 0, as csibench's benchmark pods have) still gets its volumes unmounted, as
a kubelet's volume manager tears down what no pod wants any more. As a kubelet does, each node reports the volumes
it has staged in ``status.volumesInUse`` (added before NodeStageVolume, removed after NodeUnstageVolume), and the
attach/detach controller detaches a volume only once its node no longer reports it: detach follows unmount.
Reports are coalesced per node: concurrent mounts on one node share one status patch. A claim the resizer left
``NodeResizePending`` is grown where its volume is mounted, NodeExpandVolume then its status (``expansion.py``).

Pods whose containers are not the pause image run for real (``runtime.py``): once their volumes are mounted the
init containers run to their end (on a task of their own, not the pod's worker, so a deletion stops them), the
containers start as processes, the pod goes Running, and each container's exit is reported (terminated with exit
code and reason; the pod's phase follows its restartPolicy). A container the runtime refuses (no non-root
runAsUser, no command) gets a ``Failed`` Warning event and the pod fails. Deleting such a pod stops its processes
(SIGTERM, SIGKILL after the grace period) before its volumes are unmounted.

A process-mode pod's projected volumes (the ServiceAccount token the API server's admission adds, ``projected.py``)
are made before its containers start: a failure is a ``FailedMount`` Warning and the pod waits, retried with
backoff; its token is then refreshed by a task of the pod's. Containers of a pod with a token get the
``kubernetes`` Service's variables (the API server's host and port, from the simulator's kubeconfig), so
``load_incluster_config`` works in them. Once such a pod runs, its probes run (``prober.py``): readiness drives the
pod's Ready condition, a failed liveness probe restarts the container. The pod's tasks (token refresh, probes)
are cancelled when it stops.

Pod IPs: a pause pod gets a unique 127.2.x.y (only its status needs one); a hostNetwork pod its node's address, as
a kubelet gives host-network pods the node IP; a process-mode pod shares the host's network namespace, so it gets
the host's primary IPv4 address, where its 0.0.0.0-bound ports really answer and which a Service's endpoints may
hold (the API server refuses loopback addresses there, and Prometheus finds the operator through its Service's
endpoints). Without such an address (a host with loopback only) it keeps a 127.2 address, with one warning.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import grpc

from localcluster.csi import csi_pb2 as csi
from localcluster.csi import csi_pb2_grpc as csi_grpc
from localcluster.simulator import api
from localcluster.simulator.config import DRIVER_NAME
from localcluster.simulator.context import Context
from localcluster.simulator.controller import Controller
from localcluster.simulator.expansion import build_expansion_finished, node_resize_pending, quantity_bytes
from localcluster.simulator.nodes import host_address, node_address
from localcluster.simulator.prober import Prober
from localcluster.simulator.projected import Projector, projected_volumes
from localcluster.simulator.runtime import (
    ContainerConfigError,
    PodProcesses,
    Runtime,
    pod_phase,
    runs_processes,
    service_env,
)

COMPONENT = "kubelet"
log = logging.getLogger("simulator.kubelet")
CSI_TIMEOUT_SECONDS = 120.0  # the kubelet's own deadline for a CSI node call


def staging_path(root: Path, handle: str) -> str:
    """Where a kubelet stages a CSI volume: one global mount per volume and node (pure)."""
    digest = hashlib.sha256(handle.encode()).hexdigest()
    return str(root / "plugins" / "kubernetes.io" / "csi" / DRIVER_NAME / digest / "globalmount")


def target_path(root: Path, pod_uid: str, pv_name: str) -> str:
    return str(root / "pods" / pod_uid / "volumes" / "kubernetes.io~csi" / pv_name / "mount")


def volume_capability(pv: api.Obj) -> Any:
    """The capability a kubelet sends for a PV: block or mount (with the PV's fsType), and the access mode
    (pure). The node plugin advertises SINGLE_NODE_MULTI_WRITER, so, as the kubelet then does, ReadWriteOnce is
    SINGLE_NODE_MULTI_WRITER (pods on the node share it) and ReadWriteOncePod SINGLE_NODE_SINGLE_WRITER."""
    modes = pv["spec"].get("accessModes") or ["ReadWriteOnce"]
    mode = csi.VolumeCapability.AccessMode
    access = (mode.MULTI_NODE_MULTI_WRITER if "ReadWriteMany" in modes
              else mode.MULTI_NODE_READER_ONLY if "ReadOnlyMany" in modes
              else mode.SINGLE_NODE_SINGLE_WRITER if "ReadWriteOncePod" in modes
              else mode.SINGLE_NODE_MULTI_WRITER)
    capability = csi.VolumeCapability(access_mode=mode(mode=access))
    if pv["spec"].get("volumeMode") == "Block":
        capability.block.SetInParent()
    else:
        capability.mount.SetInParent()
        capability.mount.fs_type = (pv["spec"].get("csi") or {}).get("fsType") or ""
    return capability


def unique_volume_name(handle: str) -> str:
    """The name a kubelet reports in ``volumesInUse`` for a CSI volume (pure)."""
    return f"kubernetes.io/csi/{DRIVER_NAME}^{handle}"


def describe_rpc_error(error: grpc.aio.AioRpcError) -> str:
    """How a kubelet quotes a CSI error: Go's ``rpc error: code = Internal desc = ...`` (pure)."""
    code = "".join(part.capitalize() for part in error.code().name.split("_"))
    return f"rpc error: code = {code} desc = {error.details()}"


def choose_pod_ip(pod: api.Obj, node_index: int, host_ip: str | None, loopback: Iterator[str]) -> str:
    """A pod's IP (pure but for drawing from ``loopback``): its node's address for a hostNetwork pod, the host's
    address for a process-mode pod (it shares the host's network namespace), else the next unique 127.2.x.y."""
    if pod["spec"].get("hostNetwork"):
        return node_address(node_index)
    if host_ip is not None and runs_processes(pod):
        return host_ip
    return next(loopback)


def readiness_conditions(statuses: list[api.Obj]) -> list[api.Obj]:
    """ContainersReady and Ready from the containers' readiness (pure)."""
    ready = "True" if statuses and all(s.get("ready") for s in statuses) else "False"
    return [{"type": kind, "status": ready, "lastTransitionTime": api.now_rfc3339()}
            for kind in ("ContainersReady", "Ready")]


def build_running_status(pod: api.Obj, host_ip: str, pod_ip: str) -> api.Obj:
    """The status patch a kubelet sends once every container runs (pure)."""
    stamp = api.now_rfc3339()
    containers = pod["spec"].get("containers") or []
    return {"status": {
        "phase": "Running",
        "conditions": [{"type": kind, "status": "True", "lastTransitionTime": stamp}
                       for kind in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": stamp,
        "containerStatuses": [{
            "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True, "started": True,
            "restartCount": 0, "containerID": f"sim://{pod['metadata']['uid']}-{c['name']}",
            "state": {"running": {"startedAt": stamp}},
        } for c in containers],
    }}


def claim_names(pod: api.Obj) -> list[str]:
    return list(claim_volumes(pod).values())


def foreign_ephemeral_claim(pod: api.Obj, volume: str, pvc: api.Obj | None) -> bool:
    """A generic ephemeral volume's claim that exists but was not made for this pod (its controller owner is not
    the pod): a kubelet never uses it, as the scheduler never places the pod on it (pure)."""
    if pvc is None or not any(v["name"] == volume and v.get("ephemeral") for v in pod["spec"].get("volumes") or []):
        return False
    return not any(ref.get("controller") and ref.get("uid") == pod["metadata"]["uid"]
                   for ref in pvc["metadata"].get("ownerReferences") or [])


def group_stopping(group: PodProcesses | None) -> bool:
    return group is None or group.stopping


def claim_volumes(pod: api.Obj) -> dict[str, str]:
    """The pod's volume names -> claim names (pure): a persistentVolumeClaim's, or a generic ephemeral volume's,
    which the controller-manager names ``<pod>-<volume>``."""
    return {v["name"]: v["persistentVolumeClaim"]["claimName"] if v.get("persistentVolumeClaim")
            else f"{pod['metadata']['name']}-{v['name']}"
            for v in pod["spec"].get("volumes") or [] if v.get("persistentVolumeClaim") or v.get("ephemeral")}


def grace_seconds(pod: api.Obj) -> float:
    """How long a deleted pod's processes get between SIGTERM and SIGKILL (pure)."""
    meta, spec = pod["metadata"], pod["spec"]
    value = meta.get("deletionGracePeriodSeconds", spec.get("terminationGracePeriodSeconds", 30))
    return float(value if value is not None else 30)


class Kubelet:
    def __init__(self, ctx: Context, node_sockets: dict[str, Path], root: Path) -> None:
        self.ctx = ctx
        self._root = root
        server = getattr(ctx.client, "server", None)  # the simulator's kubeconfig's: the pods' in-cluster API
        self.runtime = Runtime(root, service_env(server) if server else None)
        self.projector = Projector(ctx.client, ctx.event, root, COMPONENT)
        self.prober = Prober(self.runtime, ctx, self._report_probed)
        self._pod_tasks: dict[str, set[asyncio.Task[None]]] = defaultdict(set)  # pod uid -> its refresh, probes
        self._host_ip: str | None = None
        self._host_ip_known = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._channels = {node: grpc.aio.insecure_channel(f"unix://{path}") for node, path in node_sockets.items()}
        self._plugins = {node: csi_grpc.NodeStub(channel) for node, channel in self._channels.items()}
        self.controller = Controller("kubelet", self._reconcile)
        self.teardown = Controller("kubelet-teardown", self._tear_down)
        self.expander = Controller("kubelet-expand", self._expand)
        self._initializing: set[str] = set()  # pod uids whose init containers run (not on the pod's worker)
        self._orphaned: dict[str, tuple[api.Obj, set[str]]] = {}  # pod uid -> (removed pod, volumes still mounted)
        self._mounted: dict[str, set[str]] = defaultdict(set)  # pod uid -> mounted PV names
        self._touched: dict[str, set[str]] = defaultdict(set)  # pod uid -> PV names a mount was started for
        self._waiting: dict[tuple[str, str], set[str]] = defaultdict(set)  # (pv, node) -> pod keys
        self._waiting_claims: dict[str, set[str]] = defaultdict(set)  # pvc key -> pod keys
        self._attached_pairs: dict[tuple[str, str], dict[str, str]] = {}  # (pv, node) attached -> its metadata
        self._addresses = (f"127.2.{i // 250}.{i % 250 + 1}" for i in itertools.count())
        self._node_index = {name: index for index, name in enumerate(sorted(ctx.node_names))}
        self._in_use: dict[str, set[str]] = defaultdict(set)  # node -> unique volume names it reports
        self._in_use_wanted: dict[str, int] = defaultdict(int)  # node -> version of its set
        self._in_use_reported: dict[str, int] = defaultdict(int)  # node -> version last written
        self._in_use_locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        # One operation at a time per volume and node, and the pods that have it published there: as the real
        # kubelet's volume manager, a volume is unstaged only when no pod on the node uses it. A pod deleted and
        # recreated under the same name (a restored step) tears down while its successor mounts the volume.
        self._volume_locks: dict[tuple[str, str], asyncio.Lock] = defaultdict(asyncio.Lock)
        self._publishers: dict[tuple[str, str], set[str]] = defaultdict(set)  # (node, handle) -> pod uids
        ctx.informers.pods.handlers.append(self._on_pod)
        ctx.informers.attachments.handlers.append(self._on_attachment)
        ctx.informers.pvcs.handlers.append(self._on_claim)

    def log_lookup(self, namespace: str, pod: str, container: str) -> tuple[Path, Callable[[], bool]] | None:
        """For the log endpoint (called on its threads): a container's log file and whether it still runs."""
        path = self.runtime.log_path(namespace, pod, container)
        if path is None:
            return None
        group = next((g for g in list(self.runtime.pods.values()) if (g.namespace, g.name) == (namespace, pod)), None)
        entry = (group.containers.get(container) or group.init_containers.get(container)) if group is not None \
            else None
        return path, lambda: entry is not None and entry.exit_code is None and not group_stopping(group)

    async def shutdown(self) -> None:
        """The simulator stops: no container outlives it (their mounts go with their namespaces)."""
        for uid in list(self._pod_tasks):
            self._cancel_pod_tasks(uid)
        await asyncio.gather(*(self.runtime.stop(uid, 0.0) for uid in list(self.runtime.pods)))
        for uid in list(self.runtime.pods):
            self.runtime.forget(uid)
            self.projector.forget(uid)
        await self.prober.close()

    def host_ip(self) -> str | None:
        """The host's address for process-mode pods, looked up once (None, said once: none but loopback)."""
        if not self._host_ip_known:
            self._host_ip, self._host_ip_known = host_address(), True
            if self._host_ip is None:
                log.warning("no non-loopback IPv4 address on this host: process-mode pods get 127.2 addresses, "
                            "which a Service's endpoints cannot hold")
        return self._host_ip

    def _spawn_pod_task(self, uid: str, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work, name=f"pod:{uid}")
        self._pod_tasks[uid].add(task)
        task.add_done_callback(self._pod_tasks[uid].discard)
        task.add_done_callback(self._task_done)

    def _cancel_pod_tasks(self, uid: str) -> None:
        """The pod stops: its token refresh and probes end with it."""
        for task in self._pod_tasks.pop(uid, set()):
            task.cancel()

    def _on_pod(self, event: str, pod: api.Obj) -> None:
        if pod["spec"].get("nodeName") not in self.ctx.node_names:
            return
        if event == "DELETED":
            self.controller.cancel(api.key_of(pod))
            uid = pod["metadata"]["uid"]
            # Volumes whose mount was under way count too: the node plugin may have staged them meanwhile.
            mounted = self._mounted.pop(uid, set()) | self._touched.pop(uid, set())
            if mounted or uid in self.runtime.pods or self.projector.holds(uid):
                self._orphaned[pod["metadata"]["uid"]] = (pod, mounted)
                self.teardown.kick(pod["metadata"]["uid"])
        else:
            try:
                self.runtime.refresh(pod)  # its downwardAPI files follow its labels and annotations
            except OSError as error:
                log.warning("downwardAPI files of %s: %s", api.key_of(pod), error)
            self.projector.changed(pod)
            self.controller.kick(api.key_of(pod))

    def _on_attachment(self, event: str, attachment: api.Obj) -> None:
        pair = (attachment["spec"]["source"].get("persistentVolumeName") or "", attachment["spec"]["nodeName"])
        status = attachment.get("status") or {}
        if event == "DELETED" or not status.get("attached"):
            self._attached_pairs.pop(pair, None)
        else:
            self._attached_pairs[pair] = status.get("attachmentMetadata") or {}
            for pod_key in self._waiting.pop(pair, set()):
                self.controller.kick(pod_key)

    def _on_claim(self, event: str, claim: api.Obj) -> None:
        if event != "DELETED" and claim["spec"].get("volumeName"):
            for pod_key in self._waiting_claims.pop(api.key_of(claim), set()):
                self.controller.kick(pod_key)
        if event != "DELETED" and node_resize_pending(claim):
            self.expander.kick(api.key_of(claim))

    async def _expand(self, key: str) -> bool:
        """NodeExpandVolume for a claim the resizer left NodeResizePending, on the node where a pod has its volume
        published, then the claim's status says the new size; not mounted anywhere, its next mount does it.
        Returns True to be retried (the call failed: a FileSystemResizeFailed Warning says why)."""
        claim = self.ctx.informers.pvcs.get(key)
        if claim is None or not node_resize_pending(claim):
            return False
        pv_name = claim["spec"].get("volumeName") or ""
        pv = self.ctx.informers.pvs.get(pv_name)
        handle = ((pv or {}).get("spec", {}).get("csi") or {}).get("volumeHandle", "")
        published = next(((node, sorted(uids)[0]) for (node, h), uids in self._publishers.items()
                          if h == handle and uids), None)
        if pv is None or published is None:
            return False
        node, pod_uid = published
        capacity = pv["spec"]["capacity"]["storage"]
        plugin, root = self._plugins[node], self._root / node
        claim_ref = {**claim, "kind": "PersistentVolumeClaim", "apiVersion": "v1"}
        try:
            async with self._volume_locks[(node, handle)]:
                await plugin.NodeExpandVolume(csi.NodeExpandVolumeRequest(
                    volume_id=handle, volume_path=target_path(root, pod_uid, pv_name),
                    staging_target_path=staging_path(root, handle),
                    capacity_range=csi.CapacityRange(required_bytes=quantity_bytes(capacity)),
                    volume_capability=volume_capability(pv)), timeout=CSI_TIMEOUT_SECONDS)
        except grpc.aio.AioRpcError as error:
            await self.ctx.event(claim_ref, "FileSystemResizeFailed", "MountVolume.NodeExpandVolume failed for "
                                 f"volume {pv_name!r} : {describe_rpc_error(error)}", COMPONENT)
            return True
        namespace, name = key.split("/", 1)
        updated = await self.ctx.client.patch(api.PVC.path(namespace, name, "status"),
                                              build_expansion_finished(claim, capacity))
        self.ctx.informers.pvcs.observe(updated)
        await self.ctx.event(claim_ref, "FileSystemResizeSuccessful", "MountVolume.NodeExpandVolume succeeded for "
                             f"volume {pv_name!r}", COMPONENT, warning=False)
        return False

    async def _reconcile(self, key: str) -> bool:
        pod = self.ctx.informers.pods.get(key)
        if pod is None:
            return False
        if pod["metadata"].get("deletionTimestamp"):
            return await self._terminate(key, pod)
        if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            return False
        node = pod["spec"]["nodeName"]
        namespace = pod["metadata"]["namespace"]
        mounted = self._mounted[pod["metadata"]["uid"]]
        pending: list[tuple[str, str]] = []  # (pv name, handle) attached but not mounted
        for volume, claim in claim_volumes(pod).items():
            claim_key = f"{namespace}/{claim}"
            pvc = self.ctx.informers.pvcs.get(claim_key)
            pv_name = (pvc or {}).get("spec", {}).get("volumeName")
            pv = self.ctx.informers.pvs.get(pv_name or "")
            if pv is None or foreign_ephemeral_claim(pod, volume, pvc):
                self._waiting_claims[claim_key].add(key)
                continue
            csi = pv["spec"].get("csi") or {}
            if csi.get("driver") != DRIVER_NAME or pv_name in mounted:
                continue
            if not self._attached(pv_name, node):
                self._waiting[(pv_name, node)].add(key)
                continue
            pending.append((pv_name, csi["volumeHandle"]))
        self._touched[pod["metadata"]["uid"]].update(pv_name for pv_name, _ in pending)
        results = await asyncio.gather(*(self._mount(pod, pv_name, handle) for pv_name, handle in pending))
        mounted.update(pv_name for (pv_name, _), ok in zip(pending, results, strict=True) if ok)
        if not all(results):
            return True
        if self._all_mounted(pod, mounted):
            index = self._node_index.get(node, 0)
            processes = runs_processes(pod)
            host_ip = self.host_ip() if processes else None
            if processes:
                uid = pod["metadata"]["uid"]
                if uid in self.runtime.pods or uid in self._initializing:
                    return False  # started by an earlier pass; its Running status is on its way
                if projected_volumes(pod):
                    if not await self.projector.set_up(pod):
                        return True  # a FailedMount Warning said why; retried with backoff
                    if uid not in self._pod_tasks:
                        self._spawn_pod_task(uid, self.projector.refresh_tokens(uid))
            status = build_running_status(pod, node_address(index),
                                          choose_pod_ip(pod, index, host_ip, self._addresses))
            if processes:
                if pod["spec"].get("initContainers"):  # they run to their end first: not on this worker
                    self._initializing.add(uid)
                    self._spawn_task(self._start_and_report(pod, status))
                    return False
                await self._start_and_report(pod, status)
                return False
            await self._report_running(pod, status)
        return False

    def _spawn_task(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("kubelet task %s failed", task.get_name(), exc_info=task.exception())

    async def _start_and_report(self, pod: api.Obj, status: api.Obj) -> None:
        """Start the pod's processes (its init containers first, to their end), then report it Running."""
        latest = self.ctx.informers.pods.get(api.key_of(pod))
        if latest is None or latest["metadata"].get("uid") != pod["metadata"]["uid"] or \
                latest["metadata"].get("deletionTimestamp"):
            self._initializing.discard(pod["metadata"]["uid"])
            return  # deleted before it started
        try:
            group = await self._start_containers(pod, status)
        finally:
            self._initializing.discard(pod["metadata"]["uid"])
        if group is None:
            return
        statuses = [c.status(group.uid) for c in group.containers.values()]
        status["status"]["containerStatuses"] = statuses
        status["status"]["conditions"] = [
            *(c for c in status["status"]["conditions"] if c["type"] not in ("ContainersReady", "Ready")),
            *readiness_conditions(statuses)]
        if group.init_containers:
            status["status"]["initContainerStatuses"] = [c.status(group.uid) for c in group.init_containers.values()]
        try:
            await self._report_running(pod, status)
        except api.ApiError as error:  # deleted meanwhile
            log.warning("status of %s/%s: %s", pod["metadata"]["namespace"], pod["metadata"]["name"], error)
        if not group.stopping:
            for probe in self.prober.probes(pod, group, status["status"]["podIP"]):
                self._spawn_pod_task(group.uid, probe)

    async def _report_running(self, pod: api.Obj, status: api.Obj) -> None:
        running = await self.ctx.client.patch(
            api.POD.path(pod["metadata"]["namespace"], pod["metadata"]["name"], "status"), status, strategic=True)
        self.ctx.informers.pods.observe(running)

    def volume_dirs(self, pod: api.Obj) -> dict[str, str]:
        """The pod's CSI volumes by volume name -> the kubelet's target path (which leads to the volume's data),
        and its projected volumes' directories."""
        namespace, node = pod["metadata"]["namespace"], pod["spec"]["nodeName"]
        found = self.projector.volume_dirs(pod)
        for volume, claim in claim_volumes(pod).items():
            pvc = self.ctx.informers.pvcs.get(f"{namespace}/{claim}")
            pv_name = (pvc or {}).get("spec", {}).get("volumeName")
            if pv_name:
                found[volume] = target_path(self._root / node, pod["metadata"]["uid"], pv_name)
        return found

    async def _start_containers(self, pod: api.Obj, running: api.Obj) -> PodProcesses | None:
        """Start the pod's containers and watch them; a refused container fails the pod (None)."""
        try:
            group = await self.runtime.start(pod, self.volume_dirs(pod))
        except ContainerConfigError as error:
            await self.ctx.event(pod, "Failed", str(error), COMPONENT)
            self.runtime.forget(pod["metadata"]["uid"])
            self._cancel_pod_tasks(pod["metadata"]["uid"])
            failed = {"status": {**running["status"], "phase": "Failed", "reason": "CreateContainerConfigError",
                                 "message": str(error)[:500],
                                 "conditions": [{"type": kind, "status": "False", "reason": "PodFailed",
                                                 "lastTransitionTime": api.now_rfc3339()}
                                                for kind in ("ContainersReady", "Ready")],
                                 "containerStatuses": [{
                                     "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
                                     "restartCount": 0, "state": {"waiting": {
                                         "reason": "CreateContainerConfigError", "message": str(error)[:500]}}}
                                     for c in pod["spec"].get("containers") or []]}}
            answer = await self.ctx.client.patch(api.POD.path(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                                              "status"), failed, strategic=True)
            self.ctx.informers.pods.observe(answer)
            return None
        if group.init_failed is not None:
            if not group.stopping:  # deleted meanwhile: its teardown says the rest
                self._cancel_pod_tasks(group.uid)
                await self._report_init_failed(pod, group, running)
            return None
        for name in group.containers:
            self._spawn_task(self._watch_container(pod, group, name))
        return group

    async def _report_init_failed(self, pod: api.Obj, group: PodProcesses, running: api.Obj) -> None:
        """An init container failed: the pod fails (restartPolicy Never is all this kubelet restarts init
        containers for: none), its containers never started, as a kubelet reports it."""
        failed = {"status": {**running["status"], "phase": "Failed",
                             "conditions": [{"type": kind, "status": "False", "reason": "PodFailed",
                                             "lastTransitionTime": api.now_rfc3339()}
                                            for kind in ("Initialized", "ContainersReady", "Ready")],
                             "initContainerStatuses": [c.status(group.uid) for c in group.init_containers.values()],
                             "containerStatuses": [{
                                 "name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False,
                                 "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
                                 for c in pod["spec"].get("containers") or []]}}
        try:
            answer = await self.ctx.client.patch(api.POD.path(group.namespace, group.name, "status"), failed,
                                                 strategic=True)
        except api.ApiError as error:
            log.warning("status of %s/%s: %s", group.namespace, group.name, error)
            return
        self.ctx.informers.pods.observe(answer)

    async def _watch_container(self, pod: api.Obj, group: PodProcesses, name: str) -> None:
        """Report each exit; restart per restartPolicy; the pod's phase once it is decided."""
        policy = pod["spec"].get("restartPolicy", "Always")
        while True:
            code = await self.runtime.wait(group, name)
            if group.stopping:
                return
            restart = policy == "Always" or (policy == "OnFailure" and (code != 0 or
                                                                        group.containers[name].probe_killed))
            await self._report_containers(pod, group, restart=restart)
            if not restart:
                return
            await asyncio.sleep(min(10.0, 1.0 * 2 ** group.containers[name].restarts))
            if group.stopping:
                return
            await self.runtime.restart(group, pod, name, self.volume_dirs(pod))
            await self._report_containers(pod, group, restart=False)

    async def _report_probed(self, pod: api.Obj, group: PodProcesses) -> None:
        """A readiness or startup probe's result changed: the containers' status and the pod's Ready."""
        if not group.stopping:
            await self._report_containers(pod, group, restart=True)

    async def _report_containers(self, pod: api.Obj, group: PodProcesses, restart: bool) -> None:
        codes = [c.exit_code for c in group.containers.values()]
        statuses = [c.status(group.uid) for c in group.containers.values()]
        patch: api.Obj = {"status": {"containerStatuses": statuses, "conditions": readiness_conditions(statuses)}}
        phase = None if restart else pod_phase(pod["spec"].get("restartPolicy", "Always"), codes)
        if phase is not None:
            patch["status"]["phase"] = phase
            self._cancel_pod_tasks(group.uid)  # it ended: nothing to probe, no token to renew
        try:
            answer = await self.ctx.client.patch(api.POD.path(group.namespace, group.name, "status"), patch,
                                                 strategic=True)
        except api.ApiError as error:  # the pod may be gone already
            log.warning("status of %s/%s: %s", group.namespace, group.name, error)
            return
        self.ctx.informers.pods.observe(answer)

    def _all_mounted(self, pod: api.Obj, mounted: set[str]) -> bool:
        namespace = pod["metadata"]["namespace"]
        for claim in claim_names(pod):
            pvc = self.ctx.informers.pvcs.get(f"{namespace}/{claim}")
            pv_name = (pvc or {}).get("spec", {}).get("volumeName")
            pv = self.ctx.informers.pvs.get(pv_name or "")
            if pv is None:
                return False
            if (pv["spec"].get("csi") or {}).get("driver") == DRIVER_NAME and pv_name not in mounted:
                return False
        return True

    def _attached(self, pv_name: str, node: str) -> bool:
        return (pv_name, node) in self._attached_pairs

    async def _report_in_use(self, node: str, add: str | None = None, remove: str | None = None) -> None:
        """Change the node's volumesInUse and return once the API has it (one patch for all waiting changes)."""
        if add:
            self._in_use[node].add(add)
        if remove:
            self._in_use[node].discard(remove)
        self._in_use_wanted[node] += 1
        wanted = self._in_use_wanted[node]
        async with self._in_use_locks[node]:
            if self._in_use_reported[node] >= wanted:
                return
            version = self._in_use_wanted[node]
            await self.ctx.client.patch(api.NODE.path(name=node, subresource="status"),
                                        {"status": {"volumesInUse": sorted(self._in_use[node])}}, strategic=True)
            self._in_use_reported[node] = version

    async def _mount(self, pod: api.Obj, pv_name: str, handle: str) -> bool:
        """NodeStageVolume (once per volume and node: the driver answers a staged volume at once), then
        NodePublishVolume into the pod's volume directory."""
        node = pod["spec"]["nodeName"]
        pv = self.ctx.informers.pvs.get(pv_name) or {"spec": {}}
        plugin, root = self._plugins[node], self._root / node
        capability = volume_capability(pv)
        context = (pv["spec"].get("csi") or {}).get("volumeAttributes") or {}
        publish_context = self._attached_pairs.get((pv_name, node), {})
        staging = staging_path(root, handle)
        stage = "MountVolume.MountDevice"
        try:
            async with self._volume_locks[(node, handle)]:
                await self._report_in_use(node, add=unique_volume_name(handle))
                await plugin.NodeStageVolume(csi.NodeStageVolumeRequest(
                    volume_id=handle, publish_context=publish_context, staging_target_path=staging,
                    volume_capability=capability, volume_context=context), timeout=CSI_TIMEOUT_SECONDS)
                stage = "MountVolume.SetUp"
                await plugin.NodePublishVolume(csi.NodePublishVolumeRequest(
                    volume_id=handle, publish_context=publish_context, staging_target_path=staging,
                    target_path=target_path(root, pod["metadata"]["uid"], pv_name), volume_capability=capability,
                    volume_context=context), timeout=CSI_TIMEOUT_SECONDS)
                self._publishers[(node, handle)].add(pod["metadata"]["uid"])
            ref = pv["spec"].get("claimRef") or {}
            claim_key = f"{ref.get('namespace')}/{ref.get('name')}"
            if node_resize_pending(self.ctx.informers.pvcs.get(claim_key) or {}):  # finished at the next mount
                self.expander.kick(claim_key)
            return True
        except grpc.aio.AioRpcError as error:
            await self.ctx.event(pod, "FailedMount", f"{stage} failed for volume {pv_name!r} : "
                                 f"{describe_rpc_error(error)}", COMPONENT)
            return False

    async def _unmount(self, pod: api.Obj, pv_name: str) -> bool:
        """NodeUnpublishVolume, then NodeUnstageVolume when no other pod on the node has the volume published."""
        pv = self.ctx.informers.pvs.get(pv_name)
        handle = (pv or {}).get("spec", {}).get("csi", {}).get("volumeHandle", "")
        node = pod["spec"]["nodeName"]
        plugin, root = self._plugins[node], self._root / node
        stage = "UnmountVolume.TearDown"
        try:
            async with self._volume_locks[(node, handle)]:
                await plugin.NodeUnpublishVolume(csi.NodeUnpublishVolumeRequest(
                    volume_id=handle, target_path=target_path(root, pod["metadata"]["uid"], pv_name)),
                    timeout=CSI_TIMEOUT_SECONDS)
                users = self._publishers[(node, handle)]
                users.discard(pod["metadata"]["uid"])
                if users:
                    return True  # still published for another pod here: the staging stays
                self._publishers.pop((node, handle), None)
                stage = "UnmountDevice"
                await plugin.NodeUnstageVolume(csi.NodeUnstageVolumeRequest(
                    volume_id=handle, staging_target_path=staging_path(root, handle)), timeout=CSI_TIMEOUT_SECONDS)
                await self._report_in_use(node, remove=unique_volume_name(handle))
            return True
        except grpc.aio.AioRpcError as error:
            await self.ctx.event(pod, "FailedUnmount", f"{stage} failed for volume {pv_name!r} : "
                                 f"{describe_rpc_error(error)}", COMPONENT)
            return False

    async def _tear_down(self, uid: str) -> bool:
        """Unmount what a pod removed from the API left mounted; retried until every volume is unmounted."""
        pod, mounted = self._orphaned.get(uid, ({}, set()))
        self._cancel_pod_tasks(uid)
        await self.runtime.stop(uid, 0.0)  # removed from the API at once: no grace period left
        volumes = sorted(mounted)
        results = await asyncio.gather(*(self._unmount(pod, pv_name) for pv_name in volumes))
        mounted.difference_update(pv_name for pv_name, ok in zip(volumes, results, strict=True) if ok)
        if mounted:
            return True
        self.runtime.forget(uid)
        self.projector.forget(uid)
        self._orphaned.pop(uid, None)
        return False

    async def _terminate(self, key: str, pod: api.Obj) -> bool:
        uid = pod["metadata"]["uid"]
        self._cancel_pod_tasks(uid)  # no probe kills, no token is written, while it stops
        await self.runtime.stop(uid, grace_seconds(pod))  # processes end before their volumes are unmounted
        mounted = self._mounted.get(uid, set()) | self._touched.get(uid, set())
        volumes = sorted(mounted)
        results = await asyncio.gather(*(self._unmount(pod, pv_name) for pv_name in volumes))
        for pv_name, ok in zip(volumes, results, strict=True):
            if ok:
                mounted.discard(pv_name)
                self._mounted.get(uid, set()).discard(pv_name)
                self._touched.get(uid, set()).discard(pv_name)
        if mounted:
            return True
        self.runtime.forget(uid)
        self.projector.forget(uid)
        namespace, name = key.split("/", 1)
        answer = await self.ctx.client.delete(api.POD.path(namespace, name), {
            "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
            "preconditions": {"uid": pod["metadata"]["uid"]}})
        self.ctx.informers.pods.observe_deleted(pod, answer)
        return False
