"""Manifests used by the local-cluster tests and the benchmarks (pure builders)."""

from __future__ import annotations

from typing import Any

from localcluster.simulator.config import DRIVER_NAME

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def storage_class(name: str, binding: str = "Immediate", allow_expansion: bool = True,
                  **parameters: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": DRIVER_NAME, "reclaimPolicy": "Delete", "volumeBindingMode": binding,
            "allowVolumeExpansion": allow_expansion, "parameters": parameters}


def pvc(name: str, storage_class_name: str, size: str = "1Gi", snapshot: str | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class_name,
                            "resources": {"requests": {"storage": size}}}
    if snapshot:
        spec["dataSource"] = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def pod(name: str, claims: list[str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "automountServiceAccountToken": False,
        "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
        "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)],
    }}


def snapshot(name: str, claim: str, snapshot_class: str = "csibench-sim-snapclass") -> dict[str, Any]:
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": name},
            "spec": {"volumeSnapshotClassName": snapshot_class, "source": {"persistentVolumeClaimName": claim}}}


def group_snapshot(name: str, labels: dict[str, str],
                   group_class: str = "csibench-sim-groupsnapclass") -> dict[str, Any]:
    """A VolumeGroupSnapshot of the namespace's claims that carry ``labels``."""
    return {"apiVersion": "groupsnapshot.storage.k8s.io/v1", "kind": "VolumeGroupSnapshot", "metadata": {"name": name},
            "spec": {"volumeGroupSnapshotClassName": group_class, "source": {"selector": {"matchLabels": labels}}}}


WORKLOAD_IMAGE = "csibench/workload:test"  # any non-pause image: the simulated kubelet runs the command itself


def workload_pod(name: str, claim: str, script: str, user: int | None = 1234, grace: int = 30,
                 env: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod meeting Pod Security "restricted" that runs ``sh -c script`` with ``claim`` at /data/v."""
    security: dict[str, Any] = {"runAsNonRoot": True, "fsGroup": 2345, "seccompProfile": {"type": "RuntimeDefault"}}
    if user is not None:
        security.update(runAsUser=user, runAsGroup=user)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "automountServiceAccountToken": False, "restartPolicy": "Never", "terminationGracePeriodSeconds": grace,
        "securityContext": security,
        "containers": [{"name": "work", "image": WORKLOAD_IMAGE, "command": ["sh", "-c", script],
                        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "v", "mountPath": "/data/v"}]}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}],
    }}
