"""The simulated driver's node plugins as a DaemonSet's pods: one pod per node, and deleting it restarts that node's
plugin.

On a real cluster a CSI driver's node plugin runs in a DaemonSet pod on every node. Deleting that pod stops the
plugin on that node only: the kubelet cannot stage, publish or unpublish the driver's volumes there until the
replacement pod's plugin listens again on its socket, and calls made meanwhile fail (gRPC UNAVAILABLE) and are
retried. Mounts made before stay (they live in the kernel, not in the plugin). The simulator serves each node's
plugin in-process, so it does the same: each node's plugin is registered as a pod ``csi-sim-node-<node>`` in
kube-system, and when that pod is deleted the node's gRPC server stops (its calls in flight are cancelled), stays
away ``RESTART_SECONDS`` (a container's restart), listens again and registers a new pod (new uid). What the array
and the driver know (staged and published volumes) is kept, as a real plugin reads it back from its node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import grpc

from localcluster.simulator import api
from localcluster.simulator.runtime import HOST_PROCESS_ANNOTATION

log = logging.getLogger("simulator.plugins")
NAMESPACE = "kube-system"
COMPONENT = "csi-sim-node"
IMAGE = "csibench.io/csi-sim-driver:local"  # recorded on the pod; nothing pulls it
RESTART_SECONDS = 1.0
PART_OF_LABEL, PART_OF = "app.kubernetes.io/part-of", "csibench-localcluster"

StartServer = Callable[[str, Path], Awaitable[grpc.aio.Server]]


def pod_name(node: str) -> str:
    return f"{COMPONENT}-{node}"


def build_plugin_pod(node: str, node_uid: str, socket: Path) -> api.Obj:
    """The node plugin's pod on ``node``: owned by the node and marked as a host process, so the simulated kubelet
    only reports its status (pure)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod_name(node), "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": COMPONENT, "app.kubernetes.io/component": "node-plugin",
                       PART_OF_LABEL: PART_OF,
                       # whoever runs a driver says so of its own image (deploy/components/disruptions admits it)
                       "csibench.io/disruptable": "true"},
            "annotations": {HOST_PROCESS_ANNOTATION: COMPONENT},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
                                 "controller": True}],
        },
        "spec": {
            "nodeName": node, "priorityClassName": "system-node-critical", "hostNetwork": True,
            "containers": [{"name": COMPONENT, "image": IMAGE, "args": [f"--endpoint=unix://{socket}",
                                                                         f"--node-id={node}"]}],
        },
    }


class NodePlugins:
    """Each node's plugin server and pod; a deleted pod restarts its node's plugin."""

    def __init__(self, client: api.Client, sockets: dict[str, Path], start_server: StartServer,
                 restart_seconds: float = RESTART_SECONDS) -> None:
        self.client = client
        self.sockets = sockets
        self.start_server = start_server
        self.restart_seconds = restart_seconds
        self.servers: dict[str, grpc.aio.Server] = {}
        self.uids: dict[str, str] = {}  # node -> uid of its plugin pod
        self.restarts: dict[str, int] = {}
        self._restarting: dict[str, asyncio.Task[None]] = {}

    async def start(self) -> None:
        for node, socket in self.sockets.items():
            self.servers[node] = await self.start_server(node, socket)

    async def register(self) -> None:
        """Register every node's plugin pod (the nodes exist by now)."""
        await asyncio.gather(*(self._register(node) for node in self.sockets))

    async def _register(self, node: str) -> None:
        """Register the node's plugin pod anew (one left by an earlier simulator is replaced); retried until it
        is done (the API server may be away for a while in tests)."""
        path = api.POD.path(NAMESPACE, pod_name(node))
        while True:
            try:
                found = await self.client.get(api.NODE.path(name=node))
                if found is not None:
                    old = await self.client.get(path)
                    if old is not None:
                        await self.client.delete(path, {"apiVersion": "v1", "kind": "DeleteOptions",
                                                        "gracePeriodSeconds": 0,
                                                        "preconditions": {"uid": old["metadata"]["uid"]}})
                    created = await self.client.create(api.POD, build_plugin_pod(node, found["metadata"]["uid"],
                                                                                 self.sockets[node]), NAMESPACE)
                    if created is not None:
                        self.uids[node] = created["metadata"]["uid"]
                        return
            except (api.ApiError, aiohttp.ClientError, OSError, TimeoutError) as error:
                log.warning("registering the node plugin pod of %s: %s; retrying", node, error)
            await asyncio.sleep(0.5)

    def on_pod(self, event: str, pod: api.Obj) -> None:
        """A pod event (the kubelet's pod informer): our plugin pod deleted, or marked for deletion, restarts
        that node's plugin once."""
        meta = pod["metadata"]
        node = pod["spec"].get("nodeName", "")
        if meta.get("namespace") != NAMESPACE or meta.get("name") != pod_name(node):
            return
        if self.uids.get(node) != meta.get("uid") or node in self._restarting:
            return
        if event == "DELETED" or meta.get("deletionTimestamp"):
            task = asyncio.get_running_loop().create_task(self.restart(node), name=f"restart-plugin:{node}")
            self._restarting[node] = task
            task.add_done_callback(lambda _: self._restarting.pop(node, None))

    async def restart(self, node: str) -> None:
        server = self.servers.pop(node, None)
        log.info("node plugin pod of %s deleted: stopping its plugin for %.1f s", node, self.restart_seconds)
        if server is not None:
            await server.stop(grace=None)
        await asyncio.sleep(self.restart_seconds)
        self.servers[node] = await self.start_server(node, self.sockets[node])
        self.restarts[node] = self.restarts.get(node, 0) + 1
        await self._register(node)
        log.info("node plugin of %s listening again (restart %d)", node, self.restarts[node])

    async def stop(self) -> None:
        for task in list(self._restarting.values()):
            task.cancel()
        for server in self.servers.values():
            await server.stop(grace=None)
