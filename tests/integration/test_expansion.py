"""Volume expansion on the local cluster, without the operator: the real external-resizer grows a claim whose
request is raised (ControllerExpandVolume on the simulated array), and for the ext4 class the simulated kubelet
grows the filesystem (NodeExpandVolume: resize2fs inside the pod's mount namespace where the host allows online
resize, else at the next mount), as users see it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localcluster import manifests
from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import LocalCluster
from localcluster.simulator.volumes import can_resize_online
from tests.support.cluster import create_pod, phase, pod_gone

pytestmark = pytest.mark.integration
MIB = 1 << 20


def claim(kube: Kube, namespace: str, name: str) -> Any:
    return kube.core.read_namespaced_persistent_volume_claim(name, namespace)


def create_claim(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    kube.core.create_namespaced_persistent_volume_claim(namespace, body)  # type: ignore[arg-type]  # the client validates a dict body


def reasons_on(kube: Kube, namespace: str, name: str) -> set[str]:
    """The reasons of the Events about object ``name``."""
    return {e.reason or "" for e in kube.core.list_namespaced_event(namespace).items
            if present(e.involved_object).name == name}


def expanded(kube: Kube, namespace: str, name: str, size: str) -> bool:
    """The claim says the new size, with no resize condition or allocated resource status left."""
    status = present(claim(kube, namespace, name).status)
    return ((status.capacity or {}).get("storage") == size and not status.conditions
            and not status.allocated_resource_statuses)


def wait_expanded(kube: Kube, namespace: str, name: str, size: str, timeout: float) -> None:
    """Wait until the claim says ``size``; fail with its status and the Events about it."""
    try:
        wait_until(lambda: expanded(kube, namespace, name, size), timeout, f"claim {name} expanded to {size}")
    except AssertionError as error:
        events = [f"{e.type} {e.reason}: {e.message}" for e in kube.core.list_namespaced_event(namespace).items
                  if present(e.involved_object).name == name]
        raise AssertionError(f"{error}; status {present(claim(kube, namespace, name).status).to_dict()}; "
                             f"events {events}") from None


def request(kube: Kube, namespace: str, name: str, size: str) -> None:
    kube.core.patch_namespaced_persistent_volume_claim(name, namespace, {"spec": {"resources": {"requests": {
        "storage": size}}}})


def array_operations(cluster: LocalCluster, operation: str, volume: str) -> list[dict[str, Any]]:
    """What the simulated array did of ``operation`` on ``volume`` (its PV name), from the ground truth."""
    lines = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    return [line for line in lines if line["op"] == operation and line["object"] == volume]


def test_a_directory_volume_grows_on_the_controller_alone(kube: Kube, namespace: str, cluster: LocalCluster,
                                                         storage_class: Any) -> None:
    array = storage_class(expandLatency="300ms")
    create_claim(kube, namespace, manifests.pvc("plain", array, "1Gi"))
    wait_until(lambda: present(claim(kube, namespace, "plain").status).phase == "Bound", 30, "claim Bound")
    request(kube, namespace, "plain", "3Gi")
    wait_expanded(kube, namespace, "plain", "3Gi", 60)
    volume = present(claim(kube, namespace, "plain").spec).volume_name
    pv = kube.core.read_persistent_volume(present(volume))
    assert present(pv.spec).capacity == {"storage": "3Gi"}
    (operation,) = array_operations(cluster, "expandVolume", present(volume))
    assert operation["result"] == "ok" and operation["finish"] - operation["start"] >= 0.3
    reasons = reasons_on(kube, namespace, "plain")
    assert "VolumeResizeSuccessful" in reasons and "FileSystemResizeSuccessful" not in reasons  # no node half


def test_a_mounted_ext4_volume_grows_online_where_the_host_allows_or_at_its_next_mount(
        kube: Kube, namespace: str, cluster: LocalCluster) -> None:
    """Online, ``df`` in the running pod shows the new size. A host without CAP_SYS_RESOURCE (which the kernel's
    online ext4 resize needs) gets what an offline-only node plugin answers, a FileSystemResizeFailed Warning that
    says why, and the filesystem grows when the next pod mounts the volume."""
    create_claim(kube, namespace, manifests.pvc("fs", "csibench-sim-ext4", "64Mi"))
    wait_until(lambda: present(claim(kube, namespace, "fs").status).phase == "Bound", 30, "claim Bound")
    script = "while true; do echo \"size $(df -k /data/v | tail -1 | awk '{print $2}')\"; sleep 0.3; done"

    def start(pod: str) -> None:
        create_pod(kube, namespace, manifests.workload_pod(pod, "fs", script, grace=1))
        wait_until(lambda: phase(kube, namespace, pod) == "Running", 60, f"pod {pod} Running")

    def sizes(pod: str) -> list[int]:
        logs = cluster.kubectl("logs", "-n", namespace, pod)
        return [int(line.split()[1]) for line in logs.splitlines() if line.startswith("size ")]

    start("first")
    before = wait_until(lambda: sizes("first"), 30, "the pod's first df line")[-1]
    assert 40 * 1024 < before <= 64 * 1024  # KiB: 64 MiB less ext4's metadata
    request(kube, namespace, "fs", "128Mi")
    if can_resize_online():
        wait_expanded(kube, namespace, "fs", "128Mi", 90)
        wait_until(lambda: sizes("first")[-1] > 2 * before - 8 * 1024, 30, "df in the running pod: the new size")
    else:
        wait_until(lambda: "FileSystemResizeFailed" in reasons_on(kube, namespace, "fs"), 60, "the node's Warning")
        warning = next(e for e in kube.core.list_namespaced_event(namespace).items
                       if e.reason == "FileSystemResizeFailed")
        assert "CAP_SYS_RESOURCE" in (warning.message or "") and "next mount" in (warning.message or "")
        assert not expanded(kube, namespace, "fs", "128Mi")  # the claim says 64Mi until the node has grown it
        kube.core.delete_namespaced_pod("first", namespace)
        wait_until(lambda: pod_gone(kube, namespace, "first"), 60, "the first pod gone")
        start("second")
        wait_expanded(kube, namespace, "fs", "128Mi", 90)
        wait_until(lambda: sizes("second"), 30, "the second pod's first df line")
        assert sizes("second")[-1] > 2 * before - 8 * 1024
    assert {"FileSystemResizeRequired", "FileSystemResizeSuccessful"} <= reasons_on(kube, namespace, "fs")
