"""Helpers to create BenchmarkRuns on the local cluster and check what they leave behind."""

from __future__ import annotations

import base64
import gzip
import json
import uuid
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.support.kube import SNAPSHOT_GROUP, Kube, wait_until

GROUP, VERSION, PLURAL = "csibench.io", "v1alpha1", "benchmarkruns"
TERMINAL = {"Succeeded", "Failed"}


def benchmark_run(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun", "metadata": {"name": name}, "spec": spec}


def create_run(kube: Kube, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    return created


def get_run(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = kube.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        return found
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def wait_for_phase(kube: Kube, namespace: str, name: str, phases: set[str], timeout: float) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        run = get_run(kube, namespace, name)
        return run if run and (run.get("status") or {}).get("phase") in phases else None

    return wait_until(probe, timeout, f"BenchmarkRun {namespace}/{name} in phase {sorted(phases)}", interval=0.5)


def run_to_end(kube: Kube, namespace: str, body: dict[str, Any], timeout: float = 180) -> dict[str, Any]:
    create_run(kube, namespace, body)
    return wait_for_phase(kube, namespace, body["metadata"]["name"], TERMINAL, timeout)


def step(run: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in run["status"]["steps"] if s["name"] == name)
    return found


def read_report(kube: Kube, run: dict[str, Any]) -> dict[str, Any]:
    configmap = kube.core.read_namespaced_config_map(run["status"]["reportConfigMap"], run["metadata"]["namespace"])
    report: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(configmap.binary_data["report.json.gz"])))
    return report


def leftovers(kube: Kube, run: dict[str, Any]) -> dict[str, list[str]]:
    """Everything in the cluster that belongs to the run: labelled objects, and volumes that point at them."""
    run_uid = run["metadata"]["uid"]
    target_namespace = run["status"]["targetNamespace"]
    prefix = f"{run['metadata']['name']}-{run_uid[:5]}-"  # the run's deterministic object-name prefix
    label = f"csibench.io/run-uid={run_uid}"
    found = {
        "namespaces": [n.metadata.name for n in kube.core.list_namespace(label_selector=label).items],
        "pvcs": [p.metadata.name for p in
                 kube.core.list_persistent_volume_claim_for_all_namespaces(label_selector=label).items],
        "pods": [p.metadata.name for p in kube.core.list_pod_for_all_namespaces(label_selector=label).items],
        "snapshots": [s["metadata"]["name"] for s in kube.custom.list_cluster_custom_object(
            *SNAPSHOT_GROUP, "volumesnapshots", label_selector=label)["items"]],
        "pvs": [p.metadata.name for p in kube.core.list_persistent_volume().items
                if p.spec.claim_ref and p.spec.claim_ref.namespace == target_namespace
                and p.spec.claim_ref.name.startswith(prefix)],
        "contents": [c["metadata"]["name"] for c in kube.snapshot_contents()
                     if c["spec"]["volumeSnapshotRef"]["namespace"] == target_namespace
                     and c["spec"]["volumeSnapshotRef"]["name"].startswith(prefix)],
    }
    return {kind: names for kind, names in found.items() if names}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:4]}"
