"""What the workload steps share: the data path (fio on the run's volumes) and the database (PostgreSQL and
pgbench on a volume of its own) both run pods of the workload image and turn what the pods print into rows.

Shared here, so both behave the same: which image the pods run (the spec's, else the operator's default), and
how a step's rows live — in the step tracker's ``extra`` (so the stored report keeps them and a restart rebuilds
them), copied into their status field whenever status is written, into Prometheus when the step ends, and
marked ``Interrupted`` without numbers when an operator restart or a stop cuts the row under way short: a
half-measured row is never reported as a measurement.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from csibench.api import validation as v
from csibench.api.models import ConditionReason, StepState
from csibench.engine import judges
from csibench.engine.errors import PlanError
from csibench.engine.tracker import StepTracker

if TYPE_CHECKING:
    from csibench.engine.catalog import StepContext, StepSpec

DEFAULT_WORKLOAD_IMAGE = "ghcr.io/csibench/workload:0.1.0"
WORKLOAD_IMAGE_ENV = "CSIBENCH_WORKLOAD_IMAGE"
ROWS = "rows"
INTERRUPTED_MESSAGE = "interrupted (operator restart or stop): not a measurement"

Row = TypeVar("Row", bound=BaseModel)


def workload_image(image: str | None, environ: dict[str, str] | None = None) -> str:
    """A workload step's image: the spec's, else the operator's default (``--workload-image`` /
    CSIBENCH_WORKLOAD_IMAGE), else the release's. An operator default that is not an image reference is a
    PlanError: nothing is created."""
    if image:
        return image
    image = (environ if environ is not None else dict(os.environ)).get(WORKLOAD_IMAGE_ENV) or DEFAULT_WORKLOAD_IMAGE
    if len(image) > v.IMAGE_MAX or not re.fullmatch(v.IMAGE_PATTERN, image):
        raise PlanError(ConditionReason.INVALID_SPEC, f"the operator's workload image {image!r} ({WORKLOAD_IMAGE_ENV}) "
                        "is not an image reference")
    return image


@dataclass(frozen=True)
class ResultTable(Generic[Row]):
    """A workload step's rows: where status shows them, what in a row is a measurement, how they become
    metrics."""

    status_field: str  # BenchmarkRunStatus field holding the rows
    model: type[Row]
    measured: tuple[str, ...]  # fields dropped when the row is interrupted
    record_metrics: Callable[[str, Sequence[Row]], None]  # (run label, rows): measured rows into Prometheus

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

    def interrupt_step(self, tracker: StepTracker, rows: Sequence[Row]) -> None:
        """The step was cut short (a restart, a stop, an error): the tracker says so, and the row under way is
        kept as interrupted, without numbers."""
        tracker.interrupted = True
        self.interrupt_running(rows)
        keep_rows(tracker, rows)


def keep_rows(tracker: StepTracker, rows: Sequence[BaseModel]) -> None:
    """The rows as the tracker keeps them (and the report stores them)."""
    if tracker.extra is None:
        tracker.extra = {}
    tracker.extra[ROWS] = [row.model_dump(mode="json", exclude_none=True) for row in rows]


class Batches(Protocol):
    """What a workload step needs from the step runner: timed batches, submitters and the API."""

    async def batch(self, kind: str, tracker: StepTracker, judge: judges.Judge, submit: Any,
                    timeout: float) -> None: ...

    def creator(self, step: StepSpec, context: StepContext, tracker: StepTracker) -> Any: ...

    def remover(self, step: StepSpec, tracker: StepTracker) -> Any: ...

    def companion_creator(self, step: StepSpec, context: StepContext, tracker: StepTracker) -> Any: ...

    def companion_remover(self, step: StepSpec, tracker: StepTracker) -> Any: ...

    async def pod_log(self, name: str) -> str: ...

    async def show(self, progress: str) -> None: ...
