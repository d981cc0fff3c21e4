"""Pure ``build_*`` functions for every object a run creates (unit-tested without a cluster).

Every object carries the run's labels, so the run can select, count and delete exactly what it created.
Pods meet Pod Security "restricted": non-root, no privilege escalation, all capabilities dropped,
RuntimeDefault seccomp, no service-account token.
"""

from __future__ import annotations

from typing import Any

from csibench.api.models import BenchmarkRunSpec, DataPathSpec, DataPathWorkload

Manifest = dict[str, Any]
SNAPSHOT_API_GROUP = "snapshot.storage.k8s.io"


def build_namespace(name: str, labels: dict[str, str]) -> Manifest:
    pod_security = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {**labels, **pod_security}}}


def _claim_spec(spec: BenchmarkRunSpec) -> Manifest:
    return {
        "accessModes": [mode.value for mode in spec.accessModes],
        "storageClassName": spec.storageClassName,
        "volumeMode": spec.volumeMode.value,
        "resources": {"requests": {"storage": spec.size}},
    }


def build_pvc(name: str, spec: BenchmarkRunSpec, labels: dict[str, str]) -> Manifest:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "labels": labels}, "spec": _claim_spec(spec)}


def build_clone_pvc(name: str, snapshot: str, spec: BenchmarkRunSpec, labels: dict[str, str]) -> Manifest:
    claim = _claim_spec(spec)
    claim["dataSource"] = {"apiGroup": SNAPSHOT_API_GROUP, "kind": "VolumeSnapshot", "name": snapshot}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "labels": labels},
            "spec": claim}


def build_snapshot(name: str, claim: str, snapshot_class: str, labels: dict[str, str]) -> Manifest:
    return {"apiVersion": f"{SNAPSHOT_API_GROUP}/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": labels},
            "spec": {"volumeSnapshotClassName": snapshot_class, "source": {"persistentVolumeClaimName": claim}}}


RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
WORKLOAD_USER = 65532
WORKLOAD_GROUP = 65532
WORKLOAD_FS_GROUP = 65532


def build_workload_pod(name: str, claim: str, spec: BenchmarkRunSpec, data: DataPathSpec,
                       workload: DataPathWorkload, image: str, command: list[str], labels: dict[str, str]) -> Manifest:
    """A data-path pod: fio on one volume, once (restartPolicy Never), as non-root with fsGroup so the volume is
    writable, meeting Pod Security "restricted". Its labels name the workload so its log can be found."""
    container: Manifest = {"name": "fio", "image": image, "command": command,
                           "securityContext": dict(RESTRICTED_CONTAINER),
                           "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    resources = {k: v for k, v in data.resources.model_dump().items() if v}
    if resources:
        container["resources"] = resources
    pod_spec: Manifest = {
        "automountServiceAccountToken": False, "enableServiceLinks": False, "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 5,
        "securityContext": {"runAsNonRoot": True, "runAsUser": WORKLOAD_USER, "runAsGroup": WORKLOAD_GROUP,
                            "fsGroup": WORKLOAD_FS_GROUP, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
    }
    if spec.pod.nodeSelector:
        pod_spec["nodeSelector"] = dict(spec.pod.nodeSelector)
    if spec.pod.tolerations:
        pod_spec["tolerations"] = [t.model_dump(exclude_none=True) for t in spec.pod.tolerations]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {**labels, "csibench.io/workload": workload.name}},
            "spec": pod_spec}


def build_pod(name: str, claims: list[str], spec: BenchmarkRunSpec, labels: dict[str, str],
              block: bool) -> Manifest:
    container: Manifest = {
        "name": "bench",
        "image": spec.pod.image,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "readOnlyRootFilesystem": True},
    }
    resources = {k: v for k, v in spec.pod.resources.model_dump().items() if v}
    if resources:
        container["resources"] = resources
    volume_names = [f"vol-{i}" for i in range(len(claims))]
    if block:
        container["volumeDevices"] = [{"name": v, "devicePath": f"/dev/csibench/{v}"} for v in volume_names]
    else:
        container["volumeMounts"] = [{"name": v, "mountPath": f"/data/{v}"} for v in volume_names]
    pod_spec: Manifest = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": [{"name": v, "persistentVolumeClaim": {"claimName": c}}
                    for v, c in zip(volume_names, claims, strict=True)],
    }
    if spec.pod.nodeSelector:
        pod_spec["nodeSelector"] = dict(spec.pod.nodeSelector)
    if spec.pod.tolerations:
        pod_spec["tolerations"] = [t.model_dump(exclude_none=True) for t in spec.pod.tolerations]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": pod_spec}
