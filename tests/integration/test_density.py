"""The density ramp and Pack placement through the operator on the local cluster: the real scheduler places pods
pinned to a node against the driver's CSINode limit, the real attach/detach controller and external-attacher
attach each level's volumes on the simulated array whose attaches slow as a node fills, and the array's ground
truth says how many volumes each attach found on the node."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from localcluster.kube import Kube
from localcluster.launcher import DENSITY_PARAMETERS, DENSITY_STORAGE_CLASS, REPO_ROOT, LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import assert_failed_without_objects, benchmark_run, step, wait_until_nothing_left
from localcluster.simulator.config import parse_duration
from tests.support.cluster import cli
from tests.support.runs import create_run, run_to_end

BASE = parse_duration(DENSITY_PARAMETERS["attachLatency"])
PER_ATTACHED = parse_duration(DENSITY_PARAMETERS["attachLatencyPerAttached"])


def modelled_p50(level: int) -> float:
    """The attach p50 of a level on the dense class: the i-th of its attaches takes BASE + PER_ATTACHED x (i - 1),
    and the nearest-rank p50 of L of them is the ceil(L/2)-th."""
    return BASE + PER_ATTACHED * (math.ceil(level / 2) - 1)


CONTROL_PLANE_PER_VOLUME = 0.15  # seconds of attach p50 the busy control plane may add per volume of a level


def test_the_density_example_attach_p50_grows_with_volumes_per_node_as_modelled(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    body: dict[str, Any] = yaml.safe_load((REPO_ROOT / "examples" / "density.yaml").read_text())
    assert body["spec"]["storageClassName"] == DENSITY_STORAGE_CLASS
    run = run_to_end(kube, namespace, body, timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    rows = status["density"]
    assert [(r["volumesPerNode"], r["pods"], r["state"]) for r in rows] == [
        (2, 2, "Succeeded"), (4, 4, "Succeeded"), (8, 8, "Succeeded")], rows
    assert len({r["node"] for r in rows}) == 1 and "which had room for " in step(run, "density")["note"]
    # The array did as modelled: the attaches of a level found 0, 1, ... volumes of the class on the node.
    records = [json.loads(line) for line in cluster.config.ground_truth.read_text().splitlines()]
    attaches = sorted((r for r in records if r["op"] == "attach" and r["storageClass"] == DENSITY_STORAGE_CLASS),
                      key=lambda r: r["start"])
    assert [sorted(r["attachedBefore"] for r in attaches[first:first + level]) for first, level in
            ((len(attaches) - 14, 2), (len(attaches) - 12, 4), (len(attaches) - 8, 8))] == [
        list(range(2)), list(range(4)), list(range(8))], attaches[-14:]
    # The tool's attach part (pod created to every volume attached) is the array's time plus the control plane's
    # (scheduling, the attach/detach controller's 100 ms reconciler, csi-attacher, the status write, the watch):
    # never less than modelled, and it grows from level to level as modelled, within 10% of the level's p50 below
    # and, above, that plus the control plane's own share per volume added: with two CPU-bound processes beside
    # it, 8 concurrent attaches took the attacher and controller-manager up to 0.85 s longer than 2 did (2 of 3
    # busy runs), a growth the array did not cause.
    first = rows[0]["attach"]["p50"]
    for row in rows:
        reported, modelled = row["attach"]["p50"], modelled_p50(row["volumesPerNode"])
        assert reported >= modelled - 0.01, (row, modelled)
        growth, modelled_growth = reported - first, modelled - modelled_p50(rows[0]["volumesPerNode"])
        added = row["volumesPerNode"] - rows[0]["volumesPerNode"]
        assert -0.1 * modelled <= growth - modelled_growth <= 0.1 * modelled + CONTROL_PLANE_PER_VOLUME * added, (
            row, growth, modelled_growth)
        assert row["latency"]["p50"] >= row["attach"]["p50"] and row["throughput"] > 0 and row["detachSeconds"] > 0
    table = cli(cluster, "report", "density", "-n", namespace)
    assert "Density (volumes per node)" in table and "Attach p50/p99 s" in table, table
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")


def test_a_level_above_the_drivers_limit_is_refused_with_the_limit_named(
        kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    create_run(kube, namespace, benchmark_run("toodense", storageClassName="csibench-sim", volumes=200,
                                              density={"volumesPerNode": [64, 200]},
                                              steps=["createVolume", "density", "deleteVolume"]))
    assert_failed_without_objects(kube, namespace, "toodense", "AboveVolumeLimit",
                                  "limit of 128 volumes of driver sim.csibench.io (CSINode allocatable.count)")


@pytest.fixture
def two_volumes_per_node(kube: Kube) -> Iterator[None]:
    """Every node's CSINode says the driver takes 2 volumes there (the scheduler honours it), then as before."""
    saved = [csi_node.to_dict() for csi_node in kube.storage.list_csi_node().items]

    def replace(count: int | None) -> None:
        for original in saved:
            name = original["metadata"]["name"]
            kube.storage.delete_csi_node(name)
            drivers = [{"name": d["name"], "nodeID": d["node_id"], "topologyKeys": d.get("topology_keys") or [],
                        "allocatable": {"count": count if count is not None else d["allocatable"]["count"]}}
                       for d in original["spec"]["drivers"]]
            owners = [{"apiVersion": o["api_version"], "kind": o["kind"], "name": o["name"], "uid": o["uid"]}
                      for o in original["metadata"].get("owner_references") or []]
            kube.storage.create_csi_node({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                                          "metadata": {"name": name, "ownerReferences": owners},
                                          "spec": {"drivers": drivers}})  # type: ignore[arg-type]  # a dict body
    replace(2)
    try:
        yield
    finally:
        replace(None)


def test_pack_fills_each_node_to_its_limit_and_fails_the_rest_with_the_schedulers_reason(
        kube: Kube, namespace: str, operator: OperatorProcess, two_volumes_per_node: None) -> None:
    """8 single-volume pods packed on 3 nodes of 2 volumes each: 6 Ready, two per node; the 2 beyond every node's
    room are pinned to the last node, where the scheduler refuses them (the run fails them at once with its
    words, not at the timeout), and nothing is left Pending."""
    body = benchmark_run("packed", storageClassName="csibench-sim", volumes=8, pvcsPerPod=1,
                         pod={"placement": "Pack"}, steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                         timeouts={"publish": 120})
    run = run_to_end(kube, namespace, body, timeout=240)
    publish = step(run, "publish")
    assert (publish["succeeded"], publish["failed"]) == (6, 2), publish
    # One reason, the scheduler's; its message may differ between the two pods (what the other nodes were
    # excluded for, as the scheduler saw them at that moment), so there may be one or two entries.
    reasons = publish["failureReasons"]
    assert sum(r["count"] for r in reasons) == 2 and all(
        r["reason"] == "FailedScheduling" and "exceed max volume count" in r["message"] for r in reasons), reasons
    assert publish["durationSeconds"] < 100, publish  # failed on the scheduler's word, not the 120 s timeout
    assert run["status"]["conditions"][0]["reason"] == "ObjectsFailed"
    assert "Pack: pods pinned" in publish["note"]
    wait_until_nothing_left(kube, run, 60, "nothing of the run left, no pod Pending")
