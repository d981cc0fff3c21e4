"""spec.disruptions inside a step: wait for the moment, inject, watch the component recover, then say what it cost.

A ``Disruptor`` runs beside its step's batch. It waits until the step's clock has run ``afterSeconds`` or
``afterObjects`` of the step's objects are terminal (read from the step's tracker in memory), then, for
``RestartComponent``, lists the component's pods (its labels in its namespace, on its node if one is named),
starts a watch on them, and deletes each one by uid (the very pod it listed, never a namesake created since). The
injection is stamped when the first delete is sent; the recovery when the watch delivers the last of as many new
pods (uids not listed before) Ready as were deleted, stamped on arrival like every object's terminal event. Both
are kept on the step's clock, and once the step has ended ``settle`` adds the figures of ``disruption_figures``.

Nothing to undo: a deleted pod is replaced by its controller (a Deployment, a DaemonSet, the kubelet for a static
pod), and a component that never comes back is reported NotRecovered, never restarted by csibench. The operator
needs rights to list, watch and delete those pods; ``access_problem`` says which it lacks before the run creates
anything.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable

from csibench.api.models import (
    MAX_FAILURE_REASONS,
    MAX_LEASES_NAMED,
    MAX_PODS_NAMED,
    ComponentTarget,
    DisruptionKind,
    DisruptionResult,
    DisruptionSpec,
    DisruptionState,
    RetriedWarnings,
)
from csibench.api.text import shorten
from csibench.engine.disruption_figures import Ending, disruption_figures
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.watch import Watch, WatchEvent

log = logging.getLogger(__name__)
MOMENT_POLL_SECONDS = 0.01  # how often the tracker's count is read in memory (no request)
WATCH_SYNC_SECONDS = 60
RIGHTS = ("list", "watch", "delete")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


class DisruptionError(Exception):
    """The disruption cannot be injected (or not all of it); the message says why."""


def unrestartable(pod: Json) -> str | None:
    """Why deleting this pod would not restart it (pure): a static pod's mirror (the kubelet only writes it
    again) or a pod no controller owns (gone for good); None when a controller replaces it."""
    meta = pod.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return "is a static pod's mirror: deleting it restarts nothing"
    if not any(owner.get("controller") for owner in meta.get("ownerReferences") or []):
        return "has no controller: deleting it would remove it for good"
    return None


def whole(value: object) -> int:
    """A count from another writer's object (a Lease's leaseTransitions): 0 unless it is a whole number."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def wall_seconds(stamp: str) -> float:
    """An RFC 3339 time (a Lease's acquireTime, microseconds) as seconds since the epoch."""
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def pending_result(spec: DisruptionSpec) -> DisruptionResult:
    return DisruptionResult(step=spec.step, kind=spec.kind, target=spec.component.describe())


def never_reached(results: list[DisruptionResult], specs: list[DisruptionSpec]) -> None:
    """At the run's end: a disruption whose step never ran (the run failed first) is NotReached, and one never
    listed yet is listed so (every spec.disruptions entry has its result)."""
    if len(results) != len(specs):
        results[:] = [pending_result(spec) for spec in specs]
    for result in results:
        if result.state == DisruptionState.PENDING:
            result.state = DisruptionState.NOT_REACHED
            result.message = f"the run ended before {result.step} reached the moment: nothing was injected"


def pod_query(target: ComponentTarget) -> dict[str, str]:
    query = {"labelSelector": target.label_selector()}
    if target.node is not None:
        query["fieldSelector"] = f"spec.nodeName={target.node}"
    return query


def ready(pod: Json) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return not meta.get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


async def access_problem(client: KubeApi, spec: DisruptionSpec) -> str | None:
    """Which right on the component's pods the operator lacks (a SelfSubjectAccessReview per verb), or None."""
    missing = [verb for verb in RIGHTS
               if not await client.can_i(verb, "pods", spec.component.namespace)]
    if not missing:
        return None
    return (f"disruption in {spec.step} needs {', '.join(missing)} on pods in namespace "
            f"{spec.component.namespace}, which the operator's identity lacks (deploy/ grants no rights on pods it "
            "did not create: a Role there, bound to its ServiceAccount, and an exception in its admission policy)")


class Disruptor:
    """One disruption of the step whose tracker it reads; ``result`` is updated in place (it is in status)."""

    def __init__(self, client: KubeApi, spec: DisruptionSpec, tracker: StepTracker, result: DisruptionResult) -> None:
        self.client = client
        self.spec = spec
        self.tracker = tracker
        self.result = result
        self.injected: float | None = None  # monotonic
        self.recovered: float | None = None
        self._listed: set[str] = set()  # uids of the component's pods before the injection
        self._new_ready: dict[str, float] = {}  # uid -> when a new pod was first seen Ready
        self._leases: dict[str, tuple[str, int]] = {}  # Lease name -> (holder, transitions) before the injection
        self._wanted = 0
        self._done = asyncio.Event()
        self.on_injected: Callable[[], Awaitable[None]] | None = None  # status written at once: pods were deleted
        # The retried Warnings about the step's objects whose latest line came at or after a moment (monotonic)
        self.warnings_since: Callable[[float], list[RetriedWarnings]] | None = None

    async def run(self) -> None:
        """Watch the component's pods (from before the moment, so that the injection is one request when it
        comes), wait for the moment, inject, wait for the recovery (or its timeout). Cancelled before the moment:
        the result stays as it was (``settle`` says NotReached)."""
        assert self.spec.kind == DisruptionKind.RESTART_COMPONENT
        target = self.spec.component
        watch = Watch(self.client, "disruption", r.PODS, target.namespace, pod_query(target),
                      asyncio.get_running_loop(), self._sink)
        watch.start()
        try:
            try:
                await asyncio.wait_for(watch.synced.wait(), WATCH_SYNC_SECONDS)
            except TimeoutError:
                raise DisruptionError(f"the watch on {target.describe()} did not list them within "
                                      f"{WATCH_SYNC_SECONDS} s") from None
            leases = await self._leases_now()
            await self._moment()
            await self._restart(leases)
        except ApiError as error:
            self._failed(f"{target.describe()}: {error.message}")
        except DisruptionError as error:
            self._failed(str(error))
        finally:
            watch.stop()

    def _failed(self, message: str) -> None:
        """Not injected, or not all of it: Failed when nothing was deleted, else the recovery says the rest."""
        self.result.message = shorten(message, 300)
        if not self._wanted:
            self.result.state = DisruptionState.FAILED

    async def _moment(self) -> None:
        tracker, spec = self.tracker, self.spec
        while tracker.started is None:
            await asyncio.sleep(MOMENT_POLL_SECONDS)
        if spec.afterSeconds is not None:
            await asyncio.sleep(max(0.0, tracker.started + spec.afterSeconds - time.monotonic()))
            self.result.momentAtSeconds = round(time.monotonic() - tracker.started, 3)
            return
        wanted = spec.afterObjects or 0
        while len(tracker.outcomes) < wanted:
            await asyncio.sleep(MOMENT_POLL_SECONDS)
        self.result.momentAtSeconds = round(time.monotonic() - tracker.started, 3)

    async def _restart(self, leases: list[Json]) -> None:
        """Delete each of the component's pods as they are now (by uid), then wait for as many new ones Ready.
        A pod that would not come back is refused before anything is deleted: a static pod (deleting its mirror
        pod restarts nothing) or a pod no controller owns (deleted for good)."""
        target = self.spec.component
        listing = await self.client.get(r.PODS.path(target.namespace), pod_query(target)) or {}
        pods = [p for p in listing.get("items") or [] if not (p.get("metadata") or {}).get("deletionTimestamp")]
        if not pods:
            raise DisruptionError(f"no pod matches {target.describe()}: nothing was injected")
        for pod in pods:
            problem = unrestartable(pod)
            if problem is not None:
                raise DisruptionError(f"pod {pod['metadata']['name']} {problem}: nothing was injected")
        self._listed = {p["metadata"]["uid"] for p in listing.get("items") or []}
        self._note_leases(leases, [p["metadata"]["name"] for p in pods])
        refused, deleted = [], []
        for pod in pods:
            meta = pod["metadata"]
            try:
                await self.client.delete(r.PODS.path(target.namespace, meta["name"]), uid=meta["uid"],
                                         on_send=self._stamp)
            except ApiError as error:
                refused.append(f"{meta['name']}: {error.message}")
                continue
            deleted.append(meta["name"])
            self.result.pods = deleted[:MAX_PODS_NAMED]  # status holds names in bounds: a DaemonSet has many pods
            self.result.podsDeleted = len(deleted)
        if not deleted:
            raise DisruptionError("every delete was refused: " + "; ".join(refused))
        self._wanted = len(deleted)
        self._check_recovered()
        self.result.state = DisruptionState.INJECTED
        self._note_times()
        if refused:
            self.result.message = shorten("deletes refused, those pods were not restarted: " + "; ".join(refused),
                                          300)
        if self.on_injected is not None:
            await self.on_injected()
        log.info("disruption in %s: deleted %d pods: %s", self.spec.step, len(deleted), ", ".join(self.result.pods))
        try:
            await asyncio.wait_for(self._done.wait(), self.spec.recoveryTimeoutSeconds)
            self.result.state = DisruptionState.RECOVERED
        except TimeoutError:
            self.result.state = DisruptionState.NOT_RECOVERED
            self.result.message = shorten(f"{len(self._new_ready)} of {self._wanted} replacement pods Ready within "
                                          f"{self.spec.recoveryTimeoutSeconds} s"
                                          + (f"; {self.result.message}" if self.result.message else ""), 300)
        self._note_times()

    async def _leases_now(self) -> list[Json]:
        """The Leases in the component's namespace, read before the moment (so the injection waits for no request
        but its deletes). Best effort: an operator that may not read Leases there reports none."""
        try:
            listing = await self.client.get(r.LEASES.path(self.spec.component.namespace)) or {}
        except ApiError as error:
            log.info("disruption in %s: Leases of %s not read: %s", self.spec.step, self.spec.component.namespace,
                     error.message)
            return []
        return list(listing.get("items") or [])

    def _note_leases(self, leases: list[Json], pod_names: list[str]) -> None:
        """The Leases the pods about to be deleted hold (a sidecar campaigns under its hostname, the pod's name)."""
        for lease in leases:
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if holder and any(holder == name or holder.startswith(f"{name}-") for name in pod_names):
                self._leases[lease["metadata"]["name"]] = (holder, whole(spec.get("leaseTransitions")))
        self.result.leases = sorted(self._leases)[:MAX_LEASES_NAMED]

    async def read_leases(self) -> None:
        """After the step: how the noted Leases moved (transitions; when the last one got a new holder)."""
        if not self._leases or self.injected is None or self.tracker.anchor is None:
            return
        transitions, acquired, kept, still_unread = 0, [], [], False
        for name, (holder, before) in self._leases.items():
            try:
                lease = await self.client.get(r.LEASES.path(self.spec.component.namespace, name))
            except ApiError:
                return
            spec = (lease or {}).get("spec") or {}
            transitions += max(0, whole(spec.get("leaseTransitions")) - before)
            if spec.get("holderIdentity") == holder:
                kept.append(name)  # the deleted pod's identity holds it still, or again (a StatefulSet's same name)
            elif spec.get("holderIdentity") and spec.get("acquireTime"):
                try:
                    acquired.append(wall_seconds(str(spec["acquireTime"])))
                except ValueError:  # a Lease another writer filled oddly: no leader time, never an exception
                    still_unread = True
                    continue
        self.result.leaseTransitions = transitions
        if kept:
            note = (f"Lease {', '.join(kept)} still names the deleted pod's identity: not taken over (or taken "
                    "back under the same name, which no transition shows)")
            self.result.message = shorten(f"{self.result.message}; {note}" if self.result.message else note, 300)
        elif acquired and len(acquired) == len(self._leases) and not still_unread:
            anchor = self.tracker.anchor
            at = anchor.mono + (max(acquired) - anchor.wall)  # the new holder's clock, read as the operator's
            started = self.tracker.started or anchor.mono
            # Clocks of two machines: never before the injection the operator stamped.
            self.result.leaderAcquiredAtSeconds = round(max(at, self.injected) - started, 3)
            self.result.leaderSeconds = round(max(0.0, at - self.injected), 3)

    def _stamp(self, at: float) -> None:
        if self.injected is None:
            self.injected = at

    def _sink(self, events: list[WatchEvent]) -> None:
        """New pods Ready, once the first delete has left (a replacement cannot exist before it)."""
        for event in events:
            if self.injected is None:
                continue
            pod = event.obj
            uid = (pod.get("metadata") or {}).get("uid", "")
            if event.type in ("ADDED", "MODIFIED") and uid and uid not in self._listed and uid not in \
                    self._new_ready and ready(pod):
                self._new_ready[uid] = event.at
                self._check_recovered()

    def _check_recovered(self) -> None:
        """Recovered once as many new pods were Ready as were deleted (known when the deletes are done: a
        replacement may be Ready before the last of several deletes left), at the time the last of those was."""
        if self._wanted and not self._done.is_set() and len(self._new_ready) >= self._wanted:
            self.recovered = sorted(self._new_ready.values())[self._wanted - 1]
            self._done.set()

    def _note_times(self) -> None:
        started = self.tracker.started
        if started is None or self.injected is None:
            return
        self.result.injectedAtSeconds = round(self.injected - started, 3)
        if self.recovered is not None:
            self.result.recoveredAtSeconds = round(self.recovered - started, 3)
            self.result.recoverySeconds = round(self.recovered - self.injected, 3)

    def settle(self) -> None:
        """After the step: NotReached if the moment never came, else the figures of what it cost."""
        tracker, started, stopped = self.tracker, self.tracker.started, self.tracker.stopped
        if self.result.state == DisruptionState.PENDING:
            self.result.state = DisruptionState.NOT_REACHED
            self.result.message = "the step ended before the moment came: nothing was injected"
            return
        if self.injected is None or started is None or stopped is None:
            return
        to_clock: Callable[[float], float] = lambda at: at - started  # noqa: E731 - a one-line conversion
        endings = [Ending(name, to_clock(outcome.at), outcome.ok) for name, outcome in tracker.outcomes.items()]
        unfinished = [name for name in tracker.active if name not in tracker.outcomes]
        figures = disruption_figures(endings, unfinished, to_clock(self.injected),
                                     to_clock(self.recovered) if self.recovered is not None else None,
                                     to_clock(stopped))
        self.result.completedBefore = figures.completed_before
        self.result.completedAfter = figures.completed_after
        self.result.throughputBefore = figures.throughput_before
        self.result.throughputAfter = figures.throughput_after
        self.result.stallSeconds = figures.stall_seconds
        if self.warnings_since is not None:
            self.result.warnings = self.warnings_since(self.injected)[:MAX_FAILURE_REASONS]
        self.result.unrecovered = figures.unrecovered
        self.result.unrecoveredNames = figures.unrecovered_names
