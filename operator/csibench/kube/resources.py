"""REST paths of the resources csibench touches (one place, so RBAC in deploy/ can be checked against it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


NAMESPACES = Resource("/api/v1", "namespaces", False)
PVCS = Resource("/api/v1", "persistentvolumeclaims", True)
PVS = Resource("/api/v1", "persistentvolumes", False)
PODS = Resource("/api/v1", "pods", True)
NODES = Resource("/api/v1", "nodes", False)
EVENTS = Resource("/api/v1", "events", True)
CONFIGMAPS = Resource("/api/v1", "configmaps", True)
STORAGE_CLASSES = Resource("/apis/storage.k8s.io/v1", "storageclasses", False)
VOLUME_ATTACHMENTS = Resource("/apis/storage.k8s.io/v1", "volumeattachments", False)
SNAPSHOTS = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshots", True)
SNAPSHOT_CONTENTS = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshotcontents", False)
SNAPSHOT_CLASSES = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshotclasses", False)
BENCHMARK_RUNS = Resource("/apis/csibench.io/v1alpha1", "benchmarkruns", True)
