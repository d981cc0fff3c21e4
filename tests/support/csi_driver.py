"""The simulated CSI driver served on real unix sockets with one array behind it and no cluster, for the unit
tests of the driver: its stubs, the ground truth it wrote, and the requests' common parts."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc

from localcluster.csi import csi_pb2 as csi
from localcluster.csi import csi_pb2_grpc as csi_grpc
from localcluster.simulator.backend import Backend, GroundTruth
from localcluster.simulator.config import parse_backend_model
from localcluster.simulator.driver import Driver, serve

CLAIM = {"csi.storage.k8s.io/pvc/namespace": "ns", "csi.storage.k8s.io/pvc/name": "data"}
NODES = ("node-a", "node-b")
_MODE = csi.VolumeCapability.AccessMode


def capability(mode: Any = _MODE.SINGLE_NODE_WRITER, fs_type: str = "") -> Any:
    """A mount capability, as the sidecars and the kubelet send one."""
    return csi.VolumeCapability(access_mode=_MODE(mode=mode), mount=csi.VolumeCapability.MountVolume(
        fs_type=fs_type))


MOUNT = capability()


RUN_UID = "7d3c2f0e-run"  # the run the claim ns/data is labelled with


class Array:
    """The parts of the simulator's context the driver uses: one class ("gold"), its backend, one claim (ns/data)."""

    def __init__(self, truth: Path, **parameters: str) -> None:
        self.truth = GroundTruth(truth)
        self._backend = Backend("gold", parse_backend_model(parameters), self.truth)
        self._claims: dict[str, Any] = {"ns/data": {"metadata": {"labels": {"csibench.io/run-uid": RUN_UID}},
                                    "spec": {"storageClassName": "gold"}}}
        self.informers = SimpleNamespace(pvcs=SimpleNamespace(get=self._claims.get))

    def backend(self, storage_class: str) -> Backend:
        assert storage_class == "gold"
        return self._backend

    async def storage_class_of_claim(self, namespace: str, name: str) -> str | None:
        claim = self._claims.get(f"{namespace}/{name}")
        return str(claim["spec"]["storageClassName"]) if claim else None

    def run_of_claim(self, namespace: str, name: str) -> str:
        claim = self._claims.get(f"{namespace}/{name}")
        return str(claim["metadata"]["labels"]["csibench.io/run-uid"]) if claim else ""


async def driver_stubs(tmp_path: Path, max_volumes_per_node: int = 128, **parameters: str) -> AsyncIterator[Any]:
    """Serve the driver (controller socket, one node socket per node of ``NODES``) and yield its stubs: identity,
    controller, group, node and node_identity (node-a's) and nodes (by node ID)."""
    ctx: Any = Array(tmp_path / "truth.jsonl", **parameters)
    sockets = {node: tmp_path / f"{node}.sock" for node in NODES}
    driver = Driver(ctx, tmp_path / "data", max_volumes_per_node)
    servers = await serve(driver, tmp_path / "controller.sock", sockets)
    channels = {node: grpc.aio.insecure_channel(f"unix://{socket}") for node, socket in sockets.items()}
    async with grpc.aio.insecure_channel(f"unix://{tmp_path}/controller.sock") as channel:
        nodes = {node: csi_grpc.NodeStub(node_channel) for node, node_channel in channels.items()}
        yield SimpleNamespace(identity=csi_grpc.IdentityStub(channel), controller=csi_grpc.ControllerStub(channel),
                              group=csi_grpc.GroupControllerStub(channel), node=nodes["node-a"], nodes=nodes,
                              node_identity=csi_grpc.IdentityStub(channels["node-a"]), driver=driver)
    for node_channel in channels.values():
        await node_channel.close()
    for server in servers:
        await server.stop(None)
    ctx.truth.close()


def records(tmp_path: Path) -> list[dict[str, Any]]:
    """The ground truth the driver's array wrote, one record per operation."""
    path = tmp_path / "truth.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def create_volumes(stubs: Any, count: int, prefix: str = "pvc-u") -> list[str]:
    """``count`` volumes named ``<prefix><index>`` (one CreateVolume each, in order); their IDs."""
    ids = []
    for index in range(count):
        created = await stubs.controller.CreateVolume(csi.CreateVolumeRequest(
            name=f"{prefix}{index}", parameters=CLAIM, volume_capabilities=[MOUNT]))
        ids.append(created.volume.volume_id)
    return ids
