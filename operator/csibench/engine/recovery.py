"""After an operator restart, a run that is not resumed (``restartPolicy: Fail``, or only cleanup was left) ends
here: the step that was running is marked Interrupted (never a measurement, and a workload step's row under way
loses its numbers), cleanup runs per policy, and the run ends through the same verdict as the normal path.
"""

from __future__ import annotations

from typing import Any

from csibench.api.models import BenchmarkRunStatus, ConditionReason, StepState
from csibench.engine.catalog import STEPS
from csibench.engine.context import scope_of
from csibench.engine.run import RunEngine
from csibench.engine.verdict import Stop, decide


async def recover_after_restart(engine: RunEngine, previous: dict[str, Any]) -> BenchmarkRunStatus:
    """The operator died mid-run (and the spec says Fail, or only cleanup was left): mark the step that was
    running Interrupted (not a measurement), clean up per policy and fail with OperatorRestarted; if every
    step had finished, only cleanup was cut short: resume it and end with the run's own verdict."""
    try:
        engine.recorder.status = BenchmarkRunStatus.model_validate(previous)
    except ValueError:  # written by another version: keep at least where the run's objects are
        target = previous.get("targetNamespace")
        engine.recorder.status = BenchmarkRunStatus(targetNamespace=target if isinstance(target, str) else None)
    steps = engine.status.steps
    interrupted = [s.name for s in steps if s.state == StepState.RUNNING]
    iterations = engine.status.iterations
    more_to_come = iterations is not None and iterations.current < iterations.total
    if steps and not more_to_come and all(s.state in (StepState.SUCCEEDED, StepState.FAILED) for s in steps):
        return await stop_after_restart(engine, None)
    where = f"during step {interrupted[0]}" if interrupted else "between steps"
    if more_to_come and iterations is not None and not interrupted:
        where = f"after iteration {iterations.current} of {iterations.total}"
    return await stop_after_restart(engine, Stop(
        ConditionReason.OPERATOR_RESTARTED, f"the operator restarted {where}; an interrupted step is not a "
        "measurement, so the run was stopped and cleaned up instead of resumed"))

async def stop_after_restart(engine: RunEngine, stop: Stop | None) -> BenchmarkRunStatus:
    """Mark the running step Interrupted, clean up per policy, and end with the verdict."""
    status = engine.status
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
        scope = scope_of(engine.ref, status.targetNamespace)
        complete = await engine.clean_up(scope, None, measured_well, resumed=True)
        await engine.audit_leaks(scope.prefix)
    return await engine.finish(decide(status.steps, stop, complete, status.cleanup, status.duration or "",
                                      after_restart=True, iterations=status.iterations))
