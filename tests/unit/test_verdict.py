"""How a run ends, and the Ready condition's transition times (pure)."""

from __future__ import annotations

from csibench.api.conditions import set_condition
from csibench.api.models import ConditionReason, FailureReason, Phase, StepState, StepStatus
from csibench.engine.verdict import Stop, decide


def step(name: str, state: StepState, failed: int = 0, skipped: int = 0) -> StepStatus:
    reasons = [FailureReason(reason="Timeout", count=failed, message="no terminal state within 3s")] if failed else []
    return StepStatus(name=name, state=state, objects=10, succeeded=10 - failed - skipped, failed=failed,
                      skipped=skipped, failureReasons=reasons)


def test_a_stop_wins_over_everything() -> None:
    stop = Stop(ConditionReason.TARGET_NAMESPACE_DELETED, "target namespace 'x' was deleted during the run")
    verdict = decide([step("createVolume", StepState.FAILED, failed=3)], stop, False, "incomplete", "1s")
    assert (verdict.phase, verdict.reason, verdict.message) == (Phase.FAILED, stop.reason, stop.message)


def test_failed_and_interrupted_steps_fail_the_run_with_their_first_failure() -> None:
    verdict = decide([step("createVolume", StepState.FAILED, failed=3, skipped=2),
                      step("publish", StepState.INTERRUPTED)], None, True, None, "1s")
    assert verdict.reason == ConditionReason.OBJECTS_FAILED
    assert verdict.message == ("objects failed in createVolume: 3 of 8 failed (Timeout): no terminal state within "
                               "3s; publish: interrupted")


def test_an_incomplete_cleanup_fails_a_run_whose_steps_all_succeeded() -> None:
    verdict = decide([step("createVolume", StepState.SUCCEEDED)], None, False,
                     "cleanup incomplete after 1s: still present: 2 persistentvolumes", "4.0s")
    assert (verdict.phase, verdict.reason) == (Phase.FAILED, ConditionReason.CLEANUP_INCOMPLETE)
    assert verdict.message.startswith("1 steps succeeded; sum of step times 4.0s, but cleanup incomplete")


def test_success_says_so_and_mentions_a_resumed_cleanup() -> None:
    verdict = decide([step("createVolume", StepState.SUCCEEDED)], None, True, None, "4.0s", after_restart=True)
    assert verdict.succeeded
    assert verdict.message == "1 steps succeeded; sum of step times 4.0s; cleanup resumed after an operator restart"


def test_the_transition_time_moves_only_when_the_status_changes() -> None:
    conditions = set_condition([], "Ready", "False", "Running", "running 2 steps", 1, "t1")
    conditions = set_condition(conditions, "Ready", "False", "ObjectsFailed", "objects failed", 1, "t2")
    assert [(c.reason, c.lastTransitionTime) for c in conditions] == [("ObjectsFailed", "t1")]
    conditions = set_condition(conditions, "Ready", "True", "Succeeded", "ok", 1, "t3")
    conditions = set_condition(conditions, "Other", "True", "X", "", 1, "t4")
    assert [(c.type, c.lastTransitionTime) for c in conditions] == [("Ready", "t3"), ("Other", "t4")]
