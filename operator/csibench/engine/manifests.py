"""Pure ``build_*`` functions for the objects several steps create (unit-tested without a cluster): the namespace,
claims, publish pods and workload pods. A builder one step alone uses lives in that step's module.

Every object carries the run's labels, so the run can select, count and delete exactly what it created.
Pods meet Pod Security "restricted": non-root, no privilege escalation, all capabilities dropped,
RuntimeDefault seccomp, no service-account token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from csibench.api.models import BenchmarkRunSpec, Resources, Toleration
from csibench.engine.observed import ZONE_KEY as ZONE_LABEL

Manifest = dict[str, Any]
SNAPSHOT_API_GROUP = "snapshot.storage.k8s.io"
GROUP_LABEL = "csibench.io/group"  # on a claim: the VolumeGroupSnapshot (by name) whose group it is in


def build_namespace(name: str, labels: dict[str, str]) -> Manifest:
    pod_security = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {**labels, **pod_security}}}


def claim_spec(spec: BenchmarkRunSpec) -> Manifest:
    return {
        "accessModes": [mode.value for mode in spec.accessModes],
        "storageClassName": spec.storageClassName,
        "volumeMode": spec.volumeMode.value,
        "resources": {"requests": {"storage": spec.size}},
    }


def build_pvc(name: str, spec: BenchmarkRunSpec, labels: dict[str, str], size: str | None = None,
              filesystem: bool = False, access_modes: list[str] | None = None,
              source_claim: str | None = None) -> Manifest:
    """A claim of the run's shape; ``size``, ``filesystem`` and ``access_modes`` for a workload's own volume (the
    database's: ReadWriteOnce; the shared step's: ReadWriteMany); ``source_claim``: a clone of that claim."""
    claim = claim_spec(spec)
    if size is not None:
        claim["resources"] = {"requests": {"storage": size}}
    if filesystem:  # a database writes to its volume from one pod: never a read-only or block claim
        claim["volumeMode"] = "Filesystem"
        claim["accessModes"] = list(access_modes or ["ReadWriteOnce"])
    if source_claim is not None:
        claim["dataSource"] = {"kind": "PersistentVolumeClaim", "name": source_claim}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "labels": labels}, "spec": claim}


RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
WORKLOAD_USER = 65532
WORKLOAD_GROUP = 65532
WORKLOAD_FS_GROUP = 65532


@dataclass(frozen=True)
class WorkloadMount:
    """A volume of a workload pod: a PVC (``claim``), or a downwardAPI volume with one file holding one of the
    pod's annotations (``annotation``: (file, annotation key)), or else an emptyDir (scratch space of the pod,
    removed with it). ``device``: the claim is a raw block volume, given to the container at ``path`` as a
    device (``volumeDevices``), not mounted."""

    name: str
    path: str
    claim: str | None = None
    annotation: tuple[str, str] | None = None
    device: bool = False
    read_only: bool = False  # the claim mounted read-only (a ReadOnlyMany claim's readers)

    def volume(self) -> Manifest:
        if self.claim is not None:
            return {"name": self.name, "persistentVolumeClaim": {"claimName": self.claim,
                                                                  **({"readOnly": True} if self.read_only else {})}}
        if self.annotation is not None:
            file, key = self.annotation
            return {"name": self.name, "downwardAPI": {"items": [
                {"path": file, "fieldRef": {"fieldPath": f"metadata.annotations['{key}']"}}]}}
        return {"name": self.name, "emptyDir": {}}


def build_workload_pod(name: str, container: str, image: str, command: list[str], mounts: list[WorkloadMount],
                       labels: dict[str, str], resources: Resources, node_selector: dict[str, str],
                       tolerations: list[Toleration], env: dict[str, str] | None = None,
                       grace_seconds: int = 5, preferred_node: str | None = None,
                       init: tuple[str, list[str]] | None = None, zones: Sequence[str] = ()) -> Manifest:
    """A workload pod (fio, PostgreSQL and pgbench): one container run once (restartPolicy Never), as non-root
    with fsGroup so its volumes are writable, meeting Pod Security "restricted". With ``preferred_node``, a
    preferred node affinity on that node's name: the scheduler puts it there unless a filter forbids it (the
    volume's topology, the node's volume limit), where it places the pod itself instead of leaving it Pending.
    ``init``: (name, command) of an init container run to its end first, with the same image, mounts and
    resources. ``zones``: a required node affinity on the nodes' zone label (only nodes in those zones)."""
    body: Manifest = {"name": container, "image": image, "command": command,
                      "securityContext": dict(RESTRICTED_CONTAINER),
                      "volumeMounts": [{"name": m.name, "mountPath": m.path, **({"readOnly": True} if m.read_only
                                                                                 else {})}
                                       for m in mounts if not m.device]}
    devices = [{"name": m.name, "devicePath": m.path} for m in mounts if m.device]
    if devices:
        body["volumeDevices"] = devices
    if env:
        body["env"] = [{"name": key, "value": value} for key, value in env.items()]
    requested = {k: v for k, v in resources.model_dump().items() if v}
    if requested:
        body["resources"] = requested
    pod_spec: Manifest = {
        "automountServiceAccountToken": False, "enableServiceLinks": False, "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace_seconds,
        "securityContext": {"runAsNonRoot": True, "runAsUser": WORKLOAD_USER, "runAsGroup": WORKLOAD_GROUP,
                            "fsGroup": WORKLOAD_FS_GROUP, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [body],
        "volumes": [m.volume() for m in mounts],
    }
    if init is not None:
        pod_spec["initContainers"] = [{**body, "name": init[0], "command": init[1],
                                       "securityContext": dict(RESTRICTED_CONTAINER)}]
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod_spec["tolerations"] = [t.model_dump(exclude_none=True) for t in tolerations]
    affinity: Manifest = {}
    if preferred_node is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 100, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [preferred_node]}]}}]
    if zones:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": list(zones)}]}]}
    if affinity:
        pod_spec["affinity"] = {"nodeAffinity": affinity}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": pod_spec}


def build_pod(name: str, claims: list[str], spec: BenchmarkRunSpec, labels: dict[str, str],
              block: bool, node: str | None = None) -> Manifest:
    """A publish pod mounting ``claims``; with ``node``, pinned to that node by a required node affinity on its
    name (the scheduler still places it, so its volume limits and taints still apply: never spec.nodeName)."""
    return build_bench_pod(name, [{"persistentVolumeClaim": {"claimName": claim}} for claim in claims], spec,
                           labels, block, node)


def build_bench_pod(name: str, sources: list[Manifest], spec: BenchmarkRunSpec, labels: dict[str, str],
                    block: bool, node: str | None = None) -> Manifest:
    """A pod of ``spec.pod`` (a pause container, by default) with one volume per source (a claim, or a generic
    ephemeral volume's template), each mounted at ``/data/vol-<i>`` or, ``block``, a device at
    ``/dev/csibench/vol-<i>``; ``node`` as for ``build_pod``."""
    container: Manifest = {
        "name": "bench",
        "image": spec.pod.image,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                            "runAsNonRoot": True, "readOnlyRootFilesystem": True},
    }
    resources = {k: v for k, v in spec.pod.resources.model_dump().items() if v}
    if resources:
        container["resources"] = resources
    volume_names = [f"vol-{i}" for i in range(len(sources))]
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
        "volumes": [{"name": v, **source} for v, source in zip(volume_names, sources, strict=True)],
    }
    if spec.pod.nodeSelector:
        pod_spec["nodeSelector"] = dict(spec.pod.nodeSelector)
    if spec.pod.tolerations:
        pod_spec["tolerations"] = [t.model_dump(exclude_none=True) for t in spec.pod.tolerations]
    if node is not None:
        pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": pod_spec}
