"""moveVolume (``spec.move``): each moving publish pod deleted and made again pinned to another schedulable node
(round-robin, never its own), done when Ready there; its latency is split at watch events into pod gone, detach,
attach and start. The judges and boundaries are made when the step starts, so they tell a pod from its successor
(same name, another uid). It needs two nodes that can run the publish pods; nodes are never cordoned or drained.
"""

from __future__ import annotations

from collections.abc import Callable

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import Move
from csibench.engine.judges import DONE, Judge, Verdict
from csibench.engine.naming import Names, pod_count, volumes_of_pod
from csibench.engine.observed import POD, Observed
from csibench.engine.skips import skip_if_prerequisite_failed, skip_never_seen
from csibench.engine.step import Manifest, NodesNeeded, Phases, StepContext, StepSpec
from csibench.kube import resources as r


def _moved_pod(context: StepContext, index: int, origin: str | None) -> Manifest:
    """Pod i made again on another node: round-robin over the schedulable nodes other than the one it was on
    (never that one), pinned there; those of its volumes' zone when they have one and it has such a node (a zonal
    disk cannot follow its pod into another zone)."""
    others = [node for node in context.nodes if node != origin]
    assert others, "moveVolume runs only with two schedulable nodes (checked before the run)"
    zone = context.observed.zone_of(POD, context.names.pod(index))
    others = [node for node in others if context.node_zones.get(node) == zone] or others if zone else others
    spec = context.spec
    claims = [context.names.volume(i) for i in volumes_of_pod(index, spec.volumes, spec.pvcsPerPod)]
    return manifests.build_pod(context.names.pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block", node=others[index % len(others)])


def _moving_pods(spec: BenchmarkRunSpec) -> int:
    return spec.move.pods(pod_count(spec.volumes, spec.pvcsPerPod)) if spec.move is not None else 0


def skip_pods_not_running(step: StepSpec, context: StepContext) -> set[str]:
    """A move acts on publish pods that are Ready where the run saw them: one whose publish failed (or that the
    run never saw) has nothing to move."""
    return skip_if_prerequisite_failed(step, context) | skip_never_seen(step, context) | {
        name for name in step.objects(context.spec, context.names)
        if (pod := context.observed.pods.get(name)) is None or not pod.exists or not pod.ready or not pod.node}


# -- moveVolume: a pod made again on another node, its volumes following ------------------------------------------
def _placed(observed: Observed) -> dict[str, tuple[str, str | None]]:
    """Where the run's pods are as a move starts: name -> (uid, node). Judges and boundaries of a move are made
    when the step starts, so they tell the pod before the move from its successor (same name, another uid)."""
    return {name: (state.uid, state.node) for name, state in observed.pods.items() if state.exists}


def pod_moved(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the pod's successor (same name, another uid than when the step started) is Ready on another
    node; failed when it failed, was deleted, came up on the same node, or a terminal Warning came for it (a
    Multi-Attach error is not terminal: the attach/detach controller retries until the old node lets go)."""
    before = _placed(observed)

    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.pods.get(name)
        old_uid, old_node = before.get(name, ("", None))
        if state is None or state.uid == old_uid:
            return None  # still the pod that moves (or not yet seen again)
        if not state.exists:
            return Verdict(False, "Deleted", "the moved pod was deleted before it was ready") \
                if state.gone_at is not None and state.gone_at >= submitted else None
        if state.ready:
            if state.node == old_node:
                return Verdict(False, "SameNode", f"the moved pod came up on its old node {old_node}")
            return DONE
        if state.phase == "Failed":
            return Verdict(False, "PodFailed", "the moved pod failed")
        return judges.warning_verdict(observed, terminal, (POD, name), submitted)
    return judge


def move_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    """Where the parts of a move end, per pod: its predecessor gone from the API (deleted with a grace period, the
    kubelet stopped it and unmounted its volumes first), its volumes' VolumeAttachments to the old node gone
    (detached), every volume's VolumeAttachment to the new node attached; the last part (stage, publish, container
    start) ends when the successor is Ready."""
    before = _placed(observed)

    def gone(name: str) -> bool:
        state = observed.pods.get(name)
        return state is None or not state.exists or state.uid != before.get(name, ("", None))[0]

    def volumes(name: str) -> list[str | None]:
        state = observed.pods.get(name)
        return [observed.volume_of(claim) for claim in state.claims] if state is not None else []

    def detached(name: str) -> bool:
        old_node, pvs = before.get(name, ("", None))[1], volumes(name)
        # A volume whose PV the run does not know is never taken for detached.
        return gone(name) and bool(pvs) and all(pv is not None and not observed.volume_attached(pv, old_node)
                                                for pv in pvs)

    def attached(name: str) -> bool:
        state, (old_uid, old_node) = observed.pods.get(name), before.get(name, ("", None))
        if state is None or not state.exists or state.uid == old_uid or state.node in (None, old_node):
            return False
        return all(observed.volume_attach_done(pv, state.node) for pv in volumes(name))
    return [gone, detached, attached]


def move_nodes(observed: Observed) -> Callable[[str], str | None]:
    """What the report keeps of each moved pod: the node it left and the node its successor runs on,
    'sim-node-0 → sim-node-2'."""
    before = _placed(observed)

    def said(name: str) -> str | None:
        state, old_node = observed.pods.get(name), before.get(name, ("", None))[1]
        return f"{old_node} → {state.node}" if state is not None and old_node and state.node else None
    return said


ENTRIES = (
    StepSpec(facts=facts_of(StepName.MOVE_VOLUME), kind=POD, resource=r.PODS, action=Move(_moved_pod),
             object_name=Names.pod, count=_moving_pods, judge=pod_moved, skip=skip_pods_not_running,
             terminal_warnings=judges.MOUNT_FAILED, gone=judges.pod_gone_and_detached, recreated_by=StepName.PUBLISH,
             phases=Phases(("gone", "detach", "attach", "ready"), move_boundaries), object_note=move_nodes,
             places_pods=lambda spec: NodesNeeded(2, "moveVolume moves each pod to another node")),
)
