"""What the workload steps share: the data path (fio on the run's volumes) and the database (PostgreSQL and
pgbench on a volume of its own) both run pods of the workload image and turn what the pods print into rows.

Shared here, so both behave the same: which image the pods run (the spec's, else the operator's default), and
what a workload step needs from the step runner (``Batches``). How their rows live is ``results.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from csibench.api import validation as v
from csibench.api.collect import StepCollection
from csibench.api.models import BenchmarkRunSpec, ConditionReason
from csibench.api.text import shorten
from csibench.api.workload import DEFAULT_WORKLOAD_IMAGE, WORKLOAD_IMAGE_ENV
from csibench.engine import barrier, judges
from csibench.engine.errors import PlanError
from csibench.engine.observed import CLAIM, POD
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.tracker import StepTracker
from csibench.kube import resources as r
from csibench.kube.client import ApiError
from csibench.preflight.checks import pacing_floor

log = logging.getLogger(__name__)

LOG_UNAVAILABLE = "LogUnavailable"
LOG_MESSAGE_MAX = 600


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


class Batches(Protocol):
    """What a workload step needs from the step runner: timed batches, submitters and the API."""

    async def batch(self, kind: str, tracker: StepTracker, judge: judges.Judge, submit: Any,
                    timeout: float, boundaries: Sequence[Callable[[str], bool]] = (),
                    progress: bool = True) -> None: ...

    def creator(self, step: StepSpec, context: StepContext, tracker: StepTracker) -> Any: ...

    def remover(self, step: StepSpec, tracker: StepTracker) -> Any: ...

    def companion_creator(self, step: StepSpec, context: StepContext, tracker: StepTracker) -> Any: ...

    def companion_remover(self, step: StepSpec, tracker: StepTracker) -> Any: ...

    async def pod_log(self, name: str, container: str | None = None) -> str: ...

    async def pod_status(self, name: str) -> dict[str, Any] | None: ...

    async def annotate_pods(self, names: Sequence[str], annotations: dict[str, str]) -> list[str]: ...

    async def collect_window(self, label: str, start: float, stop: float) -> StepCollection | None: ...

    async def array_volumes(self, wait_seconds: float = ...) -> tuple[list[str], int] | str: ...

    def creating(self, resource: r.Resource, body_of: Callable[[str], Any], tracker: StepTracker) -> Any: ...

    def record_rows(self, step: StepSpec, tracker: StepTracker) -> None: ...

    async def warn(self, reason: str, message: str) -> None: ...

    async def show(self, progress: str) -> None: ...


async def finished_log(runner: Batches, pod: str) -> tuple[str, tuple[str, str] | None]:
    """A finished pod's log, or "" and why it could not be read (``LogUnavailable``, the API server's words). A pod
    that never ran has no log either: there its own outcome says why, so callers use the reason only for a pod
    whose outcome was ok."""
    try:
        return await runner.pod_log(pod), None
    except ApiError as error:
        return "", (LOG_UNAVAILABLE, shorten(f"pods/log of {pod}: {error}", LOG_MESSAGE_MAX))


async def remove_pods(runner: Batches, step: StepSpec, context: StepContext, pods: Sequence[str],
                      timeout: float) -> None:
    """The step's pods deleted, each until it is gone and its volumes detached; only those the run's watches saw."""
    seen = context.observed.uids_of(POD)
    removal = StepTracker(f"{step.name}-delete", [pod for pod in pods if pod in seen])
    await runner.batch(POD, removal, judges.pod_gone_and_detached(context.observed, frozenset()),
                       runner.remover(step, removal), timeout)


async def remove_pods_then_claim(runner: Batches, step: StepSpec, context: StepContext, pods: Sequence[str],
                                 *claims: str, timeout: float) -> None:
    """A workload step's end: its pods, then its own claims (the step's companions), in order, each until it and
    what depends on it (attachments, the volume) are gone; only those the run's watches saw."""
    assert step.companion is not None
    await remove_pods(runner, step, context, pods, timeout)
    for claim in claims:
        made = context.observed.uids_of(CLAIM)
        volume = StepTracker(f"{step.name}-volume-delete", [claim] if claim in made else [])
        await runner.batch(CLAIM, volume, judges.claim_and_volume_gone(context.observed, frozenset()),
                           runner.companion_remover(step, volume), timeout)


ANNOTATE_ATTEMPTS = 5  # a late pod's start time: tries, 1 s apart doubling


async def release_start(runner: Batches, run: StepTracker, spec: BenchmarkRunSpec, start_timeout: float,
                        start_delay: float, label: str, started_at: Callable[[int], None],
                        missed_reason: str = "DataPathNoStartTime") -> None:
    """A start barrier (the data path's ``barrier``; the readers of a ReadOnlyMany volume): once every pod of
    ``run`` runs, or once ``start_timeout`` passed, give them all one start time (``started_at`` is told it),
    ``start_delay`` ahead plus the least time the run's client needs to send them all (its QPS and burst). A pod
    the first round missed (its create still in flight, a failed patch) gets the same start time once it runs: it
    starts late, and its figures say so (the rows' skew); one that never gets it, a Warning ``missed_reason``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(start_timeout):  # (wait_for on 3.11 can swallow a cancellation)
            await asyncio.gather(*(run.passed(name, 0) for name in run.active))
    sending = pacing_floor(len(run.active), 1, spec.client.qps, spec.client.burst)
    start = barrier.start_at(time.time(), start_delay + sending)
    started_at(start)
    annotation = {barrier.START_ANNOTATION: str(start)}
    missed = await runner.annotate_pods(run.active, annotation)
    if missed:
        log.info("%s: the start time reaches %s once they run", label, ", ".join(missed))
        await asyncio.gather(*(_annotate_when_running(runner, run, name, annotation, missed_reason)
                               for name in missed))


async def _annotate_when_running(runner: Batches, run: StepTracker, name: str, annotation: dict[str, str],
                                 reason: str) -> None:
    for attempt in range(ANNOTATE_ATTEMPTS):
        if not await run.passed(name, 0):
            return  # it ended without running: its outcome says why
        if not await runner.annotate_pods([name], annotation):
            return
        await asyncio.sleep(2.0 ** attempt)
    await runner.warn(reason, f"pod {name} could not be given its start time "
                      f"({ANNOTATE_ATTEMPTS} tries): it waits until its timeout")
