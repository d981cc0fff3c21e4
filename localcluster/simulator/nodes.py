"""Simulated nodes: Node objects that stay Ready (Lease heartbeats), their CSINode, and the CSIDriver.

What a kubelet registers so that the real scheduler places pods and the real attach/detach controller creates
VolumeAttachments: the controller-managed-attach-detach annotation, capacity, Ready with the pressure
conditions False, a Lease renewed every 10 s (otherwise the node lifecycle controller taints the node
unreachable after ~40 s), and a CSINode listing the driver. Only status fields a kubelet owns are patched: the
attach/detach controller writes ``status.volumesAttached`` itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import logging
import socket
import struct

from localcluster.simulator import api
from localcluster.simulator.config import ARRAY_AUDIT, ARRAY_FAULTS, DRIVER_NAME, TOPOLOGY_KEY, ZONE_LABEL, zone_of_node
from localcluster.versions import KUBERNETES_VERSION

log = logging.getLogger("simulator.nodes")
LEASE_RENEW_SECONDS = 10.0
STATUS_HEARTBEAT_SECONDS = 30.0
# Enough for 10,000 single-volume pods spread over a few nodes.
PODS_PER_NODE = "20000"
DEFAULT_KUBELET_PORT = 10250


def node_address(index: int) -> str:
    """Loopback addresses: the API server reaches a node's log endpoint there, and nothing leaves this machine."""
    return f"127.0.1.{index + 1}"


def usable_pod_address(address: str) -> bool:
    """An IPv4 address the API server takes in a Service's endpoints (pure): not loopback, link-local, unspecified
    or multicast (``ValidateEndpointIP`` refuses those)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return ip.version == 4 and not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


SIOCGIFADDR = 0x8915  # ioctl: an interface's IPv4 address
ROUTE_PROBE = ("192.0.2.1", 9)  # TEST-NET-1: a UDP connect() picks the route, nothing is sent


def host_address() -> str | None:
    """The host's primary IPv4 address, where a process-mode pod's 0.0.0.0-bound ports answer and which a
    Service's endpoints accept: the source address of the default route (a UDP connect() sends nothing), else the
    first usable address of an interface (SIOCGIFADDR); None when the host has none."""
    candidates = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(ROUTE_PROBE)
        candidates.append(str(probe.getsockname()[0]))
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
                candidates.append(socket.inet_ntoa(answer[20:24]))
    return next((address for address in candidates if usable_pod_address(address)), None)


def build_node(name: str, index: int) -> api.Obj:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "csibench.io/simulated": "true", ZONE_LABEL: zone_of_node(name),
                       TOPOLOGY_KEY: zone_of_node(name)},
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {},
    }


def build_node_status(index: int, kubelet_port: int = DEFAULT_KUBELET_PORT) -> api.Obj:
    stamp = api.now_rfc3339()
    capacity = {"cpu": "64", "memory": "256Gi", "pods": PODS_PER_NODE, "ephemeral-storage": "1Ti"}
    conditions = [
        {"type": kind, "status": "False", "reason": f"KubeletHas{reason}", "message": reason,
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        for kind, reason in (("MemoryPressure", "SufficientMemory"), ("DiskPressure", "NoDiskPressure"),
                             ("PIDPressure", "SufficientPID"))
    ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated kubelet is ready",
          "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}]
    return {"status": {
        "capacity": capacity, "allocatable": capacity, "conditions": conditions,
        "addresses": [{"type": "InternalIP", "address": node_address(index)},
                      {"type": "Hostname", "address": f"node-{index}"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "nodeInfo": {"machineID": f"sim-{index}", "systemUUID": f"sim-{index}", "bootID": f"sim-{index}",
                     "kernelVersion": "6.1.0-sim", "osImage": "csibench simulated node",
                     "containerRuntimeVersion": "sim://1.0", "kubeletVersion": KUBERNETES_VERSION,
                     "kubeProxyVersion": KUBERNETES_VERSION, "operatingSystem": "linux", "architecture": "amd64"},
    }}


def build_csi_node(name: str, node_uid: str, max_volumes: int) -> api.Obj:
    """The CSINode a kubelet registers for the driver: its node ID and how many of its volumes the node takes
    (NodeGetInfo's max_volumes_per_node, which the scheduler honours)."""
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": name, "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]},
        "spec": {"drivers": [{"name": DRIVER_NAME, "nodeID": name, "topologyKeys": [TOPOLOGY_KEY],
                              "allocatable": {"count": max_volumes}}]},
    }


def build_csi_driver() -> api.Obj:
    return {
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        # Its array answers audits and takes fault windows, both through ConfigMaps (audit.py, faults.py).
        "metadata": {"name": DRIVER_NAME, "annotations": {ARRAY_AUDIT: "configmap", ARRAY_FAULTS: "configmap"}},
        "spec": {"attachRequired": True, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"],
                 "fsGroupPolicy": "File"},
    }


def build_lease(name: str) -> api.Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": api.now_rfc3339(micro=True)},
    }


class Nodes:
    def __init__(self, client: api.Client, names: list[str], kubelet_port: int = DEFAULT_KUBELET_PORT,
                 max_volumes_per_node: int = 128) -> None:
        self.client = client
        self.names = names
        self.kubelet_port = kubelet_port
        self.max_volumes_per_node = max_volumes_per_node

    async def register(self) -> None:
        await self.client.create(api.CSI_DRIVER, build_csi_driver())
        for index, name in enumerate(self.names):
            await self.client.create(api.NODE, build_node(name, index))
            node = await self.client.get(api.NODE.path(name=name))
            assert node is not None
            await self.client.patch(api.NODE.path(name=name, subresource="status"),
                                    build_node_status(index, self.kubelet_port), strategic=True)
            await self.client.create(api.CSI_NODE, build_csi_node(name, node["metadata"]["uid"],
                                                                    self.max_volumes_per_node))
            await self.client.create(api.LEASE, build_lease(name), "kube-node-lease")
        log.info("registered %d nodes", len(self.names))

    async def heartbeat(self) -> None:
        """Renew leases every 10 s and refresh the Ready condition every 30 s, until cancelled."""
        last_status = 0.0
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(LEASE_RENEW_SECONDS)
            for index, name in enumerate(self.names):
                try:
                    path = api.LEASE.path("kube-node-lease", name)
                    renewed = await self.client.patch(path, {"spec": {"renewTime": api.now_rfc3339(micro=True)}})
                    if renewed is None:
                        await self.client.create(api.LEASE, build_lease(name), "kube-node-lease")
                    if loop.time() - last_status >= STATUS_HEARTBEAT_SECONDS:
                        await self.client.patch(api.NODE.path(name=name, subresource="status"),
                                                build_node_status(index, self.kubelet_port), strategic=True)
                except (api.ApiError, OSError) as error:
                    log.warning("heartbeat of %s failed: %s", name, error)
            if loop.time() - last_status >= STATUS_HEARTBEAT_SECONDS:
                last_status = loop.time()
