"""How a run ends, decided in one place for the normal path and for recovery after a restart (pure).

In order: a run stopped early (a plan error found mid-run, a dependency deleted, an operator restart inside a
step) fails with that reason; otherwise any failed or interrupted step fails it with ``ObjectsFailed`` and the
first failure of each such step (with ``spec.repeat``: any failed iteration fails it, naming the iterations);
otherwise an incomplete cleanup fails it with ``CleanupIncomplete`` (leaked
objects are a failure even when every measurement is good); otherwise it succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api.models import ConditionReason, Iterations, Phase, StepState, StepStatus
from csibench.api.text import shorten


@dataclass(frozen=True)
class Stop:
    """Why a run stopped before its steps were done."""

    reason: ConditionReason
    message: str


@dataclass(frozen=True)
class RunVerdict:
    phase: Phase
    reason: ConditionReason
    message: str

    @property
    def succeeded(self) -> bool:
        return self.phase == Phase.SUCCEEDED


def failure_summary(step: StepStatus) -> str:
    """'createVolume: 3 of 10 failed (ProvisioningFailed): <the API's or driver's first message>'."""
    top = ""
    if step.failureReasons:
        first = step.failureReasons[0]
        top = f" ({first.reason})" + (f": {shorten(first.message, 240)}" if first.message else "")
    if step.state == StepState.INTERRUPTED:
        return f"{step.name}: interrupted"
    return f"{step.name}: {step.failed} of {step.objects - step.skipped} failed{top}"


def decide(steps: list[StepStatus], stop: Stop | None, cleanup_complete: bool, cleanup_note: str | None,
           duration: str, after_restart: bool = False, iterations: Iterations | None = None) -> RunVerdict:
    if stop is not None:
        return RunVerdict(Phase.FAILED, stop.reason, stop.message)
    resumed = "; cleanup resumed after an operator restart" if after_restart else ""
    repeated = iterations is not None and iterations.total > 1
    if repeated and iterations is not None and iterations.failed:
        detail = "; ".join(f"iteration {f.iteration}: {f.message}" for f in iterations.failures)
        return RunVerdict(Phase.FAILED, ConditionReason.OBJECTS_FAILED,
                          f"{iterations.failed} of {iterations.total} iterations failed and are not in the "
                          f"aggregates: {detail}{resumed}")
    failed = [s for s in steps if s.state in (StepState.FAILED, StepState.INTERRUPTED) or s.failed]
    if failed:
        detail = "; ".join(failure_summary(s) for s in failed)
        return RunVerdict(Phase.FAILED, ConditionReason.OBJECTS_FAILED, f"objects failed in {detail}{resumed}")
    summary = f"{len(steps)} steps succeeded" + (f" in each of {iterations.total} iterations"
                                                 if repeated and iterations is not None else "")
    summary += f"; sum of step times {duration}"
    if not cleanup_complete:
        return RunVerdict(Phase.FAILED, ConditionReason.CLEANUP_INCOMPLETE, f"{summary}, but {cleanup_note}")
    return RunVerdict(Phase.SUCCEEDED, ConditionReason.SUCCEEDED, summary + resumed)
