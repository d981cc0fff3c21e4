"""Zones on the local cluster: the real provisioner asks the array for a zone (the nodes' topology it read from
the CSINodes), the array places each volume of csibench-sim-zonal in one, the PV's node affinity sends each pod
to a node of its volume's zone, and the run's rows per zone agree with the array's ground truth."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from localcluster.kube import Kube
from localcluster.launcher import ZONAL_STORAGE_CLASS, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, step, wait_until_nothing_left
from localcluster.simulator.config import ZONES, zone_of_node
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
VOLUMES = 9


def test_volumes_of_a_zonal_class_spread_over_the_zones_their_pods_follow_and_rows_split_by_zone(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run(
        "zon", storageClassName=ZONAL_STORAGE_CLASS, volumes=VOLUMES, pvcsPerPod=1, size="64Mi",
        steps=["createVolume", "publish", "unpublish", "deleteVolume"]), timeout=240)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    prefix = f"{status['targetNamespace']}/zon-{run['metadata']['uid'][:5]}-v"
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    placed = {r["volume"]: r["zone"] for r in records if r["op"] == "createVolume" and r["object"].startswith(prefix)}
    assert len(placed) == VOLUMES and set(placed.values()) <= set(ZONES), placed
    assert len(set(placed.values())) > 1, placed  # the provisioner's preferred zones spread them
    attaches = [r["object"].split(":", 1) for r in records if r["op"] == "attach" and r["object"].split(":")[0]
                in placed]
    assert len(attaches) == VOLUMES and all(zone_of_node(node) == placed[pv] for pv, node in attaches), attaches
    expected = Counter(placed.values())
    for name in ("createVolume", "publish", "unpublish", "deleteVolume"):
        zones = {row["zone"]: row for row in step(run, name).get("zones") or []}
        assert {zone: row["objects"] for zone, row in zones.items()} == dict(expected), (name, zones)
        assert all(row["succeeded"] == row["objects"] and row["latency"]["p50"] > 0 for row in zones.values())
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
