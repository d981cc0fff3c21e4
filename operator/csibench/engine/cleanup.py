"""Remove everything a run created: on success, failure, timeout, deletion of the run, or after a restart.

Only labelled objects are deleted (one delete-collection per kind, by the run's uid label), so a user's own
objects in a shared namespace are never touched. The namespace a run created is deleted only after a fresh read
shows it carries the run's uid label, and with that object's uid as a precondition: a namespace named in a
tampered status, or one that replaced the run's, is left alone and the refusal is reported. Completion is
watched, not assumed: pods, snapshots, group snapshots (and the member snapshots the controller made for them)
and claims must be gone, and so must the PVs, snapshot contents and group snapshot contents that pointed at them
(no leaked volumes). A group snapshot still being taken is deleted only once it is ready or failed, and its claims
wait for it. The namespace is deleted as soon as nothing of the run is left in it, so a slow cluster-scoped object
does not also leave the namespace behind ("nothing left": none of the run's pods, snapshots, group snapshots,
member snapshots or claims, as its watches see them). What is still there at the deadline is reported, never
silently dropped: counted per kind, and the first objects named with why each is still there
(``cleanup_left.py``), so a user can finish by hand what cleanup could not.

Orphaned snapshot contents, the one kind cleanup removes without a label, are reclaimed as ``reclaim.py`` says.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field

from csibench.engine.cleanup_left import LeftObject, name_what_is_left
from csibench.engine.judges import group_settled
from csibench.engine.observed import Observed
from csibench.engine.population.making import Owner
from csibench.engine.population.removal import PopulationCleanup, Removal, remove_population
from csibench.engine.reclaim import Reclaim
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.ownership import RunScope

REDELETE_SECONDS = 5.0


@dataclass(frozen=True)
class CleanupResult:
    complete: bool
    remaining: dict[str, int]
    seconds: float
    refused: str | None = None  # what cleanup would not delete because the run could not prove it owned it
    reclaimed: tuple[str, ...] = ()  # orphaned snapshot contents cleanup deleted (``reclaim.py``)
    reclaim_error: str | None = None  # why an orphaned content could not be deleted: the first failure
    left: tuple[LeftObject, ...] = ()  # when incomplete: the first cleanup_left.MAX_NAMED objects left, with why
    unnamed: int = 0  # objects left beyond those named
    # What its watches saw at the end (a resumed cleanup's own watches, which no step fed): the leftovers by name
    # per plural, and the names the storage knows the run's PVs and contents still present by (``leak_audit``)
    left_names: dict[str, list[str]] = field(default_factory=dict)
    storage_names: frozenset[str] = frozenset()
    population: Removal | None = None  # spec.population's removal, first (None: kept, between iterations)

    def describe(self, limit: int | None = None) -> str:
        """What cleanup did; when incomplete, what is left, named with why as far as ``limit`` characters allow
        (an Event's message is shorter than status), the rest counted."""
        population = self.population.describe() if self.population is not None and self.population.found else None
        notes = "".join(f"; {note}" for note in (self._reclaimed(), self.reclaim_error, self.refused, population)
                        if note)
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


async def cleanup(client: KubeApi, observed: Observed | None, scope: RunScope, deadline_seconds: float,
                  keep_namespace: bool = False, population: PopulationCleanup | None = None) -> CleanupResult:
    """Remove the run's population when its status recorded one (``population``: ``engine/population``, by its own
    label, within its own deadline), then the run's objects."""
    removal = None
    if population is not None and not keep_namespace:
        owner = Owner(scope.namespace, scope.prefix, scope.run_uid)
        removal = await remove_population(client, owner, population.deadline_seconds, population.seed)
    result = await _clean_up_run(client, observed, scope, deadline_seconds, keep_namespace)
    if removal is None or removal.complete:
        return dataclasses.replace(result, population=removal)
    left = {**result.remaining, **{f"population {kind}": count for kind, count in removal.remaining.items()}}
    return dataclasses.replace(result, complete=False, remaining=left, population=removal)


async def _clean_up_run(client: KubeApi, observed: Observed | None, scope: RunScope,
                        deadline_seconds: float, keep_namespace: bool = False) -> CleanupResult:
    """Delete the run's objects and wait (event-driven) until they and their volumes are gone, or the deadline.
    ``keep_namespace``: between two iterations of a run, the run's namespace (and its population) stays."""
    started = time.monotonic()
    watches: RunWatches | None = None
    try:
        snapshots = await _snapshot_api_present(client)
        groups = snapshots and await _group_snapshot_api_present(client)
        if observed is None:  # resumed after an operator restart: what went before it was never seen
            observed = Observed(scope.namespace, scope.prefix)
            observed.adopts_unseen = True
            watches = RunWatches(client, observed, scope.selector, snapshots, groups=groups)
            await watches.start(timeout=max(1.0, deadline_seconds))
        query = {"labelSelector": scope.selector}
        kinds = [r.PODS] + ([r.SNAPSHOTS] if snapshots else []) + [r.PVCS]  # group snapshots: one by one, below
        last_delete = -REDELETE_SECONDS
        reclaim = Reclaim(client, scope.namespace, REDELETE_SECONDS)
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
                             named, unnamed, observed.left(), frozenset(observed.storage_names()))
    finally:
        if watches is not None:
            watches.stop()
