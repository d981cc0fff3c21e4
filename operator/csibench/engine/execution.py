"""One step, timed: announce it, start the clock, submit the whole batch, judge each object on its watch events,
stop the clock at the last terminal event (or the timeout). Bringing back an interrupted step's starting state
after an operator restart is ``restore.py``, which drives its untimed batches through this runner.

Everything step-specific comes from the catalog entry: the objects, which are skipped, how one is submitted (its
action, ``actions.py``: create its manifest, delete or patch it by the uid the run saw, or a measuring step's own
batches) and which judge decides it. The runner has no switch on the kind of action: it sends the requests an
action asks for (``creating``, ``deleting``, ``patching``), where ownership is proven. The step is written to
status as Running before its first request leaves, so a restart always knows which step it interrupted; the
write and the StepStarted Event happen before the clock starts, so they cost the measurement nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from csibench.api.collect import StepCollection
from csibench.api.models import DisruptionState, Machinery, RetriedWarnings
from csibench.api.text import human_duration, shorten
from csibench.engine.array_faults import FaultPlace
from csibench.engine.collection import record_metrics as record_collection_metrics
from csibench.engine.context import RunContext
from csibench.engine.disruptions import Disruptor, pending_result
from csibench.engine.judges import Judge, Verdict
from csibench.engine.leak_audit import array_answers, ask_array, audit_name
from csibench.engine.observed import POD, Key, Observed
from csibench.engine.requests import NotOwned, NotSeen, OwnedRequests
from csibench.engine.retries import RETRIED_BY, retried_warnings
from csibench.engine.status import StatusRecorder
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.submission import UNSENT_PER_IN_FLIGHT, Submissions
from csibench.engine.timing import rfc3339
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.ownership import selector as run_selector
from csibench.metrics import METRICS
from csibench.preflight.components import call_timeout_flag, effective

log = logging.getLogger(__name__)
RETRYING_COMPONENTS = frozenset(component for component, _ in RETRIED_BY.values())
PROGRESS_INTERVAL_SECONDS = 2.0
ARRAY_WINDOW_WAIT_SECONDS = 10.0  # a churn window's ask of the array: the next window asks again


def retry_flags(machinery: Machinery | None) -> dict[str, str]:
    """component -> '--timeout=10s': the flag bounding each try of the components that retry a step's Warnings,
    as the preflight read them (empty: no preflight, or none found)."""
    flags: dict[str, str] = {}
    for component in machinery.components if machinery else []:
        if component.kind in RETRYING_COMPONENTS and component.kind not in flags:
            flag = call_timeout_flag(component)
            value = effective(component, flag)
            if value:
                flags[component.kind] = f"--{flag}={value}"
    return flags


def build_trackers(context: RunContext, run_label: str) -> dict[str, StepTracker]:
    storage_class = context.spec.storageClassName
    trackers = {}
    for step in context.plan:
        def observe(ok: bool, seconds: float, step_name: str = step.name) -> None:
            METRICS.observe_object(run_label, step_name, storage_class, ok, seconds)
        trackers[step.name] = StepTracker(step.name, step.objects(context.spec, context.names), on_outcome=observe)
    return trackers


class StepRunner:
    """Runs the run's steps one at a time; ``on_change`` is the watches' callback (on the event loop)."""

    def __init__(self, client: KubeApi, context: RunContext, recorder: StatusRecorder, observed: Observed) -> None:
        self.client = client
        self.context = context
        self.recorder = recorder
        self.observed = observed
        self.requests = OwnedRequests(client, context.scope, observed)
        # (kind, tracker, judge, the boundaries between the parts of an object's latency) of each live batch: one,
        # but for a measuring step that runs batches side by side (the churn's overlapping waves)
        self._live: list[tuple[str, StepTracker, Judge, Sequence[Callable[[str], bool]]]] = []
        self._progress_of: StepTracker | None = None  # the step whose progress status shows
        self._lingering: list[Disruptor] = []  # injected in an earlier step: still counting container restarts

    def on_change(self, keys: list[Key], at: float) -> None:
        for live in list(self._live):
            self._judge_changes(live, keys, at)

    @staticmethod
    def _judge_changes(live: tuple[str, StepTracker, Judge, Sequence[Callable[[str], bool]]], keys: list[Key],
                       at: float) -> None:
        kind_wanted, tracker, judge, boundaries = live
        for kind, name in keys:
            if kind != kind_wanted or name in tracker.outcomes:
                continue
            submitted = tracker.submitted.get(name)
            if submitted is None:
                continue
            for index, boundary in enumerate(boundaries):
                if index not in tracker.boundaries.get(name, ()) and boundary(name):
                    tracker.mark_boundary(name, index, at)
            verdict = judge(name, submitted)
            if verdict is not None:
                tracker.record(name, verdict, at)
                if verdict.ok and tracker.note_object is not None and (said := tracker.note_object(name)):
                    tracker.object_notes[name] = said

    def publish(self) -> None:
        """Copy the trackers' aggregates into the status model (not yet written)."""
        status = self.recorder.status
        status.steps = [t.status() for t in self.context.trackers.values()]
        for step in self.context.plan:  # the workload steps' rows (data path, database)
            if step.results is not None:
                setattr(status, step.results.status_field, step.results.rows(self.context.trackers.get(step.name)))
        if self._progress_of is not None:
            status.progress = self._progress_of.progress()
        durations = [s.durationSeconds for s in status.steps if s.durationSeconds is not None]
        finished = self.context.measured_seconds  # earlier iterations (spec.repeat): the sum is over all of them
        status.totalStepSeconds = round(finished + sum(durations), 3)
        status.duration = human_duration(finished + sum(durations))

    async def run(self, step: StepSpec, before_done: Callable[[], Awaitable[None]] | None = None) -> None:
        """Time one step. ``before_done`` runs after the last terminal event and before status says the step is
        done (the run stores the step's per-object record there, so a restart never finds a finished step
        without it)."""
        context, recorder = self.context, self.recorder
        tracker = context.trackers[step.name]
        step_context = context.step_context(self.observed)
        judge = step.judge_in(step_context)
        submit = step.action.submitter(self.requests, step, step_context, tracker)
        tracker.note = step.note_in(step_context)
        tracker.phase_names = step.phases.names if step.phases is not None else None
        boundaries = step.phases.boundaries(self.observed) if step.phases is not None else ()
        tracker.note_object = step.object_note(self.observed) if step.object_note is not None else None
        tracker.zone_of = lambda name: self.observed.zone_of(step.kind, name)
        tracker.zones_known = lambda: len(self.observed.volume_zones)  # a PV seen after the step ended counts
        tracker.skipped = step.skip(step, step_context) | tracker.restore_skipped
        recorder.status.currentStep = step.name
        recorder.status.progress = f"0/{len(tracker.active)}"
        tracker.announced = True
        self.publish()
        await recorder.write()
        skipped = f" ({len(tracker.skipped)} skipped)" if tracker.skipped else ""
        attempt = f" (attempt {tracker.attempt})" if tracker.attempt > 1 else ""
        await recorder.event("StepStarted", f"{step.name}: submitting {len(tracker.active)} objects{skipped}{attempt}")
        self._progress_of = tracker
        disruptors = self._disruptors(step, tracker, step_context)
        injecting: dict[Disruptor, asyncio.Task[None]] = {}
        try:
            # Armed before the clock starts (their watches listed), so a moment at the step's start is met in time
            for disruptor in disruptors:
                if await disruptor.arm():
                    injecting[disruptor] = asyncio.create_task(disruptor.run(), name=f"disruption:{step.name}")
            if step.measure is not None:  # a measuring step (the data path) drives its own batches
                self._progress_of = None
                await step.measure(self, step, tracker, step_context)
            else:
                await self._batch(step.kind, tracker, judge, submit,
                                  float(context.spec.timeouts.for_step(step.name)), boundaries)
            await self._settle(disruptors, injecting)
        finally:
            for task in injecting.values():
                task.cancel()
            for disruptor in disruptors:  # an injected one watches on to the run's last step (its restarts)
                if disruptor.injected is not None and disruptor.result.state in (DisruptionState.RECOVERED,
                                                                                 DisruptionState.NOT_RECOVERED):
                    self._lingering.append(disruptor)
                else:
                    disruptor.disarm()
            self._progress_of = None
            recorder.status.progress = tracker.progress()
        await self._collect(step, tracker)
        status = tracker.status()
        if step.results is not None:
            step.results.record_metrics(recorder.ref.label, step.results.rows(tracker))
        METRICS.record_step(recorder.ref.label, step.name, context.spec.storageClassName, status.durationSeconds,
                            status.throughput, status.succeeded, status.failed, status.skipped)
        METRICS.record_phases(recorder.ref.label, step.name, [p.model_dump() for p in status.phases])
        if before_done is not None:
            await before_done()
        await recorder.write()
        throughput = f"{status.throughput:.2f} obj/s" if status.throughput is not None else "n/a"
        await recorder.event("StepCompleted", f"{step.name}: {status.succeeded}/{len(tracker.active)} succeeded in "
                             f"{human_duration(status.durationSeconds or 0)} ({throughput})",
                             warning=bool(status.failed))

    def _disruptors(self, step: StepSpec, tracker: StepTracker, step_context: StepContext) -> list[Disruptor]:
        """The step's disruptions (spec.disruptions), each with its result in status (Pending until it acts)."""
        spec, status = self.context.spec, self.recorder.status
        index_of = {name: index for index, name in enumerate(step.objects(spec, self.context.names))}

        def remake(name: str) -> Json | None:  # a drained object as the step made it
            index = index_of.get(name)
            return step.manifest(step_context, index) if step.manifest is not None and index is not None else None

        def warnings_since(since: float) -> list[RetriedWarnings]:
            anchor = tracker.anchor
            per_object = self.observed.retried_since(step.kind, tracker.active, since)
            return retried_warnings(per_object, lambda mono: rfc3339(anchor.wall_of(mono)) if anchor else "")
        if len(status.disruptions) != len(spec.disruptions):
            status.disruptions = [pending_result(d) for d in spec.disruptions]
        disruptors = []
        for index, disruption in enumerate(spec.disruptions):
            if disruption.step == step.name:
                status.disruptions[index] = pending_result(disruption)  # a step measured again starts afresh
                disruptor = Disruptor(self.client, disruption, tracker, status.disruptions[index],
                                      run_uid=self.recorder.ref.uid)
                disruptor.index = index
                ref = self.recorder.ref
                disruptor.place = FaultPlace(ref.namespace, ref.name, ref.uid, self.context.names.prefix,
                                             spec.storageClassName)
                disruptor.on_injected = self._injected
                disruptor.pods_namespace = self.context.target_namespace
                disruptor.run_selector = run_selector(ref.uid)
                disruptor.remake = remake
                disruptor.warnings_since = warnings_since
                disruptors.append(disruptor)
        return disruptors

    async def close_disruptions(self, read_leases: bool = True) -> None:
        """After the run's last step: the container restarts the earlier disruptions caused, as seen until now,
        and their watches stopped (idempotent); then, with ``read_leases`` (not while the run is being torn down),
        the leader Leases no new holder had taken when their steps ended, read again."""
        lingering, self._lingering = self._lingering, []
        for disruptor in lingering:
            disruptor.note_restarts()
            disruptor.disarm()
        for disruptor in lingering if read_leases else ():
            await disruptor.follow_leases()

    async def _injected(self) -> None:
        """Pods the run did not create were just deleted: status says so now, not at the next progress write."""
        self.publish()
        try:
            await self.recorder.write()
        except ApiError as error:
            log.warning("status update after a disruption failed: %s", error)

    async def _settle(self, disruptors: list[Disruptor], injecting: dict[Disruptor, asyncio.Task[None]]) -> None:
        """After the batch: a disruption still waiting for its moment never comes; one whose moment came is
        waited for until its component recovered (or its recovery timed out), then its figures are written."""
        for disruptor, task in injecting.items():
            if disruptor.result.momentAtSeconds is None and not task.done() and not disruptor.moment_at_the_end():
                task.cancel()
        for outcome in await asyncio.gather(*injecting.values(), return_exceptions=True):
            if isinstance(outcome, Exception):
                log.error("a disruption's task failed", exc_info=outcome)
        for lingering in self._lingering:
            lingering.note_restarts()
        for disruptor in disruptors:
            await disruptor.read_leases()
            disruptor.settle()
            METRICS.record_disruption(self.recorder.ref.label, disruptor.index,
                                      disruptor.result.model_dump(mode="json", exclude_none=True))
            await self.recorder.event(
                "Disruption", f"{disruptor.spec.step}: {disruptor.result.kind} of {disruptor.result.target}: "
                f"{disruptor.result.state}" + (f" in {disruptor.result.recoverySeconds} s, stalled "
                                               f"{disruptor.result.stallSeconds} s"
                                               if disruptor.result.recoverySeconds is not None else "")
                + (f" ({disruptor.result.message})" if disruptor.result.message else ""),
                warning=disruptor.result.state != DisruptionState.RECOVERED)

    async def _collect(self, step: StepSpec, tracker: StepTracker) -> None:
        """spec.collect over the step's window, once its clock stopped (outside it): readings into the step's
        status and metrics, problems into status.collection."""
        collector = self.context.collector
        if collector is None:
            return
        if collector.enabled and tracker.anchor is not None and tracker.stopped is not None and \
                not tracker.interrupted:
            # No status write here: the step's record is stored (before_done) only after this, and status must
            # never say a step is done before its record exists (a restart would find it without one).
            tracker.collection = await collector.collect(step.name, tracker.anchor.wall,
                                                         tracker.anchor.wall_of(tracker.stopped))
            record_collection_metrics(self.recorder.ref.label, step.name, tracker.collection)
        self.recorder.status.collection = collector.findings.listed()

    # -- what a measuring step (engine/steps/: the data path, the database, density) and restore.py use ----------------
    async def batch(self, kind: str, tracker: StepTracker, judge: Judge, submit: Callable[[str], Any],
                    timeout: float, boundaries: Sequence[Callable[[str], bool]] = (), progress: bool = True) -> None:
        """One timed batch; ``progress`` False: batches run side by side, and the step writes its own progress."""
        await self._batch(kind, tracker, judge, submit, timeout, boundaries, progress)

    def creator(self, step: StepSpec, step_context: StepContext, tracker: StepTracker) -> Callable[[str], Any]:
        return step.action.submitter(self.requests, step, step_context, tracker)

    def creating(self, resource: r.Resource, body_of: Callable[[str], Json],
                 tracker: StepTracker) -> Callable[[str], Any]:
        """Creates objects of ``resource`` from ``body_of(name)`` (a step that knows its objects' indexes: the
        churn's waves), as a step's own are created."""
        return self.requests.creating(resource, body_of, tracker)

    def remover(self, step: StepSpec, tracker: StepTracker) -> Callable[[str], Any]:
        return self.requests.deleting(step.kind, step.resource, tracker)

    def companion_creator(self, step: StepSpec, step_context: StepContext,
                          tracker: StepTracker) -> Callable[[str], Any]:
        """Creates the step's companion objects (the database's claim), as the step's own are created."""
        companion = step.companion
        assert companion is not None
        index_of = {name: index for index, name in enumerate(companion.names(step_context.spec,
                                                                             step_context.names))}
        return self.requests.creating(companion.resource,
                                      lambda name: companion.manifest(step_context, index_of.get(name, 0)), tracker)

    def companion_remover(self, step: StepSpec, tracker: StepTracker) -> Callable[[str], Any]:
        assert step.companion is not None
        return self.requests.deleting(step.companion.kind, step.companion.resource, tracker)

    async def pod_log(self, name: str, container: str | None = None) -> str:
        return await self.client.text(r.PODS.path(self.context.scope.namespace, name, "log"),
                                      {"container": container} if container else None)

    async def pod_status(self, name: str) -> dict[str, Any] | None:
        """The pod's status as the API has it now (None: gone)."""
        pod = await self.client.get(r.PODS.path(self.context.scope.namespace, name))
        status = (pod or {}).get("status")
        return status if isinstance(status, dict) else None

    async def annotate_pods(self, names: Sequence[str], annotations: dict[str, str]) -> list[str]:
        """Set ``annotations`` on the run's pods, each only if it is the very pod the run's watch saw (its uid a
        precondition); the names that could not be annotated (not seen, gone, refused) are returned."""
        patch = self.requests.patching(POD, r.PODS, lambda name: {"metadata": {"annotations": annotations}},
                                       StepTracker("annotate", list(names)))
        results = await asyncio.gather(*(patch(name) for name in names), return_exceptions=True)
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
            if isinstance(result, Exception):
                log.info("annotating pod %s: %s", name, result)
        return [name for name, result in zip(names, results, strict=True) if isinstance(result, Exception)]

    async def collect_window(self, label: str, start: float, stop: float) -> StepCollection | None:
        """spec.collect over a window inside a step (a churn's window: unix seconds), once Prometheus scraped past
        it; None when the run collects nothing. Problems go into status.collection, under ``label``."""
        collector = self.context.collector
        if collector is None or not collector.enabled:
            return None
        collection = await collector.collect(label, start, stop)
        self.recorder.status.collection = collector.findings.listed()
        return collection

    async def array_volumes(self, wait_seconds: float = ARRAY_WINDOW_WAIT_SECONDS) -> tuple[list[str], int] | str:
        """The run's volumes its array holds now, as it names them (at most its answer's list) and how many in
        all; or why it cannot say (its driver does not answer audits, no answer in time, an API error)."""
        ref, spec = self.recorder.ref, self.context.spec
        try:
            if not await array_answers(self.client, spec.storageClassName):
                return "the class's driver does not answer audits: counted by the cluster only"
            answer = await ask_array(self.client, ref.namespace, audit_name(self.context.names.prefix), ref.name,
                                     ref.uid, wait_seconds=wait_seconds)
        except ApiError as error:
            return f"the array could not be asked: {error}"
        if isinstance(answer, str):
            return answer
        if isinstance(answer.get("error"), str):
            return f"the array would not answer: {answer['error']}"
        return [str(name) for name in answer.get("volumes") or []], int(answer["volumeCount"])

    def record_rows(self, step: StepSpec, tracker: StepTracker) -> None:
        """A measuring step's rows so far into Prometheus (the churn's latest window, as each one closes)."""
        if step.results is not None:
            step.results.record_metrics(self.recorder.ref.label, step.results.rows(tracker))

    async def warn(self, reason: str, message: str) -> None:
        await self.recorder.event(reason, message, warning=True)

    async def show(self, progress: str) -> None:
        """Status says where a measuring step is (``progress``), with its rows so far."""
        self.publish()
        self.recorder.status.progress = progress
        try:
            await self.recorder.write()
        except ApiError as error:
            log.warning("progress update failed: %s", error)

    async def _batch(self, kind: str, tracker: StepTracker, judge: Judge, submit: Callable[[str], Any],
                     timeout: float, boundaries: Sequence[Callable[[str], bool]] = (), progress: bool = True) -> None:
        """Start the tracker's clock, submit every active object, wait for each one's terminal state (and note
        when each passes each of ``boundaries``, for a step whose latency has parts)."""
        live = (kind, tracker, judge, boundaries)
        self._live.append(live)
        tracker.start()
        submissions = Submissions(UNSENT_PER_IN_FLIGHT * self.context.spec.client.maxInFlight)
        tracker.on_sent = submissions.sent
        submissions.start(tracker.active, functools.partial(self._submit, tracker, judge, submit))
        reporting = asyncio.create_task(self._report_progress()) if progress else None
        try:
            await tracker.wait(timeout, lambda: self.observed.complaints(kind))
        except asyncio.CancelledError:
            tracker.interrupted = True
            raise
        finally:
            submissions.cancel()
            tracker.on_sent = None
            if reporting is not None:
                reporting.cancel()
            assert tracker.started is not None
            tracker.note_retries(self.observed.retried_since(kind, tracker.active, tracker.started),
                                 retry_flags(self.context.environment.machinery), self.observed.last_attached_at)
            if progress:
                self.publish()
            self._live = [other for other in self._live if other is not live]  # by identity

    async def _submit(self, tracker: StepTracker, judge: Judge, submit: Callable[[str], Any], name: str) -> None:
        try:
            await submit(name)
        except ApiError as error:
            tracker.mark_submitted(name)
            tracker.record(name, Verdict(False, f"Request{error.reason or error.status}", shorten(error.message, 300)),
                           time.monotonic())
            return
        except NotOwned as error:
            tracker.mark_submitted(name)
            tracker.record(name, Verdict(False, "NameConflict", shorten(str(error), 300)), time.monotonic())
            return
        except NotSeen as error:
            tracker.mark_submitted(name)
            tracker.record(name, Verdict(False, "NeverSeen", shorten(str(error), 300)), time.monotonic())
            return
        # A delete of something already gone, or a create whose terminal event came first, is decided now.
        submitted = tracker.submitted.get(name)
        if submitted is not None and name not in tracker.outcomes:
            verdict = judge(name, submitted)
            if verdict is not None:
                tracker.record(name, verdict, time.monotonic())

    async def _report_progress(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_SECONDS)
            self.publish()
            try:
                await self.recorder.write(progress=True)
            except ApiError as error:
                log.warning("progress update failed: %s", error)

