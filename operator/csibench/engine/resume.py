"""After an operator restart, a run whose spec says ``restartPolicy: Redo`` goes on: every finished step keeps its
measurement (rebuilt from status and the stored report), the interrupted step's starting state is restored
(untimed) and the step is measured again from scratch, then the rest of the plan runs. Finished iterations
(``spec.repeat``) are taken from the stored report. What cannot be resumed honestly (no stored record of the
finished steps, the attempt limit) ends as ``recovery.recover_after_restart`` would, with the reason.
"""

from __future__ import annotations

import logging
from typing import Any

from csibench.api.models import BenchmarkRunStatus, ConditionReason, Phase, StepState
from csibench.engine.catalog import STEPS
from csibench.engine.collection import record_metrics as record_collection_metrics
from csibench.engine.context import RunContext
from csibench.engine.errors import PlanError
from csibench.engine.execution import build_trackers
from csibench.engine.iterations import build_iteration_record
from csibench.engine.preconditions import prepare
from csibench.engine.recovery import recover_after_restart, stop_after_restart
from csibench.engine.report_store import load_report
from csibench.engine.run import RunEngine
from csibench.engine.tracker import StepTracker
from csibench.engine.verdict import Stop
from csibench.kube.client import ApiError
from csibench.metrics import METRICS

log = logging.getLogger(__name__)


async def resume(engine: RunEngine, previous: dict[str, Any]) -> BenchmarkRunStatus:
    """The operator died mid-run and the spec says Redo: keep every finished step's measurement, restore the
    state the interrupted step started from, and measure it again from scratch with the rest of the plan.
    What cannot be resumed honestly (no stored record of the finished steps, the attempt limit) ends as
    ``recover_after_restart`` would, with the reason."""
    try:
        saved = BenchmarkRunStatus.model_validate(previous)
    except ValueError:
        return await recover_after_restart(engine, previous)
    engine.recorder.status = saved
    status = engine.status
    iteration = status.iterations.current if status.iterations else 1
    finished = {s.name: s for s in status.steps if s.state in (StepState.SUCCEEDED, StepState.FAILED)}
    all_finished = bool(status.steps) and len(finished) == len(status.steps)
    if all_finished and iteration >= engine.spec.repeat:
        return await recover_after_restart(engine, previous)  # only cleanup was cut short
    try:
        context = await prepare(engine.ref, engine.spec, engine.client)
    except PlanError as error:
        return await stop_after_restart(engine, Stop(error.reason, str(error)))
    context.enter_iteration(iteration)
    context.trackers = build_trackers(context, engine.ref.label)
    report = await _stored_report(engine, context)
    context.interrupted.extend(report.get("interruptedAttempts") or [])
    try:
        context.iterations = _finished_iterations(engine, report, iteration, all_finished)
    except (KeyError, TypeError, ValueError) as error:
        return await stop_after_restart(engine, Stop(ConditionReason.OPERATOR_RESTARTED, "the operator restarted "
                                                   f"and the stored record of iteration {iteration} or an "
                                                   f"earlier one is missing or unreadable ({error}), so the "
                                                   "run cannot resume honestly"))
    if any(record["iteration"] == iteration for record in context.iterations):
        # The interrupted iteration had finished: the run goes on with the next one, from its cleanup.
        context.enter_iteration(iteration + 1)
        context.trackers = build_trackers(context, engine.ref.label)
        engine.count_iterations(context)
        status.steps = [t.status() for t in context.trackers.values()]
        status.phase = Phase.RUNNING
        engine.recorder.ready(False, ConditionReason.RUNNING, "resumed after an operator restart at iteration "
                            f"{context.iteration}")
        return await engine.run_plan(context, 0, False)
    engine.count_iterations(context)
    records = {str(step["status"]["name"]): step for step in report.get("steps", [])}
    for name, step_status in finished.items():
        try:
            context.trackers[name] = StepTracker.from_record(step_status, records[name],
                                                             context.trackers[name].objects)
        except (KeyError, TypeError, ValueError) as error:
            return await stop_after_restart(engine, Stop(ConditionReason.OPERATOR_RESTARTED, f"the operator "
                                                       f"restarted and the stored record of step {name} is "
                                                       f"missing or unreadable ({error!r}), so the run "
                                                       "cannot resume honestly"))
        results = STEPS[name].results
        if results is not None:
            results.record_metrics(engine.ref.label, results.rows(context.trackers[name]))
        METRICS.record_step(engine.ref.label, name, engine.spec.storageClassName, step_status.durationSeconds,
                            step_status.throughput, step_status.succeeded, step_status.failed,
                            step_status.skipped)
        METRICS.record_phases(engine.ref.label, name, [p.model_dump() for p in step_status.phases])
        if step_status.collection is not None:
            record_collection_metrics(engine.ref.label, name, step_status.collection)
    first = next(i for i, step in enumerate(context.plan) if step.name not in finished)
    current = next((s for s in status.steps if s.name == context.plan[first].name), None)
    redo = current is not None and current.state in (StepState.RUNNING, StepState.INTERRUPTED)
    if redo and current is not None:
        attempts = (current.attempts or 1) + 1
        if attempts > engine.spec.maxStepAttempts:
            return await stop_after_restart(engine, Stop(
                ConditionReason.RESTART_LIMIT_REACHED, f"step {current.name} was interrupted by operator "
                f"restarts {attempts - 1} times (maxStepAttempts {engine.spec.maxStepAttempts}); the run stops"))
        context.interrupted.append({"attempt": attempts - 1, "state": "Interrupted",
                                    **current.model_dump(mode="json", exclude_none=True)})
        context.trackers[current.name].attempt = attempts
    status.phase = Phase.RUNNING
    engine.recorder.ready(False, ConditionReason.RUNNING, f"resumed after an operator restart at step "
                        f"{context.plan[first].name}")
    return await engine.run_plan(context, first, redo)

def _finished_iterations(engine: RunEngine, report: dict[str, Any], iteration: int,
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
        if {str(step["status"]["name"]) for step in steps} != {s.name for s in engine.status.steps}:
            raise ValueError(f"iteration {iteration} has steps without a stored record")
        earlier.append(build_iteration_record(iteration, list(engine.status.steps), steps))
    return earlier

async def _stored_report(engine: RunEngine, context: RunContext) -> dict[str, Any]:
    """The report stored so far (by the run's fixed report name), or {} when there is none or it cannot be
    read: a damaged report must end the run with a reason, never crash-loop its daemon."""
    try:
        report = await load_report(engine.client, engine.ref.namespace, context.names.report, engine.ref.uid)
    except ApiError:
        raise
    except Exception as error:  # any damage (gzip, JSON, shape) means "no usable record"
        log.warning("run %s: stored report unreadable: %r", engine.ref.label, error)
        return {}
    return report or {}
