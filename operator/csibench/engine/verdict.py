"""How a run ends, decided in one place for the normal path and for recovery after a restart (pure).

In order: a run stopped early (a plan error found mid-run, a dependency deleted, an operator restart inside a
step) fails with that reason; otherwise any failed or interrupted step fails it with ``ObjectsFailed`` and the
first failure of each such step; otherwise an incomplete cleanup fails it with ``CleanupIncomplete`` (leaked
objects are a failure even when every measurement is good); otherwise it succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.api.models import ConditionReason, Phase, StepState, StepStatus


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
        top = f" ({first.reason})" + (f": {first.message[:240]}" if first.message else "")
    if step.state == StepState.INTERRUPTED:
        return f"{step.name}: interrupted"
    return f"{step.name}: {step.failed} of {step.objects - step.skipped} failed{top}"


def decide(steps: list[StepStatus], stop: Stop | None, cleanup_complete: bool, cleanup_note: str | None,
           duration: str, after_restart: bool = False) -> RunVerdict:
    if stop is not None:
        return RunVerdict(Phase.FAILED, stop.reason, stop.message)
    failed = [s for s in steps if s.state in (StepState.FAILED, StepState.INTERRUPTED) or s.failed]
    resumed = "; cleanup resumed after an operator restart" if after_restart else ""
    if failed:
        detail = "; ".join(failure_summary(s) for s in failed)
        return RunVerdict(Phase.FAILED, ConditionReason.OBJECTS_FAILED, f"objects failed in {detail}{resumed}")
    summary = f"{len(steps)} steps succeeded; sum of step times {duration}"
    if not cleanup_complete:
        return RunVerdict(Phase.FAILED, ConditionReason.CLEANUP_INCOMPLETE, f"{summary}, but {cleanup_note}")
    return RunVerdict(Phase.SUCCEEDED, ConditionReason.SUCCEEDED, summary + resumed)
