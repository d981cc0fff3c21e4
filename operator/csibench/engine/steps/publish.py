"""publish and unpublish: pods mounting the run's claims (``pvcsPerPod`` each), made at once and timed to Ready
(attach, stage, publish, start), then deleted and timed to gone with their volumes detached.

Under ``pod.placement: Pack`` the pods are pinned, in order, to the first node with room under the driver's
per-node volume limit (the room each node had when the run started), so the run places pods itself and needs a
node that can run them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from csibench.api.models import BenchmarkRunSpec, DisruptionKind, Placement, StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import CREATE, DELETE
from csibench.engine.naming import Names, pod_count, volumes_of_pod
from csibench.engine.observed import POD
from csibench.engine.skips import skip_missing_a_volume, skip_never_seen
from csibench.engine.step import Manifest, NodesNeeded, StepContext, StepSpec
from csibench.kube import resources as r


def packed_node(index: int, per_pod: int, nodes: Sequence[str], limits: Mapping[str, int | None]) -> str:
    """Pod ``index``'s node under Pack: nodes in order, each taking as many whole pods as its per-node volume limit
    allows (all of them without a limit); pods beyond every node's room go to the last node, where the scheduler
    refuses them with its reason (pure)."""
    first = 0
    for node in nodes:
        limit = limits.get(node)
        if limit is None:
            return node
        first += limit // per_pod
        if index < first:
            return node
    return nodes[-1]


def _pod(context: StepContext, index: int) -> Manifest:
    spec = context.spec
    claims = [context.names.volume(i) for i in volumes_of_pod(index, spec.volumes, spec.pvcsPerPod)]
    node = packed_node(index, spec.pvcsPerPod, context.nodes, context.node_limits) \
        if spec.pod.placement == Placement.PACK else None
    return manifests.build_pod(context.names.pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block", node=node)


def _publish_note(context: StepContext) -> str | None:
    if context.spec.pod.placement != Placement.PACK:
        return None
    limits = [f"{node} {'no limit' if context.node_limits.get(node) is None else context.node_limits[node]}"
              for node in context.nodes]
    return (f"Pack: pods pinned to the first node with room under its volume limit (room when the run started: "
            f"{', '.join(limits)})")


def skip_pods_missing_a_volume(step: StepSpec, context: StepContext) -> set[str]:
    """A pod mounts k volumes: it is skipped if any of them failed (on a WaitForFirstConsumer class, failing
    means the API refused the claim or never stored it: provisioning itself happens in this step)."""
    return skip_missing_a_volume(step, context, context.spec.pvcsPerPod)


def _pods(spec: BenchmarkRunSpec) -> int:
    return pod_count(spec.volumes, spec.pvcsPerPod)


def _placing(spec: BenchmarkRunSpec) -> NodesNeeded | None:
    """Pack pins pods to nodes; a DrainNode moves the pods of one node to another (one node is no failover)."""
    if any(disruption.kind == DisruptionKind.DRAIN_NODE for disruption in spec.disruptions):
        return NodesNeeded(2, "a DrainNode moves the run's pods off one node to another")
    return NodesNeeded(1) if spec.pod.placement == Placement.PACK else None


ENTRIES = (
    StepSpec(facts=facts_of(StepName.PUBLISH), kind=POD, resource=r.PODS, action=CREATE,
             object_name=Names.pod, count=_pods, judge=judges.pod_ready, skip=skip_pods_missing_a_volume,
             terminal_warnings=judges.PUBLISH_FAILED, manifest=_pod, report_key="pod",
             gone=judges.pod_gone_and_detached, provisions_on_wffc=True, note=_publish_note, places_pods=_placing),
    StepSpec(facts=facts_of(StepName.UNPUBLISH), kind=POD, resource=r.PODS, action=DELETE,
             object_name=Names.pod, count=_pods, judge=judges.pod_gone_and_detached, skip=skip_never_seen,
             gone=judges.pod_gone_and_detached, recreated_by=StepName.PUBLISH),
)
