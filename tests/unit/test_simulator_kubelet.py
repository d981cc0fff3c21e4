"""The simulated kubelet's volume operations against a node plugin that behaves like ours: a pod recreated
under the same name mounts its volume while its predecessor is torn down on the same node (a restored step)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc

from localcluster.simulator.kubelet import Kubelet

NODE, HANDLE, PV = "sim-node-1", "vol-1@sim", "pvc-1"


def _refused(details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(grpc.StatusCode.FAILED_PRECONDITION, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                details=details)


class NodePlugin:
    """Stages once per volume (a staged volume is answered at once), publishes only a staged volume."""

    def __init__(self) -> None:
        self.staged = False
        self.calls: list[str] = []

    async def NodeStageVolume(self, request: Any, timeout: float) -> None:
        self.calls.append("stage")
        if not self.staged:
            await asyncio.sleep(0.01)
            self.staged = True

    async def NodePublishVolume(self, request: Any, timeout: float) -> None:
        self.calls.append("publish")
        await asyncio.sleep(0.01)
        if not self.staged:
            raise _refused(f"volume {HANDLE} is not staged on {NODE}")

    async def NodeUnpublishVolume(self, request: Any, timeout: float) -> None:
        self.calls.append("unpublish")
        await asyncio.sleep(0.005)

    async def NodeUnstageVolume(self, request: Any, timeout: float) -> None:
        self.calls.append("unstage")
        self.staged = False


def _kubelet(plugin: NodePlugin, root: Path, events: list[str]) -> Kubelet:
    """A real kubelet whose context has only what mounting needs (the PV and claim informers, events, the node
    status patch) and whose node plugin is ``plugin``. Built on a running loop: its gRPC channels want one."""
    async def event(obj: Any, reason: str, message: str, component: str) -> None:
        events.append(f"{reason}: {message}")

    async def patch(*_: Any, **__: Any) -> None:
        await asyncio.sleep(0)

    pv = {"spec": {"csi": {"volumeHandle": HANDLE}}}
    informer = SimpleNamespace(handlers=[], get=lambda key: None)  # no claim waits on a node expansion
    ctx = SimpleNamespace(node_names=[NODE], event=event, client=SimpleNamespace(patch=patch),
                          informers=SimpleNamespace(pods=informer, attachments=informer, pvcs=informer,
                                                    pvs=SimpleNamespace(get=lambda name: pv)))
    kubelet = Kubelet(ctx, {NODE: root / "node.sock"}, root)  # type: ignore[arg-type]
    kubelet._plugins = {NODE: plugin}  # type: ignore[dict-item]
    return kubelet


def _pod(uid: str) -> dict[str, Any]:
    return {"metadata": {"name": "redo-p00000", "namespace": "ns", "uid": uid}, "spec": {"nodeName": NODE}}


def test_a_successor_mounting_while_its_predecessor_is_torn_down_keeps_the_volume_staged(tmp_path: Path) -> None:
    plugin, events = NodePlugin(), list[str]()

    async def scenario() -> None:
        kubelet = _kubelet(plugin, tmp_path, events)
        assert await kubelet._mount(_pod("old"), PV, HANDLE)
        # The old pod is deleted and a new one of the same name lands on the same node: both at once.
        mounted, unmounted = await asyncio.gather(kubelet._mount(_pod("new"), PV, HANDLE),
                                                  kubelet._unmount(_pod("old"), PV))
        assert mounted and unmounted and events == []
        assert plugin.staged and "unstage" not in plugin.calls  # the new pod has it published: still staged
        assert await kubelet._unmount(_pod("new"), PV)  # the last one out unstages
        assert not plugin.staged and plugin.calls[-1] == "unstage"

    asyncio.run(scenario())
