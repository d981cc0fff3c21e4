"""Preflight on the local cluster with the real sidecars: the snapshot-controller at upstream default client
limits is found and named before the run (status, Event, report, csibench report/compare/preflight), Enforce
stops the run before any PVC exists, and an operator without the discovery ClusterRole records "not visible"."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.kube import Kube, present, wait_until
from localcluster.launcher import REPO_ROOT, LocalCluster
from localcluster.operator_process import OPERATOR_SA, OperatorProcess
from localcluster.runs import benchmark_run, leftovers, read_report, run_to_end, unique
from localcluster.sidecars import NAMESPACE as SIDECAR_NAMESPACE
from localcluster.sidecars import RAISED_CLIENT_LIMITS

pytestmark = pytest.mark.integration
CONTROLLER_POD = "snapshot-controller-sim-node-0"
SNAPSHOT_STEPS = ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"]


def set_snapshot_controller_limits(cluster: LocalCluster, kube: Kube, qps: str, burst: str) -> None:
    """Restart the snapshot-controller with these limits and wait until its mirror pod runs with them."""
    cluster.reconfigure_sidecar("snapshot-controller", {"kube-api-qps": qps, "kube-api-burst": burst})

    def running_with_them() -> bool:
        pod = kube.core.read_namespaced_pod(CONTROLLER_POD, SIDECAR_NAMESPACE)
        return present(pod.status).phase == "Running" and f"--kube-api-qps={qps}" in (
            present(pod.spec).containers[0].args or [])

    wait_until(running_with_them, 60, f"snapshot-controller running with qps {qps}")


@pytest.fixture
def default_limits(cluster: LocalCluster, kube: Kube) -> Iterator[None]:
    set_snapshot_controller_limits(cluster, kube, "5", "10")
    try:
        yield
    finally:
        set_snapshot_controller_limits(cluster, kube, RAISED_CLIENT_LIMITS["kube-api-qps"],
                                       RAISED_CLIENT_LIMITS["kube-api-burst"])


def snapshot_run(name: str, **spec: Any) -> dict[str, Any]:
    return benchmark_run(name, **{"storageClassName": "csibench-sim", "volumes": 6, "steps": SNAPSHOT_STEPS,
                                  "volumeSnapshotClassName": "csibench-sim-snapclass", **spec})


def findings(run: dict[str, Any], check: str) -> list[dict[str, Any]]:
    return [f for f in run["status"].get("preflight", []) if f["check"] == check]


def condition(run: dict[str, Any], type_: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in run["status"]["conditions"] if c["type"] == type_)
    return found


def csibench(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a kubectl plugin would run it (``kubectl csibench ...`` execs the same entry point)."""
    return subprocess.run([sys.executable, "-m", "csibench", *args, f"--kubeconfig={kubeconfig}"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_default_snapshot_controller_limits_are_named_before_the_run_and_raised_ones_are_not(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess, default_limits: None) -> None:
    throttled = run_to_end(kube, namespace, snapshot_run("throttled"), timeout=300)
    assert throttled["status"]["phase"] == "Succeeded", throttled["status"]  # Warn: recorded, not stopped
    (warning,) = findings(throttled, "ClientThrottling")
    assert warning["severity"] == "Warning"
    assert warning["component"] == f"{SIDECAR_NAMESPACE}/{CONTROLLER_POD}/snapshot-controller"
    assert "--kube-api-qps=5 --kube-api-burst=10" in warning["message"] and "Raise them" in warning["message"]
    assert (condition(throttled, "Preflight")["status"], condition(throttled, "Preflight")["reason"]) == (
        "False", "WarningsFound")
    events = kube.events(namespace, "PreflightClientThrottling")
    assert [e.type for e in events] == ["Warning"] and "snapshot-controller" in (events[0].message or "")
    report = read_report(kube, throttled)
    assert [f["check"] for f in report["preflight"] if f["severity"] == "Warning"] == ["ClientThrottling"]
    machinery = report["environment"]["machinery"]
    assert machinery["visible"] and machinery["driver"] == "sim.csibench.io"
    controller = next(c for c in machinery["components"] if c["kind"] == "snapshot-controller")
    assert controller["flags"]["kube-api-qps"] == "5" and controller["version"] == "v8.7.0"
    assert {c["kind"] for c in machinery["components"]} == {"csi-provisioner", "csi-attacher", "csi-snapshotter",
                                                            "snapshot-controller", "csi-resizer"}
    printed = csibench("report", f"{namespace}/throttled", kubeconfig=cluster.config.kubeconfig)
    assert "preflight Warning ClientThrottling" in printed.stdout, printed

    set_snapshot_controller_limits(cluster, kube, "100", "200")
    raised = run_to_end(kube, namespace, snapshot_run("raised"), timeout=300)
    assert raised["status"]["phase"] == "Succeeded", raised["status"]
    assert findings(raised, "ClientThrottling") == []
    assert condition(raised, "Preflight")["status"] == "True"
    compared = csibench("compare", f"{namespace}/throttled", f"{namespace}/raised",
                        kubeconfig=cluster.config.kubeconfig)
    assert compared.returncode == 0, compared.stderr
    assert "kube-api-qps 5 -> 100" in compared.stdout, compared.stdout
    assert leftovers(kube, throttled) == {} and leftovers(kube, raised) == {}


def test_enforce_ends_the_run_before_any_pvc_exists_and_the_cli_gates_on_the_warning(
        kube: Kube, namespace: str, cluster: LocalCluster, operator: OperatorProcess, default_limits: None) -> None:
    name = unique("enforced")
    run = run_to_end(kube, namespace, snapshot_run(name, volumes=50, preflight="Enforce"))
    assert run["status"]["phase"] == "Failed"
    assert condition(run, "Ready")["reason"] == "PreflightFailed"
    assert "ClientThrottling" in run["status"]["message"] and "nothing was created" in run["status"]["message"]
    uid = run["metadata"]["uid"]
    claims = kube.core.list_persistent_volume_claim_for_all_namespaces(label_selector=f"csibench.io/run-uid={uid}")
    assert claims.items == []
    assert [present(n.metadata).name for n in kube.core.list_namespace().items
            if uid[:5] in present(present(n.metadata).name)] == []
    assert [(s["name"], s["state"], s.get("succeeded", 0)) for s in run["status"]["steps"]] == [
        (step, "Pending", 0) for step in SNAPSHOT_STEPS]

    gate = csibench("preflight", "--storage-class=csibench-sim", "--snapshot-class=csibench-sim-snapclass",
                    "--volumes=50", kubeconfig=cluster.config.kubeconfig)
    assert gate.returncode == 4, (gate.stdout, gate.stderr)
    assert "preflight Warning ClientThrottling: snapshot-controller in kube-system" in gate.stdout
    volumes_only = csibench("preflight", "--storage-class=csibench-sim", "--volumes=50",
                            kubeconfig=cluster.config.kubeconfig)
    assert volumes_only.returncode == 0, (volumes_only.stdout, volumes_only.stderr)  # no snapshot steps, no warning
    missing = csibench("preflight", "--storage-class=no-such-class", kubeconfig=cluster.config.kubeconfig)
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_kubectl_plugin_runs_preflight(cluster: LocalCluster) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(cluster.binaries.kubectl), "csibench", "preflight", "--storage-class=csibench-sim",
                           f"--kubeconfig={cluster.config.kubeconfig}"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "CSI machinery of sim.csibench.io: csi-provisioner v6.4.0" in done.stdout


@pytest.fixture
def without_discovery(cluster: LocalCluster, deployed: None) -> Iterator[None]:
    cluster.kubectl("delete", "clusterrolebinding", "csibench-discovery")

    def refused() -> bool:
        answer = cluster.kubectl("auth", "can-i", "get", "csidrivers.storage.k8s.io", f"--as={OPERATOR_SA}",
                                 check=False)
        return answer.strip() == "no"

    wait_until(refused, 30, "the discovery ClusterRoleBinding to be gone")
    try:
        yield
    finally:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(REPO_ROOT / "deploy"))


def test_without_the_discovery_role_the_run_records_the_machinery_as_not_visible(
        kube: Kube, namespace: str, without_discovery: None, operator_as_service_account: OperatorProcess) -> None:
    run = run_to_end(kube, namespace, benchmark_run("blind", storageClassName="csibench-sim", volumes=4,
                                                    steps=["createVolume", "deleteVolume"]))
    assert run["status"]["phase"] == "Succeeded", (run["status"], operator_as_service_account.log())
    machinery = run["status"]["environment"]["machinery"]
    assert machinery["visible"] is False and "csibench-discovery" in machinery["note"]
    assert [f["check"] for f in run["status"]["preflight"]] == ["MachineryNotVisible"]
    assert (condition(run, "Preflight")["status"], condition(run, "Preflight")["reason"]) == (
        "Unknown", "MachineryNotVisible")
    refusals = [line for line in operator_as_service_account.log(400).splitlines() if "not readable" in line]
    assert len(refusals) == 1, refusals  # one refused read for the run, no retry loop
    assert leftovers(kube, run) == {}
