"""Remove a population: everything that carries its owner's population label, and the seed's PV and snapshot
content (which the provisioner and the snapshot-controller made, so they carry no label: they are followed by the
names the seed's claim and snapshot give).

Snapshots go first (the population's contents with them, Retain: the storage is asked nothing), then the claims
and PVs (Retain too); the seed's claim only once its snapshot and content are gone, so the storage is never asked
to delete a volume that still has a snapshot. Deletes are collections by the label, asked again every few seconds
(a create still in flight lands after the first), and whether anything is left is a list of one item, never the
whole level at a time (only at the deadline is what is left counted, page by page).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from csibench.engine.population import manifests as m
from csibench.engine.population.making import Owner, read_one
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.resources import Resource

log = logging.getLogger(__name__)

_REDELETE_SECONDS = 5.0
_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class Removal:
    complete: bool
    remaining: dict[str, int]  # plural -> objects still there (the seed's PV and content included)
    seconds: float
    found: bool = True  # whether there was anything to remove
    error: str | None = None  # why what is left could not be read

    def describe(self) -> str:
        if self.complete:
            return f"population removed in {self.seconds:.1f}s"
        left = ", ".join(f"{count} {kind}" for kind, count in self.remaining.items() if count)
        why = f" ({self.error})" if self.error else ""
        return f"population removal incomplete after {self.seconds:.0f}s: still present: {left}{why}"


async def _count(client: KubeApi, resource: Resource, namespace: str | None, selector: str,
                 exact: bool = False) -> int:
    """How many objects carry the label. Not ``exact``: 0 or 1 (one item listed; the API server does not count
    what a selector leaves); ``exact``: the whole list, page by page."""
    query = {"labelSelector": selector, "limit": "500" if exact else "1"}
    count = 0
    while True:
        listing = await client.get(resource.path(namespace), query=query)
        if listing is None:  # the kind is not served (no snapshot API): none of it
            return count
        count += len(listing.get("items") or [])
        token = (listing.get("metadata") or {}).get("continue")
        if not exact or not token or not count:
            return min(count, 1) if not exact else count
        query = {**query, "continue": str(token)}


async def _delete(client: KubeApi, resource: Resource, namespace: str | None, selector: str) -> None:
    try:
        await client.delete(resource.path(namespace), query={"labelSelector": selector})
    except ApiError as error:
        if error.status not in (404, 405):
            raise


async def _seed_parts(client: KubeApi, owner: Owner) -> tuple[str | None, str | None]:
    """The seed claim's PV and the seed snapshot's content, by name, while the seed still names them."""
    name = m.seed_name(owner.prefix)
    claim = await read_one(client, r.PVCS, owner.namespace, name) or {}
    snapshot = await read_one(client, r.SNAPSHOTS, owner.namespace, name) or {}
    owned = ((claim.get("metadata") or {}).get("labels") or {}).get(m.POPULATION_LABEL) == owner.uid
    volume = (claim.get("spec") or {}).get("volumeName") if owned else None
    content = ((snapshot.get("status") or {}).get("boundVolumeSnapshotContentName")
               if ((snapshot.get("metadata") or {}).get("labels") or {}).get(m.POPULATION_LABEL) == owner.uid
               else None)
    return volume, content


async def _exists(client: KubeApi, resource: Resource, name: str | None) -> int:
    return 0 if name is None or await read_one(client, resource, None, name) is None else 1


async def _left(client: KubeApi, owner: Owner, seed: tuple[str | None, str | None], exact: bool) -> dict[str, int]:
    volume, content = seed
    selector = owner.selector
    return {
        "volumesnapshots": await _count(client, r.SNAPSHOTS, owner.namespace, selector, exact),
        "volumesnapshotcontents": await _count(client, r.SNAPSHOT_CONTENTS, None, selector, exact)
        + await _exists(client, r.SNAPSHOT_CONTENTS, content),
        "persistentvolumeclaims": await _count(client, r.PVCS, owner.namespace, selector, exact),
        "persistentvolumes": await _count(client, r.PVS, None, selector, exact)
        + await _exists(client, r.PVS, volume),
    }


async def remove_population(client: KubeApi, owner: Owner, deadline_seconds: float) -> Removal:
    """Delete the owner's population and wait until it, the seed's PV and the seed's content are gone."""
    started = time.monotonic()
    selector = owner.selector
    try:
        seed = await _seed_parts(client, owner)
    except ApiError as error:  # the seed unreadable: its PV and content are not followed, the labelled rest is
        log.warning("population of %s: the seed: %s", owner.selector, error)
        seed = (None, None)
    found = False
    asked: dict[str, float] = {}  # "snapshots" / "volumes" -> when their deletes were last asked

    async def ask(what: str, kinds: tuple[tuple[Resource, str | None], ...]) -> None:
        if time.monotonic() - asked.get(what, -_REDELETE_SECONDS) >= _REDELETE_SECONDS:
            asked[what] = time.monotonic()
            for resource, namespace in kinds:
                await _delete(client, resource, namespace, selector)

    while True:
        try:
            left = await _left(client, owner, seed, exact=False)
        except ApiError as error:  # unreadable for now: asked again until the deadline, then said
            log.warning("population of %s: %s", owner.selector, error)
            if time.monotonic() - started >= deadline_seconds:
                return Removal(False, {"population objects (unreadable)": 1}, time.monotonic() - started,
                               error=str(error))
            await asyncio.sleep(_POLL_SECONDS)
            continue
        seconds = time.monotonic() - started
        if not any(left.values()):
            return Removal(True, left, seconds, found)
        found = True
        if seconds >= deadline_seconds:
            return Removal(False, await _left(client, owner, seed, exact=True), seconds)
        if left["volumesnapshots"] + left["volumesnapshotcontents"]:
            await ask("snapshots", ((r.SNAPSHOTS, owner.namespace), (r.SNAPSHOT_CONTENTS, None)))
        else:  # the seed volume outlives its snapshot
            await ask("volumes", ((r.PVCS, owner.namespace), (r.PVS, None)))
        await asyncio.sleep(_POLL_SECONDS)
