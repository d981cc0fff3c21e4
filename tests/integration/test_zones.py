"""Zones on the local cluster: the real provisioner asks the array for a zone (the nodes' topology it read from
the CSINodes), the array places each volume of csibench-sim-zonal in one, the PV's node affinity sends each pod
to a node of its volume's zone, and the run's rows per zone agree with the array's ground truth. A data-path row
asked to run in another zone than its volumes' home (csibench-sim-homezone) runs there, and the array holds it to
the class's cross-zone limit."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from localcluster.kube import Kube
from localcluster.launcher import (
    CROSS_ZONE_IOPS,
    HOME_ZONE,
    HOME_ZONE_STORAGE_CLASS,
    ZONAL_STORAGE_CLASS,
    LocalCluster,
)
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, step, wait_until_nothing_left
from localcluster.simulator.config import ZONES, zone_of_node
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
VOLUMES = 9
CAP_SLACK = 1.1  # the throttle admits a little over its rate at the edges of fio's window


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


def test_a_data_path_row_run_in_another_zone_than_its_volumes_home_runs_there_at_the_cross_zone_cost(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    away = next(zone for zone in ZONES if zone != HOME_ZONE)
    workloads = [{"name": name, "pattern": "randread", "blockSize": "8Ki", "zones": [zone]}
                 for name, zone in (("home", HOME_ZONE), ("away", away))]
    run = run_to_end(kube, namespace, benchmark_run(
        "xzo", storageClassName=HOME_ZONE_STORAGE_CLASS, volumes=2, size="128Mi",
        steps=["createVolume", "dataPath", "deleteVolume"],
        dataPath={"workloads": workloads, "jobsPerVolume": 1, "fileSize": "16Mi", "rampSeconds": 0,
                  "runtimeSeconds": 3, "startDelaySeconds": 2}), timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", status.get("message")
    home, far = status["dataPath"]
    assert [(z["zone"], z["volumes"]) for z in home["zones"]] == [(HOME_ZONE, 2)], home
    assert [(z["zone"], z["volumes"]) for z in far["zones"]] == [(away, 2)], far
    assert 0 < far["readIOPS"] <= 2 * CROSS_ZONE_IOPS * CAP_SLACK, far  # each volume held to the cross-zone limit
    prefix = f"{status['targetNamespace']}/xzo-{run['metadata']['uid'][:5]}-v"
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    ours = {r["volume"] for r in records if r["op"] == "createVolume" and r["object"].startswith(prefix)}
    assert len(ours) == 2 and all(r.get("homeZone") == HOME_ZONE for r in records if r.get("volume") in ours)
    stages = [(r["object"].split(":", 1)[1], bool(r.get("crossZone"))) for r in records
              if r["op"] == "mount" and r["object"].split(":", 1)[0] in ours]
    assert stages and all(crossing == (zone_of_node(node) != HOME_ZONE) for node, crossing in stages), stages
    assert {zone_of_node(node) for node, _ in stages} == {HOME_ZONE, away}, stages
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
