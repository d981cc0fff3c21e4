"""Remove everything a run created: on success, failure, timeout, deletion of the run, or after a restart.

Only labelled objects are deleted (one delete-collection per kind, by the run's uid label), so a user's own
objects in a shared namespace are never touched. The namespace a run created is deleted only after a fresh read
shows it carries the run's uid label, and with that object's uid as a precondition: a namespace named in a
tampered status, or one that replaced the run's, is left alone and the refusal is reported. Completion is
watched, not assumed: pods, snapshots and claims must be gone, and so must the PVs and snapshot contents that
pointed at them (no leaked volumes). The namespace is deleted as soon as nothing of the run is left in it, so a
slow cluster-scoped object does not also leave the namespace behind. What is still there at the deadline is
reported, never silently dropped.

Orphaned snapshot contents are the one kind cleanup removes without a label. A snapshot deleted while the
snapshot-controller was binding it (its content just created, not yet in the controller's cache; an operator
restart's redo or a cleanup mid-createSnapshot does that) loses its finalizer at once, and the controller never
deletes a content whose snapshot is missing: the content, and the snapshot on the storage, would stay forever.
A content carries no labels of ours (the controller creates it), so ownership is proven by server-assigned uids
instead: it is named ``snapcontent-<uid>`` after, and points back at, a snapshot uid the run's label-selected
watch saw; it was made from a volume (not an imported handle) with deletionPolicy Delete. Cleanup then does what
the controller does for a deleted snapshot: it sets ``snapshot.storage.kubernetes.io/volumesnapshot-being-
deleted`` and deletes the content, both only if its uid is still the one seen; the CSI snapshotter then deletes
the snapshot on the storage and removes its finalizer.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from csibench.engine.observed import Observed
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.client import ApiError, KubeClient
from csibench.kube.ownership import RunScope

REDELETE_SECONDS = 5.0
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"  # external-snapshotter's own


@dataclass(frozen=True)
class CleanupResult:
    complete: bool
    remaining: dict[str, int]
    seconds: float
    refused: str | None = None  # what cleanup would not delete because the run could not prove it owned it
    reclaimed: tuple[str, ...] = ()  # orphaned snapshot contents cleanup deleted (see the module docstring)
    reclaim_error: str | None = None  # why an orphaned content could not be deleted (e.g. 403 Forbidden)

    def describe(self) -> str:
        notes = "".join(f"; {note}" for note in (self._reclaimed(), self.reclaim_error, self.refused) if note)
        if self.complete:
            return f"removed every object the run created in {self.seconds:.1f}s{notes}"
        left = ", ".join(f"{count} {kind}" for kind, count in self.remaining.items() if count)
        return f"cleanup incomplete after {self.seconds:.0f}s: still present: {left}{notes}"

    def _reclaimed(self) -> str | None:
        if not self.reclaimed:
            return None
        return (f"deleted {len(self.reclaimed)} snapshot contents the snapshot-controller had left without their "
                f"snapshots ({', '.join(self.reclaimed[:3])}{', ...' if len(self.reclaimed) > 3 else ''})")


def remaining(observed: Observed, namespace_left: bool) -> dict[str, int]:
    counts = {
        "pods": sum(1 for p in observed.pods.values() if p.exists),
        "volumesnapshots": sum(1 for s in observed.snapshots.values() if s.exists),
        "persistentvolumeclaims": sum(1 for c in observed.claims.values() if c.exists),
        "persistentvolumes": observed.owned_volumes(),
        "volumesnapshotcontents": observed.owned_contents(),
    }
    if namespace_left:
        counts["namespaces"] = 1
    return counts


async def _snapshot_api_present(client: KubeClient) -> bool:
    return await client.get(r.SNAPSHOT_API) is not None


async def delete_owned_namespace(client: KubeClient, scope: RunScope) -> tuple[str | None, str | None]:
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


async def reclaim_orphaned_content(client: KubeClient, name: str, uid: str) -> bool:
    """Mark one orphaned content as its snapshot's deletion would have, and delete it, both only while its uid is
    ``uid`` (a uid in a merge patch must match the stored one). True if it was there to delete."""
    path = r.SNAPSHOT_CONTENTS.path(name=name)
    patched = await client.merge_patch(path, {"metadata": {"uid": uid, "annotations": {BEING_DELETED: "yes"}}})
    return patched is not None and await client.delete(path, uid=uid)


async def _reclaim_orphans(client: KubeClient, observed: Observed, tried: set[str], reclaimed: list[str]) -> str | None:
    """Reclaim every orphaned content not tried yet (once each); the first refusal, as text (others are alike)."""
    error = None
    for name, uid in observed.orphaned_contents():
        if name in tried:
            continue
        tried.add(name)
        try:
            if await reclaim_orphaned_content(client, name, uid):
                reclaimed.append(name)
        except ApiError as refusal:
            error = error or f"could not delete orphaned snapshot content {name}: {refusal}"
    return error


async def _namespace_gone(client: KubeClient, name: str, uid: str) -> bool:
    found = await client.get(r.NAMESPACES.path(name=name))
    return found is None or (found.get("metadata") or {}).get("uid") != uid


async def cleanup(client: KubeClient, observed: Observed | None, scope: RunScope,
                  deadline_seconds: float, keep_namespace: bool = False) -> CleanupResult:
    """Delete the run's objects and wait (event-driven) until they and their volumes are gone, or the deadline.
    ``keep_namespace``: between two iterations of a run, the run's namespace stays."""
    started = time.monotonic()
    watches: RunWatches | None = None
    try:
        snapshots = await _snapshot_api_present(client)
        if observed is None:
            observed = Observed(scope.namespace, scope.prefix)
            watches = RunWatches(client, observed, scope.selector, snapshots)
            await watches.start(timeout=max(1.0, deadline_seconds))
        query = {"labelSelector": scope.selector}
        kinds = [r.PODS] + ([r.SNAPSHOTS] if snapshots else []) + [r.PVCS]
        last_delete = -REDELETE_SECONDS
        tried: set[str] = set()
        reclaimed: list[str] = []
        reclaim_error: str | None = None
        namespace: tuple[str | None, str | None] | None = None  # (uid being deleted, refusal) once asked
        while time.monotonic() - started < deadline_seconds:
            left = remaining(observed, namespace_left=False)
            reclaim_error = await _reclaim_orphans(client, observed, tried, reclaimed) or reclaim_error
            in_namespace = left["pods"] + left["volumesnapshots"] + left["persistentvolumeclaims"]
            if not in_namespace and namespace is None and not keep_namespace:
                namespace = await delete_owned_namespace(client, scope)
            if not any(left.values()):
                break
            # Delete again now and then: a create still in flight when cleanup began lands after the first delete.
            if in_namespace and time.monotonic() - last_delete >= REDELETE_SECONDS:
                last_delete = time.monotonic()
                for resource in kinds:
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
        return CleanupResult(not any(objects_left.values()), objects_left, time.monotonic() - started, refused,
                             tuple(reclaimed), reclaim_error)
    finally:
        if watches is not None:
            watches.stop()
