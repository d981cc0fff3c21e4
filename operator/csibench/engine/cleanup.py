"""Remove everything a run created: on success, failure, timeout, deletion of the run, or after a restart.

Only labelled objects are deleted (one delete-collection per kind, by the run's uid label), so a user's own
objects in a shared namespace are never touched. Completion is watched, not assumed: pods, snapshots and
claims must be gone, and so must the PVs and snapshot contents that pointed at them (no leaked volumes). What
is still there at the deadline is reported, never silently dropped.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from csibench.engine.observed import Observed
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.client import ApiError, KubeClient

REDELETE_SECONDS = 5.0


@dataclass(frozen=True)
class CleanupResult:
    complete: bool
    remaining: dict[str, int]
    seconds: float

    def describe(self) -> str:
        if self.complete:
            return f"removed every object the run created in {self.seconds:.1f}s"
        left = ", ".join(f"{count} {kind}" for kind, count in self.remaining.items() if count)
        return f"cleanup incomplete after {self.seconds:.0f}s: still present: {left}"


def remaining(observed: Observed, namespace_left: bool) -> dict[str, int]:
    counts = {
        "pods": sum(1 for p in observed.pods.values() if p.exists),
        "volumesnapshots": sum(1 for s in observed.snapshots.values() if s.exists),
        "persistentvolumeclaims": sum(1 for c in observed.claims.values() if c.exists),
        "persistentvolumes": len(observed.pv_claim),
        "volumesnapshotcontents": len(observed.contents),
    }
    if namespace_left:
        counts["namespaces"] = 1
    return counts


async def _snapshot_api_present(client: KubeClient) -> bool:
    return await client.get("/apis/snapshot.storage.k8s.io/v1") is not None


async def _namespace_gone(client: KubeClient, namespace: str) -> bool:
    found = await client.get(r.NAMESPACES.path(name=namespace))
    return found is None


async def cleanup(client: KubeClient, observed: Observed | None, namespace: str, prefix: str, selector: str,
                  own_namespace: bool, deadline_seconds: float) -> CleanupResult:
    """Delete the run's objects and wait (event-driven) until they and their volumes are gone, or the deadline."""
    started = time.monotonic()
    snapshots = await _snapshot_api_present(client)
    watches: RunWatches | None = None
    if observed is None:
        observed = Observed(namespace, prefix)
        watches = RunWatches(client, observed, selector, snapshots)
        await watches.start()
    try:
        query = {"labelSelector": selector}
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
                        await client.delete(resource.path(namespace), query=query)
                    except ApiError as error:
                        if error.status not in (404, 405):
                            raise
            await asyncio.sleep(0.2)  # reads in-memory state kept current by the watches
        objects_left = remaining(observed, namespace_left=False)
        namespace_left = False
        if own_namespace:
            await client.delete(r.NAMESPACES.path(name=namespace))
            while time.monotonic() - started < deadline_seconds:
                if await _namespace_gone(client, namespace):
                    break
                await asyncio.sleep(0.5)
            else:
                namespace_left = True
        if namespace_left:
            objects_left["namespaces"] = 1
        return CleanupResult(not any(objects_left.values()), objects_left, time.monotonic() - started)
    finally:
        if watches is not None:
            watches.stop()
