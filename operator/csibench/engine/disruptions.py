"""spec.disruptions inside a step: wait for the moment, inject, watch the component recover, then say what it cost.

A ``Disruptor`` runs beside its step's batch. It waits until the step's clock has run ``afterSeconds`` or
``afterObjects`` of the step's objects are terminal (read from the step's tracker in memory), then injects:

- ``RestartComponent`` lists the component's pods (its labels in its namespace, on its node if one is named) and
  deletes each one by uid (the very pod it listed, never a namesake created since);
- ``ScaleDown`` takes the workload to zero replicas, and after ``seconds`` back to what it had (``scaling``);
- ``PauseApiServer`` / ``PauseEtcd`` ask the local cluster to freeze the process for ``seconds`` (``pausing``);
- ``ArrayFault`` asks the array for a window (``array_faults``);
- ``DrainNode`` cordons the node (``cordoning``), deletes the run's pods on it (by uid, with their grace period:
  the run's pods have no PodDisruptionBudget, so an Eviction would be this same delete, and a delete is admitted
  only for the run's own pods), makes each again once it is gone (the scheduler places it off the cordoned node),
  and uncordons the node once as many of them are Ready as were deleted (or that timed out).

The injection is stamped when its first request is sent. The recovery is stamped on the watch event that shows
it, on arrival like every object's terminal event: as many new pods (uids not listed before) Ready as were
deleted or scaled away, or, for a pause, the local cluster's answer (the first event the API server delivered
after it). Both are kept on the step's clock, and once the step has ended ``settle`` adds the figures of
``disruption_figures``.

Undoing: a deleted pod is replaced by its controller, and a component that never comes back is reported
NotRecovered, never restarted by csibench. A scaled-down workload is given back its replicas on every path
(``scaling.restore``, shielded from cancellation here). A pause ends by the local cluster's own clock. The
operator needs rights it lacks by default; ``access_problem`` says which before the run creates anything.
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
    MAX_UNRECOVERED_NAMED,
    ComponentTarget,
    DisruptionKind,
    DisruptionResult,
    DisruptionSpec,
    DisruptionState,
    RetriedWarnings,
    WorkloadTarget,
)
from csibench.api.text import shorten
from csibench.engine import cordoning
from csibench.engine.array_faults import (
    FaultPlace,
    build_fault_request,
    fault_answer,
    no_fault_taker,
    send_fault_request,
    takes_faults,
)
from csibench.engine.disruption_figures import Ending, disruption_figures
from csibench.engine.pausing import (
    CONTROL_PLANE_NAMESPACE,
    answer_of,
    build_request,
    not_local,
    pausable,
    pause_query,
)
from csibench.engine.scaling import (
    RESOURCES,
    ScaleError,
    build_scale_down,
    pod_selector,
    read_workload,
    replicas_of,
    restore,
    scale_down,
    workload_path,
)
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.watch import Watch, WatchEvent

log = logging.getLogger(__name__)
MOMENT_POLL_SECONDS = 0.01  # how often the tracker's count is read in memory (no request)
WATCH_SYNC_SECONDS = 60
RIGHTS = ("list", "watch", "delete")
FAULT_POLL_SECONDS = 0.02  # how often an array fault's answer is read once its window is about to close
FAULT_POLL_EARLY_SECONDS = 0.5
FAULT_POLL_GRACE_SECONDS = 2.0
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
    return DisruptionResult(step=spec.step, kind=spec.kind, target=spec.describe_target())


def never_reached(results: list[DisruptionResult], specs: list[DisruptionSpec]) -> None:
    """At the run's end: a disruption whose step never ran (the run failed first) is NotReached, and one never
    listed yet is listed so (every spec.disruptions entry has its result)."""
    if len(results) != len(specs):
        results[:] = [pending_result(spec) for spec in specs]
    for result in results:
        if result.state == DisruptionState.PENDING:
            result.state = DisruptionState.NOT_REACHED
            result.message = f"the run ended before {result.step} reached the moment: nothing was injected"
        elif result.state == DisruptionState.INJECTED:  # its step was cut short (the run aborted, an operator restart)
            result.state = DisruptionState.NOT_RECOVERED
            result.message = ("interrupted before its recovery was seen (the step was cut short); anything it "
                              "scaled down was given back at the run's end")


def pod_query(target: ComponentTarget) -> dict[str, str]:
    query = {"labelSelector": target.label_selector()}
    if target.node is not None:
        query["fieldSelector"] = f"spec.nodeName={target.node}"
    return query


def container_restarts(pod: Json) -> int:
    """The restarts of a pod's containers (their restartCount summed; another writer's oddities count 0)."""
    statuses = ((pod.get("status") or {}).get("containerStatuses") or [])
    return sum(whole(s.get("restartCount")) for s in statuses if isinstance(s, dict))


def ready(pod: Json) -> bool:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    return not meta.get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def rights_needed(spec: DisruptionSpec) -> list[tuple[str, str, str]]:
    """(verb, resource, group) the operator needs in the disruption's namespace (pure). An ArrayFault has no
    namespace of its own to check (``access_problem``): it writes a ConfigMap of the run's, as every run may."""
    pods = [(verb, "pods", "") for verb in RIGHTS]
    if spec.kind == DisruptionKind.SCALE_DOWN and spec.workload is not None:
        plural = RESOURCES[spec.workload.kind].plural
        return [("list", "pods", ""), ("watch", "pods", ""), ("get", plural, "apps"), ("patch", plural, "apps")]
    if spec.kind.paused_component() is not None:
        return [("list", "pods", ""), ("watch", "pods", ""), ("patch", "pods", "")]
    return pods


async def access_problem(client: KubeApi, spec: DisruptionSpec) -> str | None:
    """Which rights the operator lacks for the disruption (a SelfSubjectAccessReview each), or None."""
    namespace = spec.target_namespace()
    if spec.kind == DisruptionKind.DRAIN_NODE:  # the run's own pods, and a node: cluster-wide
        if await client.can_i("patch", "nodes", ""):
            return None
        return (f"disruption in {spec.step} needs patch nodes (cluster-wide), which the operator's identity lacks "
                "(deploy/components/disruptions grants it, and admits only a run's cordon and uncordon)")
    if namespace is None:  # an array fault: a ConfigMap of the run's own, which every run may write
        return None
    missing = [f"{verb} {resource}" for verb, resource, group in rights_needed(spec)
               if not await client.can_i(verb, resource, namespace, group)]
    if not missing:
        return None
    return (f"disruption in {spec.step} needs {', '.join(missing)} in namespace {namespace}, which the operator's "
            "identity lacks (deploy/components/disruptions grants them in the namespaces it names, and admits them "
            "for CSI components only)")


async def admission_problem(client: KubeApi, spec: DisruptionSpec, run_uid: str) -> str | None:
    """What the API server would say of the disruption's own requests, asked now as server-side dry runs of them
    (RBAC is not all: an admission policy can refuse what RBAC grants, as deploy/base's refuses deleting a pod
    no run labelled): the deletes of the component's pods as they are now, the workload's scale-down patch, the
    pause request. None when it would admit them (or there is nothing to ask about yet: no pod matches, the
    workload does not exist; the moment says so)."""
    asked: list[tuple[str, str, Json]] = []
    namespace = spec.target_namespace()
    if spec.kind == DisruptionKind.DRAIN_NODE:
        return await _cordon_admitted(client, spec, run_uid)
    if namespace is None:  # an array fault: nothing outside the run's namespace is asked
        return None
    if spec.component is not None:
        listing = await client.get(r.PODS.path(namespace), pod_query(spec.component)) or {}
        for pod in (listing.get("items") or [])[:MAX_PODS_NAMED]:
            meta = pod["metadata"]
            asked.append(("DELETE", r.PODS.path(namespace, meta["name"]), {
                "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": meta["uid"]}}))
    elif spec.workload is not None:
        workload = await client.get(workload_path(spec.workload))
        if workload is not None:
            asked.append(("PATCH", workload_path(spec.workload), build_scale_down(
                str(workload["metadata"].get("uid", "")), run_uid, max(1, replicas_of(workload)))))
    else:
        listing = await client.get(r.PODS.path(namespace), pause_query(spec.kind)) or {}
        for pod in [p for p in listing.get("items") or [] if pausable(p, spec.kind)][:1]:
            asked.append(("PATCH", r.PODS.path(namespace, pod["metadata"]["name"]),
                          build_request(pod["metadata"]["uid"], "dry-run", spec.seconds or 1)))
    for method, path, body in asked:
        said = await client.admits(method, path, body)
        if said is not None:
            return (f"disruption in {spec.step}: the API server would refuse its {method} of "
                    f"{path.rsplit('/', 1)[-1]} in {namespace} (asked as a dry run): {shorten(said, 300)} "
                    "(deploy/components/disruptions admits a CSI component's pods and workloads)")
    return None


async def _cordon_admitted(client: KubeApi, spec: DisruptionSpec, run_uid: str) -> str | None:
    """The cordon of the named node (else of any schedulable node: the policy judges them alike), asked as a dry
    run. A node cordoned already is not asked about: somebody's cordon is the disruption's to refuse, at its
    moment, and a policy refuses cordoning it again."""
    query = {"fieldSelector": f"metadata.name={spec.node}"} if spec.node else {
        "fieldSelector": "spec.unschedulable=false", "limit": "1"}
    nodes = (await client.get(r.NODES.path(), query) or {}).get("items") or []
    if not nodes:
        return f"disruption in {spec.step}: node {spec.node} does not exist" if spec.node else None
    if cordoning.unschedulable(nodes[0]):
        return None
    meta = nodes[0]["metadata"]
    said = await client.admits("PATCH", r.NODES.path(name=meta["name"]),
                               cordoning.build_cordon(str(meta.get("uid", "")), run_uid))
    if said is None:
        return None
    return (f"disruption in {spec.step}: the API server would refuse its cordon of node {meta['name']} (asked as "
            f"a dry run): {shorten(said, 300)} (deploy/components/disruptions admits a run's cordon)")


async def locality_problem(client: KubeApi, spec: DisruptionSpec, storage_class: Json) -> str | None:
    """A pause asked of a cluster that is not csibench's local one (no pausable pod), or an array fault of an
    array that does not take faults: why, else None."""
    if spec.kind == DisruptionKind.ARRAY_FAULT:
        return None if await takes_faults(client, storage_class) else no_fault_taker(storage_class)
    if spec.kind.paused_component() is None:
        return None
    listing = await client.get(r.PODS.path(CONTROL_PLANE_NAMESPACE), pause_query(spec.kind)) or {}
    if any(pausable(pod, spec.kind) for pod in listing.get("items") or []):
        return None
    return not_local(spec.kind)


class Disruptor:
    """One disruption of the step whose tracker it reads; ``result`` is updated in place (it is in status)."""

    def __init__(self, client: KubeApi, spec: DisruptionSpec, tracker: StepTracker, result: DisruptionResult,
                 run_uid: str = "") -> None:
        self.client = client
        self.spec = spec
        self.tracker = tracker
        self.result = result
        self.run_uid = run_uid  # marks what a ScaleDown changed, and names a pause request
        self.index = 0  # its place in spec.disruptions (its metrics' label)
        self.injected: float | None = None  # monotonic
        self.restored: float | None = None
        self.recovered: float | None = None
        self._listed: set[str] = set()  # uids of the component's pods before the injection
        self._new_ready: dict[str, float] = {}  # uid -> when a new pod was first seen Ready
        self._leases: dict[str, tuple[str, int]] = {}  # Lease name -> (holder, transitions) before the injection
        self._leader_pending = False  # a noted Lease had no new holder when the step ended: read again at the end
        self._restarts: dict[str, int] = {}  # uid -> the pod's container restarts, as last seen
        self._restarts_at_injection: dict[str, int] = {}
        self._wanted = 0
        self._pause_id = ""
        self.place: FaultPlace | None = None  # an array fault: where the run asks for it
        self._fault_id = ""
        self._fault_error: str | None = None  # the array would not open the window: why
        # A drain: the run's pods (their namespace and selector) and each one's manifest, made again off the node
        self.pods_namespace = ""
        self.run_selector = ""
        self.remake: Callable[[str], Json | None] | None = None
        self._drained: dict[str, str] = {}  # uid -> name of the run's pods deleted off the node, still to go
        self._drained_node = ""
        self._moving: set[str] = set()  # names of the drained pods: only their new pods count for the recovery
        self._ready_names: set[str] = set()  # those of them seen Ready off the node
        self._unmade: list[str] = []  # those that could not be made again
        self._unmoved_names: list[str] | None = None  # those not Ready off the node by the recovery's end
        self._watch: Watch | None = None
        self._query: dict[str, str] = {}  # the watched pods' query
        self._leases_before: list[Json] = []
        self._done = asyncio.Event()
        self._making: set[asyncio.Task[None]] = set()  # a drain's pods being made again
        self.on_injected: Callable[[], Awaitable[None]] | None = None  # status written at once: pods were deleted
        # The retried Warnings about the step's objects whose latest line came at or after a moment (monotonic)
        self.warnings_since: Callable[[float], list[RetriedWarnings]] | None = None

    async def arm(self) -> bool:
        """Before the step's clock starts (untimed): watch the pods that will show the recovery and read the
        Leases, so that the injection is one request when the moment comes. False (and Failed) when it cannot."""
        if self.spec.kind == DisruptionKind.ARRAY_FAULT:
            return True  # no pods to watch: the array's answer is read from its request (``_poll_fault_answer``)
        if self.spec.kind == DisruptionKind.DRAIN_NODE and not (self.pods_namespace and self.run_selector and
                                                                self.remake is not None):
            self._failed("a drain needs to know the run's pods and how to make them again")
            return False
        try:
            namespace, query = await self._watched()
            self._query = query
            self._watch = Watch(self.client, "disruption", r.PODS, namespace, query, asyncio.get_running_loop(),
                                self._sink)
            self._watch.start()
            try:
                async with asyncio.timeout(WATCH_SYNC_SECONDS):
                    await self._watch.synced.wait()
            except TimeoutError:
                raise DisruptionError(f"the watch on the pods of {self.spec.describe_target()} did not list them "
                                      f"within {WATCH_SYNC_SECONDS} s") from None
            if self.spec.kind != DisruptionKind.DRAIN_NODE:  # a drain moves the run's pods: no leader to follow
                self._leases_before = await self._leases_now()
            return True
        except ApiError as error:
            self._failed(f"{self.spec.describe_target()}: {error.message}")
        except (DisruptionError, ScaleError) as error:
            self._failed(str(error))
        except BaseException:  # cancelled while arming (the run deleted, the operator stopping): no watch left
            self.disarm()
            raise
        self.disarm()
        return False

    def disarm(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    async def run(self) -> None:
        """Once armed: wait for the moment, inject, wait for the recovery (or its timeout). Cancelled before the
        moment: the result stays as it was (``settle`` says NotReached). The watch goes on until the step ends
        (``disarm``): restarts that come after the recovery count."""
        try:
            await self._moment()
            if self.spec.kind == DisruptionKind.RESTART_COMPONENT:
                await self._restart(self._leases_before)
            elif self.spec.kind == DisruptionKind.SCALE_DOWN:
                await self._scale_down(self._leases_before)
            elif self.spec.kind == DisruptionKind.ARRAY_FAULT:
                await self._array_fault()
            elif self.spec.kind == DisruptionKind.DRAIN_NODE:
                await self._drain()
            else:
                await self._pause(self._leases_before)
        except ApiError as error:
            self._failed(f"{self.spec.describe_target()}: {error.message}")
        except (DisruptionError, ScaleError, cordoning.CordonError) as error:
            self._failed(str(error))

    async def _watched(self) -> tuple[str, dict[str, str]]:
        """The namespace and query of the pods whose events show the recovery."""
        spec = self.spec
        if spec.component is not None:
            return spec.component.namespace, pod_query(spec.component)
        if spec.workload is not None:
            workload = await read_workload(self.client, spec.workload)
            return spec.workload.namespace, {"labelSelector": pod_selector(workload)}
        if spec.kind == DisruptionKind.DRAIN_NODE:
            return self.pods_namespace, {"labelSelector": self.run_selector}  # the run's own pods
        return CONTROL_PLANE_NAMESPACE, {}  # every pod there: the sidecars a pause makes restart, and its answer

    def _failed(self, message: str) -> None:
        """Not injected, or not all of it: Failed when nothing was done, else the recovery says the rest."""
        self.result.message = shorten(message, 300)
        if self.result.state == DisruptionState.PENDING:
            self.result.state = DisruptionState.FAILED

    def moment_at_the_end(self) -> bool:
        """Whether its moment is the end of its step's batch (afterObjects equal to the step's objects, as only a
        drain may ask: once every pod runs): then it comes as the batch ends, and the step does not give up on it."""
        wanted = self.spec.afterObjects
        return wanted is not None and self.tracker.started is not None and \
            wanted >= len(self.tracker.active) and len(self.tracker.outcomes) >= wanted

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

    async def _live_pods(self, namespace: str, query: dict[str, str]) -> list[Json]:
        """The pods as they are now (all noted as listed: none of them is a replacement)."""
        listing = await self.client.get(r.PODS.path(namespace), query) or {}
        self._listed = {p["metadata"]["uid"] for p in listing.get("items") or []}
        return [p for p in listing.get("items") or [] if not (p.get("metadata") or {}).get("deletionTimestamp")]

    async def _restart(self, leases: list[Json]) -> None:
        """Delete each of the component's pods as they are now (by uid), then wait for as many new ones Ready.
        A pod that would not come back is refused before anything is deleted: a static pod (deleting its mirror
        pod restarts nothing) or a pod no controller owns (deleted for good)."""
        target = self.spec.component
        assert target is not None
        pods = await self._live_pods(target.namespace, pod_query(target))
        if not pods:
            raise DisruptionError(f"no pod matches {target.describe()}: nothing was injected")
        for pod in pods:
            problem = unrestartable(pod)
            if problem is not None:
                raise DisruptionError(f"pod {pod['metadata']['name']} {problem}: nothing was injected")
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
        if refused:
            self.result.message = shorten("deletes refused, those pods were not restarted: " + "; ".join(refused),
                                          300)
        await self._announce()
        log.info("disruption in %s: deleted %d pods: %s", self.spec.step, len(deleted), ", ".join(self.result.pods))
        self._expect(len(deleted))
        await self._await_recovery(f"{{ready}} of {len(deleted)} replacement pods Ready")

    async def _scale_down(self, leases: list[Json]) -> None:
        """Zero replicas for ``seconds``, then what it had (given back whatever interrupts the wait), then wait
        for that many new pods Ready."""
        workload = self.spec.workload
        assert workload is not None and self.spec.seconds is not None
        pods = await self._live_pods(workload.namespace, self._query)
        self._note_leases(leases, [p["metadata"]["name"] for p in pods])
        try:
            replicas = await scale_down(self.client, workload, self.run_uid, on_send=self._stamp)
            self.result.replicasBefore = replicas
            self.result.pods = [p["metadata"]["name"] for p in pods][:MAX_PODS_NAMED]
            self.result.podsDeleted = len(pods)
            await self._announce()
            log.info("disruption in %s: %s scaled to 0 from %d for %d s", self.spec.step, workload.describe(),
                     replicas, self.spec.seconds)
            await asyncio.sleep(max(0.0, (self.injected or time.monotonic()) + self.spec.seconds - time.monotonic()))
        finally:
            if self.injected is not None:  # shielded: a cancelled step (run failed, deleted) still gives it back
                await asyncio.shield(self._give_back(workload))
        self._note_times()
        self._expect(replicas)
        await self._await_recovery(f"{{ready}} of {replicas} pods Ready after the scale back")

    async def _give_back(self, workload: WorkloadTarget) -> None:
        try:
            given = await restore(self.client, workload, self.run_uid, on_send=self._stamp_restored)
        except ApiError as error:
            log.error("disruption in %s: %s not given back its replicas: %s (the run's end tries again)",
                      self.spec.step, workload.describe(), error.message)
            self.result.message = shorten(f"not given back its replicas: {error.message}", 300)
            return
        if given is None:
            self.result.message = "its mark was gone when it was to be given back (another path gave it back first)"
        elif given == 0:
            self.result.message = "its replicas were changed while it was scaled down: only the run's mark removed"

    async def _pause(self, leases: list[Json]) -> None:
        """Ask the local cluster to freeze the process for ``seconds``; recovered when its answer arrives."""
        assert self.spec.seconds is not None
        pods = [p for p in await self._live_pods(CONTROL_PLANE_NAMESPACE, pause_query(self.spec.kind))
                if pausable(p, self.spec.kind)]
        if not pods:
            raise DisruptionError(not_local(self.spec.kind))
        pod = pods[0]
        self._note_leases(leases, None)
        self._pause_id = f"{self.run_uid}/{self.spec.step}/{time.time_ns()}"
        answered = await self.client.merge_patch(
            r.PODS.path(CONTROL_PLANE_NAMESPACE, pod["metadata"]["name"]),
            build_request(pod["metadata"]["uid"], self._pause_id, self.spec.seconds), on_send=self._stamp)
        if answered is None:
            raise DisruptionError(f"pod {pod['metadata']['name']} disappeared: nothing was injected")
        self.result.pods = [pod["metadata"]["name"]]
        self.result.state = DisruptionState.INJECTED
        self._note_times()
        log.info("disruption in %s: %s paused for %d s", self.spec.step, self.spec.kind.paused_component(),
                 self.spec.seconds)
        self._check_pause_answer(answered, time.monotonic())
        await self._await_recovery("no answer from the local cluster", extra=float(self.spec.seconds))

    async def _drain(self) -> None:
        """Cordon the node, delete the run's pods on it (each made again once gone: ``_sink``), wait for as many
        of them Ready off the node, then uncordon it (shielded: a cancelled step still gives it back; the run's
        end does too). The pods are listed again once the node is cordoned: none can land there after that."""
        if self.spec.node:  # a node somebody cordoned says so before anything else
            await cordoning.cordonable(self.client, self.spec.node, self.run_uid)
        node = self.spec.node or cordoning.busiest_node(await self._live_pods(self.pods_namespace, self._query))
        if node is None:
            raise DisruptionError("no pod of the run is placed on a node at the moment: nothing was injected")
        self.result.target = f"node {node}"
        self._drained_node = node
        cordoned = False
        try:
            await cordoning.cordon(self.client, node, self.run_uid, on_send=self._stamp)
            cordoned = True
            on_node = [p for p in await self._live_pods(self.pods_namespace, self._query)
                       if (p.get("spec") or {}).get("nodeName") == node and self.remake is not None
                       and self.remake(p["metadata"]["name"]) is not None]  # the step's own pods only
            if not on_node:
                raise DisruptionError(f"no pod of the run is on node {node} at the moment: nothing was deleted")
            deleted, refused = await self._delete_drained(on_node)
            if not deleted:
                raise DisruptionError("every delete was refused: " + "; ".join(refused))
            if refused:
                self.result.message = shorten("deletes refused, those pods stay on the node: " + "; ".join(refused),
                                              300)
            await self._announce()
            log.info("disruption in %s: node %s cordoned, %d of the run's pods moving off it: %s", self.spec.step,
                     node, len(deleted), ", ".join(self.result.pods))
            self._expect(len(deleted))
            await self._await_recovery(f"{{ready}} of {len(deleted)} pods made again Ready off node {node}")
            self._unmoved()
        finally:
            self._drained.clear()  # from now on a pod of the run that goes is a later step's: never made again
            for making in list(self._making):
                making.cancel()
            if cordoned:
                await asyncio.shield(self._uncordon(node))
        self._note_times()

    async def _delete_drained(self, pods: list[Json]) -> tuple[list[str], list[str]]:
        """Delete each pod by uid (each one on its own: one refused leaves the others moving); the names deleted,
        and the refusals."""
        deleted: list[str] = []
        refused: list[str] = []
        for pod in pods:
            meta = pod["metadata"]
            self._drained[meta["uid"]] = meta["name"]
            self._moving.add(meta["name"])
            try:
                gone_already = not await self.client.delete(r.PODS.path(self.pods_namespace, meta["name"]),
                                                            uid=meta["uid"])
            except ApiError as error:
                self._drained.pop(meta["uid"], None)
                self._moving.discard(meta["name"])
                refused.append(f"{meta['name']}: {error.message}")
                continue
            deleted.append(meta["name"])
            self.result.pods = deleted[:MAX_PODS_NAMED]
            self.result.podsDeleted = len(deleted)
            if gone_already:  # nothing will say so: make it again now
                self._drained.pop(meta["uid"], None)
                await self._make_again(meta["name"])
        return deleted, refused

    def _unmoved(self) -> None:
        """A drain's pods not made again Ready off the node by the recovery's end: its unrecovered objects (the
        step's own figures were made before the drain when it came after the step's last pod)."""
        self._unmoved_names = sorted((self._moving - self._ready_names) | set(self._unmade))
        if self._unmade:
            self.result.state = DisruptionState.NOT_RECOVERED
            self.result.message = shorten(f"{len(self._unmade)} pods not made again: {', '.join(self._unmade)}"
                                          + (f"; {self.result.message}" if self.result.message else ""), 300)

    async def _make_again(self, name: str) -> None:
        """A drained pod made again (its volumes follow it to the node the scheduler picks); one that cannot be is
        no longer waited for."""
        manifest = self.remake(name) if self.remake is not None else None
        problem = None
        if manifest is None:
            problem = f"pod {name} could not be made again (not one of the step's)"
        else:
            try:
                if not await self.client.create(r.PODS.path(self.pods_namespace),
                                                cordoning.build_replacement(manifest)):
                    problem = f"pod {name} was not made again: a pod of that name exists (made by someone else)"
            except ApiError as error:
                problem = f"pod {name} was not made again: {error.message}"
        if problem is not None:
            log.warning("disruption in %s: %s", self.spec.step, problem)
            self.result.message = shorten(problem, 300)
            self._moving.discard(name)
            self._unmade.append(name)
            self._check_recovered()

    def _pod_gone(self, uid: str) -> None:
        """A drained pod is gone: made again (on the event loop, never in the watch's callback)."""
        name = self._drained.pop(uid, None)
        if name is not None:
            task = asyncio.get_running_loop().create_task(self._make_again(name), name=f"drain:{name}")
            self._making.add(task)
            task.add_done_callback(self._making.discard)

    async def _uncordon(self, node: str) -> None:
        try:
            if not await cordoning.uncordon(self.client, node, self.run_uid, on_send=self._stamp_restored):
                self.result.message = "its mark was gone when it was to be uncordoned (another path did it first)"
        except ApiError as error:
            log.error("disruption in %s: node %s not uncordoned: %s (the run's end tries again)", self.spec.step,
                      node, error.message)
            self.result.message = shorten(f"node {node} not uncordoned: {error.message}", 300)

    def _place(self) -> FaultPlace:
        if self.place is None:
            raise DisruptionError("an array fault needs to know where its run asks for it")
        return self.place

    async def _array_fault(self) -> None:
        """Ask the array for the window; recovered when its answer says the window closed."""
        assert self.spec.seconds is not None and self.spec.arrayFault is not None
        place = self._place()
        self._fault_id = f"{self.run_uid}/{self.spec.step}/{time.time_ns()}"
        await send_fault_request(self.client, place, build_fault_request(place, self.index, self._fault_id,
                                                                         self.spec), on_send=self._stamp)
        self.result.state = DisruptionState.INJECTED
        self._note_times()
        log.info("disruption in %s: the array of %s, %s for %d s", self.spec.step, place.storage_class,
                 self.spec.arrayFault.describe(), self.spec.seconds)
        poller = asyncio.create_task(self._poll_fault_answer(place, time.monotonic() + self.spec.seconds))
        try:
            await self._await_recovery("the array did not say its window closed", extra=float(self.spec.seconds))
        finally:
            poller.cancel()
        if self._fault_error is not None:  # nothing was injected: the array said why
            self.result.state = DisruptionState.FAILED
            self.result.message = shorten(f"the array did not open the window: {self._fault_error}", 300)
            self.injected = self.restored = self.recovered = None
            self.result.injectedAtSeconds = self.result.restoredAtSeconds = None
            self.result.recoveredAtSeconds = self.result.recoverySeconds = None

    async def _announce(self) -> None:
        """The fault is in: status says so at once (objects the run did not create were changed)."""
        self.result.state = DisruptionState.INJECTED
        self._note_times()
        if self.on_injected is not None:
            await self.on_injected()

    def _expect(self, pods: int) -> None:
        self._wanted = pods
        self._check_recovered()

    async def _await_recovery(self, shortfall: str, extra: float = 0.0) -> None:
        """Wait for the recovery (recoveryTimeoutSeconds, plus ``extra``); NotRecovered with ``shortfall`` (its
        ``{ready}`` filled in) when it does not come."""
        try:
            async with asyncio.timeout(self.spec.recoveryTimeoutSeconds + extra):  # never swallows a cancellation
                await self._done.wait()
            self.result.state = DisruptionState.RECOVERED
        except TimeoutError:
            self.result.state = DisruptionState.NOT_RECOVERED
            text = shortfall.replace("{ready}", str(len(self._new_ready)))
            self.result.message = shorten(f"{text} within {self.spec.recoveryTimeoutSeconds} s"
                                          + (f"; {self.result.message}" if self.result.message else ""), 300)
        self._note_times()

    async def _leases_now(self) -> list[Json]:
        """The Leases in the component's namespace, read before the moment (so the injection waits for no request
        but its own). Best effort: an operator that may not read Leases there reports none."""
        try:
            listing = await self.client.get(r.LEASES.path(self.spec.target_namespace())) or {}
        except ApiError as error:
            log.info("disruption in %s: Leases of %s not read: %s", self.spec.step, self.spec.target_namespace(),
                     error.message)
            return []
        return list(listing.get("items") or [])

    def _note_leases(self, leases: list[Json], pod_names: list[str] | None) -> None:
        """The Leases the pods about to go hold (a sidecar campaigns under its hostname, the pod's name); for a
        pause (``pod_names`` None) every held Lease there: a frozen API server can cost any leader its lease."""
        for lease in leases:
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            if holder and (pod_names is None or any(holder == name or holder.startswith(f"{name}-")
                                                    for name in pod_names)):
                self._leases[lease["metadata"]["name"]] = (holder, whole(spec.get("leaseTransitions")))
        self.result.leases = sorted(self._leases)[:MAX_LEASES_NAMED]

    async def read_leases(self, final: bool = False) -> None:
        """After the step: how the noted Leases moved (transitions; when the last one got a new holder). After a
        pause only the transitions: the leaders were not meant to go, and one that kept its lease did well. A Lease
        still held by a deleted pod's identity when the step ends is read again after the run's last step
        (``final``, from ``follow_leases``): a successor waits for the old lease to expire (15 s for the sidecars),
        and that wait often falls in the next step; only the final read says the Lease was never taken over."""
        if not self._leases or self.injected is None or self.tracker.anchor is None:
            return
        transitions, acquired, kept, still_unread, again = 0, [], [], False, []
        for name, (holder, before) in self._leases.items():
            try:
                lease = await self.client.get(r.LEASES.path(self.spec.target_namespace(), name))
            except ApiError:
                return
            spec = (lease or {}).get("spec") or {}
            moved = max(0, whole(spec.get("leaseTransitions")) - before)
            transitions += moved
            if moved > 1:  # taken over more than once: its acquireTime is the last takeover's, not the first's
                again.append(name)
            if spec.get("holderIdentity") == holder:
                kept.append(name)  # the deleted pod's identity holds it still, or again (a StatefulSet's same name)
            elif spec.get("holderIdentity") and spec.get("acquireTime"):
                try:
                    acquired.append(wall_seconds(str(spec["acquireTime"])))
                except ValueError:  # a Lease another writer filled oddly: no leader time, never an exception
                    still_unread = True
                    continue
        self.result.leaseTransitions = transitions
        if self.spec.kind.paused_component() is not None:
            return
        self._leader_pending = bool(kept) and not final
        if kept and final:
            note = (f"Lease {', '.join(kept)} still named a deleted pod's identity after the run's last step: "
                    "not taken over (or taken back under the same name, which no transition shows)")
            self.result.message = shorten(f"{self.result.message}; {note}" if self.result.message else note, 300)
        elif kept:
            return
        elif again:
            note = (f"Lease {', '.join(again)} changed holder more than once since the injection: the first "
                    "takeover's time is not in the Lease, so no leader time is given")
            self.result.message = shorten(f"{self.result.message}; {note}" if self.result.message else note, 300)
        elif acquired and len(acquired) == len(self._leases) and not still_unread:
            anchor = self.tracker.anchor
            at = anchor.mono + (max(acquired) - anchor.wall)  # the new holder's clock, read as the operator's
            started = self.tracker.started or anchor.mono
            # Clocks of two machines: never before the injection the operator stamped.
            self.result.leaderAcquiredAtSeconds = round(max(at, self.injected) - started, 3)
            self.result.leaderSeconds = round(max(0.0, at - self.injected), 3)

    async def follow_leases(self) -> None:
        """After the run's last step: the Leases still held by a deleted pod's identity when the disruption's step
        ended, read once more (the new leader's ``acquireTime`` is the figure, whenever it is read)."""
        if self._leader_pending:
            await self.read_leases(final=True)

    def _stamp(self, at: float) -> None:
        if self.injected is None:
            self.injected = at
            self._restarts_at_injection = dict(self._restarts)

    def _stamp_restored(self, at: float) -> None:
        self.restored = at

    def _sink(self, events: list[WatchEvent]) -> None:
        """Every pod's container restarts; new pods Ready, once the fault is in (a replacement cannot exist before
        it); a pause's answer."""
        for event in events:
            pod = event.obj
            uid = (pod.get("metadata") or {}).get("uid", "")
            if uid and event.type in ("ADDED", "MODIFIED"):
                self._restarts[uid] = container_restarts(pod)
            if self.injected is None:
                continue
            if self._pause_id:
                self._check_pause_answer(pod, event.at)
                continue
            if event.type == "DELETED" and uid in self._drained:
                self._pod_gone(uid)
                continue
            if event.type == "SYNC":  # a relist: a drained pod no longer listed went while the watch was away
                present = set(pod.get("present") or ())
                for gone in [u for u, name in self._drained.items() if f"{self.pods_namespace}/{name}" not in present]:
                    self._pod_gone(gone)
                continue
            if event.type in ("ADDED", "MODIFIED") and uid and uid not in self._listed and uid not in \
                    self._new_ready and ready(pod) and self._counts_for_recovery(pod):
                self._new_ready[uid] = event.at
                self._ready_names.add(str((pod.get("metadata") or {}).get("name", "")))
                self._check_recovered()

    def _counts_for_recovery(self, pod: Json) -> bool:
        """Any new pod of a component; for a drain, only a drained pod made again, off the cordoned node (one
        pinned there by a nodeName has not moved, and the step's other pods are not the failover)."""
        if self.spec.kind != DisruptionKind.DRAIN_NODE:
            return True
        return (pod.get("metadata") or {}).get("name") in self._moving and \
            (pod.get("spec") or {}).get("nodeName") != self._drained_node

    def _check_pause_answer(self, pod: Json, at: float) -> None:
        """The local cluster's answer to this pause, arrived at ``at``: resumed (its stamp), recovered (now)."""
        answer = answer_of(pod, self._pause_id)
        anchor = self.tracker.anchor
        if answer is None or self._done.is_set():
            return
        try:
            resumed = wall_seconds(answer[1])
        except ValueError:
            resumed = None
        if resumed is not None and anchor is not None and self.injected is not None:
            self.restored = max(self.injected, anchor.mono + (resumed - anchor.wall))
        self.recovered = at
        self._done.set()

    async def _poll_fault_answer(self, place: FaultPlace, closes: float) -> None:
        """Read the request until the array's answer says the window closed. Read, not watched: the operator may
        get the ConfigMaps it writes but not list or watch every namespace's (least privilege). Seldom while the
        window is open, every FAULT_POLL_SECONDS from just before it closes: the recovery's stamp is that close."""
        path = r.CONFIGMAPS.path(place.namespace, place.request_name(self.index))
        while not self._done.is_set():
            now = time.monotonic()
            early, late = closes - FAULT_POLL_EARLY_SECONDS - now, now - closes - FAULT_POLL_GRACE_SECONDS
            # Often only around the close: an array that never says it closed costs the run's client 1 request/s.
            await asyncio.sleep(min(1.0, early) if early > 0 else 1.0 if late > 0 else FAULT_POLL_SECONDS)
            try:
                configmap = await self.client.get(path)
            except ApiError as error:
                log.warning("disruption in %s: reading the array's answer: %s", self.spec.step, error.message)
                continue
            self._check_fault_answer(configmap or {}, time.monotonic())

    def _check_fault_answer(self, configmap: Json, at: float) -> None:
        """The array's answer to this fault, arrived at ``at``: the window closed (its stamp), recovered (now); or
        refused."""
        answer = fault_answer(configmap, self._fault_id)
        if answer is None or self._done.is_set():
            return
        if answer.error is not None:
            self._fault_error = answer.error
            self._done.set()
            return
        if answer.ended_at is None:
            return
        anchor = self.tracker.anchor
        try:
            ended = wall_seconds(answer.ended_at)
        except ValueError:
            ended = None
        if ended is not None and anchor is not None and self.injected is not None:
            self.restored = min(at, max(self.injected, anchor.mono + (ended - anchor.wall)))
        self.result.arrayOperations = answer.operations
        self.recovered = at
        self._done.set()

    def _check_recovered(self) -> None:
        """Recovered once as many new pods were Ready as were deleted or scaled away (known when the fault is
        in: a replacement may be Ready before the last of several deletes left), at the time the last of those
        was."""
        if not self._wanted or self._done.is_set():
            return
        needed = self._wanted - len(self._unmade)  # a drained pod that could not be made again is not waited for
        if needed <= 0:
            self._done.set()
        elif len(self._new_ready) >= needed:
            self.recovered = sorted(self._new_ready.values())[needed - 1]
            self._done.set()

    def _note_times(self) -> None:
        started = self.tracker.started
        if started is None or self.injected is None:
            return
        self.result.injectedAtSeconds = round(self.injected - started, 3)
        if self.restored is not None:
            self.result.restoredAtSeconds = round(self.restored - started, 3)
        if self.recovered is not None:
            self.result.recoveredAtSeconds = round(self.recovered - started, 3)
            since = self.restored if self.restored is not None and self.spec.kind != DisruptionKind.DRAIN_NODE \
                else self.injected
            self.result.recoverySeconds = round(max(0.0, self.recovered - since), 3)

    def note_restarts(self) -> None:
        """containerRestarts as the watch has seen them so far (called again after later steps: a container the
        fault made exit restarts after its back-off, often after its own step ended)."""
        if self.injected is not None and self.spec.kind != DisruptionKind.ARRAY_FAULT:
            self.result.containerRestarts = sum(max(0, count - self._restarts_at_injection.get(uid, 0))
                                                for uid, count in self._restarts.items())

    def settle(self) -> None:
        """After the step: NotReached if the moment never came, else the figures of what it cost."""
        tracker, started, stopped = self.tracker, self.tracker.started, self.tracker.stopped
        if self.result.state == DisruptionState.PENDING:
            self.result.state = DisruptionState.NOT_REACHED
            self.result.message = "the step ended before the moment came: nothing was injected"
            return
        if self.injected is None or started is None or stopped is None or \
                self.result.state == DisruptionState.FAILED:
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
        self.note_restarts()
        self.result.unrecovered = figures.unrecovered
        self.result.unrecoveredNames = figures.unrecovered_names
        if self._unmoved_names:  # a drain's pods that did not run again off the node (the step may have ended)
            more = [name for name in self._unmoved_names if name not in figures.unrecovered_names]
            self.result.unrecovered = figures.unrecovered + len(more)
            self.result.unrecoveredNames = (figures.unrecovered_names + more)[:MAX_UNRECOVERED_NAMED]
