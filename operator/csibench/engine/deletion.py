"""A deleted run's cleanup, behind csibench's finalizer: what its status says it created is removed (every delete
still limited to objects carrying the run's uid label), and what cannot be is named, with why, in the run's
status and a Warning Event before the finalizer goes, so no object is left without a word said about it."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from pydantic import ValidationError

from csibench.api.models import BenchmarkRunStatus, Condition
from csibench.api.population import DEFAULT_TIMEOUT_SECONDS, PopulationStatus
from csibench.engine.cleanup import CleanupResult, cleanup
from csibench.engine.context import scope_of
from csibench.engine.errors import PlanError
from csibench.engine.population.removal import population_cleanup
from csibench.engine.status import StatusRecorder
from csibench.kube.api import KubeApi
from csibench.kube.resources import RunRef

log = logging.getLogger(__name__)


async def clean_up_deleted_run(client: KubeApi, ref: RunRef, status: dict[str, Any],
                               deadline_seconds: float, population_seconds: float = DEFAULT_TIMEOUT_SECONDS,
                               population_shared: bool = False) -> CleanupResult | None:
    """Clean up after a deleted run; None when it never got past its preconditions (nothing was created) or its
    status names no namespace the run can own. ``population_seconds``: the spec's population.timeoutSeconds, for
    removing the population its status recorded (the seed's PV and content followed as status named them);
    ``population_shared``: the spec's population.shared (its suite's population, left to the suite)."""
    if not status.get("targetNamespace"):
        return None
    try:
        scope = scope_of(ref, status.get("targetNamespace"))
    except PlanError as error:
        log.warning("run %s deleted: %s; nothing to clean up", ref.label, error)
        return None
    recorded = status.get("population")
    try:
        made = PopulationStatus.model_validate(recorded) if recorded is not None else None
    except ValidationError:  # written by another version: a population all the same, its seed found from itself
        made = PopulationStatus()
    result = await cleanup(client, None, scope, deadline_seconds=deadline_seconds,
                           population=population_cleanup(made, population_seconds, population_shared))
    if result.complete:
        log.info("run %s deleted: %s", ref.label, result.describe())
        return result
    try:
        recorded = BenchmarkRunStatus.model_validate(status)
    except ValidationError:  # a status another version wrote: keep what conditions it has (the patch replaces them)
        recorded = BenchmarkRunStatus(conditions=_conditions(status.get("conditions")))
    recorder = StatusRecorder(ref, client, recorded)
    await recorder.cleanup_incomplete(result, when="after the run was deleted: ", patch_now=True)
    return result


def _conditions(raw: Any) -> list[Condition]:
    kept = []
    for item in raw if isinstance(raw, list) else []:
        with contextlib.suppress(ValidationError):
            kept.append(Condition.model_validate(item))
    return kept
