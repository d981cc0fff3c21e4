"""The local cluster behaves like a Kubernetes cluster with a CSI driver: real controllers, simulated storage."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from localcluster.launcher import LocalCluster
from localcluster.simulator.config import DRIVER_NAME
from tests.support import manifests
from tests.support.kube import SNAPSHOT_GROUP, Kube, wait_until

pytestmark = pytest.mark.integration



def create_pod(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    """Right after a namespace is created its default ServiceAccount may not exist yet: retry briefly."""
    deadline = time.monotonic() + 15
    while True:
        try:
            kube.core.create_namespaced_pod(namespace, body)
            return
        except ApiException as error:
            if "serviceaccount" not in str(error.body) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def bound_claims(kube: Kube, namespace: str) -> list[Any]:
    return [c for c in kube.core.list_namespaced_persistent_volume_claim(namespace).items
            if c.status.phase == "Bound"]


def create_claims(kube: Kube, namespace: str, names: list[str], storage_class: str) -> None:
    for name in names:
        kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc(name, storage_class))


def test_pvc_binds_through_the_real_pv_controller(kube: Kube, namespace: str) -> None:
    create_claims(kube, namespace, ["data"], "csibench-sim")
    claim = wait_until(lambda: bound_claims(kube, namespace), 30, "PVC Bound")[0]
    pv = kube.core.read_persistent_volume(claim.spec.volume_name)
    assert pv.metadata.annotations["pv.kubernetes.io/provisioned-by"] == DRIVER_NAME
    assert pv.spec.claim_ref.uid == claim.metadata.uid
    assert pv.spec.csi.driver == DRIVER_NAME
    # The PV controller, not the simulator, completed the binding.
    assert claim.metadata.annotations.get("pv.kubernetes.io/bind-completed") == "yes"


def test_pod_with_four_claims_is_scheduled_attached_and_detached(kube: Kube, namespace: str) -> None:
    claims = [f"vol-{i}" for i in range(4)]
    create_claims(kube, namespace, claims, "csibench-sim")
    create_pod(kube, namespace, manifests.pod("app", claims))

    def running() -> Any:
        pod = kube.core.read_namespaced_pod("app", namespace)
        return pod if pod.status.phase == "Running" else None

    pod = wait_until(running, 60, "pod Running")
    assert pod.spec.node_name.startswith("sim-node-")
    assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)
    scheduled = kube.events(namespace, "Scheduled")
    assert scheduled and scheduled[0].reporting_component == "default-scheduler"
    volume_names = {kube.core.read_namespaced_persistent_volume_claim(c, namespace).spec.volume_name
                    for c in claims}

    def attachments() -> list[Any]:
        return [a for a in kube.storage.list_volume_attachment().items
                if a.spec.source.persistent_volume_name in volume_names]

    found = attachments()
    assert len(found) == 4 and all(a.status.attached for a in found)
    assert all(a.spec.node_name == pod.spec.node_name for a in found)

    kube.core.delete_namespaced_pod("app", namespace)
    wait_until(lambda: not kube.core.list_namespaced_pod(namespace).items, 60, "pod removed")
    wait_until(lambda: not attachments(), 60, "VolumeAttachments removed")


def test_snapshot_becomes_ready_and_restores_into_a_new_claim(kube: Kube, namespace: str) -> None:
    create_claims(kube, namespace, ["source"], "csibench-sim")
    kube.custom.create_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots",
                                                manifests.snapshot("snap", "source"))

    def ready() -> Any:
        snap = kube.custom.get_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots", "snap")
        return snap if (snap.get("status") or {}).get("readyToUse") else None

    snap = wait_until(ready, 60, "VolumeSnapshot readyToUse")
    content = kube.custom.get_cluster_custom_object(*SNAPSHOT_GROUP, "volumesnapshotcontents",
                                                    snap["status"]["boundVolumeSnapshotContentName"])
    assert content["status"]["readyToUse"] is True
    assert content["spec"]["volumeSnapshotRef"]["uid"] == snap["metadata"]["uid"]

    kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc("restored", "csibench-sim",
                                                                                 snapshot="snap"))
    wait_until(lambda: len(bound_claims(kube, namespace)) == 2, 60, "restored PVC Bound")


def test_wait_for_first_consumer_binds_only_after_scheduling(kube: Kube, namespace: str,
                                                            storage_class: Any) -> None:
    late = storage_class("WaitForFirstConsumer")
    create_claims(kube, namespace, ["late"], late)
    time.sleep(3)
    claim = kube.core.read_namespaced_persistent_volume_claim("late", namespace)
    assert claim.status.phase == "Pending" and not claim.spec.volume_name
    create_pod(kube, namespace, manifests.pod("consumer", ["late"]))
    wait_until(lambda: bound_claims(kube, namespace), 60, "PVC Bound after the pod was scheduled")
    claim = kube.core.read_namespaced_persistent_volume_claim("late", namespace)
    assert claim.metadata.annotations["volume.kubernetes.io/selected-node"].startswith("sim-node-")
    wait_until(lambda: kube.core.read_namespaced_pod("consumer", namespace).status.phase == "Running", 60,
               "consumer pod Running")


def test_deleting_everything_leaves_no_volume_attachment_or_content(kube: Kube, namespace: str) -> None:
    create_claims(kube, namespace, ["a", "b"], "csibench-sim")
    create_pod(kube, namespace, manifests.pod("user", ["a", "b"]))
    kube.custom.create_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots",
                                                manifests.snapshot("snap", "a"))
    wait_until(lambda: (kube.snapshots(namespace)[0].get("status") or {}).get("readyToUse"), 60, "snapshot")
    kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc("clone", "csibench-sim",
                                                                                 snapshot="snap"))
    wait_until(lambda: len(bound_claims(kube, namespace)) == 3, 60, "three claims Bound")
    wait_until(lambda: kube.core.read_namespaced_pod("user", namespace).status.phase == "Running", 60, "pod")
    volumes = {c.spec.volume_name for c in bound_claims(kube, namespace)}

    kube.core.delete_namespaced_pod("user", namespace)
    kube.custom.delete_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots", "snap")
    for name in ("a", "b", "clone"):
        kube.core.delete_namespaced_persistent_volume_claim(name, namespace)

    def leftovers() -> list[str]:
        pvs = [p.metadata.name for p in kube.core.list_persistent_volume().items if p.metadata.name in volumes]
        vas = [a.metadata.name for a in kube.storage.list_volume_attachment().items
               if a.spec.source.persistent_volume_name in volumes]
        contents = [c["metadata"]["name"] for c in kube.snapshot_contents()
                    if c["spec"]["volumeSnapshotRef"]["namespace"] == namespace]
        snaps = [s["metadata"]["name"] for s in kube.snapshots(namespace)]
        return pvs + vas + contents + snaps

    wait_until(lambda: not leftovers(), 60, "no PV, VolumeAttachment, VolumeSnapshot or content left")


def _time_to_bind(kube: Kube, namespace: str, storage_class: str, count: int) -> float:
    names = [f"{storage_class}-{i}" for i in range(count)]
    started = time.monotonic()
    create_claims(kube, namespace, names, storage_class)
    wait_until(lambda: len([c for c in bound_claims(kube, namespace) if c.metadata.name in names]) == count,
               120, f"{count} claims of {storage_class} Bound", interval=0.05)
    return time.monotonic() - started


def test_concurrency_limit_serializes_the_backend(kube: Kube, namespace: str, storage_class: Any) -> None:
    serial = storage_class(latency="100ms", concurrency="1")
    parallel = storage_class(latency="100ms", concurrency="20")
    serial_seconds = _time_to_bind(kube, namespace, serial, 20)
    parallel_seconds = _time_to_bind(kube, namespace, parallel, 20)
    assert serial_seconds >= 2.0, f"20 x 100 ms behind a global lock took only {serial_seconds:.2f}s"
    assert serial_seconds >= 4 * parallel_seconds, (serial_seconds, parallel_seconds)


def test_injected_failures_become_warning_events_and_are_retried(kube: Kube, namespace: str,
                                                                 storage_class: Any) -> None:
    flaky = storage_class(failureRate="0.3", failureOperations="createVolume", seed="7")
    create_claims(kube, namespace, [f"flaky-{i}" for i in range(8)], flaky)
    wait_until(lambda: kube.events(namespace, "ProvisioningFailed"), 30, "a ProvisioningFailed event")
    event = kube.events(namespace, "ProvisioningFailed")[0]
    assert event.type == "Warning" and "injected failure" in event.message
    assert event.involved_object.kind == "PersistentVolumeClaim"
    wait_until(lambda: len(bound_claims(kube, namespace)) == 8, 90, "every flaky claim Bound after retries")


def test_hang_mode_leaves_claims_pending(kube: Kube, namespace: str, storage_class: Any,
                                         cluster: LocalCluster) -> None:
    stuck = storage_class(hangOperations="createVolume")
    create_claims(kube, namespace, ["stuck-0", "stuck-1"], stuck)

    def hung_operations() -> list[dict[str, Any]]:
        return [r for r in read_ground_truth(cluster) if r["storageClass"] == stuck and r["result"] == "hang"]

    wait_until(lambda: len(hung_operations()) == 2, 30, "both createVolume operations hung")
    time.sleep(2)
    claims = kube.core.list_namespaced_persistent_volume_claim(namespace).items
    assert [c.status.phase for c in claims] == ["Pending", "Pending"]


def read_ground_truth(cluster: LocalCluster) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines() if line]


def test_ground_truth_records_each_operation_with_start_and_finish(kube: Kube, namespace: str,
                                                                   cluster: LocalCluster,
                                                                   storage_class: Any) -> None:
    slow = storage_class(latency="200ms", concurrency="1")
    before = time.time()
    create_claims(kube, namespace, ["gt-0", "gt-1", "gt-2"], slow)
    wait_until(lambda: len(bound_claims(kube, namespace)) == 3, 30, "claims Bound")
    records = [r for r in read_ground_truth(cluster) if r["storageClass"] == slow]
    assert sorted(r["object"] for r in records) == [f"{namespace}/gt-{i}" for i in range(3)]
    for record in records:
        assert record["op"] == "createVolume" and record["result"] == "ok"
        assert before <= record["queued"] <= record["start"] < record["finish"]
        assert record["finish"] - record["start"] == pytest.approx(0.2, abs=0.05)
    # A global lock: the operations never overlap.
    ordered = sorted(records, key=lambda r: r["start"])
    assert all(a["finish"] <= b["start"] for a, b in itertools.pairwise(ordered))
