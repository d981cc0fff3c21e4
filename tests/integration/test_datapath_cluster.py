"""Issue 28's acceptance on the local cluster's three nodes: the data path's pods spread two per node and started
together by the barrier (their skew within a tenth of the runtime), rows per node that add up to the row, latency
that is the exact merge of the pods' histograms, each clone verified against its source (a corrupted one named);
a pod held back on a slow node is flagged, not summed silently; rate levels hold their targets and the local
baseline is reported beside the class."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.kube import Kube, present
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import benchmark_run, read_report, wait_until_nothing_left
from tests.support.cluster import StorageClassFactory, cli
from tests.support.datapath import SIM, TINY, assert_host_clean, assert_latency_is_the_merge_of_the_pods
from tests.support.runs import run_to_end

pytestmark = pytest.mark.integration
RUNTIME = 5  # seconds of fio: long enough that a tenth of it (the skew bound) is more than a busy machine's jitter
RANDOM_READ = [{"name": "randRead", "pattern": "randread", "blockSize": "4Ki"}]


def data_path_record(kube: Kube, run: dict[str, Any]) -> list[dict[str, Any]]:
    report = read_report(kube, run)
    record = next(s for s in report["steps"] if s["status"]["name"] == "dataPath")
    volumes: list[dict[str, Any]] = record["extra"]["volumes"]
    return volumes


def test_six_volumes_run_two_per_node_start_together_merge_exactly_and_each_clone_is_verified(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess,
        storage_class: StorageClassFactory) -> None:
    # verify: true through snapshot and clone; the array flips one byte of the largest file of one clone (the clone
    # of volume 5: its claim ends in -c00005), which must fail that clone, and only it, with the file named.
    buggy = storage_class(corruptCloneSuffix="-c00005")
    data = {**TINY, "jobsPerVolume": 1, "runtimeSeconds": RUNTIME, "workloads": RANDOM_READ, "verify": True}
    run = run_to_end(kube, namespace, benchmark_run("spread", volumes=6, dataPath=data,
                                                    **{**SIM, "storageClassName": buggy}), timeout=300)
    status = run["status"]
    steps = {s["name"]: s for s in status["steps"]}
    assert status["phase"] == "Failed", (status.get("message"), operator.log()[-3000:])  # the corrupted clone
    assert [name for name, s in steps.items() if s["failed"]] == ["verifyClone"], steps
    row = status["dataPath"][0]
    nodes = sorted(str(present(n.metadata).name) for n in kube.core.list_node().items)
    assert len(nodes) == 3 and [(n["node"], n["volumes"]) for n in row["nodes"]] == [(node, 2) for node in nodes]
    for field, step_size in (("readMiBps", 0.001), ("readIOPS", 0.1)):
        assert sum(n[field] for n in row["nodes"]) == pytest.approx(row[field], abs=step_size * 3), (field, row)
    # Started together: the barrier gave one start time, and fio's own clocks say they began within the bound.
    assert row["startAt"] > 0 and row["skewed"] is False, row
    assert 0 <= row["startSkewSeconds"] <= 0.1 * RUNTIME, row
    assert row["togetherSeconds"] >= 0.9 * RUNTIME - 0.1, row
    volumes = [v for v in data_path_record(kube, run) if v["workload"] == "randRead"]
    assert sorted(v["node"] for v in volumes) == sorted(nodes * 2)
    assert all(v["startMs"] >= row["startAt"] * 1000 for v in volumes), (row["startAt"], volumes)
    assert_latency_is_the_merge_of_the_pods({row["name"]: row}, volumes)
    # Integrity: six volumes checksummed after the data path, five clones verified, the corrupted one named.
    assert steps["dataPath"]["succeeded"] == 12 and steps["cloneFromSnapshot"]["succeeded"] == 6, steps
    verify = steps["verifyClone"]
    assert (verify["succeeded"], verify["failed"]) == (5, 1), verify
    reason = verify["failureReasons"][0]
    assert reason["reason"] == "DataMismatch", reason
    assert "-c00005: csibench.0.0 has sha256" in reason["message"] and "-v00005's was" in reason["message"], reason
    report = read_report(kube, run)
    record = next(s for s in report["steps"] if s["status"]["name"] == "dataPath")
    assert len(record["extra"]["checksums"]) == 6, record["extra"]
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_a_pod_held_back_on_a_slow_node_is_flagged_not_summed_silently(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess,
        storage_class: StorageClassFactory) -> None:
    # One node attaches 6 s late; the barrier waits at most 2 s for every pod, so two pods start at its time and
    # the third when its volume is there: about 4 s late, on a 5 s runtime (the bound is 0.5 s).
    slow = storage_class(nodeAttachLatency="sim-node-2=6s")
    data = {**TINY, "jobsPerVolume": 1, "runtimeSeconds": RUNTIME, "startTimeoutSeconds": 2,
            "workloads": RANDOM_READ}
    run = run_to_end(kube, namespace, benchmark_run("stagger", volumes=3, dataPath=data,
                                                    **{**SIM, "storageClassName": slow}), timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    row = status["dataPath"][0]
    assert row["skewed"] is True and row["startSkewSeconds"] > 0.1 * RUNTIME, row
    assert row["togetherSeconds"] < RUNTIME, row
    volumes = data_path_record(kube, run)
    late = max(volumes, key=lambda v: v["startMs"])
    assert late["node"] == "sim-node-2", volumes
    assert late["startMs"] - min(v["startMs"] for v in volumes) == pytest.approx(row["startSkewSeconds"] * 1000)
    events = [e for e in kube.core.list_namespaced_event(namespace).items
              if e.reason == "DataPathStartSkew" and present(e.involved_object).name == "stagger"]
    assert events and events[0].type == "Warning" and "did not run together" in str(events[0].message), events
    assert "randRead" in str(events[0].message)
    table = cli(cluster, "report", "stagger", "-n", namespace)
    assert "pods did not run together" in table, table
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)


def test_rate_levels_hold_their_target_and_the_local_baseline_is_reported_beside_the_class(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess) -> None:
    # Levels well below the unthrottled rate: on these two shared cores the unthrottled row is CPU-bound (fio and
    # the loop devices), so what other tests take from it between the rows must not bring a level out of reach.
    # fio holds each job to its rate.
    levels = [5, 20]
    data = {**TINY, "jobsPerVolume": 1, "runtimeSeconds": 2, "rateLevels": levels, "workloads": RANDOM_READ,
            "localBaseline": True}
    run = run_to_end(kube, namespace, benchmark_run("levels", volumes=3, dataPath=data, **SIM), timeout=300)
    status = run["status"]
    assert status["phase"] == "Succeeded", (status.get("message"), operator.log()[-3000:])
    row = status["dataPath"][0]
    assert [level["percent"] for level in row["levels"]] == levels, row
    for level in row["levels"]:
        wanted = row["readIOPS"] * level["percent"] / 100
        assert level["state"] == "Succeeded" and level["targetIOPS"] == pytest.approx(wanted, rel=0.05, abs=3), level
        assert level["readIOPS"] == pytest.approx(level["targetIOPS"], rel=0.1), level
        assert level["readP99"] > 0 and level["startSkewSeconds"] is not None, level
    # The local baseline: the same workload on an emptyDir of each volume's node, beside the class.
    local = row["baseline"]
    assert local["state"] == "Succeeded" and local["readIOPS"] > 0 and local["readP99"] > 0, local
    assert local["fasterThanLocal"] == (row["readMiBps"] > local["readMiBps"]), (row, local)
    volumes = data_path_record(kube, run)
    assert sorted(v.get("ratePercent", 0) for v in volumes if not v.get("local")) == sorted([0, *levels] * 3)
    assert sorted(v["node"] for v in volumes if v.get("local")) == sorted(n["node"] for n in row["nodes"])
    table = cli(cluster, "report", "levels", "-n", namespace)
    assert "Data path under load (rate levels)" in table and "unthrottled" in table, table
    assert "Data path against the nodes' own disk" in table, table
    page = cli(cluster, "report", "levels", "-n", namespace, "-o", "html")
    assert '<div class="plot levels"><svg' in page and "Latency under load" in page
    wait_until_nothing_left(kube, run, 60, "nothing of the run left")
    assert_host_clean(cluster)
