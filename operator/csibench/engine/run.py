"""A BenchmarkRun from start to end: preconditions, namespace, the timed steps, report, cleanup, verdict.

Phases: Pending -> Running -> CleaningUp -> Succeeded | Failed. Everything that can be checked is checked
before the first object is created (plan, classes, snapshot API, target namespace), so a bad run fails with a
clear condition and leaves nothing behind. Status is written at each step's start and end and every couple of
seconds in between (never once per object), and an Event on the run marks each step's start and end.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import (
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    CleanupPolicy,
    ClientUsed,
    Condition,
    Environment,
    Phase,
    StepName,
    StepState,
)
from csibench.api.validation import namespace_problem
from csibench.engine import manifests
from csibench.engine.cleanup import CleanupResult, cleanup
from csibench.engine.clock import StepTracker
from csibench.engine.observed import CLAIM, POD, SNAPSHOT, Key, Observed
from csibench.engine.plan import (
    SNAPSHOT_STEPS,
    Names,
    PlanError,
    pod_count,
    resolve_steps,
    volumes_of_pod,
)
from csibench.engine.report_store import ReportNameTaken, build_report_configmaps, save_report
from csibench.engine.steps import (
    StepDefinition,
    Verdict,
    claim_and_volume_gone,
    claim_bound,
    claim_seen,
    pod_gone_and_detached,
    pod_ready,
    snapshot_and_content_gone,
    snapshot_ready,
)
from csibench.engine.timing import human_duration, rfc3339
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.client import ApiError, KubeClient
from csibench.kube.identity import operator_namespace
from csibench.kube.ownership import RunScope, run_labels, selector
from csibench.metrics import METRICS

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_SECONDS = 2.0
WFFC = "WaitForFirstConsumer"
# Deletion steps act only on objects of this kind that the run's label-selected watches saw.
DELETION_KINDS = {StepName.UNPUBLISH: POD, StepName.DELETE_CLONE: CLAIM, StepName.DELETE_SNAPSHOT: SNAPSHOT,
                  StepName.DELETE_VOLUME: CLAIM}


class NotOwned(Exception):
    """An object of the run's name exists but is not the run's: it is never counted, changed or deleted."""


@dataclass(frozen=True)
class RunRef:
    namespace: str
    name: str
    uid: str
    generation: int = 1

    @property
    def status_path(self) -> str:
        return r.BENCHMARK_RUNS.path(self.namespace, self.name, "status")


@dataclass
class RunContext:
    """What the run decided before its first object (names, steps, scope, environment) and the trackers its
    steps fill in."""

    names: Names
    steps: list[StepName]
    target_namespace: str
    own_namespace: bool
    binding_mode: str
    labels: dict[str, str]
    environment: Environment
    scope: RunScope
    trackers: dict[StepName, StepTracker] = field(default_factory=dict)


def now() -> str:
    return rfc3339(time.time())


def scope_of(ref: RunRef, target_namespace: str | None) -> RunScope:
    """What a run may clean up: its labelled objects in the namespace it recorded using, and the one namespace
    its identity lets it create (``csibench-<run>-<uid5>``), which cleanup deletes only while it carries the
    run's uid label. Neither the spec nor a status field can point cleanup at another namespace to delete."""
    names = Names.for_run(ref.name, ref.uid)
    return RunScope(target_namespace or names.namespace, names.prefix, ref.uid, names.namespace)


def _failure_summary(tracker: StepTracker) -> str:
    """'createVolume: 3 of 10 failed (ProvisioningFailed): <the API's or driver's first message>'."""
    reasons = tracker.failure_reasons()
    top = ""
    if reasons:
        example = f": {reasons[0].message[:240]}" if reasons[0].message else ""
        top = f" ({reasons[0].reason}){example}"
    return f"{tracker.name.value}: {tracker.counts()[1]} of {len(tracker.active)} failed{top}"


class RunEngine:
    def __init__(self, ref: RunRef, spec: BenchmarkRunSpec, client: KubeClient) -> None:
        self.ref = ref
        self.spec = spec
        self.client = client
        self.status = BenchmarkRunStatus(phase=Phase.PENDING, observedGeneration=ref.generation)
        self._current: StepTracker | None = None
        self._definition: StepDefinition | None = None
        self.observed: Observed | None = None
        self.watches: RunWatches | None = None

    # -- status ------------------------------------------------------------------------------------------------
    def _condition(self, status: str, reason: str, message: str) -> None:
        previous = next((c for c in self.status.conditions if c.type == "Ready"), None)
        changed = previous is None or previous.status != status
        self.status.conditions = [Condition(
            type="Ready", status=status, reason=reason, message=message,
            lastTransitionTime=now() if changed or previous is None else previous.lastTransitionTime,
            observedGeneration=self.ref.generation)]

    @property
    def run_label(self) -> str:
        return f"{self.ref.namespace}/{self.ref.name}"

    async def write_status(self) -> None:
        if self.status.phase is not None:
            METRICS.set_phase(self.run_label, self.status.phase.value)
        self.status.client = ClientUsed(qps=self.spec.client.qps, burst=self.spec.client.burst,
                                        maxInFlight=self.spec.client.maxInFlight,
                                        throttledSeconds=round(self.client.limiter.throttled_seconds, 3),
                                        requests=self.client.requests)
        status = self.status.model_dump(mode="json", exclude_none=True)
        # A merge patch keeps fields it does not mention: cleared top-level fields must be sent as null.
        status.update({name: None for name in BenchmarkRunStatus.model_fields if name not in status})
        await self.client.merge_patch(self.ref.status_path, {"status": status})

    async def event(self, reason: str, message: str, warning: bool = False) -> None:
        stamp = now()
        body = {
            "metadata": {"generateName": f"{self.ref.name}.", "namespace": self.ref.namespace},
            "involvedObject": {"apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkRun",
                               "name": self.ref.name, "namespace": self.ref.namespace, "uid": self.ref.uid},
            "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
            "source": {"component": "csibench"}, "reportingComponent": "csibench.io/operator",
            "reportingInstance": "csibench", "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self.client.create(r.EVENTS.path(self.ref.namespace), body)
        except ApiError as error:
            log.warning("could not record event %s: %s", reason, error)

    async def fail(self, reason: str, message: str) -> BenchmarkRunStatus:
        self.status.phase = Phase.FAILED
        self.status.message = message
        self.status.completionTime = now()
        self._condition("False", reason, message)
        await self.write_status()
        await self.event(reason, message, warning=True)
        return self.status

    async def recover_after_restart(self, previous: dict[str, Any]) -> BenchmarkRunStatus:
        """The operator died mid-run. A half-measured step is never reported as a measurement: mark it
        Interrupted, remove what the run created (per policy) and fail with the reason. If every step had
        already finished, only cleanup was cut short: resume it and keep the run's own verdict."""
        try:
            self.status = BenchmarkRunStatus.model_validate(previous)
        except ValueError:
            self.status = BenchmarkRunStatus()
        interrupted = [s.name.value for s in self.status.steps if s.state == StepState.RUNNING]
        for step in self.status.steps:
            if step.state == StepState.RUNNING:
                step.state = StepState.INTERRUPTED
                step.latency, step.throughput, step.completionTime = None, None, None
        finished = bool(self.status.steps) and all(
            s.state in (StepState.SUCCEEDED, StepState.FAILED) for s in self.status.steps)
        target = self.status.targetNamespace
        cleanup_complete = True
        if target and self.spec.cleanup != CleanupPolicy.NEVER:
            self.status.phase = Phase.CLEANING_UP
            await self.write_status()
            scope = scope_of(self.ref, target)
            result = await cleanup(self.client, None, scope, float(self.spec.timeouts.cleanup))
            self.status.cleanup = result.describe() + " (resumed after an operator restart)"
            cleanup_complete = result.complete
        self.status.currentStep = None
        self.status.progress = None
        if finished:
            failed = [s for s in self.status.steps if s.state == StepState.FAILED]
            if not failed and not cleanup_complete:
                return await self.fail("CleanupIncomplete", f"{len(self.status.steps)} steps succeeded, but "
                                       f"{self.status.cleanup}")
            if not failed:
                self.status.phase = Phase.SUCCEEDED
                self.status.completionTime = now()
                self.status.message = (f"{len(self.status.steps)} steps succeeded; sum of step times "
                                       f"{self.status.duration}; cleanup resumed after an operator restart")
                self._condition("True", "Succeeded", self.status.message)
                await self.write_status()
                return self.status
            detail = "; ".join(f"{s.name.value}: {s.failed} of {s.objects - s.skipped} failed" for s in failed)
            return await self.fail("ObjectsFailed", f"objects failed in {detail}; cleanup resumed after an "
                                   "operator restart")
        where = f"during step {interrupted[0]}" if interrupted else "between steps"
        return await self.fail("OperatorRestarted", f"the operator restarted {where}; an interrupted step is not "
                               "a measurement, so the run was stopped and cleaned up instead of resumed")

    # -- the run ---------------------------------------------------------------------------------------------
    async def execute(self) -> BenchmarkRunStatus:
        self.status.startTime = now()
        try:
            context = await self._prepare()
        except PlanError as error:
            return await self.fail(error.reason, str(error))
        self.status.phase = Phase.RUNNING
        self.status.environment = context.environment
        self.status.targetNamespace = context.target_namespace
        # Recorded before the namespace is created, so a restart knows which namespace may be the run's;
        # cleanup still deletes it only if it carries the run's label.
        self.status.ownedNamespace = context.target_namespace if context.own_namespace else None
        self.status.objectSelector = selector(self.ref.uid)
        self._init_trackers(context)
        self._condition("False", "Running", f"running {len(context.steps)} steps")
        await self.write_status()
        try:
            await self._run_steps(context)
        finally:
            if self.watches is not None:
                self.watches.stop()
        return self.status

    async def _run_steps(self, context: RunContext) -> None:
        try:
            await self._ensure_namespace(context)
            self.observed = Observed(context.target_namespace, context.names.prefix)
            self.watches = RunWatches(self.client, self.observed, selector(self.ref.uid),
                                      snapshots=bool(SNAPSHOT_STEPS & set(context.steps)),
                                      on_change=self._on_change)
            await self.watches.start()
            for step in context.steps:
                await self._check_still_there(context)
                await self._run_step(context, step)
        except PlanError as error:
            self.status.message = str(error)
            abort_reason: str | None = error.reason
        except (ApiError, TimeoutError, OSError) as error:
            self.status.message = f"run aborted: {error}"
            log.exception("run %s/%s aborted", self.ref.namespace, self.ref.name)
            abort_reason = "RunAborted"
        else:
            abort_reason = None
        aborted = abort_reason is not None
        await self._save_report(context)
        failed_steps = [t for t in context.trackers.values() if t.counts()[1] or t.interrupted]
        succeeded = not aborted and not failed_steps
        cleanup_complete = await self._cleanup(context, succeeded)
        if self.watches is not None:
            self.watches.stop()
        self.status.currentStep = None
        self.status.progress = None
        self.status.completionTime = now()
        self._summarize_total(context)
        if succeeded and not cleanup_complete:
            await self.fail("CleanupIncomplete", f"{len(context.steps)} steps succeeded (sum of step times "
                            f"{self.status.duration}), but {self.status.cleanup}")
        elif succeeded:
            self.status.phase = Phase.SUCCEEDED
            self.status.message = f"{len(context.steps)} steps succeeded; sum of step times {self.status.duration}"
            self._condition("True", "Succeeded", self.status.message)
            await self.write_status()
            await self.event("RunSucceeded", self.status.message)
        else:
            detail = "; ".join(_failure_summary(t) for t in failed_steps)
            message = self.status.message if aborted else f"objects failed in {detail}"
            await self.fail(abort_reason or "ObjectsFailed", message or "run failed")

    def _summarize_total(self, context: RunContext) -> None:
        durations = [s.durationSeconds for s in self.status.steps if s.durationSeconds is not None]
        total = sum(durations)
        self.status.totalStepSeconds = round(total, 3)
        self.status.duration = human_duration(total)

    # -- preparation ---------------------------------------------------------------------------------------------
    async def _prepare(self) -> RunContext:
        spec = self.spec
        names = Names.for_run(self.ref.name, self.ref.uid)
        steps = resolve_steps(spec)
        if spec.targetNamespace is not None:
            problem = namespace_problem(spec.targetNamespace, operator_namespace())
            if problem:
                raise PlanError("InvalidTargetNamespace", problem)
        storage_class = await self.client.get(r.STORAGE_CLASSES.path(name=spec.storageClassName))
        if storage_class is None:
            raise PlanError("StorageClassNotFound", f"StorageClass {spec.storageClassName!r} does not exist")
        binding_mode = storage_class.get("volumeBindingMode") or "Immediate"
        if SNAPSHOT_STEPS & set(steps):
            if await self.client.get("/apis/snapshot.storage.k8s.io/v1") is None:
                raise PlanError("SnapshotAPINotInstalled", "the run has snapshot steps but the cluster does not "
                                "serve snapshot.storage.k8s.io/v1 (install the external-snapshotter CRDs)")
            assert spec.volumeSnapshotClassName is not None
            if await self.client.get(r.SNAPSHOT_CLASSES.path(name=spec.volumeSnapshotClassName)) is None:
                raise PlanError("VolumeSnapshotClassNotFound",
                                f"VolumeSnapshotClass {spec.volumeSnapshotClassName!r} does not exist")
            if binding_mode == WFFC and StepName.PUBLISH not in steps:
                raise PlanError("InvalidSteps", f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes are "
                                "only provisioned when a pod uses them, so snapshot steps need the publish step")
        if spec.targetNamespace and await self.client.get(r.NAMESPACES.path(name=spec.targetNamespace)) is None:
            raise PlanError("TargetNamespaceNotFound", f"target namespace {spec.targetNamespace!r} does not "
                            "exist (omit targetNamespace to let the run create its own)")
        environment = await self._environment(storage_class, binding_mode)
        target = spec.targetNamespace or names.namespace
        own_namespace = spec.targetNamespace is None
        context = RunContext(
            names=names, steps=steps, target_namespace=target, own_namespace=own_namespace,
            binding_mode=binding_mode, labels=run_labels(self.ref.name, self.ref.uid, spec.labels),
            environment=environment,
            scope=scope_of(self.ref, target))
        await self._dry_run(context)
        return context

    async def _dry_run(self, context: RunContext) -> None:
        """Send one of each object the run will create as a server-side dry run, so that whatever the API server
        would refuse (a field it rejects, an admission policy) fails the run now, with the API's own message,
        before anything exists. The run's own namespace does not exist yet: its objects are tried in the
        BenchmarkRun's namespace, where only a refusal of the object itself (400/422) counts."""
        for kind, path, body in self._manifests_to_try(context):
            try:
                await self.client.create(path, body, dry_run=True)
            except ApiError as error:
                in_target = not context.own_namespace or kind == "Namespace"
                if error.status in (400, 422) or (in_target and error.status == 403):
                    raise PlanError("ManifestRejected", f"the API server refuses the {kind} this run would "
                                    f"create: {error.message}") from error
                log.info("dry run of %s outside the target namespace answered %s; not conclusive", kind, error)

    def _manifests_to_try(self, context: RunContext) -> list[tuple[str, str, dict[str, Any]]]:
        used = self._representative_manifests(context)
        namespace = self.ref.namespace if context.own_namespace else context.target_namespace
        resources = {"pvc": r.PVCS, "pod": r.PODS, "volumeSnapshot": r.SNAPSHOTS, "clone": r.PVCS}
        tried: list[tuple[str, str, dict[str, Any]]] = []
        if "namespace" in used:
            tried.append(("Namespace", r.NAMESPACES.path(), used["namespace"]))
        for key, resource in resources.items():
            if key in used:
                tried.append((used[key]["kind"], resource.path(namespace), used[key]))
        return tried

    async def _environment(self, storage_class: dict[str, Any], binding_mode: str) -> Environment:
        version = await self.client.get("/version") or {}
        nodes = await self.client.get(r.NODES.path(), query={"limit": "500"}) or {}
        node_count = len(nodes.get("items", [])) + int((nodes.get("metadata") or {}).get("remainingItemCount", 0))
        return Environment(serverVersion=version.get("gitVersion"), provisioner=storage_class.get("provisioner"),
                           volumeBindingMode=binding_mode,
                           storageClassParameters=dict(storage_class.get("parameters") or {}), nodeCount=node_count)

    async def _ensure_namespace(self, context: RunContext) -> None:
        if not context.own_namespace:
            return
        await self.client.create(r.NAMESPACES.path(), manifests.build_namespace(context.target_namespace,
                                                                                 context.labels))
        # Pod admission needs the namespace's default ServiceAccount, created asynchronously by the
        # controller-manager; waiting here keeps that delay out of the publish step's numbers.
        deadline = time.monotonic() + 60
        path = r.SERVICE_ACCOUNTS.path(context.target_namespace, "default")
        while await self.client.get(path) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {context.target_namespace} never got its default ServiceAccount")
            await asyncio.sleep(0.2)

    async def _check_still_there(self, context: RunContext) -> None:
        """Between steps: a deleted target namespace or StorageClass ends the run cleanly, with the reason."""
        namespace = await self.client.get(r.NAMESPACES.path(name=context.target_namespace))
        if namespace is None or (namespace.get("metadata") or {}).get("deletionTimestamp"):
            raise PlanError("TargetNamespaceDeleted",
                            f"target namespace {context.target_namespace!r} was deleted during the run")
        if await self.client.get(r.STORAGE_CLASSES.path(name=self.spec.storageClassName)) is None:
            raise PlanError("StorageClassDeleted",
                            f"StorageClass {self.spec.storageClassName!r} was deleted during the run")

    def _init_trackers(self, context: RunContext) -> None:
        names, spec = context.names, self.spec
        pods = pod_count(spec.volumes, spec.pvcsPerPod)
        objects = {
            StepName.CREATE_VOLUME: [names.volume(i) for i in range(spec.volumes)],
            StepName.PUBLISH: [names.pod(i) for i in range(pods)],
            StepName.UNPUBLISH: [names.pod(i) for i in range(pods)],
            StepName.CREATE_SNAPSHOT: [names.snapshot(i) for i in range(spec.volumes)],
            StepName.CLONE_FROM_SNAPSHOT: [names.clone(i) for i in range(spec.volumes)],
            StepName.DELETE_CLONE: [names.clone(i) for i in range(spec.volumes)],
            StepName.DELETE_SNAPSHOT: [names.snapshot(i) for i in range(spec.volumes)],
            StepName.DELETE_VOLUME: [names.volume(i) for i in range(spec.volumes)],
        }
        storage_class = self.spec.storageClassName
        for step in context.steps:
            def observe(ok: bool, seconds: float, step: StepName = step) -> None:
                METRICS.observe_object(self.run_label, step.value, storage_class, ok, seconds)
            context.trackers[step] = StepTracker(step, objects[step], on_outcome=observe)
        self.status.steps = [t.status() for t in context.trackers.values()]

    # -- one step ----------------------------------------------------------------------------------------------
    def _on_change(self, keys: list[Key], at: float) -> None:
        tracker, definition = self._current, self._definition
        if tracker is None or definition is None:
            return
        for kind, name in keys:
            if kind != definition.kind or name in tracker.outcomes:
                continue
            submitted = tracker.submitted.get(name)
            if submitted is None:
                continue
            verdict = definition.evaluate(name, submitted)
            if verdict is not None:
                tracker.record(name, verdict, at)

    async def _run_step(self, context: RunContext, step: StepName) -> None:
        tracker = context.trackers[step]
        definition = self._definition_of(context, step)
        tracker.note = definition.note
        tracker.skipped = self._skipped(context, step)
        # Announce the step first, then start the clock right before the batch goes out: the status write and
        # the event are not part of what the step measures.
        self.status.currentStep = step.value
        self.status.progress = f"0/{len(tracker.active)}"
        tracker.announced = True  # status says Running before the first request leaves: a restart knows
        self._publish_step(context)
        await self.write_status()
        await self.event("StepStarted", f"{step.value}: submitting {len(tracker.active)} objects"
                         + (f" ({len(tracker.skipped)} skipped: prerequisite failed)" if tracker.skipped else ""))
        self._current, self._definition = tracker, definition
        tracker.start()
        submissions = [asyncio.create_task(self._submit(tracker, definition, name)) for name in tracker.active]
        progress = asyncio.create_task(self._report_progress(context))
        try:
            await tracker.wait(float(self.spec.timeouts.for_step(step)),
                               lambda: self._last_warnings(definition.kind))
        except asyncio.CancelledError:
            tracker.interrupted = True
            raise
        finally:
            for task in submissions:
                task.cancel()
            progress.cancel()
            self._current, self._definition = None, None
            self._publish_step(context)
            self.status.progress = tracker.progress()
        status = tracker.status()
        METRICS.record_step(self.run_label, step.value, self.spec.storageClassName, status.durationSeconds,
                            status.throughput, status.succeeded, status.failed, status.skipped)
        await self.write_status()
        throughput = f"{status.throughput:.2f} obj/s" if status.throughput is not None else "n/a"
        await self.event("StepCompleted", f"{step.value}: {status.succeeded}/{len(tracker.active)} succeeded in "
                         f"{human_duration(status.durationSeconds or 0)} ({throughput})", warning=bool(status.failed))

    async def _submit(self, tracker: StepTracker, definition: StepDefinition, name: str) -> None:
        try:
            await definition.submit(name)
        except ApiError as error:
            tracker.mark_submitted(name)
            tracker.record(name, Verdict(False, f"Request{error.reason or error.status}", error.message[:300]),
                           time.monotonic())
            return
        except NotOwned as error:
            tracker.mark_submitted(name)
            tracker.record(name, Verdict(False, "NameConflict", str(error)[:300]), time.monotonic())
            return
        # A delete of something already gone, or a create whose terminal event came first, is decided now.
        submitted = tracker.submitted.get(name)
        if submitted is not None and name not in tracker.outcomes:
            verdict = definition.evaluate(name, submitted)
            if verdict is not None:
                tracker.record(name, verdict, time.monotonic())

    async def _report_progress(self, context: RunContext) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_SECONDS)
            self._publish_step(context)
            try:
                await self.write_status()
            except ApiError as error:
                log.warning("progress update failed: %s", error)

    def _publish_step(self, context: RunContext) -> None:
        self.status.steps = [t.status() for t in context.trackers.values()]
        if self._current is not None:
            self.status.progress = self._current.progress()
        self._summarize_total(context)

    def _last_warnings(self, kind: str) -> dict[str, str]:
        assert self.observed is not None
        return {name: f"{w.reason}: {w.message}"[:200] for (k, name), w in self.observed.warnings.items()
                if k == kind}

    def _skipped(self, context: RunContext, step: StepName) -> set[str]:
        """Objects a step does not submit: for a creation step, those whose prerequisite failed or was never
        created; for a deletion step, those the run never saw exist (a refused create made nothing to delete,
        and counting its deletion as a success would be false)."""
        names, trackers = context.names, context.trackers
        if step in DELETION_KINDS:
            assert self.observed is not None
            seen = self.observed.uids_of(DELETION_KINDS[step])
            return {name for name in trackers[step].objects if name not in seen}

        def failed(of: StepName) -> set[int]:
            tracker = trackers[of]
            return {i for i, n in enumerate(tracker.objects)
                    if n in tracker.skipped or (n in tracker.outcomes and not tracker.outcomes[n].ok)}

        def not_created(of: StepName) -> set[int]:
            tracker = trackers[of]
            return {i for i, n in enumerate(tracker.objects) if n not in tracker.submitted}

        if step == StepName.PUBLISH:
            bad = failed(StepName.CREATE_VOLUME)
            if context.binding_mode == WFFC:
                bad = not_created(StepName.CREATE_VOLUME)
            return {names.pod(p) for p in range(len(trackers[step].objects))
                    if bad & set(volumes_of_pod(p, self.spec.volumes, self.spec.pvcsPerPod))}
        prerequisite = {StepName.CREATE_SNAPSHOT: StepName.CREATE_VOLUME,
                        StepName.CLONE_FROM_SNAPSHOT: StepName.CREATE_SNAPSHOT}.get(step)
        if prerequisite is None:
            return set()
        objects = trackers[step].objects
        return {objects[i] for i in failed(prerequisite)}

    def _definition_of(self, context: RunContext, step: StepName) -> StepDefinition:
        assert self.observed is not None
        observed, spec, names, labels = self.observed, self.spec, context.names, context.labels
        ns = context.target_namespace
        client = self.client
        index = {n: i for i, n in enumerate(context.trackers[step].objects)}

        def stamp(tracker: StepTracker, name: str) -> Any:
            return lambda at: tracker.mark_submitted(name, at)

        tracker = context.trackers[step]
        block = spec.volumeMode.value == "Block"
        wffc = context.binding_mode == WFFC

        async def create(resource: r.Resource, name: str, body: dict[str, Any]) -> None:
            if not await client.create(resource.path(ns), body, stamp(tracker, name)):
                # "Already exists" is success only for an object this run created (a restart re-submitting).
                existing = await client.get(resource.path(ns, name))
                if existing is not None and not context.scope.owns(existing.get("metadata") or {}):
                    raise NotOwned(f"{body['kind']} {ns}/{name} already exists and does not carry this run's "
                                   f"label {context.scope.selector}; the run never touches it")

        async def create_volume(name: str) -> None:
            await create(r.PVCS, name, manifests.build_pvc(name, spec, labels))

        async def publish(name: str) -> None:
            claims = [names.volume(i) for i in volumes_of_pod(index[name], spec.volumes, spec.pvcsPerPod)]
            await create(r.PODS, name, manifests.build_pod(name, claims, spec, labels, block))

        async def create_snapshot(name: str) -> None:
            assert spec.volumeSnapshotClassName is not None
            await create(r.SNAPSHOTS, name, manifests.build_snapshot(
                name, names.volume(index[name]), spec.volumeSnapshotClassName, labels))

        async def clone(name: str) -> None:
            await create(r.PVCS, name, manifests.build_clone_pvc(name, names.snapshot(index[name]), spec, labels))

        def deleting(resource: r.Resource, kind: str) -> Any:
            uids = observed.uids_of(kind)

            async def delete(name: str) -> None:
                # Only the very object the run's label-selected watch saw (its uid as a precondition).
                await client.delete(resource.path(ns, name), on_send=stamp(tracker, name), uid=uids[name])
            return delete

        if step == StepName.CREATE_VOLUME:
            if wffc:
                return StepDefinition(step, "claim", create_volume, claim_seen(observed),
                                      note=f"{WFFC}: claims are provisioned when their pod is scheduled, so this "
                                      "step times API submission only; provisioning time is inside publish")
            return StepDefinition(step, "claim", create_volume, claim_bound(observed, step))
        if step == StepName.PUBLISH:
            note = f"{WFFC}: includes provisioning of each pod's volumes" if wffc else None
            return StepDefinition(step, "pod", publish, pod_ready(observed), note=note)
        if step == StepName.UNPUBLISH:
            return StepDefinition(step, "pod", deleting(r.PODS, POD), pod_gone_and_detached(observed))
        if step == StepName.CREATE_SNAPSHOT:
            return StepDefinition(step, "snapshot", create_snapshot, snapshot_ready(observed))
        if step == StepName.CLONE_FROM_SNAPSHOT:
            return StepDefinition(step, "claim", clone, claim_bound(observed, step))
        if step == StepName.DELETE_CLONE:
            return StepDefinition(step, "claim", deleting(r.PVCS, CLAIM), claim_and_volume_gone(observed))
        if step == StepName.DELETE_SNAPSHOT:
            return StepDefinition(step, "snapshot", deleting(r.SNAPSHOTS, SNAPSHOT),
                                  snapshot_and_content_gone(observed))
        return StepDefinition(step, "claim", deleting(r.PVCS, CLAIM), claim_and_volume_gone(observed))

    # -- after the steps -------------------------------------------------------------------------------------
    async def _save_report(self, context: RunContext) -> None:
        steps = []
        for tracker in context.trackers.values():
            if tracker.started is None or tracker.anchor is None:
                continue
            first = tracker.objects[0] if tracker.objects else ""
            steps.append({"status": tracker.status().model_dump(mode="json", exclude_none=True),
                          "objectPrefix": first[:-5], "objectCount": len(tracker.objects),
                          "startWall": tracker.anchor.wall, **tracker.per_object()})
        report = {"run": {"namespace": self.ref.namespace, "name": self.ref.name, "uid": self.ref.uid},
                  "spec": self.spec.model_dump(mode="json", exclude_none=True),
                  "environment": context.environment.model_dump(mode="json"),
                  "client": {"qps": self.spec.client.qps, "burst": self.spec.client.burst,
                             "maxInFlight": self.spec.client.maxInFlight,
                             "throttledSeconds": round(self.client.limiter.throttled_seconds, 3)},
                  "manifests": self._representative_manifests(context),
                  "steps": steps}
        configmaps = build_report_configmaps(context.names.report, self.ref.name, self.ref.uid, report)
        try:
            await save_report(self.client, self.ref.namespace, configmaps, self.ref.uid)
            self.status.reportConfigMap = context.names.report
        except (ApiError, ReportNameTaken) as error:
            log.warning("could not store the report: %s", error)

    def _representative_manifests(self, context: RunContext) -> dict[str, Any]:
        """The first object of each kind as submitted (the rest differ only in their index)."""
        names, spec, labels = context.names, self.spec, context.labels
        used: dict[str, Any] = {"pvc": manifests.build_pvc(names.volume(0), spec, labels)}
        if StepName.PUBLISH in context.steps:
            claims = [names.volume(i) for i in volumes_of_pod(0, spec.volumes, spec.pvcsPerPod)]
            used["pod"] = manifests.build_pod(names.pod(0), claims, spec, labels, spec.volumeMode.value == "Block")
        if spec.volumeSnapshotClassName and StepName.CREATE_SNAPSHOT in context.steps:
            used["volumeSnapshot"] = manifests.build_snapshot(names.snapshot(0), names.volume(0),
                                                              spec.volumeSnapshotClassName, labels)
        if StepName.CLONE_FROM_SNAPSHOT in context.steps:
            used["clone"] = manifests.build_clone_pvc(names.clone(0), names.snapshot(0), spec, labels)
        if context.own_namespace:
            used["namespace"] = manifests.build_namespace(context.target_namespace, labels)
        return used

    async def _cleanup(self, context: RunContext, succeeded: bool) -> bool:
        """Clean up per policy; False when objects the run should have removed are still there."""
        policy = self.spec.cleanup
        if policy == CleanupPolicy.NEVER or (policy == CleanupPolicy.ON_SUCCESS and not succeeded):
            self.status.cleanup = (f"objects kept (cleanup: {policy.value}) in namespace "
                                   f"{context.target_namespace}, selector {selector(self.ref.uid)}")
            return True
        self.status.phase = Phase.CLEANING_UP
        self.status.currentStep = None
        self.status.progress = None
        await self.write_status()
        result: CleanupResult = await cleanup(self.client, self.observed, context.scope,
                                              float(self.spec.timeouts.cleanup))
        self.status.cleanup = result.describe()
        return result.complete
