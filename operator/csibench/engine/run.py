"""A BenchmarkRun from start to end: the orchestration, and nothing step-specific.

Phases: Pending -> Running -> CleaningUp -> Succeeded | Failed. ``execute`` checks everything it can before the
first object (``preconditions``), records the preflight's findings (and stops there under Enforce), creates the
run's namespace if it has none, starts the watches, runs the planned steps from the catalog one at a time
(``execution``) — ``spec.repeat`` times, each iteration on fresh objects after an untimed cleanup — stores the
report, cleans up per policy and ends with the verdict. After an operator restart, ``resume`` (restartPolicy
Redo) keeps the finished iterations and the finished steps of the current one, restores the interrupted step's
starting state and measures it again; ``recover_after_restart`` (Fail, or only cleanup left) marks a
half-measured step Interrupted, never a measurement. All end through ``verdict``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from csibench.api.models import (
    MAX_FINDINGS,
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    CleanupPolicy,
    ConditionReason,
    Phase,
    Severity,
    StepState,
)
from csibench.engine import manifests
from csibench.engine.catalog import STEPS
from csibench.engine.cleanup import cleanup
from csibench.engine.context import RunContext, RunRef, scope_of
from csibench.engine.errors import PlanError, RunAborted
from csibench.engine.execution import StepRunner, build_trackers
from csibench.engine.iterations import build_aggregates, build_iteration_record, count_iterations
from csibench.engine.observed import Observed
from csibench.engine.preconditions import check_still_there, prepare
from csibench.engine.report_builder import build_step_records, store_report
from csibench.engine.report_store import load_report
from csibench.engine.status import StatusRecorder, now
from csibench.engine.step import StepSpec
from csibench.engine.tracker import StepTracker
from csibench.engine.verdict import RunVerdict, Stop, decide
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.ownership import RunScope
from csibench.metrics import METRICS
from csibench.preflight.outcome import CONDITION as PREFLIGHT_CONDITION
from csibench.preflight.outcome import outcome

log = logging.getLogger(__name__)
SERVICE_ACCOUNT_WAIT_SECONDS = 60.0


class RunEngine:
    def __init__(self, ref: RunRef, spec: BenchmarkRunSpec, client: KubeApi) -> None:
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
        status.environment = context.environment
        status.steps = [t.status() for t in context.trackers.values()]  # planned: Pending, even if Enforce stops
        self._count_iterations(context)
        stop = await self._record_preflight(context)
        if stop is not None:
            return await self.recorder.finish(RunVerdict(Phase.FAILED, ConditionReason.PREFLIGHT_FAILED, stop))
        status.phase = Phase.RUNNING
        status.targetNamespace = context.target_namespace
        # Recorded before the namespace is created; cleanup still deletes it only if it carries the run's label.
        status.ownedNamespace = context.target_namespace if context.own_namespace else None
        status.objectSelector = context.scope.selector
        self.recorder.ready(False, ConditionReason.RUNNING, f"running {len(context.plan)} steps")
        await self.recorder.write()
        return await self._run(context, first=0, redo=False)

    async def _record_preflight(self, context: RunContext) -> str | None:
        """Findings into status (bounded), the Preflight condition, one Event per finding; with Enforce and a
        Warning, the reason the run stops before creating anything."""
        self.status.preflight = context.findings[:MAX_FINDINGS]
        result = outcome(self.spec.preflight, context.findings, context.environment.machinery)
        self.recorder.condition(PREFLIGHT_CONDITION, result.status, result.reason, result.message)
        for finding in context.findings[:MAX_FINDINGS]:
            await self.recorder.event(f"Preflight{finding.check}", finding.message,
                                      warning=finding.severity == Severity.WARNING)
        return result.stop

    async def _run(self, context: RunContext, first: int, redo: bool) -> BenchmarkRunStatus:
        """Run the plan from step ``first`` of the current iteration (restoring its starting state first when
        ``redo``), then every later iteration (``spec.repeat``) on fresh objects after an untimed cleanup; store
        the report, clean up per policy and end with the verdict."""
        status = self.status
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
                while True:
                    if context.iteration > 1 and first == 0 and not redo:
                        await self._clear_between_iterations(context, observed)
                    for index, step in enumerate(context.plan[first:], start=first):
                        await check_still_there(self.client, context)
                        if redo and index == first:
                            await self._restore(runner, step)
                        # Each step's record is stored before status says it is done: after a restart, a
                        # finished step always keeps its measurement.
                        await runner.run(step, before_done=lambda: self._store_report(context))
                    await self._close_iteration(context, runner)
                    if context.iteration >= self.spec.repeat:
                        break
                    await self._next_iteration(context, runner)
                    first, redo = 0, False
            except RunAborted as error:
                stop = Stop(error.reason, str(error))
            except (ApiError, TimeoutError, OSError) as error:
                log.exception("run %s aborted", self.ref.label)
                stop = Stop(ConditionReason.RUN_ABORTED, f"run aborted: {error}")
            await self._store_report(context)
            runner.publish()
            iterations = status.iterations
            measured_well = stop is None and not any(s.failed or s.state == StepState.INTERRUPTED
                                                     for s in status.steps) and not (iterations and iterations.failed)
            complete = await self._clean_up(context.scope, observed, measured_well)
        finally:
            if watches is not None:
                watches.stop()
        return await self.recorder.finish(decide(status.steps, stop, complete, status.cleanup, status.duration or "",
                                                 iterations=status.iterations))

    # -- iterations (spec.repeat) --------------------------------------------------------------------------------
    def _count_iterations(self, context: RunContext) -> None:
        """Status: the iteration counter and the aggregates over the finished iterations."""
        self.status.iterations = count_iterations(context.iterations, context.iteration, self.spec.repeat)
        self.status.aggregates = build_aggregates(context.iterations) if self.spec.repeat > 1 else []

    async def _close_iteration(self, context: RunContext, runner: StepRunner) -> None:
        """Every step of the current iteration ran: it becomes a finished iteration (measured or failed)."""
        runner.publish()
        record = build_iteration_record(context.iteration, list(self.status.steps), build_step_records(context))
        context.iterations = [r for r in context.iterations if r["iteration"] != context.iteration] + [record]
        self._count_iterations(context)
        if self.spec.repeat > 1:
            failed = record["state"] != "Succeeded"
            await self.recorder.event("IterationCompleted", f"iteration {context.iteration}/{self.spec.repeat} "
                                      + (f"failed and is not in the aggregates: {record['message']}" if failed
                                         else "measured"), warning=failed)

    async def _next_iteration(self, context: RunContext, runner: StepRunner) -> None:
        """Move to the next iteration: fresh trackers and names. The report (with the finished iteration among
        ``iterations``) is stored before status names the new iteration, so a restart in between finds the
        finished one recorded and never measures it twice."""
        context.enter_iteration(context.iteration + 1)
        context.trackers = build_trackers(context, self.ref.label)
        await self._store_report(context)
        self._count_iterations(context)
        runner.publish()
        await self.recorder.write()

    async def _clear_between_iterations(self, context: RunContext, observed: Observed) -> None:
        """Remove what earlier iterations left (untimed: no step's clock runs), keeping the run's namespace."""
        status = self.status
        status.currentStep = None
        status.progress = f"cleanup before iteration {context.iteration}"
        await self.recorder.write()
        result = await cleanup(self.client, observed, context.scope, float(self.spec.timeouts.cleanup),
                               keep_namespace=True)
        if not result.complete:
            raise RunAborted(ConditionReason.CLEANUP_INCOMPLETE, f"before iteration {context.iteration}: "
                             f"{result.describe()}; the next iteration would run beside them, so the run stops")

    async def _store_report(self, context: RunContext) -> None:
        stored = await store_report(self.ref, context, self.client)
        self.status.reportConfigMap = stored or self.status.reportConfigMap  # a failed save keeps the last one

    async def _restore(self, runner: StepRunner, step: StepSpec) -> None:
        tracker = runner.context.trackers[step.name]
        tracker.announced = True  # status says Running with this attempt before anything is touched
        self.status.currentStep = step.name
        self.status.progress = "restoring"
        runner.publish()
        await self.recorder.write()
        await self.recorder.event("StepRestoring", f"{step.name}: attempt {tracker.attempt - 1} was interrupted by "
                                  "an operator restart; restoring the state it started from")
        await runner.restore(step)
        await self.recorder.event("StepRestored", f"{step.name}: {tracker.restored}; measuring attempt "
                                  f"{tracker.attempt} from scratch")

    async def _ensure_namespace(self, context: RunContext) -> None:
        if not context.own_namespace:
            return
        created = await self.client.create(r.NAMESPACES.path(), manifests.build_namespace(
            context.target_namespace, context.labels))
        if not created:  # a restarted run finds its namespace; anything else of that name is not the run's
            existing = await self.client.get(r.NAMESPACES.path(name=context.target_namespace)) or {}
            if not context.scope.owns(existing.get("metadata") or {}):
                raise RunAborted(ConditionReason.RUN_ABORTED, f"namespace {context.target_namespace} exists and does "
                                 f"not carry this run's label {context.scope.selector}; the run never uses it")
        # Pod admission needs the namespace's default ServiceAccount, created asynchronously by the
        # controller-manager; waiting here keeps that delay out of the publish step's numbers.
        deadline = time.monotonic() + SERVICE_ACCOUNT_WAIT_SECONDS
        while await self.client.get(r.SERVICE_ACCOUNTS.path(context.target_namespace, "default")) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"namespace {context.target_namespace} never got its default ServiceAccount")
            await asyncio.sleep(0.2)

    # -- after an operator restart ---------------------------------------------------------------------------------
    async def resume(self, previous: dict[str, Any]) -> BenchmarkRunStatus:
        """The operator died mid-run and the spec says Redo: keep every finished step's measurement, restore the
        state the interrupted step started from, and measure it again from scratch with the rest of the plan.
        What cannot be resumed honestly (no stored record of the finished steps, the attempt limit) ends as
        ``recover_after_restart`` would, with the reason."""
        try:
            saved = BenchmarkRunStatus.model_validate(previous)
        except ValueError:
            return await self.recover_after_restart(previous)
        self.recorder.status = saved
        status = self.status
        iteration = status.iterations.current if status.iterations else 1
        finished = {s.name: s for s in status.steps if s.state in (StepState.SUCCEEDED, StepState.FAILED)}
        all_finished = bool(status.steps) and len(finished) == len(status.steps)
        if all_finished and iteration >= self.spec.repeat:
            return await self.recover_after_restart(previous)  # only cleanup was cut short
        try:
            context = await prepare(self.ref, self.spec, self.client)
        except PlanError as error:
            return await self._stop_after_restart(Stop(error.reason, str(error)))
        context.enter_iteration(iteration)
        context.trackers = build_trackers(context, self.ref.label)
        report = await self._stored_report(context)
        context.interrupted.extend(report.get("interruptedAttempts") or [])
        try:
            context.iterations = self._finished_iterations(report, iteration, all_finished)
        except (KeyError, TypeError, ValueError) as error:
            return await self._stop_after_restart(Stop(ConditionReason.OPERATOR_RESTARTED, "the operator restarted "
                                                       f"and the stored record of iteration {iteration} or an "
                                                       f"earlier one is missing or unreadable ({error}), so the "
                                                       "run cannot resume honestly"))
        if any(record["iteration"] == iteration for record in context.iterations):
            # The interrupted iteration had finished: the run goes on with the next one, from its cleanup.
            context.enter_iteration(iteration + 1)
            context.trackers = build_trackers(context, self.ref.label)
            self._count_iterations(context)
            status.steps = [t.status() for t in context.trackers.values()]
            status.phase = Phase.RUNNING
            self.recorder.ready(False, ConditionReason.RUNNING, "resumed after an operator restart at iteration "
                                f"{context.iteration}")
            return await self._run(context, 0, False)
        self._count_iterations(context)
        records = {str(step["status"]["name"]): step for step in report.get("steps", [])}
        for name, step_status in finished.items():
            try:
                context.trackers[name] = StepTracker.from_record(step_status, records[name],
                                                                 context.trackers[name].objects)
            except (KeyError, TypeError, ValueError) as error:
                return await self._stop_after_restart(Stop(ConditionReason.OPERATOR_RESTARTED, f"the operator "
                                                           f"restarted and the stored record of step {name} is "
                                                           f"missing or unreadable ({error!r}), so the run "
                                                           "cannot resume honestly"))
            results = STEPS[name].results
            if results is not None:
                results.record_metrics(self.ref.label, results.rows(context.trackers[name]))
            METRICS.record_step(self.ref.label, name, self.spec.storageClassName, step_status.durationSeconds,
                                step_status.throughput, step_status.succeeded, step_status.failed,
                                step_status.skipped)
        first = next(i for i, step in enumerate(context.plan) if step.name not in finished)
        current = next((s for s in status.steps if s.name == context.plan[first].name), None)
        redo = current is not None and current.state in (StepState.RUNNING, StepState.INTERRUPTED)
        if redo and current is not None:
            attempts = (current.attempts or 1) + 1
            if attempts > self.spec.maxStepAttempts:
                return await self._stop_after_restart(Stop(
                    ConditionReason.RESTART_LIMIT_REACHED, f"step {current.name} was interrupted by operator "
                    f"restarts {attempts - 1} times (maxStepAttempts {self.spec.maxStepAttempts}); the run stops"))
            context.interrupted.append({"attempt": attempts - 1, "state": "Interrupted",
                                        **current.model_dump(mode="json", exclude_none=True)})
            context.trackers[current.name].attempt = attempts
        status.phase = Phase.RUNNING
        self.recorder.ready(False, ConditionReason.RUNNING, f"resumed after an operator restart at step "
                            f"{context.plan[first].name}")
        return await self._run(context, first, redo)

    def _finished_iterations(self, report: dict[str, Any], iteration: int,
                             all_finished: bool) -> list[dict[str, Any]]:
        """The records of the iterations finished before the restart: every earlier one must be in the stored
        report (else ValueError); the current one counts as finished when all its steps are (each step's record is
        stored before status says it is done), or when the report already moved it among the finished."""
        earlier = [dict(record) for record in report.get("iterations") or []]
        recorded = {int(record["iteration"]) for record in earlier}
        missing = [n for n in range(1, iteration) if n not in recorded]
        if missing:
            raise ValueError(f"no record of iteration {missing[0]}")
        if all_finished and iteration not in recorded:
            if int(report.get("iteration") or 1) != iteration:
                raise ValueError(f"the stored steps are not iteration {iteration}'s")
            steps = list(report.get("steps") or [])
            if {str(step["status"]["name"]) for step in steps} != {s.name for s in self.status.steps}:
                raise ValueError(f"iteration {iteration} has steps without a stored record")
            earlier.append(build_iteration_record(iteration, list(self.status.steps), steps))
        return earlier

    async def _stored_report(self, context: RunContext) -> dict[str, Any]:
        """The report stored so far (by the run's fixed report name), or {} when there is none or it cannot be
        read: a damaged report must end the run with a reason, never crash-loop its daemon."""
        try:
            report = await load_report(self.client, self.ref.namespace, context.names.report, self.ref.uid)
        except ApiError:
            raise
        except Exception as error:  # any damage (gzip, JSON, shape) means "no usable record"
            log.warning("run %s: stored report unreadable: %r", self.ref.label, error)
            return {}
        return report or {}

    async def recover_after_restart(self, previous: dict[str, Any]) -> BenchmarkRunStatus:
        """The operator died mid-run (and the spec says Fail, or only cleanup was left): mark the step that was
        running Interrupted (not a measurement), clean up per policy and fail with OperatorRestarted; if every
        step had finished, only cleanup was cut short: resume it and end with the run's own verdict."""
        try:
            self.recorder.status = BenchmarkRunStatus.model_validate(previous)
        except ValueError:  # written by another version: keep at least where the run's objects are
            target = previous.get("targetNamespace")
            self.recorder.status = BenchmarkRunStatus(targetNamespace=target if isinstance(target, str) else None)
        steps = self.status.steps
        interrupted = [s.name for s in steps if s.state == StepState.RUNNING]
        iterations = self.status.iterations
        more_to_come = iterations is not None and iterations.current < iterations.total
        if steps and not more_to_come and all(s.state in (StepState.SUCCEEDED, StepState.FAILED) for s in steps):
            return await self._stop_after_restart(None)
        where = f"during step {interrupted[0]}" if interrupted else "between steps"
        if more_to_come and iterations is not None and not interrupted:
            where = f"after iteration {iterations.current} of {iterations.total}"
        return await self._stop_after_restart(Stop(
            ConditionReason.OPERATOR_RESTARTED, f"the operator restarted {where}; an interrupted step is not a "
            "measurement, so the run was stopped and cleaned up instead of resumed"))

    async def _stop_after_restart(self, stop: Stop | None) -> BenchmarkRunStatus:
        """Mark the running step Interrupted, clean up per policy, and end with the verdict."""
        status = self.status
        for step in status.steps:
            if step.state == StepState.RUNNING:
                step.state = StepState.INTERRUPTED
                step.latency, step.throughput, step.completionTime = None, None, None
        for step in status.steps:  # a workload step's row under way is no measurement either
            results = STEPS[step.name].results if step.name in STEPS else None
            if results is not None and step.state == StepState.INTERRUPTED:
                results.interrupt_running(getattr(status, results.status_field))
        complete = True
        if status.targetNamespace:
            measured_well = stop is None and not any(s.state == StepState.FAILED for s in status.steps) \
                and not (status.iterations and status.iterations.failed)
            complete = await self._clean_up(scope_of(self.ref, status.targetNamespace), None, measured_well,
                                            resumed=True)
        return await self.recorder.finish(decide(status.steps, stop, complete, status.cleanup,
                                                 status.duration or "", after_restart=True,
                                                 iterations=status.iterations))

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
        log.info("run %s: cleaning up (deadline %ss)", self.ref.label, self.spec.timeouts.cleanup)
        result = await cleanup(self.client, observed, scope, float(self.spec.timeouts.cleanup))
        log.info("run %s: %s", self.ref.label, result.describe())
        self.status.cleanup = result.describe() + (" (resumed after an operator restart)" if resumed else "")
        return result.complete
