"""The full report of a run, built from its trackers when the steps are over and stored beside the run.

Status keeps aggregates; the report keeps everything a later reader needs to trust or re-analyse the numbers: the
spec, the cluster facts (with the CSI machinery found), every preflight finding, the client limits and time spent
throttled, the manifests as submitted, and per step its aggregates plus per-object submit offsets, latencies and
results (see ``report_store``).
"""

from __future__ import annotations

import logging
from typing import Any

from csibench.api.models import DisruptionResult
from csibench.engine.context import RunContext
from csibench.engine.preconditions import representative_manifests
from csibench.engine.report_store import ReportNameTaken, build_report_configmaps, save_report
from csibench.engine.tracker import StepTracker
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.resources import RunRef

log = logging.getLogger(__name__)


def build_step_record(tracker: StepTracker) -> dict[str, Any] | None:
    """A started step as the report keeps it: its status and its per-object arrays (None before it started)."""
    if tracker.started is None or tracker.anchor is None:
        return None
    first = tracker.objects[0] if tracker.objects else ""
    return {"status": tracker.status().model_dump(mode="json", exclude_none=True),
            "objectPrefix": first[:-5], "objectCount": len(tracker.objects),
            "startWall": tracker.anchor.wall, **tracker.per_object(),
            **({"extra": tracker.extra} if tracker.extra is not None else {})}


def build_step_records(context: RunContext) -> list[dict[str, Any]]:
    return [record for record in map(build_step_record, context.trackers.values()) if record is not None]


def _current_iteration_state(context: RunContext) -> dict[str, Any]:
    """The current iteration's state once it has finished (absent while it runs)."""
    for record in context.iterations:
        if record["iteration"] == context.iteration:
            return {"iterationState": record["state"], "iterationMessage": record["message"]}
    return {}


def build_report(ref: RunRef, context: RunContext, client: KubeApi,
                 disruptions: list[DisruptionResult] | None = None) -> dict[str, Any]:
    steps = build_step_records(context)
    spec = context.spec
    return {"run": {"namespace": ref.namespace, "name": ref.name, "uid": ref.uid},
            "spec": spec.model_dump(mode="json", exclude_none=True),
            "environment": context.environment.model_dump(mode="json"),
            "preflight": [finding.model_dump(mode="json") for finding in context.findings],
            "client": {"qps": spec.client.qps, "burst": spec.client.burst, "maxInFlight": spec.client.maxInFlight,
                       "throttledSeconds": round(client.limiter.throttled_seconds, 3)},
            "manifests": representative_manifests(context),
            "steps": steps,
            "iteration": context.iteration,
            **_current_iteration_state(context),
            # Finished iterations before the current one, each with its per-step records (spec.repeat).
            "iterations": [record for record in context.iterations if record["iteration"] < context.iteration],
            # Attempts an operator restart interrupted: partial aggregates as last written, never a measurement.
            "interruptedAttempts": context.interrupted,
            "disruptions": [d.model_dump(mode="json", exclude_none=True) for d in disruptions or []]}


async def store_report(ref: RunRef, context: RunContext, client: KubeApi,
                       disruptions: list[DisruptionResult] | None = None) -> str | None:
    """Save the report; the ConfigMap's name, or None when it could not be stored (logged, the run goes on)."""
    configmaps = build_report_configmaps(context.names.report, ref.name, ref.uid,
                                         build_report(ref, context, client, disruptions))
    try:
        await save_report(client, ref.namespace, configmaps, ref.uid)
    except (ApiError, ReportNameTaken) as error:
        log.warning("could not store the report: %s", error)
        return None
    return context.names.report
