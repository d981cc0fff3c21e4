"""A workload step's rows (the data path's workloads, the database's runs): where status shows them, what in a row
is a measurement, how they become metrics, and how the tracker keeps them (in its ``extra``, so the stored report
keeps them and a restart rebuilds them). A row cut short by a restart or a stop is marked ``Interrupted`` without
numbers: a half-measured row is never reported as a measurement; ``ResultTable.measuring`` is that rule around a
measuring step's body, written once for every such step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from csibench.api.models import StepState
from csibench.engine.tracker import StepTracker

ROWS = "rows"
INTERRUPTED_MESSAGE = "interrupted (operator restart or stop): not a measurement"

Row = TypeVar("Row", bound=BaseModel)


@dataclass(frozen=True)
class ResultTable(Generic[Row]):
    """A workload step's rows: where status shows them, what in a row is a measurement, how they become
    metrics."""

    status_field: str  # BenchmarkRunStatus field holding the rows
    model: type[Row]
    measured: tuple[str, ...]  # fields dropped when the row is interrupted
    record_metrics: Callable[[str, Sequence[Row]], None]  # (run label, rows): measured rows into Prometheus
    # A row's own parts that run after it is done (the data path's rate levels and local baseline): those under
    # way when the step is cut short are marked interrupted too.
    interrupt_parts: Callable[[Row], None] | None = None

    def rows(self, tracker: StepTracker | None) -> list[Row]:
        """The rows a tracker holds (status shows them)."""
        if tracker is None or tracker.extra is None:
            return []
        return [self.model.model_validate(row) for row in tracker.extra.get(ROWS, [])]

    def from_status(self, status: dict[str, Any]) -> list[Row]:
        return [self.model.model_validate(row) for row in status.get(self.status_field) or []]

    def interrupted(self, row: Row) -> None:
        """A row cut short is not a measurement: its numbers are dropped, its state says why."""
        row.state = StepState.INTERRUPTED  # type: ignore[attr-defined]
        for name in self.measured:
            setattr(row, name, None)
        row.message = INTERRUPTED_MESSAGE  # type: ignore[attr-defined]

    def interrupt_running(self, rows: Sequence[Row]) -> None:
        for row in rows:
            if row.state == StepState.RUNNING:  # type: ignore[attr-defined]
                self.interrupted(row)
            if self.interrupt_parts is not None:
                self.interrupt_parts(row)

    def interrupt_step(self, tracker: StepTracker, rows: Sequence[Row]) -> None:
        """The step was cut short (a restart, a stop, an error): the tracker says so, and the row under way is
        kept as interrupted, without numbers."""
        tracker.interrupted = True
        self.interrupt_running(rows)
        keep_rows(tracker, rows)

    @contextmanager
    def measuring(self, tracker: StepTracker, rows: Sequence[Row]) -> Iterator[None]:
        """A measuring step's body: the tracker's clock starts here and stops when the body ends; a body cut short
        (a restart, a stop, an error) marks the step and the row under way interrupted (``interrupt_step``) and
        re-raises. ``rows`` is read when it is cut short, so the body updates that list in place."""
        tracker.start()
        try:
            yield
        except BaseException:
            self.interrupt_step(tracker, rows)
            raise
        tracker.stopped = time.monotonic()


def keep_rows(tracker: StepTracker, rows: Sequence[BaseModel]) -> None:
    """The rows as the tracker keeps them (and the report stores them)."""
    if tracker.extra is None:
        tracker.extra = {}
    tracker.extra[ROWS] = [row.model_dump(mode="json", exclude_none=True) for row in rows]
