"""Changing a volume's class on the local cluster: the real external-resizer calls the array's
ControllerModifyVolume once per volume; the array's QoS policy then holds each volume's fio to its limit (a hard
cap of the host's block throttling on the volume's device); a class the array refuses for a volume ends the
change Infeasible with the array's words. Nothing is left."""

from __future__ import annotations

import json

import pytest

from localcluster.kube import Kube
from localcluster.launcher import (
    FILESYSTEM_STORAGE_CLASS,
    LIMITED_ATTRIBUTES_CLASS,
    LIMITED_IOPS,
    LocalCluster,
)
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, step, wait_until_nothing_left
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
VOLUMES = 2
CAP_SLACK = 1.1  # the throttle admits a little over its rate at the edges of fio's window


def test_volumes_move_to_a_limited_class_once_each_and_fio_after_it_stays_under_the_limit(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run(
        "mod", storageClassName=FILESYSTEM_STORAGE_CLASS, volumes=VOLUMES, size="128Mi",
        steps=["createVolume", "modifyVolume", "deleteVolume"],
        modify={"volumeAttributesClassName": LIMITED_ATTRIBUTES_CLASS, "fioSeconds": 3, "fioSize": "16Mi"}),
        timeout=240)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    record = step(run, "modifyVolume")
    assert (record["objects"], record["succeeded"], record["failed"]) == (VOLUMES, VOLUMES, 0), record
    before, after = status["modify"]
    assert before["state"] == after["state"] == "Succeeded", status["modify"]
    assert after["attributesClass"] == LIMITED_ATTRIBUTES_CLASS
    for direction in ("readIOPS", "writeIOPS"):  # each volume held to the limit, each way
        assert 0 < after[direction] <= VOLUMES * LIMITED_IOPS * CAP_SLACK, after
    prefix = f"{status['targetNamespace']}/mod-{run['metadata']['uid'][:5]}-v"
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    ours = {r["volume"] for r in records if r["op"] == "createVolume" and r["object"].startswith(prefix)}
    modified = [r for r in records if r["op"] == "modifyVolume" and r["object"] in ours]
    assert len(ours) == VOLUMES and sorted(r["object"] for r in modified) == sorted(ours), (ours, modified)
    assert all(r["parameters"]["maxIOPS"] == str(LIMITED_IOPS) for r in modified)  # once per volume, the class's
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")


def test_a_limit_the_array_cannot_keep_ends_the_change_infeasible_in_its_words(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run(
        "inf", storageClassName="csibench-sim", volumes=1, size="64Mi",
        steps=["createVolume", "modifyVolume", "deleteVolume"],
        modify={"volumeAttributesClassName": LIMITED_ATTRIBUTES_CLASS, "fioSeconds": 0}), timeout=180)
    status = run["status"]
    assert status["phase"] == "Failed", status
    record = step(run, "modifyVolume")
    assert record["failed"] == 1, record
    reason = record["failureReasons"][0]
    assert reason["reason"] == "Infeasible" and "only ext4 volumes" in reason["message"], reason
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
