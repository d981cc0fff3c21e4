"""A shared (ReadWriteMany) volume on the local cluster: one claim, three probe pods on three nodes through the real
provisioner, attacher and scheduler; the array's ground truth holds that the volume was made and deleted once and
attached, mounted, unmounted and detached once per node, and nothing is left."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from localcluster.kube import Kube
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, step, wait_until_nothing_left
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
PODS, FILES, ROUNDS, SMALL, LISTED, FIO = 3, 20, 50, 100, 2000, 2


def test_three_pods_on_three_nodes_share_one_volume_and_every_phase_is_measured(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run(
        "shr", storageClassName="csibench-sim", volumes=1, steps=["sharedVolume"],
        shared={"pods": PODS, "size": "64Mi", "files": FILES, "lockRounds": ROUNDS, "smallFiles": SMALL,
                "listFiles": LISTED, "fioSeconds": FIO, "fioSize": "8Mi"}), timeout=240)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    record = step(run, "sharedVolume")
    assert (record["objects"], record["succeeded"], record["failed"]) == (PODS, PODS, 0), record
    rows = {row["phase"]: row for row in status["shared"]}
    assert list(rows) == ["visibility", "lock", "create", "stat", "list", "delete", "listing", "fio"]
    for phase, row in rows.items():
        assert row["state"] == "Succeeded" and (row["pods"], row["nodes"]) == (PODS, PODS), row  # a node each
        assert 0 < row["latency"]["p50"] <= row["latency"]["max"], (phase, row)
    assert rows["visibility"]["operations"] == FILES * (PODS - 1)
    assert (rows["lock"]["operations"], rows["lock"]["lostUpdates"]) == (PODS * ROUNDS, 0)
    assert (rows["stat"]["operations"], rows["stat"]["missing"]) == (PODS * SMALL, 0)
    assert (rows["listing"]["entries"], rows["listing"]["missing"]) == (LISTED, 0)
    assert rows["fio"]["writeMiBps"] > 0 and rows["fio"]["operations"] > 0  # every writer's fio, summed
    # The array's own record: one volume, made once, on every node once, deleted once within the step.
    claim = f"{status['targetNamespace']}/shr-{run['metadata']['uid'][:5]}-w00000"
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    created = [r for r in records if r["op"] == "createVolume" and r["object"] == claim]
    assert len(created) == 1, created
    volume = created[0]["volume"]
    per_node = Counter((r["op"], r["object"]) for r in records if r["object"].startswith(f"{volume}:"))
    nodes = {obj.split(":", 1)[1] for _, obj in per_node}
    assert len(nodes) == PODS and all(per_node[(op, f"{volume}:{node}")] == 1
                                      for op in ("attach", "mount", "unmount", "detach") for node in nodes), per_node
    assert [r["op"] for r in records if r["op"] == "deleteVolume" and r.get("object") == volume] == ["deleteVolume"]
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")


def test_a_read_only_many_volume_is_filled_cloned_and_read_by_three_pods_on_three_nodes_at_once(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run(
        "rox", storageClassName="csibench-sim", volumes=1, steps=["sharedVolume"],
        shared={"accessMode": "ReadOnlyMany", "pods": PODS, "size": "64Mi", "listFiles": LISTED,
                "fioSeconds": 4, "fioSize": "8Mi"}), timeout=240)  # 4 s: a reader 0.4 s late still reads with all
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    record = step(run, "sharedVolume")
    assert (record["objects"], record["succeeded"], record["failed"]) == (PODS + 1, PODS + 1, 0), record
    rows = {row["phase"]: row for row in status["shared"]}
    assert list(rows) == ["fio", "listing"]
    assert all(row["state"] == "Succeeded" and (row["pods"], row["nodes"]) == (PODS, PODS) for row in rows.values())
    assert rows["fio"]["readMiBps"] > 0 and "writeMiBps" not in rows["fio"]  # every reader's fio, summed
    assert (rows["listing"]["entries"], rows["listing"]["missing"]) == (LISTED, 0)
    assert rows["listing"]["createSeconds"] > 0  # the filler's time to make the files
    # The array's record: the filled volume made once, its clone made once from it and used on three nodes.
    prefix = f"{status['targetNamespace']}/rox-{run['metadata']['uid'][:5]}-w0000"
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    made = {r["object"]: r for r in records if r["op"] in ("createVolume", "cloneVolume")
            and r["object"].startswith(prefix)}
    seed, clone = made[f"{prefix}0"], made[f"{prefix}1"]
    assert (seed["op"], clone["op"]) == ("createVolume", "cloneVolume"), made
    assert clone["sourceVolume"].startswith(seed["volume"].removeprefix("pvc-")), (seed, clone)
    nodes = {r["object"].split(":", 1)[1] for r in records if r["op"] == "mount"
             and r["object"].startswith(f"{clone['volume']}:")}
    assert len(nodes) == PODS, nodes
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
