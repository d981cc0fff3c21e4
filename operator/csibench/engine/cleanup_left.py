"""What an incomplete cleanup left, named: the first ``MAX_NAMED`` objects, each with why it is still there from a
fresh read (being deleted and the finalizers holding it, what it is bound to, the driver it waits for, its status
error, the last Warning said against it), so a user can finish by hand what cleanup could not; the rest counted.

Apart from ``cleanup.py`` because it changes with how a leftover is explained to a user (which fields of a fresh
read say why), not with how cleanup deletes and waits.
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api.text import shorten
from csibench.engine.kinds.claim import CLAIM
from csibench.engine.kinds.group_snapshot import GROUP_SNAPSHOT
from csibench.engine.kinds.pod import POD
from csibench.engine.kinds.snapshot import SNAPSHOT
from csibench.engine.observed import Observed
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.ownership import RunScope
from csibench.kube.reads import read_by_name
from csibench.kube.resources import InvalidName

MAX_NAMED = 10  # objects an incomplete cleanup names (with why); the rest are counted
WHY_LENGTH = 240  # characters of why one object is left, and of each quoted part of it
# plural (as cleanup.remaining and Observed.left say) -> the resource and the kind as a user reads it
_LEFT_KINDS = {
    "pods": (r.PODS, "Pod", POD), "volumesnapshots": (r.SNAPSHOTS, "VolumeSnapshot", SNAPSHOT),
    "persistentvolumeclaims": (r.PVCS, "PersistentVolumeClaim", CLAIM),
    "volumegroupsnapshots": (r.GROUP_SNAPSHOTS, "VolumeGroupSnapshot", GROUP_SNAPSHOT),
    "persistentvolumes": (r.PVS, "PersistentVolume", None),
    "volumesnapshotcontents": (r.SNAPSHOT_CONTENTS, "VolumeSnapshotContent", None),
    "volumegroupsnapshotcontents": (r.GROUP_SNAPSHOT_CONTENTS, "VolumeGroupSnapshotContent", None),
    "namespaces": (r.NAMESPACES, "Namespace", None),
}

_BOUND_TO = (("claimRef", "PersistentVolumeClaim"), ("volumeSnapshotRef", "VolumeSnapshot"),
             ("volumeGroupSnapshotRef", "VolumeGroupSnapshot"))


@dataclass(frozen=True)
class LeftObject:
    """One object an incomplete cleanup left, and why it is still there."""

    kind: str  # "VolumeSnapshot"
    name: str  # "namespace/name", or the name of a cluster-scoped object
    why: str

    def describe(self) -> str:
        return f"{self.kind} {self.name} ({self.why})"


async def name_what_is_left(client: KubeApi, observed: Observed, scope: RunScope,
                            namespace_left: bool) -> tuple[tuple[LeftObject, ...], int]:
    """The first ``MAX_NAMED`` objects cleanup left, each with why from a fresh read, and how many more."""
    names = observed.left()
    if namespace_left and scope.owned_namespace is not None:
        names["namespaces"] = [scope.owned_namespace]
    listed = [(plural, name) for plural, items in names.items() for name in items]
    said = {kind: observed.complaints(kind) for kind in (POD, SNAPSHOT, CLAIM, GROUP_SNAPSHOT)}
    named = []
    for plural, name in listed[:MAX_NAMED]:
        resource, kind, observed_kind = _LEFT_KINDS[plural]
        namespace = scope.namespace if resource.namespaced else None
        complaint = said[observed_kind].get(name) if observed_kind is not None else None
        why = await _why_left(client, resource, namespace, name, complaint)
        named.append(LeftObject(kind, f"{namespace}/{name}" if namespace else name, why))
    return tuple(named), len(listed) - len(named)


async def _why_left(client: KubeApi, resource: r.Resource, namespace: str | None, name: str,
                    complaint: str | None) -> str:
    """Why one object is still there, as a fresh read shows it (a list by name: the operator may list, not get,
    most kinds), and the last thing said against it."""
    try:
        if resource is r.NAMESPACES:
            found = await client.get(resource.path(name=name))
        else:
            found = await read_by_name(client, resource, namespace, name)
    except (ApiError, InvalidName) as error:
        return shorten(f"could not read it: {error}", WHY_LENGTH)
    if found is None:
        return "gone just after the deadline"
    metadata, spec, status = found.get("metadata") or {}, found.get("spec") or {}, found.get("status") or {}
    finalizers = [str(f) for f in metadata.get("finalizers") or []]
    if metadata.get("deletionTimestamp"):
        held = f", held by finalizer{'s' if len(finalizers) > 1 else ''} {', '.join(finalizers)}" if finalizers \
            else ""
        parts = [f"deleting since {metadata['deletionTimestamp']}{held}"]
    else:
        parts = ["not being deleted" + (f", finalizers {', '.join(finalizers)}" if finalizers else "")]
    for key, kind in _BOUND_TO:  # a volume or content waits for what it is bound to
        ref = spec.get(key) or {}
        if ref.get("name") and not metadata.get("deletionTimestamp"):
            parts.append(f"bound to {kind} {ref.get('namespace')}/{ref['name']}")
            break
    driver = spec.get("driver") or (spec.get("csi") or {}).get("driver")
    if driver:
        parts.append(f"driver {driver}")
    status_error = status.get("error")
    if complaint:
        parts.append(complaint)
    elif isinstance(status_error, dict) and status_error.get("message"):
        parts.append(f"status.error: {status_error['message']}")
    return shorten("; ".join(shorten(str(part), WHY_LENGTH) for part in parts), WHY_LENGTH)
