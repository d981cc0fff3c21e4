"""The kubelet's part for pods on simulated nodes: mount attached volumes, report Running, unmount on delete.

A pod goes Running and Ready only after every CSI volume it uses is attached (its VolumeAttachment says so)
and mounted (the backend's mount operation). Waiting is event-driven: a pod whose volume is not attached yet is
parked on that (volume, node) pair and woken by the VolumeAttachment's update, so the simulator adds no
polling delay to what the operator measures. A deleted pod is unmounted, then removed with grace period 0,
as a kubelet does; only then does the attach/detach controller detach. A pod removed from the API at once (its
``terminationGracePeriodSeconds`` is 0, as csibench's benchmark pods have) still gets its volumes unmounted, as
a kubelet's volume manager tears down what no pod wants any more; the attach/detach controller does not wait for
that here, since simulated nodes report no ``volumesInUse``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict

from localcluster.simulator import api
from localcluster.simulator.backend import InjectedFailure
from localcluster.simulator.config import DRIVER_NAME, Operation, class_of_handle
from localcluster.simulator.context import Context
from localcluster.simulator.controller import Controller
from localcluster.simulator.nodes import node_address

COMPONENT = "kubelet"


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
    return [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"].get("volumes") or []
            if v.get("persistentVolumeClaim")]


class Kubelet:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.controller = Controller("kubelet", self._reconcile)
        self.teardown = Controller("kubelet-teardown", self._tear_down)
        self._orphaned: dict[str, tuple[api.Obj, set[str]]] = {}  # pod uid -> (removed pod, volumes still mounted)
        self._mounted: dict[str, set[str]] = defaultdict(set)  # pod uid -> mounted PV names
        self._waiting: dict[tuple[str, str], set[str]] = defaultdict(set)  # (pv, node) -> pod keys
        self._waiting_claims: dict[str, set[str]] = defaultdict(set)  # pvc key -> pod keys
        self._attached_pairs: set[tuple[str, str]] = set()  # (pv, node) with an attached VolumeAttachment
        self._addresses = (f"127.2.{i // 250}.{i % 250 + 1}" for i in itertools.count())
        self._node_index = {name: index for index, name in enumerate(sorted(ctx.node_names))}
        ctx.informers.pods.handlers.append(self._on_pod)
        ctx.informers.attachments.handlers.append(self._on_attachment)
        ctx.informers.pvcs.handlers.append(self._on_claim)

    def _on_pod(self, event: str, pod: api.Obj) -> None:
        if pod["spec"].get("nodeName") not in self.ctx.node_names:
            return
        if event == "DELETED":
            self.controller.cancel(api.key_of(pod))
            mounted = self._mounted.pop(pod["metadata"]["uid"], set())
            if mounted:
                self._orphaned[pod["metadata"]["uid"]] = (pod, mounted)
                self.teardown.kick(pod["metadata"]["uid"])
        else:
            self.controller.kick(api.key_of(pod))

    def _on_attachment(self, event: str, attachment: api.Obj) -> None:
        pair = (attachment["spec"]["source"].get("persistentVolumeName") or "", attachment["spec"]["nodeName"])
        if event == "DELETED" or not (attachment.get("status") or {}).get("attached"):
            self._attached_pairs.discard(pair)
        else:
            self._attached_pairs.add(pair)
            for pod_key in self._waiting.pop(pair, set()):
                self.controller.kick(pod_key)

    def _on_claim(self, event: str, claim: api.Obj) -> None:
        if event != "DELETED" and claim["spec"].get("volumeName"):
            for pod_key in self._waiting_claims.pop(api.key_of(claim), set()):
                self.controller.kick(pod_key)

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
        for claim in claim_names(pod):
            claim_key = f"{namespace}/{claim}"
            pvc = self.ctx.informers.pvcs.get(claim_key)
            pv_name = (pvc or {}).get("spec", {}).get("volumeName")
            pv = self.ctx.informers.pvs.get(pv_name or "")
            if pv is None:
                self._waiting_claims[claim_key].add(key)
                continue
            csi = pv["spec"].get("csi") or {}
            if csi.get("driver") != DRIVER_NAME or pv_name in mounted:
                continue
            if not self._attached(pv_name, node):
                self._waiting[(pv_name, node)].add(key)
                continue
            pending.append((pv_name, csi["volumeHandle"]))
        results = await asyncio.gather(*(self._mount(pod, pv_name, handle) for pv_name, handle in pending))
        mounted.update(pv_name for (pv_name, _), ok in zip(pending, results, strict=True) if ok)
        if not all(results):
            return True
        if self._all_mounted(pod, mounted):
            index = self._node_index.get(node, 0)
            running = await self.ctx.client.patch(
                api.POD.path(namespace, pod["metadata"]["name"], "status"),
                build_running_status(pod, node_address(index), next(self._addresses)), strategic=True)
            self.ctx.informers.pods.observe(running)
        return False

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

    async def _mount(self, pod: api.Obj, pv_name: str, handle: str) -> bool:
        try:
            await self.ctx.backend(class_of_handle(handle)).run(Operation.MOUNT, f"{api.key_of(pod)}:{pv_name}")
            return True
        except InjectedFailure as failure:
            await self.ctx.event(pod, "FailedMount", f"MountVolume.SetUp failed for volume {pv_name!r}: {failure}",
                                 COMPONENT)
            return False

    async def _unmount(self, pod: api.Obj, pv_name: str) -> bool:
        pv = self.ctx.informers.pvs.get(pv_name)
        handle = (pv or {}).get("spec", {}).get("csi", {}).get("volumeHandle", "")
        try:
            await self.ctx.backend(class_of_handle(handle)).run(Operation.UNMOUNT, f"{api.key_of(pod)}:{pv_name}")
            return True
        except InjectedFailure as failure:
            await self.ctx.event(pod, "FailedUnmount", f"UnmountVolume.TearDown failed for volume {pv_name!r}: "
                                 f"{failure}", COMPONENT)
            return False

    async def _tear_down(self, uid: str) -> bool:
        """Unmount what a pod removed from the API left mounted; retried until every volume is unmounted."""
        pod, mounted = self._orphaned.get(uid, ({}, set()))
        volumes = sorted(mounted)
        results = await asyncio.gather(*(self._unmount(pod, pv_name) for pv_name in volumes))
        mounted.difference_update(pv_name for pv_name, ok in zip(volumes, results, strict=True) if ok)
        if mounted:
            return True
        self._orphaned.pop(uid, None)
        return False

    async def _terminate(self, key: str, pod: api.Obj) -> bool:
        mounted = self._mounted.get(pod["metadata"]["uid"], set())
        volumes = sorted(mounted)
        results = await asyncio.gather(*(self._unmount(pod, pv_name) for pv_name in volumes))
        mounted.difference_update(pv_name for pv_name, ok in zip(volumes, results, strict=True) if ok)
        if mounted:
            return True
        namespace, name = key.split("/", 1)
        answer = await self.ctx.client.delete(api.POD.path(namespace, name), {
            "apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
            "preconditions": {"uid": pod["metadata"]["uid"]}})
        self.ctx.informers.pods.observe_deleted(pod, answer)
        return False
