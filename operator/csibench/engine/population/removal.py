"""Remove a population: everything that carries its owner's population label, and the seed's PV and snapshot
content (which the provisioner and the snapshot-controller made, so they carry no label: they are followed by name,
as status recorded them when the seed was made, else as the seed's claim and snapshot still give them).

Every member goes at once (PVs and contents Retain: the storage is asked nothing), and the seed's snapshot with
them; the seed's claim only once its snapshot is gone and its content too (unless that content is Retain, kept by
its class's choice), so the storage is never asked to delete a volume that still has a snapshot. Deletes are
collections by the label, asked again every few seconds (a create still in flight lands after the first); a delete
or a read the API server fails is asked again until the deadline, and said then. Whether anything is left is a list
of one item, never the whole level at a time (only at the deadline is what is left counted, page by page).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from csibench.api.population import PopulationStatus
from csibench.api.validation import is_dns_subdomain
from csibench.engine.population import manifests as m
from csibench.engine.population.making import Owner
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.reads import read_by_name
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


@dataclass
class SeedParts:
    """The seed's PV and snapshot content, by name (None: not known), and whether that content is Retain."""

    volume: str | None = None
    content: str | None = None
    content_retained: bool = False


@dataclass(frozen=True)
class PopulationCleanup:
    """What a run's cleanup needs to remove the population its status recorded: a deadline, and the seed's PV and
    content as status named them (None: found from the seed itself)."""

    deadline_seconds: float
    seed: SeedParts | None = None


def population_cleanup(recorded: PopulationStatus | None, timeout_seconds: float,
                       shared: bool = False) -> PopulationCleanup | None:
    """The removal a run's status calls for: None when it recorded no population (status.population is written
    before the seed is created, so a run that made one says so), or when its spec (immutable, unlike status) says
    the population is its suite's (``shared``: the suite removes it); the seed's names only when they are names (a
    tampered status cannot send a read elsewhere)."""
    if recorded is None or shared:
        return None
    volume, content = (name if name is not None and is_dns_subdomain(name) else None
                       for name in (recorded.seedVolume, recorded.seedSnapshotContent))
    return PopulationCleanup(timeout_seconds, SeedParts(volume, content) if volume or content else None)


async def seed_parts(client: KubeApi, owner: Owner, known: SeedParts) -> SeedParts:
    """The seed's parts: those status recorded, else those the seed's claim and snapshot (the owner's) name."""
    name = m.seed_name(owner.prefix)
    parts = SeedParts(known.volume, known.content)
    if parts.volume is None:
        claim = await read_by_name(client, r.PVCS, owner.namespace, name) or {}
        if ((claim.get("metadata") or {}).get("labels") or {}).get(m.POPULATION_LABEL) == owner.uid:
            parts.volume = (claim.get("spec") or {}).get("volumeName")
    if parts.content is None:
        snapshot = await read_by_name(client, r.SNAPSHOTS, owner.namespace, name) or {}
        if ((snapshot.get("metadata") or {}).get("labels") or {}).get(m.POPULATION_LABEL) == owner.uid:
            parts.content = (snapshot.get("status") or {}).get("boundVolumeSnapshotContentName")
    if parts.content is not None:
        content = await read_by_name(client, r.SNAPSHOT_CONTENTS, None, parts.content) or {}
        parts.content_retained = (content.get("spec") or {}).get("deletionPolicy") == "Retain"
    return parts


async def _exists(client: KubeApi, resource: Resource, name: str | None) -> int:
    return 0 if name is None or await read_by_name(client, resource, None, name) is None else 1


async def _left(client: KubeApi, owner: Owner, seed: SeedParts, exact: bool) -> dict[str, int]:
    selector = owner.selector
    return {
        "volumesnapshots": await _count(client, r.SNAPSHOTS, owner.namespace, selector, exact),
        "volumesnapshotcontents": await _count(client, r.SNAPSHOT_CONTENTS, None, selector, exact)
        + await _exists(client, r.SNAPSHOT_CONTENTS, seed.content),
        "persistentvolumeclaims": await _count(client, r.PVCS, owner.namespace, selector, exact),
        "persistentvolumes": await _count(client, r.PVS, None, selector, exact)
        + await _exists(client, r.PVS, seed.volume),
    }


async def remove_population(client: KubeApi, owner: Owner, deadline_seconds: float,
                            known: SeedParts | None = None) -> Removal:
    """Delete the owner's population and wait until it, the seed's PV and the seed's content are gone (``known``:
    their names, as status recorded them)."""
    started = time.monotonic()
    members = m.population_selector(owner.uid, members_only=True)
    error: str | None = None
    seed: SeedParts | None = None
    found = False
    asked: dict[str, float] = {}  # "members" / "seed snapshot" / "seed claim" -> when their deletes were last asked

    async def ask(what: str, deletes: tuple[tuple[Resource, str | None, str], ...]) -> None:
        if time.monotonic() - asked.get(what, -_REDELETE_SECONDS) >= _REDELETE_SECONDS:
            asked[what] = time.monotonic()
            for resource, namespace, selector in deletes:
                await _delete(client, resource, namespace, selector)

    seed_only = f"{owner.selector},{m.SEED_LABEL}"
    while True:
        seconds = time.monotonic() - started
        try:
            seed = seed or await seed_parts(client, owner, known or SeedParts())
            left = await _left(client, owner, seed, exact=False)
            if not any(left.values()):
                return Removal(True, left, seconds, found)
            found = True
            if seconds >= deadline_seconds:
                return Removal(False, await _left(client, owner, seed, exact=True), seconds, error=error)
            await ask("members", ((r.SNAPSHOTS, owner.namespace, members), (r.SNAPSHOT_CONTENTS, None, members),
                                  (r.PVCS, owner.namespace, members), (r.PVS, None, members),
                                  (r.SNAPSHOTS, owner.namespace, seed_only)))
            seed_snapshot_left = await _count(client, r.SNAPSHOTS, owner.namespace, seed_only) + (
                0 if seed.content_retained else await _exists(client, r.SNAPSHOT_CONTENTS, seed.content))
            if not seed_snapshot_left:  # the seed volume outlives its snapshot
                await ask("seed claim", ((r.PVCS, owner.namespace, seed_only),))
        except ApiError as failed:  # asked again until the deadline, then said
            log.warning("population of %s: %s", owner.selector, failed)
            error = str(failed)
            if seconds >= deadline_seconds:
                return Removal(False, {"population objects (unreadable)": 1}, seconds, error=error)
        await asyncio.sleep(_POLL_SECONDS)
