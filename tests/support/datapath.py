"""What the data-path integration tests share: tiny fio settings for these shared machines, the cluster's class,
a check that nothing of a workload pod stays on the host, and the row's latency recomputed from the report's
per-pod histograms by a calculation of the test's own."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from localcluster.kube import wait_until
from localcluster.launcher import LocalCluster
from tests.support.hostcheck import SANDBOX_MODULE, host_mounts_under, loop_devices_under, processes_with

# One second of fio, started one second after the last pod runs (the barrier's delay: the simulated kubelet writes
# the start time into the pods at once).
TINY = {"fileSize": "4Mi", "jobsPerVolume": 2, "rampSeconds": 0, "runtimeSeconds": 1, "startDelaySeconds": 1}
SIM = {"storageClassName": "csibench-sim", "volumeSnapshotClassName": "csibench-sim-snapclass", "size": "64Mi"}


def assert_host_clean(cluster: LocalCluster) -> None:
    wait_until(lambda: not processes_with(SANDBOX_MODULE), 30, "no container helper left")
    wait_until(lambda: not processes_with("--output-format=json"), 30, "no fio left")
    assert host_mounts_under(cluster.config.state_dir) == []
    wait_until(lambda: not loop_devices_under(cluster.config.state_dir), 30, "no loop device left")


def assert_latency_is_the_merge_of_the_pods(rows: dict[str, Any], volumes: list[dict[str, Any]]) -> None:
    """Each row's latency is of every completion of its pods: recomputed here from the per-pod histograms the
    report keeps (each completion as its bin's value, sorted, the nearest rank), not by the code under test; the
    row's p99 lies between its pods' own."""
    for name, row in rows.items():
        for direction in ("read", "write"):
            pods = [v for v in volumes if v["workload"] == name and v[f"{direction}ClatBins"]]
            if not pods:
                assert row["latency"].get(f"{direction}P99") is None, row
                continue
            samples_ns = sorted(int(value) for v in pods for value, count in v[f"{direction}ClatBins"].items()
                                for _ in range(count))
            for field, percent in (("P50", 50.0), ("P99", 99.0), ("P999", 99.9)):
                # the smallest count reaching p/100 of all, p the double fio parsed from its percentile list
                rank = math.ceil(Fraction(percent) * len(samples_ns) / 100)
                assert row["latency"][f"{direction}{field}"] * 1e9 == pytest.approx(samples_ns[rank - 1]), (
                    name, direction, field)
            per_pod = [v[f"{direction}ClatP99"] for v in pods]
            assert min(per_pod) <= row["latency"][f"{direction}P99"] <= max(per_pod), (name, direction, per_pod)
