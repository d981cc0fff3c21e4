"""ScaleDown: a controller workload taken to zero replicas and given back what it had, on every exit path.

The workload is not the run's, so what the run did to it is written on the workload itself, in the same request
that scales it (one merge patch, the workload's uid a precondition: never half done): the annotation
``csibench.io/scaled-down-by`` holds the run's uid, ``csibench.io/replicas-before`` the replicas it had, and
``spec.replicas`` goes to zero. Giving it back (``restore``) reads the workload, and only when the annotation
names this run (ownership proven on the object, whatever the spec or status say) removes both annotations and,
in the same patch, sets the recorded replicas, unless someone changed them since (then it only removes the mark:
the run gives back what it took, never what another writer set). ``restore`` is idempotent, so every path calls
it without knowing whether an earlier one did: the disruption after its ``seconds``, the disruption cancelled
(run failed or deleted: shielded), the run's end, the deleted run's cleanup, and an operator that starts again
(before it redoes or fails a Running run's step, and for a finished run whose give back had failed).

The scale subresource is not used: a Scale request carries no annotations, so the admission policy of
deploy/components/disruptions could not tie it to a run's mark; a patch of the workload can be (replicas change
only together with the mark).

What cannot be undone: the pods the scale-down removed are gone; their replacements are new pods (new names and
uids, a StatefulSet's same names), as after any rollout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from csibench.api.models import WorkloadKind, WorkloadTarget
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import Json

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


def build_scale_down(workload_uid: str, run_uid: str, replicas: int) -> Json:
    """The one merge patch that marks the workload as this run's (its uid, the replicas it had) and scales it to
    zero (pure)."""
    return {"metadata": {"uid": workload_uid, "annotations": {SCALED_BY_ANNOTATION: run_uid,
                                                              REPLICAS_BEFORE_ANNOTATION: str(replicas)}},
            "spec": {"replicas": 0}}


def build_give_back(workload_uid: str, replicas: int | None) -> Json:
    """The one merge patch that removes the mark and, unless ``replicas`` is None, sets them back (pure)."""
    patch: Json = {"metadata": {"uid": workload_uid, "annotations": {SCALED_BY_ANNOTATION: None,
                                                                      REPLICAS_BEFORE_ANNOTATION: None}}}
    if replicas is not None:
        patch["spec"] = {"replicas": replicas}
    return patch


def replicas_of(workload: Json) -> int:
    raw = (workload.get("spec") or {}).get("replicas", 1)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0


async def read_workload(client: KubeApi, target: WorkloadTarget) -> Json:
    workload = await client.get(workload_path(target))
    if workload is None:
        raise ScaleError(f"{target.describe()} does not exist")
    return workload


async def scale_down(client: KubeApi, target: WorkloadTarget, run_uid: str,
                     on_send: Callable[[float], None] | None = None) -> int:
    """Mark the workload as this run's to give back and scale it to zero, in one patch; the replicas it had. A
    workload this run marked already (an operator restarted while it was down, and nothing gave it back yet) is
    scaled down again from what the mark says."""
    workload = await read_workload(client, target)
    meta = workload.get("metadata") or {}
    holder = (meta.get("annotations") or {}).get(SCALED_BY_ANNOTATION)
    if holder and holder != run_uid:
        raise ScaleError(f"{target.describe()} is scaled down by another run (uid {holder}): left alone")
    replicas = marked_replicas(workload, run_uid)
    if replicas is None:
        replicas = replicas_of(workload)
    if replicas <= 0:
        raise ScaleError(f"{target.describe()} has no replicas: there is nothing to scale down")
    if await client.merge_patch(workload_path(target), build_scale_down(str(meta.get("uid", "")), run_uid, replicas),
                                on_send=on_send) is None:
        raise ScaleError(f"{target.describe()} disappeared while it was being scaled down")
    return replicas


async def restore(client: KubeApi, target: WorkloadTarget, run_uid: str,
                  on_send: Callable[[float], None] | None = None) -> int | None:
    """Remove this run's mark from the workload and give it back the replicas the mark records (only if it is
    still at zero: replicas someone set since are theirs); the replicas given back, 0 when only the mark went, None
    when it carries no mark of this run (never scaled down by it, or already given back)."""
    workload = await client.get(workload_path(target))
    if workload is None:
        return None
    replicas = marked_replicas(workload, run_uid)
    if replicas is None:
        return None
    back = replicas if replicas_of(workload) == 0 else None
    await client.merge_patch(workload_path(target), build_give_back(str(workload["metadata"].get("uid", "")), back),
                             on_send=on_send)
    if back is None:
        log.warning("%s: its replicas were changed while it was scaled down (to %d): only the mark of run %s "
                    "removed", target.describe(), replicas_of(workload), run_uid)
        return 0
    log.info("%s given back %d replicas (scaled down by run %s)", target.describe(), replicas, run_uid)
    return replicas
