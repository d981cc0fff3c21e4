"""REST paths of the resources csibench touches (one place, so RBAC in deploy/ can be checked against it).

Paths are built from validated, escaped segments, never by plain formatting: a namespace such as
``"victim#"`` or ``".."`` would otherwise move the request to another object (``/namespaces/victim``, or up
a level), and a request meant for the run's own namespace could then delete someone else's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
from urllib.parse import quote

from csibench.api.validation import is_dns_label

SUBRESOURCES = frozenset({"status", "log"})


class InvalidName(ValueError):
    """A name that cannot be part of a REST path; nothing was sent."""


def _name_segment(name: str) -> str:
    """An object name as one escaped path segment (Kubernetes names never contain '/' or '%')."""
    if not name or name in (".", "..") or "/" in name or "%" in name or len(name) > 253:
        raise InvalidName(f"{name!r} is not a valid object name")
    return quote(name, safe="")


@dataclass(frozen=True)
class Resource:
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced and namespace is not None:
            if not is_dns_label(namespace):
                raise InvalidName(f"{namespace!r} is not a valid namespace name (a DNS-1123 label)")
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(_name_segment(name))
        if subresource is not None:
            if subresource not in SUBRESOURCES:
                raise InvalidName(f"{subresource!r} is not a subresource csibench uses")
            parts.append(subresource)
        return "/".join(parts)


NAMESPACES = Resource("/api/v1", "namespaces", False)
PVCS = Resource("/api/v1", "persistentvolumeclaims", True)
PVS = Resource("/api/v1", "persistentvolumes", False)
PODS = Resource("/api/v1", "pods", True)
NODES = Resource("/api/v1", "nodes", False)
DEPLOYMENTS = Resource("/apis/apps/v1", "deployments", True)  # scaled only by a ScaleDown disruption
STATEFUL_SETS = Resource("/apis/apps/v1", "statefulsets", True)
LEASES = Resource("/apis/coordination.k8s.io/v1", "leases", True)
EVENTS = Resource("/api/v1", "events", True)
CONFIGMAPS = Resource("/api/v1", "configmaps", True)
SERVICE_ACCOUNTS = Resource("/api/v1", "serviceaccounts", True)
STORAGE_CLASSES = Resource("/apis/storage.k8s.io/v1", "storageclasses", False)
VOLUME_ATTRIBUTES_CLASSES = Resource("/apis/storage.k8s.io/v1", "volumeattributesclasses", False)
CSI_DRIVERS = Resource("/apis/storage.k8s.io/v1", "csidrivers", False)
CSI_NODES = Resource("/apis/storage.k8s.io/v1", "csinodes", False)
VOLUME_ATTACHMENTS = Resource("/apis/storage.k8s.io/v1", "volumeattachments", False)
SNAPSHOTS = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshots", True)
SNAPSHOT_CONTENTS = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshotcontents", False)
SNAPSHOT_CLASSES = Resource("/apis/snapshot.storage.k8s.io/v1", "volumesnapshotclasses", False)
SNAPSHOT_API = "/apis/snapshot.storage.k8s.io/v1"  # served only where the external-snapshotter CRDs are installed
GROUP_SNAPSHOTS = Resource("/apis/groupsnapshot.storage.k8s.io/v1", "volumegroupsnapshots", True)
GROUP_SNAPSHOT_CONTENTS = Resource("/apis/groupsnapshot.storage.k8s.io/v1", "volumegroupsnapshotcontents", False)
GROUP_SNAPSHOT_CLASSES = Resource("/apis/groupsnapshot.storage.k8s.io/v1", "volumegroupsnapshotclasses", False)
GROUP_SNAPSHOT_API = "/apis/groupsnapshot.storage.k8s.io/v1"  # external-snapshotter's group snapshot CRDs
BENCHMARK_RUNS = Resource("/apis/csibench.io/v1alpha1", "benchmarkruns", True)
BENCHMARK_SUITES = Resource("/apis/csibench.io/v1alpha1", "benchmarksuites", True)
BENCHMARK_SCHEDULES = Resource("/apis/csibench.io/v1alpha1", "benchmarkschedules", True)


@dataclass(frozen=True)
class ObjectRef:
    """One of csibench's own objects as its handler saw it: where it is, which incarnation (uid) and which
    generation of its spec. A subclass names the resource, so a run's reference cannot be passed for a suite's."""

    resource: ClassVar[Resource]
    namespace: str
    name: str
    uid: str
    generation: int = 1

    @property
    def status_path(self) -> str:
        return self.resource.path(self.namespace, self.name, "status")

    @property
    def label(self) -> str:
        """How metrics and logs name the object: "namespace/name"."""
        return f"{self.namespace}/{self.name}"


class RunRef(ObjectRef):
    resource = BENCHMARK_RUNS


class SuiteRef(ObjectRef):
    resource = BENCHMARK_SUITES


class ScheduleRef(ObjectRef):
    resource = BENCHMARK_SCHEDULES
