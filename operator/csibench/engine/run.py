"""A BenchmarkRun from start to end: the orchestration, and nothing step-specific.

Phases: Pending -> Running -> CleaningUp -> Succeeded | Failed. ``execute`` checks everything it can before the
first object (``preconditions``), records the preflight's findings (and stops there under Enforce), creates the
run's namespace if it has none, starts the watches, runs the planned steps from the catalog one at a time
(``execution``) — ``spec.repeat`` times, each iteration on fresh objects after an untimed cleanup — stores the
report, cleans up per policy and ends with the verdict. After an operator restart, ``resume.resume`` (restartPolicy
Redo) keeps the finished iterations and the finished steps of the current one, restores the interrupted step's
starting state and measures it again through ``run_plan``; ``recovery.recover_after_restart`` (Fail, or only
cleanup left) marks a half-measured step Interrupted, never a measurement. All end through ``verdict``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from csibench.api.baseline import compare_with_baseline, not_shared, shared_with
from csibench.api.models import (
    MAX_FINDINGS,
    BaselineComparison,
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    CleanupPolicy,
    ConditionReason,
    DisruptionState,
    Phase,
    Severity,
    StepState,
)
from csibench.api.population import DEFAULT_TIMEOUT_SECONDS, PopulationStatus
from csibench.api.regression import Change
from csibench.api.text import shorten
from csibench.engine import manifests
from csibench.engine.cleanup import CleanupResult, cleanup
from csibench.engine.collection import build_collector
from csibench.engine.context import RunContext
from csibench.engine.disruptions import never_reached
from csibench.engine.drift import churn_drift
from csibench.engine.errors import PlanError, RunAborted
from csibench.engine.execution import StepRunner, build_trackers
from csibench.engine.iterations import (
    build_aggregates,
    build_data_path_aggregates,
    build_iteration_record,
    count_iterations,
)
from csibench.engine.judgement import Judgement
from csibench.engine.leak_audit import audit_leaks, repeats_per_disruption
from csibench.engine.observed import Observed
from csibench.engine.population.making import Owner, make_population
from csibench.engine.population.removal import population_cleanup
from csibench.engine.preconditions import check_still_there, prepare
from csibench.engine.report_builder import build_step_records, store_report
from csibench.engine.restore import restore
from csibench.engine.status import StatusRecorder, now
from csibench.engine.step import StepSpec
from csibench.engine.thresholds import judge
from csibench.engine.undo import undo_all
from csibench.engine.verdict import RunVerdict, Stop, decide
from csibench.engine.watching import RunWatches
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.ownership import RunScope
from csibench.kube.resources import RunRef
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
        self._cleaned: CleanupResult | None = None  # the last cleanup this engine ran (leaks are audited after it)

    @property
    def status(self) -> BenchmarkRunStatus:
        return self.recorder.status

    # -- the normal path -----------------------------------------------------------------------------------------
    async def execute(self) -> BenchmarkRunStatus:
        self.status.startTime = now()
        if self.spec.baseline and self._baseline_ref() == (self.ref.namespace, self.ref.name):
            return await self.finish(RunVerdict(Phase.FAILED, ConditionReason.INVALID_SPEC,
                                                f"spec.baseline names this run itself ({self.spec.baseline}): a "
                                                "run's baseline is an earlier, finished run"))
        try:
            context = await prepare(self.ref, self.spec, self.client)
        except PlanError as error:
            return await self.finish(RunVerdict(Phase.FAILED, error.reason, str(error)))
        context.trackers = build_trackers(context, self.ref.label)
        status = self.status
        status.environment = context.environment
        status.steps = [t.status() for t in context.trackers.values()]  # planned: Pending, even if Enforce stops
        self.count_iterations(context)
        stop = await self._record_preflight(context)
        if stop is not None:
            return await self.finish(RunVerdict(Phase.FAILED, ConditionReason.PREFLIGHT_FAILED, stop))
        status.phase = Phase.RUNNING
        status.targetNamespace = context.target_namespace
        # Recorded before the namespace is created; cleanup still deletes it only if it carries the run's label.
        status.ownedNamespace = context.target_namespace if context.own_namespace else None
        status.objectSelector = context.scope.selector
        self.recorder.ready(False, ConditionReason.RUNNING, f"running {len(context.plan)} steps")
        await self.recorder.write()
        return await self.run_plan(context, first=0, redo=False)

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

    async def run_plan(self, context: RunContext, first: int, redo: bool) -> BenchmarkRunStatus:
        """Run the plan from step ``first`` of the current iteration (restoring its starting state first when
        ``redo``), then every later iteration (``spec.repeat``) on fresh objects after an untimed cleanup; store
        the report, clean up per policy and end with the verdict."""
        status = self.status
        observed = Observed(context.target_namespace, context.names.prefix)
        observed.fail_after = self.spec.failAfterWarnings
        runner = StepRunner(self.client, context, self.recorder, observed)
        context.collector = build_collector(self.spec, self.ref.label, context.target_namespace, context.environment,
                                            status.collection)
        if context.collector is not None:
            status.collection = context.collector.findings.listed()
        watches: RunWatches | None = None
        try:
            stop: Stop | None = None
            try:
                await self._ensure_namespace(context)
                await self._ensure_population(context)
                watches = RunWatches(self.client, observed, context.scope.selector, context.needs_snapshots,
                                     on_change=runner.on_change, groups=context.needs_group_snapshots)
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
            await runner.close_disruptions()
            await self._store_report(context)
            runner.publish()
            iterations = status.iterations
            measured_well = stop is None and not any(s.failed or s.state == StepState.INTERRUPTED
                                                     for s in status.steps) and not (iterations and iterations.failed)
            complete = await self.clean_up(context.scope, observed, measured_well)
            await self.audit_leaks(context.names.prefix)
        finally:
            await runner.close_disruptions(read_leases=False)  # done above, unless the run is being torn down
            if watches is not None:
                watches.stop()
        return await self.finish(decide(status.steps, stop, complete, status.cleanup, status.duration or "",
                                        iterations=status.iterations))

    async def finish(self, verdict: RunVerdict) -> BenchmarkRunStatus:
        """The run's end, with its thresholds judged against what it measured and its baseline compared."""
        await self._undo_disruptions()
        never_reached(self.status.disruptions, self.spec.disruptions)
        baseline = await self._compare_with_baseline(verdict) if self.spec.baseline else None
        self.status.churnDrift = churn_drift(self.spec.churn, self.status.churn, verdict)
        thresholds = judge(self.spec, self.status, verdict)
        drift = self.status.churnDrift
        judged = Judgement(thresholds, baseline, drift) \
            if thresholds is not None or baseline is not None or drift is not None else None
        return await self.recorder.finish(verdict, judged)

    async def _undo_disruptions(self) -> None:
        """A workload a ScaleDown of this run scaled down is given back its replicas (if a disruption's own give
        back was cut short); one that cannot be is named in a Warning Event."""
        acted = [spec for spec, result in zip(self.spec.disruptions, self.status.disruptions, strict=False)
                 if result.momentAtSeconds is not None or result.state != DisruptionState.PENDING]
        for problem in await undo_all(self.client, self.ref.uid, acted):
            await self.recorder.event("DisruptionNotUndone", f"not undone: {problem}", warning=True)

    def _baseline_ref(self) -> tuple[str, str]:
        """spec.baseline as (namespace, name): this run's namespace unless it names one."""
        namespace, _, name = (self.spec.baseline or "").rpartition("/")
        return namespace or self.ref.namespace, name

    async def _compare_with_baseline(self, verdict: RunVerdict) -> BaselineComparison:
        """spec.baseline read from the API (this run's namespace unless it names one) and compared; a baseline
        that cannot be read, or a run that did not measure, is Inconclusive and says why. The operator reads with
        its own rights: a baseline in another namespace is compared only when shared with this run's namespace
        (``api/baseline.shared_with``), and missing, unreadable or not shared all read the same there."""
        namespace, name = self._baseline_ref()
        threshold = self.spec.regressionThresholdPercent
        shown = f"{namespace}/{name}"
        if not verdict.succeeded:
            return BaselineComparison(run=shown, change=Change.INCONCLUSIVE, thresholdPercent=threshold,
                                      failOnSlower=self.spec.failOnSlower,
                                      message=f"this run failed to measure ({verdict.reason}): nothing to compare")
        foreign = namespace != self.ref.namespace
        try:
            found = await self.client.get(r.BENCHMARK_RUNS.path(namespace, name))
        except ApiError as error:
            found, problem = None, f"baseline {shown} could not be read: {error}"
        else:
            problem = f"baseline {shown} not found"
        if found is not None and not shared_with(found, namespace, self.ref.namespace):
            found = None
        if found is None:
            return BaselineComparison(run=shown, change=Change.INCONCLUSIVE, thresholdPercent=threshold,
                                      failOnSlower=self.spec.failOnSlower,
                                      message=not_shared(shown, self.ref.namespace) if foreign else problem)
        current = {"metadata": {"namespace": self.ref.namespace, "name": self.ref.name},
                   "spec": self.spec.model_dump(mode="json"),
                   "status": self.status.model_dump(mode="json", exclude_none=True)}
        current["status"]["phase"] = verdict.phase.value
        return compare_with_baseline(found, current, threshold, fail_on_slower=self.spec.failOnSlower,
                                     require_same_shape=self.spec.baselineRequireSameShape)

    # -- iterations (spec.repeat) --------------------------------------------------------------------------------
    def count_iterations(self, context: RunContext) -> None:
        """Status: the iteration counter and the aggregates over the finished iterations."""
        self.status.iterations = count_iterations(context.iterations, context.iteration, self.spec.repeat)
        self.status.aggregates = build_aggregates(context.iterations) if self.spec.repeat > 1 else []
        self.status.dataPathAggregates = build_data_path_aggregates(context.iterations) \
            if self.spec.repeat > 1 and self.spec.dataPath is not None else []

    async def _close_iteration(self, context: RunContext, runner: StepRunner) -> None:
        """Every step of the current iteration ran: it becomes a finished iteration (measured or failed)."""
        runner.publish()
        record = build_iteration_record(context.iteration, list(self.status.steps), build_step_records(context))
        context.iterations = [r for r in context.iterations if r["iteration"] != context.iteration] + [record]
        self.count_iterations(context)
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
        self.count_iterations(context)
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
            await self.recorder.cleanup_incomplete(result, when=f"before iteration {context.iteration}: ")
            raise RunAborted(ConditionReason.CLEANUP_INCOMPLETE, f"before iteration {context.iteration}: "
                             f"{result.describe()}; the next iteration would run beside them, so the run stops")

    async def _store_report(self, context: RunContext) -> None:
        stored = await store_report(self.ref, context, self.client, self.status.disruptions)
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
        await restore(runner, step)
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

    async def _ensure_population(self, context: RunContext) -> None:
        """spec.population made before the first step (untimed; ``engine/population``), unless status says it was
        (an operator restart: it is still there, or its absence shows when the steps' run ends)."""
        population = self.spec.population
        done = self.status.population
        if population is None or (done is not None and done.seconds is not None):
            return
        shared = context.shared_population  # the suite's (population.shared), proven by the preconditions
        owner = shared.owner if shared is not None else Owner(context.target_namespace, context.names.prefix,
                                                              self.ref.uid, dict(self.spec.labels))
        shared_by = shared.suite if shared is not None else None
        if population.empty:  # a level of 0: nothing to make
            self.status.population = PopulationStatus(seconds=0.0, sharedBy=shared_by)
            return
        record = self.status.population = PopulationStatus(selector=owner.selector, sharedBy=shared_by)

        async def progress(text: str) -> None:
            self.status.progress = text
            await self.recorder.write()

        try:
            await make_population(self.client, self.spec, population, owner, context.seed_node, progress, record)
        except RunAborted as error:
            record.message = shorten(str(error), 1024)
            raise
        self.status.progress = None
        await self.recorder.write()
        grown = (f", grown from the suite's {record.foundClaims or 0} claims and {record.foundSnapshots or 0} "
                 f"snapshots" if shared_by else "")
        await self.recorder.event("PopulationReady", f"{record.claims} claims Bound and {record.snapshots} snapshots "
                                  f"ready beside the run's steps, in {record.seconds or 0:.1f}s{grown} "
                                  f"({owner.selector})")

    async def audit_leaks(self, prefix: str) -> None:
        """A run with disruptions, or a bound on what it leaked, whose cleanup ran (here, or resumed by a restarted
        operator): what it left behind (status.leaks, ``leak_audit``), from what cleanup's watches saw at its end."""
        cleaned = self._cleaned
        if not self.spec.audits_leaks or cleaned is None:
            return
        leaks, repeats = await audit_leaks(
            self.client, namespace=self.ref.namespace, prefix=prefix, run_name=self.ref.name,
            run_uid=self.ref.uid, storage_class_name=self.spec.storageClassName, remaining=cleaned.remaining,
            left=cleaned.left_names, still_named=set(cleaned.storage_names))
        self.status.leaks = leaks
        if repeats is not None:
            repeats_per_disruption(self.status.disruptions, self.status.steps, repeats)
        METRICS.record_leaks(self.ref.label, leaks.model_dump(mode="json"))

    # -- cleanup -----------------------------------------------------------------------------------------------
    async def clean_up(self, scope: RunScope, observed: Observed | None, measured_well: bool,
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
        timeout = self.spec.population.timeoutSeconds if self.spec.population else DEFAULT_TIMEOUT_SECONDS
        result = await cleanup(self.client, observed, scope, float(self.spec.timeouts.cleanup),
                               population=population_cleanup(self.status.population, float(timeout),
                                                             self.spec.population is not None
                                                             and self.spec.population.shared))
        self._cleaned = result
        if self.status.population is not None and result.population is not None:
            self.status.population.removedSeconds = round(result.population.seconds, 3)
        note = " (resumed after an operator restart)" if resumed else ""
        if result.complete:
            log.info("run %s: %s", self.ref.label, result.describe())
            self.status.cleanup = result.describe() + note
        else:
            await self.recorder.cleanup_incomplete(result, note=note)
        return result.complete
