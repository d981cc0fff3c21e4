"""Make a population: the seed through the class, then every PV and claim, content and snapshot at once (within
the run's client limits), and wait until every claim is Bound and every snapshot ready.

The seed is read by polling one object (nothing of it is measured). The population's readiness is counted from
label-selected watches (one list, then events), so a level of 100k is not listed again and again. An object that
exists already (409: a restarted operator making it again) counts like one just made: only the watches, which
see the owner's label alone, say it is ready. Everything has one deadline, ``population.timeoutSeconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import BenchmarkRunSpec, ConditionReason
from csibench.api.population import PopulationSpec, PopulationStatus
from csibench.api.text import shorten
from csibench.engine.errors import RunAborted
from csibench.engine.population import manifests as m
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.reads import read_by_name
from csibench.kube.watch import Watch, WatchEvent

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5
_PROGRESS_SECONDS = 5.0  # status.progress while the population is made: no more often (each is a status write)
_CREATES_AT_ONCE = 64  # the client's own limits (qps, burst, maxInFlight) pace them; this bounds the tasks
Progress = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Owner:
    """Who the population belongs to: its objects' names start with ``prefix`` and carry ``uid``."""

    namespace: str
    prefix: str
    uid: str
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        return m.population_labels(self.uid, self.extra_labels)

    @property
    def selector(self) -> str:
        return m.population_selector(self.uid)


@dataclass
class Seed:
    """What the population's objects name: the seed's PV, and its snapshot's handle and driver."""

    pv: dict[str, Any]
    snapshot_handle: str | None = None
    snapshot_driver: str | None = None


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0

    def fail(self, what: str, why: str | None = None) -> RunAborted:
        return RunAborted(ConditionReason.POPULATION_FAILED, f"population: {what} within population.timeoutSeconds "
                          f"({self.seconds:.0f}s)" + (f"; {why}" if why else ""))


async def _last_warning(client: KubeApi, namespace: str, name: str) -> str | None:
    """The newest Warning Event about object ``name`` (a provisioner's ProvisioningFailed, a snapshotter's
    error), as 'reason: message', or None: what a failed seed says of itself."""
    try:
        listing = await client.get(r.EVENTS.path(namespace), query={
            "fieldSelector": f"involvedObject.name={name},type=Warning"})
    except ApiError:
        return None
    events = sorted((listing or {}).get("items") or [],
                    key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    if not events:
        return None
    newest = events[-1]
    return shorten(f"last Warning {newest.get('reason', '')}: {newest.get('message', '')}", 400)


def _owned(obj: dict[str, Any], owner: Owner, what: str) -> None:
    """A seed found under the seed's name must carry the owner's label: anything else is never used."""
    if obj and ((obj.get("metadata") or {}).get("labels") or {}).get(m.POPULATION_LABEL) != owner.uid:
        raise RunAborted(ConditionReason.POPULATION_FAILED, f"population: {what} exists and is not this "
                         "population's (its label differs): it is never used")


async def _poll(read: Callable[[], Awaitable[Any]], deadline: _Deadline, what: str,
                why: Callable[[], Awaitable[str | None]]) -> Any:
    while True:
        found = await read()
        if found is not None:
            return found
        if deadline.passed():
            raise deadline.fail(what, await why())
        await asyncio.sleep(_POLL_SECONDS)


async def _make_seed(client: KubeApi, spec: BenchmarkRunSpec, owner: Owner, node: str | None,
                     deadline: _Deadline, snapshots: bool, record: PopulationStatus) -> Seed:
    name = m.seed_name(owner.prefix)
    await client.create(r.PVCS.path(owner.namespace), m.build_seed_claim(name, spec, owner.labels, node))

    async def bound_volume() -> dict[str, Any] | None:
        claim = await read_by_name(client, r.PVCS, owner.namespace, name) or {}
        _owned(claim, owner, f"claim {owner.namespace}/{name}")
        volume = (claim.get("spec") or {}).get("volumeName")
        if (claim.get("status") or {}).get("phase") != "Bound" or not volume:
            return None
        record.seedVolume = str(volume)
        pv = await read_by_name(client, r.PVS, None, volume)
        if pv and not ((pv.get("spec") or {}).get("csi") or {}).get("volumeHandle"):
            raise RunAborted(ConditionReason.POPULATION_FAILED, f"population: the seed's volume {volume} has no CSI "
                             f"source: a population names the seed's CSI volume handle, and class "
                             f"{spec.storageClassName} makes volumes of another kind")
        return pv

    pv = await _poll(bound_volume, deadline, f"the seed claim {name} was not Bound by the class "
                     f"{spec.storageClassName}", lambda: _last_warning(client, owner.namespace, name))
    seed = Seed(pv)
    if not snapshots:
        return seed
    assert spec.volumeSnapshotClassName is not None  # the spec's rule
    await client.create(r.SNAPSHOTS.path(owner.namespace),
                        m.build_seed_snapshot(name, name, spec.volumeSnapshotClassName, owner.labels))
    error: str | None = None

    async def ready_content() -> dict[str, Any] | None:
        nonlocal error
        snapshot = await read_by_name(client, r.SNAPSHOTS, owner.namespace, name) or {}
        _owned(snapshot, owner, f"VolumeSnapshot {owner.namespace}/{name}")
        status = snapshot.get("status") or {}
        said = (status.get("error") or {}).get("message")
        if said and said != error:
            log.info("population seed snapshot %s/%s: %s", owner.namespace, name, said)
        error = said or error
        content = status.get("boundVolumeSnapshotContentName")
        if content:
            record.seedSnapshotContent = str(content)
        if not status.get("readyToUse") or not content:
            return None
        found = await read_by_name(client, r.SNAPSHOT_CONTENTS, None, content)
        return found if found and (found.get("status") or {}).get("snapshotHandle") else None

    async def why() -> str | None:
        return shorten(f"its error: {error}", 400) if error else await _last_warning(client, owner.namespace, name)

    content = await _poll(ready_content, deadline, f"the seed snapshot {name} was not ready (class "
                          f"{spec.volumeSnapshotClassName})", why)
    seed.snapshot_handle = str(content["status"]["snapshotHandle"])
    seed.snapshot_driver = str(content["spec"]["driver"])
    return seed


async def _create_all(client: KubeApi, requests: Iterable[tuple[str, dict[str, Any]]], total: int,
                      progress: Progress, deadline: _Deadline) -> None:
    """Every (path, body) created, at most ``_CREATES_AT_ONCE`` in flight; one that exists already counts. How
    many are made is said every ``_PROGRESS_SECONDS`` (at a level of 100k this takes a while). A create the API
    server refuses, or the deadline, fails the population (what was made is cleanup's)."""
    gate = asyncio.Semaphore(_CREATES_AT_ONCE)
    made = 0

    async def create(path: str, body: dict[str, Any]) -> None:
        nonlocal made
        async with gate:
            try:
                await client.create(path, body)
            except ApiError as error:
                raise RunAborted(ConditionReason.POPULATION_FAILED, shorten(
                    f"population: creating {body['kind']} {body['metadata']['name']} failed: {error}", 1000)) from error
        made += 1

    pending: set[asyncio.Task[None]] = set()
    said = time.monotonic()
    try:
        for path, body in requests:
            if len(pending) >= 4 * _CREATES_AT_ONCE:  # a bounded number of tasks, whatever the level
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
                if deadline.passed():
                    raise deadline.fail(f"{made}/{total} objects created")
                if time.monotonic() - said >= _PROGRESS_SECONDS:
                    said = time.monotonic()
                    await progress(f"population: {made}/{total} objects created")
            pending.add(asyncio.create_task(create(path, body)))
        for finished in asyncio.as_completed(pending):
            await finished
    finally:
        for task in pending:
            task.cancel()


class _Readiness:
    """Names of the population's claims Bound and snapshots ready, from their watches' events; and, once each
    watch has listed (``listed``), every name it holds (``present``): what exists already is not made again."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.ready: set[str] = set()
        self.present: dict[str, set[str]] = {"claims": set(), "snapshots": set()}
        self.listed: set[str] = set()
        self.changed = asyncio.Event()

    def __call__(self, events: list[WatchEvent]) -> None:
        for event in events:
            if event.type == "SYNC":
                self.listed.add(event.source)
                self.present[event.source] = {key.rpartition("/")[2] for key in event.obj.get("present") or ()}
                continue
            meta, status = event.obj.get("metadata") or {}, event.obj.get("status") or {}
            name = str(meta.get("name", ""))
            if event.type == "DELETED":
                self.present[event.source].discard(name)
            else:
                self.present[event.source].add(name)
            done = event.type != "DELETED" and (
                status.get("phase") == "Bound" if event.source == "claims" else status.get("readyToUse") is True)
            target = self.bound if event.source == "claims" else self.ready
            if done:
                target.add(name)
            else:
                target.discard(name)
        self.changed.set()


async def make_population(client: KubeApi, spec: BenchmarkRunSpec, population: PopulationSpec, owner: Owner,
                          node: str | None, progress: Progress, record: PopulationStatus) -> None:
    """The seed, then the population, until every claim is Bound and every snapshot ready, filling ``record`` as it
    goes (the seed's PV and content, so a removal after a restart follows them; the level and time at the end);
    RunAborted (PopulationFailed) on a refused create or past the deadline, what was made left for cleanup."""
    started = time.monotonic()
    deadline = _Deadline(float(population.timeoutSeconds))
    await progress("population: the seed")
    seed = await _make_seed(client, spec, owner, node, deadline, population.snapshots > 0, record)
    readiness = _Readiness()
    loop = asyncio.get_running_loop()
    query = {"labelSelector": owner.selector}
    watches = [Watch(client, "claims", r.PVCS, owner.namespace, query, loop, readiness)]
    if population.snapshots:
        watches.append(Watch(client, "snapshots", r.SNAPSHOTS, owner.namespace, query, loop, readiness))
    for watch in watches:
        watch.start()
    try:
        seed_name = m.seed_name(owner.prefix)
        found, done = await _found(readiness, {watch.source for watch in watches}, owner, deadline)
        if population.shared:
            record.foundClaims, record.foundSnapshots = len(found["claims"]), len(found["snapshots"])
            if record.foundClaims > population.claims or record.foundSnapshots > population.snapshots:
                raise RunAborted(ConditionReason.POPULATION_FAILED, f"population: the suite's population holds "
                                 f"{record.foundClaims} claims and {record.foundSnapshots} snapshots, more than "
                                 f"this run's level ({population.shown()}): a shared population only grows")
        missing_claims = population.claims - len(done["claims"] & set(range(1, population.claims + 1)))
        missing_snapshots = population.snapshots - len(done["snapshots"] & set(range(1, population.snapshots + 1)))
        await progress(f"population: creating {missing_claims} claims, {missing_snapshots} snapshots")
        total = 2 * (missing_claims + missing_snapshots)
        await _create_all(client, _requests(spec, population, owner, seed, done), total, progress, deadline)
        # The seed carries the label too, and is ready already: it is not part of the level.
        wanted_claims, wanted_snapshots = population.claims + 1, population.snapshots + (population.snapshots > 0)
        last_said = 0.0
        while len(readiness.bound) < wanted_claims or len(readiness.ready) < wanted_snapshots:
            claims, snapshots = len(readiness.bound - {seed_name}), len(readiness.ready - {seed_name})
            if deadline.passed():
                raise deadline.fail(f"{claims}/{population.claims} claims Bound and {snapshots}/"
                                    f"{population.snapshots} snapshots ready")
            if time.monotonic() - last_said >= _PROGRESS_SECONDS:
                last_said = time.monotonic()
                await progress(f"population: {claims}/{population.claims} claims Bound, "
                               f"{snapshots}/{population.snapshots} snapshots ready")
            readiness.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(readiness.changed.wait(), timeout=min(1.0, max(0.05, deadline.left())))
    finally:
        for watch in watches:
            watch.stop()
    record.claims, record.snapshots = population.claims, population.snapshots
    record.seconds = round(time.monotonic() - started, 3)


Indices = dict[str, set[int]]  # "claims" / "snapshots" -> member indices


async def _found(readiness: _Readiness, sources: set[str], owner: Owner,
                 deadline: _Deadline) -> tuple[Indices, Indices]:
    """The indices of the members each watch found when it first listed (a shared population's earlier levels, or
    what an operator made before it restarted), waiting for every watch's first list; and of those, the ones
    already Bound or ready. Only those are not asked for again: a claim whose PV was never made (a create refused,
    a run stopped between the two) has its pair asked for again, and the PV's 409 counts like a create."""
    while not sources <= readiness.listed:
        if deadline.passed():
            raise deadline.fail("the population's objects listed")
        readiness.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(readiness.changed.wait(), timeout=min(1.0, max(0.05, deadline.left())))

    def indices(names: set[str]) -> set[int]:
        return {index for name in names if (index := m.member_index(owner.prefix, name)) is not None}
    found = {source: indices(readiness.present[source]) for source in ("claims", "snapshots")}
    return found, {"claims": indices(readiness.bound), "snapshots": indices(readiness.ready)}


def _requests(spec: BenchmarkRunSpec, population: PopulationSpec, owner: Owner, seed: Seed,
              found: Indices) -> Iterable[tuple[str, dict[str, Any]]]:
    """Each PV before its claim, each content before its snapshot: the claim or snapshot finds its pair there.
    A pair whose claim is Bound (snapshot ready) in ``found`` is not asked for again."""
    labels = owner.labels
    for index in range(1, population.claims + 1):
        if index in found["claims"]:
            continue
        name = m.member_name(owner.prefix, index)
        yield r.PVS.path(), m.build_volume(name, owner.namespace, seed.pv, spec, labels)
        yield r.PVCS.path(owner.namespace), m.build_claim(name, spec, labels)
    if population.snapshots:
        assert seed.snapshot_handle is not None and seed.snapshot_driver is not None
        assert spec.volumeSnapshotClassName is not None
        for index in range(1, population.snapshots + 1):
            if index in found["snapshots"]:
                continue
            name = m.member_name(owner.prefix, index)
            yield r.SNAPSHOT_CONTENTS.path(), m.build_content(name, owner.namespace, seed.snapshot_driver,
                                                              seed.snapshot_handle, spec.volumeSnapshotClassName,
                                                              labels)
            yield r.SNAPSHOTS.path(owner.namespace), m.build_snapshot(name, labels)
