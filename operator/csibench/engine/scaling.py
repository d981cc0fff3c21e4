"""ScaleDown: a controller workload taken to zero replicas and given back what it had, on every exit path.

The workload is not the run's, so what the run did to it is written on the workload itself before anything
changes: the annotation ``csibench.io/scaled-down-by`` holds the run's uid and ``csibench.io/replicas-before``
the replicas it had. Then the scale subresource goes to zero. Giving it back (``restore``) reads the workload,
and only when the annotation names this run (ownership proven on the object, whatever the spec or status say)
scales it to the recorded replicas and removes both annotations. ``restore`` is idempotent, so every path calls
it without knowing whether an earlier one did: the disruption after its ``seconds``, the disruption cancelled
(run failed or deleted: shielded), the run's end, the deleted run's cleanup, and an operator that starts again
while the run was Running (before it redoes or fails the step).

What cannot be undone: the pods the scale-down removed are gone; their replacements are new pods (new names and
uids, a StatefulSet's same names), as after any rollout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from csibench.api.models import DisruptionKind, DisruptionSpec, WorkloadKind, WorkloadTarget
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json

log = logging.getLogger(__name__)
SCALED_BY_ANNOTATION = "csibench.io/scaled-down-by"  # the uid of the run that scaled it down
REPLICAS_BEFORE_ANNOTATION = "csibench.io/replicas-before"  # what it had, restored from here
RESOURCES = {WorkloadKind.DEPLOYMENT: r.DEPLOYMENTS, WorkloadKind.STATEFUL_SET: r.STATEFUL_SETS}
MAX_RESTORED_REPLICAS = 10000


class ScaleError(Exception):
    """The workload cannot be scaled down (missing, scaled down by another run, no replicas, no plain selector)."""


def workload_path(target: WorkloadTarget, subresource: str | None = None) -> str:
    return RESOURCES[target.kind].path(target.namespace, target.name, subresource)


def pod_selector(workload: Json) -> str:
    """The workload's pod selector as a labelSelector query value (pure): its matchLabels, escaped by the API
    server's own rules (keys and values are labels). A selector with matchExpressions is refused: csibench
    watches the pods by labels only."""
    selector = (workload.get("spec") or {}).get("selector") or {}
    labels = selector.get("matchLabels") or {}
    if selector.get("matchExpressions") or not labels:
        raise ScaleError("its pod selector is not plain matchLabels: csibench cannot watch its pods")
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def whole_replicas(value: object) -> int | None:
    """A replica count another writer left in an annotation: a whole number in bounds, else None (pure)."""
    if not isinstance(value, str) or not value.isdigit() or len(value) > 5:
        return None
    replicas = int(value)
    return replicas if replicas <= MAX_RESTORED_REPLICAS else None


def marked_replicas(workload: Json, run_uid: str) -> int | None:
    """The replicas to give back, when the workload carries this run's mark (pure); None when it does not."""
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    if not run_uid or annotations.get(SCALED_BY_ANNOTATION) != run_uid:
        return None
    return whole_replicas(annotations.get(REPLICAS_BEFORE_ANNOTATION))


def build_mark(workload_uid: str, run_uid: str, replicas: int) -> Json:
    """The merge patch that says, on the workload, which run scaled it down and what it had (pure)."""
    return {"metadata": {"uid": workload_uid, "annotations": {SCALED_BY_ANNOTATION: run_uid,
                                                              REPLICAS_BEFORE_ANNOTATION: str(replicas)}}}


def build_unmark(workload_uid: str) -> Json:
    return {"metadata": {"uid": workload_uid, "annotations": {SCALED_BY_ANNOTATION: None,
                                                              REPLICAS_BEFORE_ANNOTATION: None}}}


def build_scale(replicas: int) -> Json:
    return {"spec": {"replicas": replicas}}


async def read_workload(client: KubeApi, target: WorkloadTarget) -> Json:
    workload = await client.get(workload_path(target))
    if workload is None:
        raise ScaleError(f"{target.describe()} does not exist")
    return workload


async def scale_down(client: KubeApi, target: WorkloadTarget, run_uid: str,
                     on_send: Callable[[float], None] | None = None) -> int:
    """Mark the workload as this run's to give back, then scale it to zero; the replicas it had. A workload
    this run marked already (an operator restarted while it was down, then restored it) is scaled down again
    from what the mark says."""
    workload = await read_workload(client, target)
    meta = workload.get("metadata") or {}
    holder = (meta.get("annotations") or {}).get(SCALED_BY_ANNOTATION)
    if holder and holder != run_uid:
        raise ScaleError(f"{target.describe()} is scaled down by another run (uid {holder}): left alone")
    replicas = marked_replicas(workload, run_uid)
    if replicas is None:
        raw = (workload.get("spec") or {}).get("replicas", 1)
        replicas = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
    if replicas <= 0:
        raise ScaleError(f"{target.describe()} has no replicas: there is nothing to scale down")
    await client.merge_patch(workload_path(target), build_mark(str(meta.get("uid", "")), run_uid, replicas))
    if await client.merge_patch(workload_path(target, "scale"), build_scale(0), on_send=on_send) is None:
        raise ScaleError(f"{target.describe()} disappeared while it was being scaled down")
    return replicas


async def restore(client: KubeApi, target: WorkloadTarget, run_uid: str,
                  on_send: Callable[[float], None] | None = None) -> int | None:
    """Give the workload back the replicas this run's mark records, then remove the mark; None when it carries
    no mark of this run (never scaled down by it, or already restored)."""
    workload = await client.get(workload_path(target))
    if workload is None:
        return None
    replicas = marked_replicas(workload, run_uid)
    if replicas is None:
        return None
    await client.merge_patch(workload_path(target, "scale"), build_scale(replicas), on_send=on_send)
    await client.merge_patch(workload_path(target), build_unmark(str(workload["metadata"].get("uid", ""))))
    log.info("%s given back %d replicas (scaled down by run %s)", target.describe(), replicas, run_uid)
    return replicas


async def restore_all(client: KubeApi, run_uid: str, disruptions: Iterable[DisruptionSpec]) -> list[str]:
    """Every workload the run's ScaleDowns name, given back what this run's mark on it records; what could not
    be restored, with why (the caller says so: status, an Event, a retry)."""
    problems = []
    for disruption in disruptions:
        if disruption.kind != DisruptionKind.SCALE_DOWN or disruption.workload is None:
            continue
        try:
            await restore(client, disruption.workload, run_uid)
        except ApiError as error:
            problems.append(f"{disruption.workload.describe()}: {error.message}")
    return problems
