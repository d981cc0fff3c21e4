"""Remove everything a run created: on success, failure, timeout, deletion of the run, or after a restart.

Only labelled objects are deleted (one delete-collection per kind, by the run's uid label), so a user's own
objects in a shared namespace are never touched. The namespace a run created is deleted only after a fresh read
shows it carries the run's uid label, and with that object's uid as a precondition: a namespace named in a
tampered status, or one that replaced the run's, is left alone and the refusal is reported. Completion is
watched, not assumed: pods, snapshots and claims must be gone, and so must the PVs and snapshot contents that
pointed at them (no leaked volumes). The namespace is deleted as soon as nothing of the run is left in it, so a
slow cluster-scoped object does not also leave the namespace behind ("nothing left": none of the run's pods,
snapshots or claims, as its watches see them). What is still there at the deadline is
reported, never silently dropped: counted per kind, and the first ``MAX_NAMED`` objects named with why each is
still there, from a fresh read (being deleted and the finalizers holding it, the driver it waits for, its status
error, the last Warning said against it), so a user can finish by hand what cleanup could not.

Orphaned snapshot contents are the one kind cleanup removes without a label. A snapshot deleted while the
snapshot-controller was binding it (an operator restart's redo, or a cleanup mid-createSnapshot, does that) can
go without its content, and the controller never deletes a content whose snapshot is missing: the content, and
the snapshot on the storage, would stay forever. A content carries no labels of ours (the controller creates
it), so ownership is proven by server-assigned uids instead: it is named ``snapcontent-<uid>`` after, and points
back at, a snapshot uid the run's label-selected watch saw go; a fresh read without the label confirms that
snapshot is gone (not merely unlabelled by someone who keeps it); it was made from a volume (not an imported
handle), with deletionPolicy Delete, and carries the controller's finalizer (so deleting it waits for the
storage). Cleanup then does what the controller does for a deleted snapshot: it sets
``snapshot.storage.kubernetes.io/volumesnapshot-being-deleted`` (a merge patch naming the uid seen: another uid
is refused, 422) and deletes the content (that uid as precondition); csi-snapshotter then deletes the snapshot on
the storage, once any CreateSnapshot call in flight has returned, and removes the finalizer.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field

from csibench.api.text import shorten
from csibench.engine.judges import group_settled
from csibench.engine.kinds.claim import CLAIM
from csibench.engine.kinds.group_snapshot import GROUP_SNAPSHOT
from csibench.engine.kinds.pod import POD
from csibench.engine.kinds.snapshot import SNAPSHOT
from csibench.engine.observed import ContentRef, Observed
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.ownership import RunScope

REDELETE_SECONDS = 5.0
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"  # external-snapshotter's own
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


@dataclass(frozen=True)
class CleanupResult:
    complete: bool
    remaining: dict[str, int]
    seconds: float
    refused: str | None = None  # what cleanup would not delete because the run could not prove it owned it
    reclaimed: tuple[str, ...] = ()  # orphaned snapshot contents cleanup deleted (see the module docstring)
    reclaim_error: str | None = None  # why an orphaned content could not be deleted: the first failure
    left: tuple[LeftObject, ...] = ()  # when incomplete: the first MAX_NAMED objects left, each with why
    unnamed: int = 0  # objects left beyond those named

    def describe(self, limit: int | None = None) -> str:
        """What cleanup did; when incomplete, what is left, named with why as far as ``limit`` characters allow
        (an Event's message is shorter than status), the rest counted."""
        notes = "".join(f"; {note}" for note in (self._reclaimed(), self.reclaim_error, self.refused) if note)
        if self.complete:
            return f"removed every object the run created in {self.seconds:.1f}s{notes}"
        left = ", ".join(f"{count} {kind}" for kind, count in self.remaining.items() if count)
        head = f"cleanup incomplete after {self.seconds:.0f}s: still present: {left}"
        return head + self.named(None if limit is None else limit - len(head) - len(notes)) + notes

    def named(self, room: int | None = None) -> str:
        """'; left: Kind ns/name (why), ... and N more' within ``room`` characters (as many objects as fit), or
        nothing when no object could be named."""
        for shown in range(len(self.left), 0, -1):
            hidden = self.unnamed + len(self.left) - shown
            text = "; left: " + ", ".join(left.describe() for left in self.left[:shown]) + \
                (f" and {hidden} more" if hidden else "")
            if room is None or len(text) <= room:
                return text
        return ""

    def _reclaimed(self) -> str | None:
        if not self.reclaimed:
            return None
        count = f"{len(self.reclaimed)} snapshot content{'s' if len(self.reclaimed) != 1 else ''}"
        return (f"deleted {count} the snapshot-controller had left without their snapshots "
                f"({', '.join(self.reclaimed[:3])}{', ...' if len(self.reclaimed) > 3 else ''})")


def remaining(observed: Observed, namespace_left: bool) -> dict[str, int]:
    counts = {
        "pods": sum(1 for p in observed.pods.values() if p.exists),
        "volumesnapshots": sum(1 for s in observed.snapshots.values() if s.exists),
        "persistentvolumeclaims": sum(1 for c in observed.claims.values() if c.exists),
        "persistentvolumes": observed.owned_volumes(),
        "volumesnapshotcontents": observed.owned_contents(),
        "volumegroupsnapshots": sum(1 for g in observed.groups.values() if g.exists),
        "volumegroupsnapshotcontents": observed.owned_group_contents(),
        "volumesnapshots of groups": observed.members_left(),
        "volumesnapshotcontents of groups": observed.member_contents_left(),
    }
    if namespace_left:
        counts["namespaces"] = 1
    return counts


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
            listing = await client.get(resource.path(namespace), query={"fieldSelector": f"metadata.name={name}"})
            found = next(iter((listing or {}).get("items") or []), None)
    except ApiError as error:
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


async def _snapshot_api_present(client: KubeApi) -> bool:
    return await client.get(r.SNAPSHOT_API) is not None


async def _group_snapshot_api_present(client: KubeApi) -> bool:
    return await client.get(r.GROUP_SNAPSHOT_API) is not None


async def delete_owned_namespace(client: KubeApi, scope: RunScope) -> tuple[str | None, str | None]:
    """Delete the run's own namespace if it still carries the run's label. Returns (uid being deleted, refusal)."""
    if scope.owned_namespace is None:
        return None, None
    found = await client.get(r.NAMESPACES.path(name=scope.owned_namespace))
    if found is None:
        return None, None
    metadata = found.get("metadata") or {}
    if not scope.owns(metadata):
        return None, (f"namespace {scope.owned_namespace} was not deleted: it does not carry this run's label "
                      f"{scope.selector}, so the run cannot have created it")
    uid = str(metadata.get("uid", ""))
    await client.delete(r.NAMESPACES.path(name=scope.owned_namespace), uid=uid or None)
    return uid, None


async def _snapshot_still_there(client: KubeApi, namespace: str, ref: ContentRef) -> bool:
    """A fresh read, without the run's label: a snapshot that only lost the label is someone's now, not gone."""
    listing = await client.get(r.SNAPSHOTS.path(namespace), query={"fieldSelector": f"metadata.name={ref.snapshot}"})
    return any((item.get("metadata") or {}).get("uid") == ref.snapshot_uid for item in (listing or {}).get("items", []))


async def reclaim_orphaned_content(client: KubeApi, name: str, uid: str) -> bool:
    """Mark one orphaned content as its snapshot's deletion would have, and delete it, both only while its uid is
    ``uid`` (a merge patch naming another uid is refused, 422; the delete carries the uid as a precondition,
    409). True if it was there to delete."""
    path = r.SNAPSHOT_CONTENTS.path(name=name)
    patched = await client.merge_patch(path, {"metadata": {"uid": uid, "annotations": {BEING_DELETED: "yes"}}})
    return patched is not None and await client.delete(path, uid=uid)


@dataclass
class _Reclaim:
    """Cleanup's reclaim of orphaned contents: each tried once, again after a transient failure."""

    client: KubeApi
    namespace: str
    retry_at: dict[str, float] = field(default_factory=dict)  # content uid -> when to try again (inf: never)
    reclaimed: list[str] = field(default_factory=list)
    error: str | None = None  # the first failure, as text (others are alike)

    async def __call__(self, observed: Observed) -> None:
        for name, ref in observed.orphaned_contents():
            if time.monotonic() < self.retry_at.get(ref.uid, 0.0):
                continue
            self.retry_at[ref.uid] = math.inf
            try:
                if await _snapshot_still_there(self.client, self.namespace, ref):
                    continue  # not gone: it lost the run's label, so it and its content are left alone
                if await reclaim_orphaned_content(self.client, name, ref.uid):
                    self.reclaimed.append(name)
            except ApiError as failure:
                if failure.status == 0 or failure.status == 429 or failure.status >= 500:
                    self.retry_at[ref.uid] = time.monotonic() + REDELETE_SECONDS
                self.error = self.error or f"could not delete orphaned snapshot content {name}: {failure}"


async def _delete_settled_groups(client: KubeApi, namespace: str, observed: Observed) -> None:
    for name, group in observed.groups.items():
        if group.exists and group_settled(group):
            try:
                await client.delete(r.GROUP_SNAPSHOTS.path(namespace, name), uid=group.uid or None)
            except ApiError as error:
                if error.status not in (404, 409):  # gone, or a namesake now: not this group
                    raise


async def _namespace_gone(client: KubeApi, name: str, uid: str) -> bool:
    found = await client.get(r.NAMESPACES.path(name=name))
    return found is None or (found.get("metadata") or {}).get("uid") != uid


async def cleanup(client: KubeApi, observed: Observed | None, scope: RunScope,
                  deadline_seconds: float, keep_namespace: bool = False) -> CleanupResult:
    """Delete the run's objects and wait (event-driven) until they and their volumes are gone, or the deadline.
    ``keep_namespace``: between two iterations of a run, the run's namespace stays."""
    started = time.monotonic()
    watches: RunWatches | None = None
    try:
        snapshots = await _snapshot_api_present(client)
        groups = snapshots and await _group_snapshot_api_present(client)
        if observed is None:
            observed = Observed(scope.namespace, scope.prefix)
            watches = RunWatches(client, observed, scope.selector, snapshots, groups=groups)
            await watches.start(timeout=max(1.0, deadline_seconds))
        query = {"labelSelector": scope.selector}
        kinds = [r.PODS] + ([r.SNAPSHOTS] if snapshots else []) + [r.PVCS]  # group snapshots: one by one, below
        last_delete = -REDELETE_SECONDS
        reclaim = _Reclaim(client, scope.namespace)
        namespace: tuple[str | None, str | None] | None = None  # (uid being deleted, refusal) once asked
        while time.monotonic() - started < deadline_seconds:
            left = remaining(observed, namespace_left=False)
            await reclaim(observed)
            in_namespace = (left["pods"] + left["volumesnapshots"] + left["persistentvolumeclaims"]
                            + left["volumegroupsnapshots"] + left["volumesnapshots of groups"])
            if not in_namespace and namespace is None and not keep_namespace:
                namespace = await delete_owned_namespace(client, scope)
            if not any(left.values()):
                break
            # Delete again now and then: a create still in flight when cleanup began lands after the first delete.
            if in_namespace and time.monotonic() - last_delete >= REDELETE_SECONDS:
                last_delete = time.monotonic()
                # A group snapshot being taken is left until it is ready or failed (judges.group_settled): deleted
                # sooner, the storage would keep it with nothing left in the API to delete it by. Its claims stay
                # until then too (no finalizer holds a group's volumes). Settled ones go one by one, each by the
                # uid the run's label-selected watch saw.
                unsettled = any(not group_settled(group) for group in observed.groups.values())
                await _delete_settled_groups(client, scope.namespace, observed)
                for resource in [k for k in kinds if not (unsettled and k == r.PVCS)]:
                    try:
                        await client.delete(resource.path(scope.namespace), query=query)
                    except ApiError as error:
                        if error.status not in (404, 405):
                            raise
            await asyncio.sleep(0.2)  # reads in-memory state kept current by the watches
        objects_left = remaining(observed, namespace_left=False)
        if namespace is None:
            namespace = (None, None) if keep_namespace else await delete_owned_namespace(client, scope)
        deleting, refused = namespace
        if deleting is not None and scope.owned_namespace is not None:
            while not await _namespace_gone(client, scope.owned_namespace, deleting):  # asked at least once
                if time.monotonic() - started >= deadline_seconds:
                    objects_left["namespaces"] = 1
                    break
                await asyncio.sleep(0.5)
        seconds, complete = time.monotonic() - started, not any(objects_left.values())
        named, unnamed = ((), 0) if complete else await name_what_is_left(
            client, observed, scope, namespace_left=bool(objects_left.get("namespaces")))
        return CleanupResult(complete, objects_left, seconds, refused, tuple(reclaim.reclaimed), reclaim.error,
                             named, unnamed)
    finally:
        if watches is not None:
            watches.stop()
