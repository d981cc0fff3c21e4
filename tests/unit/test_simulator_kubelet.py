"""The simulated kubelet's volume operations against a node plugin that behaves like ours: a pod recreated
under the same name mounts its volume while its predecessor is torn down on the same node (a restored step)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc

from localcluster.simulator.api import ApiError
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


def test_a_process_pod_waits_for_its_token_and_a_pause_pod_asks_for_none(tmp_path: Path) -> None:
    """A process pod whose TokenRequest fails gets FailedMount in the kubelet's words and is not started (retried);
    once the token comes it starts, at the host's address. A pause pod with the same volume is reported Running at
    once, at a 127.2 address, without any token request."""
    events: list[str] = []
    requests: list[str] = []
    patches: list[dict[str, Any]] = []
    started: list[str] = []
    answers = iter([ApiError(403, 'serviceaccounts "default" is forbidden: nope')])

    async def request(method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        requests.append(f"{method} {path}")
        answer = next(answers, None)
        if answer is not None:
            raise answer
        return {"status": {"token": "t", "expirationTimestamp": "2099-01-01T00:00:00Z"}}

    async def get(path: str) -> dict[str, Any]:
        return {"data": {"ca.crt": "PEM"}}

    async def patch(path: str, body: dict[str, Any], strategic: bool = False) -> dict[str, Any]:
        patches.append(body)
        return {}

    def shaped(name: str, image: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {
            "nodeName": NODE, "containers": [{"name": "c", "image": image, "command": ["sleep", "1"]}],
            "volumes": [{"name": "kube-api-access-abcde", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]}}

    pods = {"ns/work": shaped("work", "csibench/workload:1"), "ns/pause": shaped("pause", "registry.k8s.io/pause:3.10")}

    async def scenario() -> None:
        kubelet = _kubelet(NodePlugin(), tmp_path, events)
        kubelet.ctx.client = SimpleNamespace(request=request, get=get, patch=patch)  # type: ignore[assignment]
        kubelet.projector._client = kubelet.ctx.client
        kubelet.ctx.informers.pods = SimpleNamespace(  # type: ignore[assignment]
            handlers=[], get=pods.get, observe=lambda obj: None)
        kubelet.host_ip = lambda: "192.0.2.2"  # type: ignore[method-assign]

        async def start(pod: dict[str, Any], status: dict[str, Any]) -> None:
            started.append(status["status"]["podIP"])

        kubelet._start_and_report = start  # type: ignore[method-assign]
        assert await kubelet._reconcile("ns/pause") is False
        assert requests == [] and patches[0]["status"]["podIP"].startswith("127.2.")
        assert await kubelet._reconcile("ns/work") is True  # retried with backoff
        assert started == [] and events == [
            'FailedMount: MountVolume.SetUp failed for volume "kube-api-access-abcde" : failed to fetch token: '
            'serviceaccounts "default" is forbidden: nope']
        assert await kubelet._reconcile("ns/work") is False
        assert started == ["192.0.2.2"] and requests == ["POST /api/v1/namespaces/ns/serviceaccounts/default/token"] * 2
        assert (tmp_path / NODE / "pods" / "uid-work" / "volumes" / "kubernetes.io~projected" / "kube-api-access-abcde"
                / "token").read_text() == "t"
        kubelet._cancel_pod_tasks("uid-work")
        kubelet.projector.forget("uid-work")

    asyncio.run(scenario())
