"""The measuring steps' shared skeleton (``ResultTable.measuring``): the step's clock covers its body, and a body cut
short leaves the row under way Interrupted without numbers, kept in the tracker, and the error raised on."""

from __future__ import annotations

import asyncio

import pytest

from csibench.api.models import DensityRow, StepState
from csibench.engine.results import INTERRUPTED_MESSAGE, ROWS
from csibench.engine.steps.density import RESULTS
from csibench.engine.tracker import StepTracker


def test_a_finished_body_is_timed_from_start_to_end_and_not_interrupted() -> None:
    tracker = StepTracker("density", ["p-0"])
    rows = [DensityRow(volumesPerNode=1)]
    with RESULTS.measuring(tracker, rows):
        assert tracker.started is not None and tracker.stopped is None
        rows[0].state = StepState.SUCCEEDED
    assert tracker.stopped is not None and tracker.started is not None and tracker.stopped >= tracker.started
    assert not tracker.interrupted and rows[0].state == StepState.SUCCEEDED


def test_a_body_cut_short_marks_the_row_under_way_interrupted_in_place_and_raises_on() -> None:
    """The database step replaces its rows as the pod's log is read: it does so in place, so the rows cut short
    are the latest ones, not the list the step began with."""
    tracker = StepTracker("density", ["p-0"])
    rows = [DensityRow(volumesPerNode=1), DensityRow(volumesPerNode=2)]
    with pytest.raises(asyncio.CancelledError), RESULTS.measuring(tracker, rows):
        rows[:] = [DensityRow(volumesPerNode=1, state=StepState.SUCCEEDED, durationSeconds=1.0),
                   DensityRow(volumesPerNode=2, state=StepState.RUNNING, durationSeconds=2.0, throughput=3.0)]
        raise asyncio.CancelledError
    assert tracker.interrupted and tracker.stopped is None
    assert rows[0].state == StepState.SUCCEEDED and rows[0].durationSeconds == 1.0
    assert rows[1].state == StepState.INTERRUPTED and rows[1].message == INTERRUPTED_MESSAGE
    assert rows[1].durationSeconds is None and rows[1].throughput is None
    assert tracker.extra is not None
    assert [row["state"] for row in tracker.extra[ROWS]] == ["Succeeded", "Interrupted"]
