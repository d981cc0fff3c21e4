"""A BenchmarkRun from start to end: the orchestration, and nothing step-specific.

Phases: Pending -> Running -> CleaningUp -> Succeeded | Failed. ``execute`` checks everything it can before the
first object (``preconditions``), creates the run's namespace if it has none, starts the watches, runs the planned
steps from the catalog one at a time (``execution``), stores the report, cleans up per policy and ends with the
verdict. ``recover_after_restart`` is the same ending for a run the operator lost mid-way: a half-measured step is
marked Interrupted, never reported as a measurement. Both end through the one verdict in ``verdict``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from csibench.api.models import (
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    CleanupPolicy,
    ConditionReason,
    Phase,
    StepState,
)
from csibench.engine import manifests
from csibench.engine.cleanup import cleanup
from csibench.engine.context import RunContext, RunRef, scope_of
from csibench.engine.errors import PlanError, RunAborted
from csibench.engine.execution import StepRunner, build_trackers
from csibench.engine.observed import Observed
from csibench.engine.preconditions import check_still_there, prepare
from csibench.engine.report_builder import store_report
from csibench.engine.status import StatusRecorder, now
from csibench.engine.verdict import RunVerdict, Stop, decide
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.client import ApiError, KubeClient
from csibench.kube.ownership import RunScope

log = logging.getLogger(__name__)
SERVICE_ACCOUNT_WAIT_SECONDS = 60.0


class RunEngine:
    def __init__(self, ref: RunRef, spec: BenchmarkRunSpec, client: KubeClient) -> None:
        self.ref = ref
        self.spec = spec
        self.client = client
        self.recorder = StatusRecorder(ref, client)

    @property
    def status(self) -> BenchmarkRunStatus:
        return self.recorder.status

    # -- the normal path -----------------------------------------------------------------------------------------
    async def execute(self) -> BenchmarkRunStatus:
        self.status.startTime = now()
        try:
            context = await prepare(self.ref, self.spec, self.client)
        except PlanError as error:
            return await self.recorder.finish(RunVerdict(Phase.FAILED, error.reason, str(error)))
        context.trackers = build_trackers(context, self.ref.label)
        status = self.status
        status.phase = Phase.RUNNING
        status.environment = context.environment
        status.targetNamespace = context.target_namespace
        # Recorded before the namespace is created; cleanup still deletes it only if it carries the run's label.
        status.ownedNamespace = context.target_namespace if context.own_namespace else None
        status.objectSelector = context.scope.selector
        status.steps = [t.status() for t in context.trackers.values()]
        self.recorder.ready(False, ConditionReason.RUNNING, f"running {len(context.plan)} steps")
        await self.recorder.write()
        observed = Observed(context.target_namespace, context.names.prefix)
        runner = StepRunner(self.client, context, self.recorder, observed)
        watches: RunWatches | None = None
        try:
            stop: Stop | None = None
            try:
                await self._ensure_namespace(context)
                watches = RunWatches(self.client, observed, context.scope.selector, context.needs_snapshots,
                                     on_change=runner.on_change)
                await watches.start()
                for step in context.plan:
                    await check_still_there(self.client, context)
                    await runner.run(step)
            except RunAborted as error:
                stop = Stop(error.reason, str(error))
            except (ApiError, TimeoutError, OSError) as error:
                log.exception("run %s aborted", self.ref.label)
                stop = Stop(ConditionReason.RUN_ABORTED, f"run aborted: {error}")
            status.reportConfigMap = await store_report(self.ref, context, self.client)
            runner.publish()
            measured_well = stop is None and not any(s.failed or s.state == StepState.INTERRUPTED
                                                     for s in status.steps)
            complete = await self._clean_up(context.scope, observed, measured_well)
        finally:
            if watches is not None:
                watches.stop()
        return await self.recorder.finish(decide(status.steps, stop, complete, status.cleanup, status.duration or ""))

    async def _ensure_namespace(self, context: RunContext) -> None:
        if not context.own_namespace:
            return
        await self.client.create(r.NAMESPACES.path(), manifests.build_namespace(context.target_namespace,
                                                                                 context.labels))
        # Pod admission needs the namespace's default ServiceAccount, created asynchronously by the
        # controller-manager; waiting here keeps that delay out of the publish step's numbers.
        deadline = time.monotonic() + SERVICE_ACCOUNT_WAIT_SECONDS
        while await self.client.get(r.SERVICE_ACCOUNTS.path(context.target_namespace, "default")) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {context.target_namespace} never got its default ServiceAccount")
            await asyncio.sleep(0.2)

    # -- after an operator restart ---------------------------------------------------------------------------------
    async def recover_after_restart(self, previous: dict[str, Any]) -> BenchmarkRunStatus:
        """The operator died mid-run. Mark the step that was running Interrupted (not a measurement), clean up
        per policy and fail with OperatorRestarted; if every step had finished, only cleanup was cut short:
        resume it and end with the run's own verdict."""
        try:
            self.recorder.status = BenchmarkRunStatus.model_validate(previous)
        except ValueError:
            self.recorder.status = BenchmarkRunStatus()
        status = self.status
        interrupted = [s.name for s in status.steps if s.state == StepState.RUNNING]
        for step in status.steps:
            if step.state == StepState.RUNNING:
                step.state = StepState.INTERRUPTED
                step.latency, step.throughput, step.completionTime = None, None, None
        finished = bool(status.steps) and all(s.state in (StepState.SUCCEEDED, StepState.FAILED)
                                              for s in status.steps)
        complete = True
        if status.targetNamespace:
            measured_well = finished and not any(s.state == StepState.FAILED for s in status.steps)
            complete = await self._clean_up(scope_of(self.ref, status.targetNamespace), None, measured_well,
                                            resumed=True)
        stop = None
        if not finished:
            where = f"during step {interrupted[0]}" if interrupted else "between steps"
            stop = Stop(ConditionReason.OPERATOR_RESTARTED, f"the operator restarted {where}; an interrupted step "
                        "is not a measurement, so the run was stopped and cleaned up instead of resumed")
        return await self.recorder.finish(decide(status.steps, stop, complete, status.cleanup,
                                                 status.duration or "", after_restart=True))

    # -- cleanup -----------------------------------------------------------------------------------------------
    async def _clean_up(self, scope: RunScope, observed: Observed | None, measured_well: bool,
                        resumed: bool = False) -> bool:
        """Clean up per policy; False when objects the run should have removed are still there."""
        policy = self.spec.cleanup
        if policy == CleanupPolicy.NEVER or (policy == CleanupPolicy.ON_SUCCESS and not measured_well):
            self.status.cleanup = (f"objects kept (cleanup: {policy.value}) in namespace {scope.namespace}, "
                                   f"selector {scope.selector}")
            return True
        self.status.phase = Phase.CLEANING_UP
        self.status.currentStep = None
        self.status.progress = None
        await self.recorder.write()
        result = await cleanup(self.client, observed, scope, float(self.spec.timeouts.cleanup))
        self.status.cleanup = result.describe() + (" (resumed after an operator restart)" if resumed else "")
        return result.complete
