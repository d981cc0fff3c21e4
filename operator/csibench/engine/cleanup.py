"""Remove everything a run created: on success, failure, timeout, deletion of the run, or after a restart.

Only labelled objects are deleted (one delete-collection per kind, by the run's uid label), so a user's own
objects in a shared namespace are never touched. The namespace a run created is deleted only after a fresh read
shows it carries the run's uid label, and with that object's uid as a precondition: a namespace named in a
tampered status, or one that replaced the run's, is left alone and the refusal is reported. Completion is
watched, not assumed: pods, snapshots and claims must be gone, and so must the PVs and snapshot contents that
pointed at them (no leaked volumes). What is still there at the deadline is reported, never silently dropped.
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


@dataclass(frozen=True)
class CleanupResult:
    complete: bool
    remaining: dict[str, int]
    seconds: float
    refused: str | None = None  # what cleanup would not delete because the run could not prove it owned it

    def describe(self) -> str:
        refused = f"; {self.refused}" if self.refused else ""
        if self.complete:
            return f"removed every object the run created in {self.seconds:.1f}s{refused}"
        left = ", ".join(f"{count} {kind}" for kind, count in self.remaining.items() if count)
        return f"cleanup incomplete after {self.seconds:.0f}s: still present: {left}{refused}"


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
        while time.monotonic() - started < deadline_seconds:
            left = remaining(observed, namespace_left=False)
            if not any(left.values()):
                break
            # Delete again now and then: a create still in flight when cleanup began lands after the first delete.
            if time.monotonic() - last_delete >= REDELETE_SECONDS:
                last_delete = time.monotonic()
                for resource in kinds:
                    try:
                        await client.delete(resource.path(scope.namespace), query=query)
                    except ApiError as error:
                        if error.status not in (404, 405):
                            raise
            await asyncio.sleep(0.2)  # reads in-memory state kept current by the watches
        objects_left = remaining(observed, namespace_left=False)
        deleting, refused = (None, None) if keep_namespace else await delete_owned_namespace(client, scope)
        if deleting is not None and scope.owned_namespace is not None:
            while time.monotonic() - started < deadline_seconds:
                if await _namespace_gone(client, scope.owned_namespace, deleting):
                    break
                await asyncio.sleep(0.5)
            else:
                objects_left["namespaces"] = 1
        return CleanupResult(not any(objects_left.values()), objects_left, time.monotonic() - started, refused)
    finally:
        if watches is not None:
            watches.stop()
