"""The step table rendered from a run's status."""

from __future__ import annotations

from csibench.report.compare import comparison_rows
from csibench.report.render import render_table

RUN = {
    "metadata": {"namespace": "bench", "name": "seed"},
    "spec": {"storageClassName": "fast"},
    "status": {
        "phase": "Failed", "message": "objects failed in publish: 1 of 250 failed (FailedMount)",
        "totalStepSeconds": 3451.0,
        "client": {"qps": 100, "burst": 200, "maxInFlight": 16, "throttledSeconds": 1.5, "requests": 2510},
        "environment": {"provisioner": "csi.example.com", "volumeBindingMode": "Immediate",
                        "serverVersion": "v1.36.3", "nodeCount": 3},
        "steps": [
            {"name": "createVolume", "state": "Succeeded", "objects": 1000, "succeeded": 1000, "failed": 0,
             "durationSeconds": 3451.0 - 1384.0, "throughput": 0.48,
             "latency": {"p50": 12.5, "p90": 20.25, "p99": 30.0, "max": 31.5, "mean": 13.0}},
            {"name": "publish", "state": "Failed", "objects": 250, "succeeded": 249, "failed": 1,
             "durationSeconds": 1384.0, "throughput": 0.18,
             "latency": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0, "mean": 1.5},
             "failureReasons": [{"reason": "FailedMount", "count": 1, "message": "mount timed out"}]},
        ],
    },
}


def test_step_table_reads_like_published_tables() -> None:
    lines = render_table(RUN).splitlines()
    assert lines[0] == "BenchmarkRun bench/seed: Failed — objects failed in publish: 1 of 250 failed (FailedMount)"
    assert "csi.example.com" in lines[1] and "3 nodes" in lines[1]
    assert "qps 100 burst 200" in lines[2] and "throttled 1.5s" in lines[2]
    create = next(line for line in lines if line.startswith("Create Volume"))
    assert "34m 27s · 0.48 vol/s" in create and "12.500" in create and "1000/1000" in create
    publish = next(line for line in lines if line.startswith("Publish (Attach)"))
    assert "23m 04s · 0.18 pod/s" in publish and "249/250 (1 failed)" in publish
    assert next(line for line in lines if line.startswith("Sum of step times")).endswith("57m 31s")
    assert "failures (publish): 1× FailedMount: mount timed out" in lines


def test_a_single_run_meets_a_repeated_runs_medians_not_its_last_iteration() -> None:
    single = {"metadata": {"namespace": "n", "name": "one"}, "status": {"phase": "Succeeded", "steps": [
        {"name": "createVolume", "durationSeconds": 10.0, "throughput": 1.0}]}}
    repeated = {"metadata": {"namespace": "n", "name": "many"}, "status": {
        "phase": "Succeeded",
        "steps": [{"name": "createVolume", "durationSeconds": 100.0, "throughput": 0.1}],  # its last iteration
        "aggregates": [{"name": "createVolume", "iterations": 3, "durationSeconds": {"median": 10.0},
                        "throughput": {"median": 1.0}, "throughputs": [0.9, 1.0, 0.1]}]}}
    _, rows, _ = comparison_rows(single, repeated)
    assert rows[0][-1] == "1.0×", rows
