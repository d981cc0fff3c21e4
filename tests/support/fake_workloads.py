"""A controller Deployment on the fake cluster, and the ScaleDown that targets it: what the disruption tests share
(a Deployment controller that makes and removes its pods as spec.replicas says)."""

from __future__ import annotations

import functools
from typing import Any

from csibench.kube.client import Json
from tests.support.fake_kube import FakeKube

CONTROLLER = {"kind": "Deployment", "namespace": "csi-driver", "name": "csi-controller"}
LABELS = {"app": "csi-controller"}


def scale_down_spec(**fields: Any) -> dict[str, Any]:
    return {"step": "createVolume", "afterObjects": 1, "kind": "ScaleDown", "workload": CONTROLLER, "seconds": 1,
            **fields}


def controller_pod(name: str) -> Json:
    return {"metadata": {"name": name, "labels": dict(LABELS), "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "csi-controller-7c", "uid": "rs", "controller": True}]},
        "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "c"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def with_deployment(fake: FakeKube, replicas: int = 2, ready_after: float = 0.2) -> list[int]:
    """A Deployment in csi-driver with ``replicas`` pods, and a controller for it: its spec.replicas decide how
    many pods exist (removed at once, new ones Ready ``ready_after`` later). Returns the
    replicas each scale request set, filled as it goes."""
    fake.put("namespaces", "", {"metadata": {"name": "csi-driver"}})
    fake.put("deployments", "csi-driver", {"metadata": {"name": "csi-controller"}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": dict(LABELS)}}})
    for index in range(replicas):
        fake.put("pods", "csi-driver", controller_pod(f"csi-controller-{index}"))
    scaled: list[int] = []
    original = fake.merge_patch
    serial = iter(range(100, 1000))

    async def merge_patch(path: str, body: Json, on_send: Any = None) -> Json | None:
        answer = await original(path, body, on_send)
        if "/deployments/" in path and "replicas" in (body.get("spec") or {}):
            wanted = body["spec"]["replicas"]
            scaled.append(wanted)
            pods = sorted(fake.named("pods", "csi-driver"))
            for name in pods[wanted:]:
                fake.remove("pods", "csi-driver", name)
            for _ in range(wanted - len(pods)):
                fake._later(ready_after, functools.partial(fake.put, "pods", "csi-driver",
                                                           controller_pod(f"csi-controller-{next(serial)}")))
        return answer
    fake.merge_patch = merge_patch  # type: ignore[method-assign]  # the Deployment controller, for this test
    return scaled
