"""What the workload steps share: the data path (fio on the run's volumes) and the database (PostgreSQL and
pgbench on a volume of its own) both run pods of the workload image and turn what the pods print into rows.

Shared here, so both behave the same: which image the pods run (the spec's, else the operator's default), and
what a workload step needs from the step runner (``Batches``). How their rows live is ``results.py``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from csibench.api import validation as v
from csibench.api.models import ConditionReason
from csibench.api.text import shorten
from csibench.api.workload import DEFAULT_WORKLOAD_IMAGE, WORKLOAD_IMAGE_ENV
from csibench.engine import judges
from csibench.engine.errors import PlanError
from csibench.engine.observed import CLAIM, POD
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.tracker import StepTracker
from csibench.kube.client import ApiError

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
                    timeout: float, boundaries: Sequence[Callable[[str], bool]] = ()) -> None: ...

    def creator(self, step: StepSpec, context: StepContext, tracker: StepTracker) -> Any: ...

    def remover(self, step: StepSpec, tracker: StepTracker) -> Any: ...

    def companion_creator(self, step: StepSpec, context: StepContext, tracker: StepTracker) -> Any: ...

    def companion_remover(self, step: StepSpec, tracker: StepTracker) -> Any: ...

    async def pod_log(self, name: str, container: str | None = None) -> str: ...

    async def pod_status(self, name: str) -> dict[str, Any] | None: ...

    async def annotate_pods(self, names: Sequence[str], annotations: dict[str, str]) -> list[str]: ...

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


async def remove_pods_then_claim(runner: Batches, step: StepSpec, context: StepContext, pods: Sequence[str],
                                 claim: str, timeout: float) -> None:
    """A workload step's end: its pods, then its own claim (the step's companion), each until it and what depends
    on it (attachments, the volume) are gone; only those the run's watches saw."""
    assert step.companion is not None
    seen = context.observed.uids_of(POD)
    removal = StepTracker(f"{step.name}-delete", [pod for pod in pods if pod in seen])
    await runner.batch(POD, removal, judges.pod_gone_and_detached(context.observed, frozenset()),
                       runner.remover(step, removal), timeout)
    claims = context.observed.uids_of(CLAIM)
    volume = StepTracker(f"{step.name}-volume-delete", [claim] if claim in claims else [])
    await runner.batch(CLAIM, volume, judges.claim_and_volume_gone(context.observed, frozenset()),
                       runner.companion_remover(step, volume), timeout)
