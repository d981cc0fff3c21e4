"""The metrics module and the Grafana dashboard built on it."""

from __future__ import annotations

import json
import re

from prometheus_client import CollectorRegistry, generate_latest

from csibench.metrics import LATENCY_BUCKETS, Metrics, resource_of
from localcluster.launcher import REPO_ROOT


def test_resources_are_bounded_labels() -> None:
    assert resource_of("/api/v1/namespaces/ns/persistentvolumeclaims/x") == "persistentvolumeclaims"
    assert resource_of("/apis/snapshot.storage.k8s.io/v1/namespaces/ns/volumesnapshots") == "volumesnapshots"
    assert resource_of("/api/v1/persistentvolumes") == "persistentvolumes"
    assert resource_of("/api/v1/namespaces/csibench-run-1") == "namespaces"
    assert resource_of("/version") == "other"


def test_buckets_span_10ms_to_1h() -> None:
    assert LATENCY_BUCKETS[0] == 0.01 and LATENCY_BUCKETS[-1] == 3600


def test_forgetting_a_run_removes_every_series_of_it() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for run in ("ns/a", "ns/b"):
        metrics.set_phase(run, "Running")
        metrics.observe_object(run, "createVolume", "fast", True, 0.2)
        metrics.record_step(run, "createVolume", "fast", 1.5, 10.0, 15, 0, 0)
        metrics.add_throttle(run, 0.5)
    metrics.set_phase("ns/a", "Succeeded")
    metrics.forget_run("ns/a")
    text = generate_latest(registry).decode()
    assert 'run="ns/a"' not in text and 'run="ns/b"' in text
    assert 'csibench_runs{phase="Running"} 1.0' in text and 'csibench_runs{phase="Succeeded"} 0.0' in text


def test_a_run_has_a_throttling_counter_from_its_first_phase_at_zero() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.set_phase("ns/c", "Running")
    assert 'csibench_client_throttled_seconds_total{run="ns/c"} 0.0' in generate_latest(registry).decode()
    metrics.forget_run("ns/c")
    assert 'run="ns/c"' not in generate_latest(registry).decode()


def test_dashboard_queries_only_metrics_the_operator_serves() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.observe_object("r", "s", "c", True, 1)
    metrics.record_step("r", "s", "c", 1, 1, 1, 0, 0)
    metrics.set_phase("r", "Running")
    metrics.count_request("GET", "/api/v1/pods", 200)
    metrics.add_throttle("r", 1)
    metrics.record_datapath("r", "seqRead", 1.0, {"read": (1.0, 1.0, {"0.5": 0.001, "0.99": 0.002})})
    metrics.record_database_run("r", 10, "readWrite", 8, 1000.0, 0.008, 0.002, 4096, 0)
    metrics.record_database_initialize("r", 10, 12.5)
    metrics.record_phases("r", "moveVolume", [{"name": "detach", "latency": {"p50": 0.5, "p99": 0.9}}])
    metrics.record_density("r", 8, 2.1, 3.0, 2.0, 1.5, 0.4)
    metrics.record_collection("r", "createVolume", [("cpuSeconds", "csi-provisioner", 1.5)])
    metrics.set_schedule("ns/probe", "Pass", 1_796_601_600.0)
    served = {line.split("{")[0].split(" ")[0] for line in generate_latest(registry).decode().splitlines()
              if line and not line.startswith("#")}
    dashboard = json.loads((REPO_ROOT / "deploy" / "grafana" / "csibench-dashboard.json").read_text())
    queried = {name for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"\bcsibench_[a-z_]+", target["expr"])}
    assert queried and queried <= served, queried - served
    assert {"csibench_database_transactions_per_second", "csibench_database_wal_bytes",
            "csibench_step_phase_latency_seconds", "csibench_density_pod_ready_seconds",
            "csibench_density_attach_seconds", "csibench_density_volumes_per_second",
            "csibench_density_detach_seconds"} <= queried
