"""The full report of a run, built from its trackers when the steps are over and stored beside the run.

Status keeps aggregates; the report keeps everything a later reader needs to trust or re-analyse the numbers: the
spec, the cluster facts (with the CSI machinery found), every preflight finding, the client limits and time spent
throttled, the manifests as submitted, and per step its aggregates plus per-object submit offsets, latencies and
results (see ``report_store``).
"""

from __future__ import annotations

import logging
from typing import Any

from csibench.engine.context import RunContext, RunRef
from csibench.engine.preconditions import representative_manifests
from csibench.engine.report_store import ReportNameTaken, build_report_configmaps, save_report
from csibench.kube.client import ApiError, KubeClient

log = logging.getLogger(__name__)


def build_report(ref: RunRef, context: RunContext, client: KubeClient) -> dict[str, Any]:
    steps = []
    for tracker in context.trackers.values():
        if tracker.started is None or tracker.anchor is None:
            continue
        first = tracker.objects[0] if tracker.objects else ""
        steps.append({"status": tracker.status().model_dump(mode="json", exclude_none=True),
                      "objectPrefix": first[:-5], "objectCount": len(tracker.objects),
                      "startWall": tracker.anchor.wall, **tracker.per_object()})
    spec = context.spec
    return {"run": {"namespace": ref.namespace, "name": ref.name, "uid": ref.uid},
            "spec": spec.model_dump(mode="json", exclude_none=True),
            "environment": context.environment.model_dump(mode="json"),
            "preflight": [finding.model_dump(mode="json") for finding in context.findings],
            "client": {"qps": spec.client.qps, "burst": spec.client.burst, "maxInFlight": spec.client.maxInFlight,
                       "throttledSeconds": round(client.limiter.throttled_seconds, 3)},
            "manifests": representative_manifests(context),
            "steps": steps,
            # Attempts an operator restart interrupted: partial aggregates as last written, never a measurement.
            "interruptedAttempts": context.interrupted}


async def store_report(ref: RunRef, context: RunContext, client: KubeClient) -> str | None:
    """Save the report; the ConfigMap's name, or None when it could not be stored (logged, the run goes on)."""
    configmaps = build_report_configmaps(context.names.report, ref.name, ref.uid, build_report(ref, context, client))
    try:
        await save_report(client, ref.namespace, configmaps, ref.uid)
    except (ApiError, ReportNameTaken) as error:
        log.warning("could not store the report: %s", error)
        return None
    return context.names.report
