"""One step, timed: announce it, start the clock, submit the whole batch, judge each object on its watch events,
stop the clock at the last terminal event (or the timeout).

Everything step-specific comes from the catalog entry: the objects, which are skipped, how one is submitted
(create its manifest, or delete it by the uid the run saw) and which judge decides it. The step is written to
status as Running before its first request leaves, so a restart always knows which step it interrupted; the
write and the StepStarted Event happen before the clock starts, so they cost the measurement nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from csibench.engine.catalog import Action, StepContext, StepSpec
from csibench.engine.context import RunContext
from csibench.engine.judges import Judge, Verdict
from csibench.engine.observed import Key, Observed
from csibench.engine.status import StatusRecorder
from csibench.engine.timing import human_duration
from csibench.engine.tracker import StepTracker
from csibench.kube.client import ApiError, KubeClient
from csibench.metrics import METRICS

log = logging.getLogger(__name__)
PROGRESS_INTERVAL_SECONDS = 2.0


class NotOwned(Exception):
    """An object of the run's name exists but is not the run's: it is never counted, changed or deleted."""


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

    def __init__(self, client: KubeClient, context: RunContext, recorder: StatusRecorder, observed: Observed) -> None:
        self.client = client
        self.context = context
        self.recorder = recorder
        self.observed = observed
        self._current: tuple[StepSpec, StepTracker, Judge] | None = None

    def on_change(self, keys: list[Key], at: float) -> None:
        if self._current is None:
            return
        step, tracker, judge = self._current
        for kind, name in keys:
            if kind != step.kind or name in tracker.outcomes:
                continue
            submitted = tracker.submitted.get(name)
            if submitted is None:
                continue
            verdict = judge(name, submitted)
            if verdict is not None:
                tracker.record(name, verdict, at)

    def publish(self) -> None:
        """Copy the trackers' aggregates into the status model (not yet written)."""
        status = self.recorder.status
        status.steps = [t.status() for t in self.context.trackers.values()]
        if self._current is not None:
            status.progress = self._current[1].progress()
        durations = [s.durationSeconds for s in status.steps if s.durationSeconds is not None]
        status.totalStepSeconds = round(sum(durations), 3)
        status.duration = human_duration(sum(durations))

    async def run(self, step: StepSpec) -> None:
        context, recorder = self.context, self.recorder
        tracker = context.trackers[step.name]
        step_context = context.step_context(self.observed)
        judge = step.judge_in(step_context)
        submit = self._submitter(step, step_context, tracker)
        tracker.note = step.note_in(step_context)
        tracker.skipped = step.skip(step, step_context)
        recorder.status.currentStep = step.name
        recorder.status.progress = f"0/{len(tracker.active)}"
        tracker.announced = True
        self.publish()
        await recorder.write()
        skipped = f" ({len(tracker.skipped)} skipped)" if tracker.skipped else ""
        await recorder.event("StepStarted", f"{step.name}: submitting {len(tracker.active)} objects{skipped}")
        self._current = (step, tracker, judge)
        tracker.start()
        submissions = [asyncio.create_task(self._submit(tracker, judge, submit, name)) for name in tracker.active]
        progress = asyncio.create_task(self._report_progress())
        try:
            await tracker.wait(float(context.spec.timeouts.for_step(step.name)),
                               lambda: self._last_warnings(step.kind))
        except asyncio.CancelledError:
            tracker.interrupted = True
            raise
        finally:
            for task in submissions:
                task.cancel()
            progress.cancel()
            self.publish()
            self._current = None
            recorder.status.progress = tracker.progress()
        status = tracker.status()
        METRICS.record_step(recorder.ref.label, step.name, context.spec.storageClassName, status.durationSeconds,
                            status.throughput, status.succeeded, status.failed, status.skipped)
        await recorder.write()
        throughput = f"{status.throughput:.2f} obj/s" if status.throughput is not None else "n/a"
        await recorder.event("StepCompleted", f"{step.name}: {status.succeeded}/{len(tracker.active)} succeeded in "
                             f"{human_duration(status.durationSeconds or 0)} ({throughput})",
                             warning=bool(status.failed))

    def _submitter(self, step: StepSpec, step_context: StepContext,
                   tracker: StepTracker) -> Callable[[str], Any]:
        client, scope = self.client, self.context.scope
        path = step.resource.path(scope.namespace)
        index = {name: i for i, name in enumerate(tracker.objects)}

        def stamp(name: str) -> Callable[[float], None]:
            return lambda at: tracker.mark_submitted(name, at)

        if step.action == Action.DELETE:
            uids = self.observed.uids_of(step.kind)

            async def delete(name: str) -> None:
                # Only the very object the run's label-selected watch saw (its uid as a precondition).
                await client.delete(step.resource.path(scope.namespace, name), on_send=stamp(name), uid=uids[name])
            return delete
        assert step.manifest is not None, f"creation step {step.name} has no manifest in the catalog"
        manifest = step.manifest

        async def create(name: str) -> None:
            body = manifest(step_context, index[name])
            if not await client.create(path, body, stamp(name)):
                # "Already exists" is success only for an object this run created (a restart re-submitting).
                existing = await client.get(step.resource.path(scope.namespace, name))
                if existing is not None and not scope.owns(existing.get("metadata") or {}):
                    raise NotOwned(f"{body['kind']} {scope.namespace}/{name} already exists and does not carry "
                                   f"this run's label {scope.selector}; the run never touches it")
        return create

    async def _submit(self, tracker: StepTracker, judge: Judge, submit: Callable[[str], Any], name: str) -> None:
        try:
            await submit(name)
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
            verdict = judge(name, submitted)
            if verdict is not None:
                tracker.record(name, verdict, time.monotonic())

    async def _report_progress(self) -> None:
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_SECONDS)
            self.publish()
            try:
                await self.recorder.write()
            except ApiError as error:
                log.warning("progress update failed: %s", error)

    def _last_warnings(self, kind: str) -> dict[str, str]:
        return {name: f"{w.reason}: {w.message}"[:200] for (k, name), w in self.observed.warnings.items()
                if k == kind}
