"""Volume group snapshots on the local cluster, without the operator: the real snapshot-controller and
csi-snapshotter (external-snapshotter v8.7.0, groupsnapshot.storage.k8s.io/v1, its CSIVolumeGroupSnapshot gate on by
default) drive the simulated driver's GroupController, which takes every member of a group in one array operation
at one instant (the ground truth records it with its members) and makes each member a snapshot a clone can be
restored from."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from localcluster import manifests
from localcluster.kube import GROUP_SNAPSHOT_GROUP, SNAPSHOT_GROUP, Kube, items, present, wait_until
from localcluster.launcher import FILESYSTEM_STORAGE_CLASS, LocalCluster
from tests.support.cluster import bound_claims, create_pod, phase, pod_gone

pytestmark = pytest.mark.integration
GROUPS, PER_GROUP = 4, 5


def group_snapshots(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return items(kube.custom.list_namespaced_custom_object(*GROUP_SNAPSHOT_GROUP, namespace, "volumegroupsnapshots"))


def group_contents(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    everything = items(kube.custom.list_cluster_custom_object(*GROUP_SNAPSHOT_GROUP, "volumegroupsnapshotcontents"))
    return [c for c in everything if c["spec"]["volumeGroupSnapshotRef"].get("namespace") == namespace]


def snapshots(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return items(kube.custom.list_namespaced_custom_object(*SNAPSHOT_GROUP, namespace, "volumesnapshots"))


def ready(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("readyToUse"))


def array_operations(cluster: LocalCluster, operation: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    return [line for line in lines if line["op"] == operation]


def create_group(kube: Kube, namespace: str, name: str, labels: dict[str, str]) -> None:
    kube.custom.create_namespaced_custom_object(*GROUP_SNAPSHOT_GROUP, namespace, "volumegroupsnapshots",
                                                manifests.group_snapshot(name, labels))


def test_twenty_volumes_in_groups_of_five_are_four_array_operations_and_leave_nothing(
        kube: Kube, namespace: str, cluster: LocalCluster) -> None:
    for index in range(GROUPS * PER_GROUP):
        kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc(  # type: ignore[arg-type]  # the client validates a dict body
            f"v{index:02d}", "csibench-sim", labels={"group": f"g{index // PER_GROUP}"}))
    wait_until(lambda: len(bound_claims(kube, namespace)) == GROUPS * PER_GROUP, 60, "claims Bound")
    volume_of = {present(c.metadata).name: present(c.spec).volume_name for c in bound_claims(kube, namespace)}
    for group in range(GROUPS):
        create_group(kube, namespace, f"g{group}", {"group": f"g{group}"})
    wait_until(lambda: sum(map(ready, group_snapshots(kube, namespace))) == GROUPS, 90,
               "every group snapshot readyToUse")

    def all_members_ready() -> list[dict[str, Any]] | None:
        found = snapshots(kube, namespace)
        return found if len(found) == GROUPS * PER_GROUP and all(map(ready, found)) else None
    members = wait_until(all_members_ready, 60, "every member snapshot readyToUse")
    for member in members:  # made by the snapshot-controller for its group, owned by it
        (owner,) = member["metadata"]["ownerReferences"]
        assert owner["kind"] == "VolumeGroupSnapshot", member["metadata"]
    operations = [o for o in array_operations(cluster, "createGroupSnapshot")
                  if o["object"].startswith(f"{namespace}/")]
    assert sorted(o["object"] for o in operations) == [f"{namespace}/g{g}" for g in range(GROUPS)]  # one per group
    for operation in operations:  # all of its group's members, at one instant of the array
        group = operation["object"].rpartition("/")[2]
        expected = {volume_of[f"v{i:02d}"] for i in range(GROUPS * PER_GROUP) if f"g{i // PER_GROUP}" == group}
        assert operation["result"] == "ok" and set(operation["members"]) == expected, operation
    for group in range(GROUPS):
        kube.custom.delete_namespaced_custom_object(*GROUP_SNAPSHOT_GROUP, namespace, "volumegroupsnapshots",
                                                    f"g{group}")
    wait_until(lambda: not group_snapshots(kube, namespace) and not group_contents(kube, namespace)
               and not snapshots(kube, namespace), 90, "groups, their contents and members gone")
    contents = {m["status"]["boundVolumeSnapshotContentName"] for m in members}
    assert not [c for c in items(kube.custom.list_cluster_custom_object(*SNAPSHOT_GROUP, "volumesnapshotcontents"))
                if c["metadata"]["name"] in contents]
    # Each group deleted on the array in one operation too, with all of its members.
    deleted = {o["object"]: o for o in array_operations(cluster, "deleteGroupSnapshot") if o["result"] == "ok"}
    for operation in operations:
        assert len(deleted[operation["groupSnapshotId"]]["members"]) == PER_GROUP, deleted


def test_a_clone_from_a_member_snapshot_holds_what_was_written_before_the_group_snapshot(
        kube: Kube, namespace: str, cluster: LocalCluster) -> None:
    """A database's data and WAL on two ext4 volumes, snapshotted as one group; the data member restored into a
    clone reads back what a pod wrote (and synced) before the group snapshot."""
    for name in ("data", "wal"):
        kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc(  # type: ignore[arg-type]  # the client validates a dict body
            name, FILESYSTEM_STORAGE_CLASS, "64Mi", labels={"app": "db"}))
    wait_until(lambda: len(bound_claims(kube, namespace)) == 2, 60, "claims Bound")
    token = f"row-{time.time_ns()}"
    create_pod(kube, namespace, manifests.workload_pod("writer", "data", f"echo {token} > /data/v/token && sync"))
    wait_until(lambda: phase(kube, namespace, "writer") == "Succeeded", 60, "writer Succeeded")
    kube.core.delete_namespaced_pod("writer", namespace)
    wait_until(lambda: pod_gone(kube, namespace, "writer"), 30, "writer gone")
    create_group(kube, namespace, "db", {"app": "db"})
    wait_until(lambda: any(ready(g) for g in group_snapshots(kube, namespace)), 60, "group snapshot ready")
    member = wait_until(lambda: next((s for s in snapshots(kube, namespace) if ready(s) and s["spec"]["source"].get(
        "persistentVolumeClaimName") == "data"), None), 60, "the data volume's member snapshot ready")
    kube.core.create_namespaced_persistent_volume_claim(namespace, manifests.pvc(  # type: ignore[arg-type]  # the client validates a dict body
        "restored", FILESYSTEM_STORAGE_CLASS, "64Mi", snapshot=member["metadata"]["name"]))
    wait_until(lambda: len(bound_claims(kube, namespace)) == 3, 60, "clone Bound")
    create_pod(kube, namespace, manifests.workload_pod("reader", "restored", "cat /data/v/token"))
    wait_until(lambda: phase(kube, namespace, "reader") == "Succeeded", 60, "reader Succeeded")
    assert cluster.kubectl("logs", "-n", namespace, "reader").strip() == token
