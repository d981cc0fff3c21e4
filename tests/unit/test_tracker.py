"""The step clock: per-object outcomes, the stop time and timeouts."""

from __future__ import annotations

import asyncio

import pytest

from csibench.api.models import StepName, StepState
from csibench.engine.judges import DONE, Verdict
from csibench.engine.tracker import StepTracker


def test_step_clock_stops_at_the_last_terminal_event_and_fails_the_rest_at_timeout() -> None:
    async def scenario() -> StepTracker:
        tracker = StepTracker(StepName.CREATE_VOLUME, ["a", "b", "c"])
        tracker.start()
        assert tracker.started is not None
        for name in ("a", "b", "c"):
            tracker.mark_submitted(name, tracker.started)
        tracker.record("a", DONE, tracker.started + 0.5)
        tracker.record("b", Verdict(False, "ProvisioningFailed", "boom"), tracker.started + 0.2)
        tracker.record("a", Verdict(False, "Late", "ignored"), tracker.started + 9)  # first verdict wins
        await tracker.wait(0.05, lambda: {"c": "FailedScheduling: no nodes"})
        return tracker

    tracker = asyncio.run(scenario())
    status = tracker.status()
    assert (status.state, status.succeeded, status.failed) == (StepState.FAILED, 1, 2)
    reasons = {r.reason: r for r in status.failureReasons}
    assert set(reasons) == {"ProvisioningFailed", "Timeout"}
    assert "FailedScheduling" in reasons["Timeout"].message
    assert status.latency is not None and status.latency.max == pytest.approx(0.5)
    assert tracker.per_object()["result"] == ["ok", "ProvisioningFailed", "Timeout"]


def test_a_cancellation_that_lands_as_the_last_object_ends_stops_the_wait() -> None:
    """The run deleted (or the operator stopping) in the very loop turn the step's last object ended: the wait
    must end cancelled, not return as if the step had finished (asyncio.wait_for on Python 3.11 returned, and the
    run went on: a killed run scaled a workload down, drained a node)."""
    async def scenario() -> str:
        tracker = StepTracker(StepName.CREATE_VOLUME, ["a"])
        tracker.start()
        waiting = asyncio.create_task(tracker.wait(60, dict))
        await asyncio.sleep(0)  # the wait is under way
        tracker.mark_submitted("a")
        tracker.record("a", DONE, 0.0)  # the last object ends ...
        waiting.cancel()  # ... and the cancellation lands in the same turn
        try:
            await waiting
        except asyncio.CancelledError:
            return "cancelled"
        return "went on"
    assert asyncio.run(scenario()) == "cancelled"
