"""Volume group snapshots on the local cluster: the real snapshot-controller and csi-snapshotter
(external-snapshotter v8.7.0, groupsnapshot.storage.k8s.io/v1, its CSIVolumeGroupSnapshot gate on by default) drive
the simulated driver's GroupController, which takes every member of a group in one array operation at one instant
(the ground truth records it with its members) and makes each member a snapshot a clone can be restored from. The
operator's group snapshot steps are timed on it as the example says; the clone is made by hand."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from localcluster import manifests
from localcluster.kube import GROUP_SNAPSHOT_GROUP, SNAPSHOT_GROUP, Kube, items, wait_until
from localcluster.launcher import FILESYSTEM_STORAGE_CLASS, REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import read_report, step, wait_until_nothing_left
from tests.support.cluster import bound_claims, cli, create_pod, phase, pod_gone
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
GROUPS, PER_GROUP = 4, 5


def group_snapshots(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    return items(kube.custom.list_namespaced_custom_object(*GROUP_SNAPSHOT_GROUP, namespace, "volumegroupsnapshots"))


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


def test_the_group_snapshot_example_takes_each_group_in_one_array_operation_and_leaves_nothing(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    """examples/group-snapshot.yaml as it is, through the operator: 20 volumes in groups of 5 are 4 group
    snapshots, each one array operation covering exactly its 5 volumes; each group is done only with its 5 member
    snapshots ready; deleting them is one array operation per group with all 5, and nothing of the run is left."""
    body = yaml.safe_load((REPO_ROOT / "examples" / "group-snapshot.yaml").read_text())
    run = run_to_end(kube, namespace, body, timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    for name in ("createGroupSnapshot", "deleteGroupSnapshot"):
        taken = step(run, name)
        assert (taken["objects"], taken["succeeded"]) == (GROUPS, GROUPS) and taken["latency"]["p50"] > 0, taken
    wait_until_nothing_left(kube, run, 90, "nothing of the run left: groups, members and every content")
    target = status["targetNamespace"]
    prefix = f"{run['metadata']['name']}-{run['metadata']['uid'][:5]}"
    volume_of = {o["object"]: o["volume"] for o in array_operations(cluster, "createVolume")
                 if o["object"].startswith(f"{target}/")}
    operations = [o for o in array_operations(cluster, "createGroupSnapshot") if o["object"].startswith(f"{target}/")]
    assert sorted(o["object"] for o in operations) == [f"{target}/{prefix}-x{g:05d}" for g in range(GROUPS)]
    for operation in operations:  # all of its group's members, at one instant of the array
        group = int(operation["object"].rpartition("-x")[2])
        expected = {volume_of[f"{target}/{prefix}-v{i:05d}"] for i in range(group * PER_GROUP, (group + 1) * PER_GROUP)}
        assert operation["result"] == "ok" and set(operation["members"]) == expected, operation
    deleted = {o["object"]: o for o in array_operations(cluster, "deleteGroupSnapshot") if o["result"] == "ok"}
    for operation in operations:  # each group deleted on the array in one operation too, with all of its members
        assert len(deleted[operation["groupSnapshotId"]]["members"]) == PER_GROUP, deleted
    table = cli(cluster, "report", body["metadata"]["name"], "-n", namespace)
    assert "Create Group Snapshot" in table and "Delete Group Snapshot" in table, table
    assert "└ taken" in table and "└ members" in table, table
    # The parts of each group's latency: the storage's operation ends inside the parts named for it ("taken" once
    # the group content carries the array's handle; "content" once the deleted group's content is gone), and the
    # controllers' handling of the members is the rest. Wall clock of both sides: the same machine.
    report = {s["status"]["name"]: s for s in read_report(kube, run)["steps"]}
    array_end = {"createGroupSnapshot": {int(o["object"].rpartition("-x")[2]): o["finish"] for o in operations},
                 "deleteGroupSnapshot": {int(o["object"].rpartition("-x")[2]): deleted[o["groupSnapshotId"]]["finish"]
                                         for o in operations}}
    storage_part = {"createGroupSnapshot": 2, "deleteGroupSnapshot": 1}  # parts up to the storage's answer
    for name, parts_named in (("createGroupSnapshot", ["content", "taken", "members"]),
                              ("deleteGroupSnapshot", ["content", "group", "members"])):
        assert [p["name"] for p in step(run, name)["phases"]] == parts_named, step(run, name)
        record = report[name]
        for group, (sent, latency, parts) in enumerate(zip(record["submitMs"], record["latencyMs"],
                                                           record["phaseMs"], strict=True)):
            assert abs(sum(parts) - latency) <= 1.0, (name, parts, latency)
            answered = record["startWall"] + (sent + sum(parts[:storage_part[name]])) / 1000
            assert answered >= array_end[name][group] - 0.05, (name, group, parts, answered, array_end[name][group])


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
