"""When one object of a step has reached its terminal state: pure functions over what the run observed.

A judge is ``(object name, submitted at) -> Verdict | None``: DONE, a failure with its reason, or None (not yet).
Judges read only ``Observed`` (kept current by the watches), so an object's verdict is decided on the watch event
that made it terminal and timed on that event's arrival. Which judge a step uses, and which Warning reasons end
its objects as failed, is declared in the step catalog.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from csibench.api.validation import parse_quantity
from csibench.engine.observed import (
    CLAIM,
    GROUP_SNAPSHOT,
    POD,
    SNAPSHOT,
    ClaimState,
    GroupSnapshotState,
    Key,
    Observed,
    SnapshotState,
)
from csibench.engine.retries import is_transient


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""
    message: str = ""


DONE = Verdict(True)
Judge = Callable[[str, float], Verdict | None]


# The scheduler's refusal of a pod because the driver's per-node volume limit (CSINode allocatable.count) is reached
# on every node the pod may use (the others it names are only those its node affinity or selector excludes): no
# slot frees itself, so a step that lists this key in its terminal warnings fails the pod with the scheduler's
# words instead of waiting for the timeout. A refusal that also names another reason (CPU, a taint) may resolve.
AT_VOLUME_LIMIT = "FailedScheduling: exceed max volume count"
_AT_LIMIT = "node(s) exceed max volume count"
# What the scheduler says of the nodes a pinned pod's required node affinity excludes (older, then current wording).
_EXCLUDED = frozenset({"node(s) didn't match Pod's node affinity/selector",
                       "node(s) didn't satisfy plugin(s) [NodeAffinity]",
                       "node(s) didn't satisfy plugin [NodeAffinity]"})


def at_volume_limit(message: str) -> bool:
    """'0/3 nodes are available: 1 node(s) exceed max volume count, 2 node(s) didn't satisfy plugin(s)
    [NodeAffinity]. preemption: ...' -> True; with 'Insufficient cpu' among the reasons -> False (pure)."""
    found = message.split("nodes are available: ", 1)
    if len(found) < 2:
        return False
    reasons = {re.sub(r"^\d+ ", "", item.strip()) for item in found[1].split(". ", 1)[0].rstrip(".").split(", ")}
    return _AT_LIMIT in reasons and reasons <= {_AT_LIMIT, *_EXCLUDED}


def _terminal_key(reason: str, message: str) -> str:
    return AT_VOLUME_LIMIT if reason == "FailedScheduling" and at_volume_limit(message) else reason


def _warning_verdict(observed: Observed, terminal: frozenset[str], key: Key, submitted: float) -> Verdict | None:
    """A Warning event that ends the object's step (e.g. ProvisioningFailed), if one came after its submission.
    Other warnings (e.g. FailedScheduling for want of CPU, a Multi-Attach error, a CSI call that timed out) may
    resolve themselves and are only quoted if the object then times out."""
    warning = observed.warnings.get(key)
    if not warning or warning.at < submitted:
        return None
    if is_transient(warning.message):  # retried by Kubernetes: counted; fails only past spec.failAfterWarnings
        limit, seen = observed.fail_after, observed.retried_count(key, submitted)
        if limit is not None and seen >= limit and _terminal_key(warning.reason, warning.message) in terminal:
            return Verdict(False, warning.reason, f"{seen} retried Warnings "
                           f"(spec.failAfterWarnings: {limit}); the last: {warning.message}")
        return None
    if _terminal_key(warning.reason, warning.message) in terminal:
        return Verdict(False, warning.reason, warning.message)
    return None


def _ready_with(observed: Observed, terminal: frozenset[str], kind: str, lookup: Callable[[str], Any],
                ready: Callable[[Any], bool], failure: Callable[[Any], Verdict | None],
                complete: Callable[[str], bool] = lambda name: True) -> Judge:
    """Done when the object exists and is ready (and ``complete`` says the same of what it made, by its name);
    failed when its status says so, a terminal Warning came, or it was deleted after its submission (by someone
    else: the run deletes nothing of a step still running)."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = lookup(name)
        if state is not None and state.exists and ready(state) and complete(name):
            return DONE
        if state is not None and not state.exists:
            if state.gone_at is not None and state.gone_at >= submitted:
                return Verdict(False, "Deleted", f"the {kind} was deleted before it was ready")
            return None  # a namesake deleted before this submission (a restore's): its status is not this object's
        failed = failure(state) if state is not None else None
        return failed or _warning_verdict(observed, terminal, (kind, name), submitted)
    return judge


def claim_bound(observed: Observed, terminal: frozenset[str]) -> Judge:
    return _ready_with(observed, terminal, CLAIM, observed.claims.get, lambda claim: claim.phase == "Bound",
                       lambda claim: Verdict(False, "ClaimLost", "the claim's volume was lost")
                       if claim.phase == "Lost" else None)


# allocatedResourceStatuses that end an expansion (RecoverVolumeExpansionFailure): the storage or the node said the
# new size cannot be had; the others (ControllerResizeInProgress, NodeResizePending, ...) are on the way.
RESIZE_INFEASIBLE = frozenset({"ControllerResizeInfeasible", "NodeResizeInfeasible"})
# Where the controller's half of an expansion has ended and the node's begins (the resizer's marks).
NODE_RESIZE_PENDING = frozenset({"NodeResizePending", "NodeResizeInProgress"})
# Conditions that say a resize is still under way (the kubelet clears them when it writes the new capacity).
RESIZING = frozenset({"Resizing", "FileSystemResizePending"})


def _at_least(capacity: str | None, request: str | None) -> bool:
    if not capacity or not request:
        return False
    try:
        return parse_quantity(capacity) >= parse_quantity(request)
    except ValueError:
        return False


def _node_resize_pending(claim: ClaimState) -> bool:
    return "FileSystemResizePending" in claim.resizing or claim.resize_status in NODE_RESIZE_PENDING


def _grown(claim: ClaimState) -> bool:
    """The capacity says the size the run asked for and no resize condition is left. (allocatedResourceStatuses
    is not waited for: external-resizer v2.3.0 always sets it, and a kubelet without RecoverVolumeExpansionFailure
    never clears it; a current kubelet clears it in the same write as the capacity.)"""
    return claim.expand_to is not None and not RESIZING & set(claim.resizing) \
        and _at_least(claim.capacity, claim.expand_to)


def _infeasible(claim: ClaimState) -> Verdict | None:
    if claim.resize_status in RESIZE_INFEASIBLE:
        return Verdict(False, claim.resize_status or "", f"allocatedResourceStatuses says {claim.resize_status}")
    return None


def claim_expanded(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Online (pods hold the claims): done when an event after the run's PATCH (it carries the PATCH's annotation,
    which holds the size asked for) says the capacity reached that size and no resize condition is left; failed
    on an infeasible resize, a terminal Warning (VolumeResizeFailed, FileSystemResizeFailed) or the claim's
    deletion."""
    return _ready_with(observed, terminal, CLAIM, observed.claims.get, _grown, _infeasible)


def claim_expanded_offline(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Offline (no pod holds the claims): as online, or done once the controller's half is over and the node's
    waits for the next mount (FileSystemResizePending): only a mount finishes it, and none comes in this step."""
    def ready(claim: ClaimState) -> bool:
        return _grown(claim) or (claim.expand_to is not None and _node_resize_pending(claim))
    return _ready_with(observed, terminal, CLAIM, observed.claims.get, ready, _infeasible)


def claim_node_resize_pending(observed: Observed) -> Callable[[str], bool]:
    """The controller's half of a claim's expansion is over and the node's has begun: the resizer marked the claim
    FileSystemResizePending (or its allocated resource status NodeResize*). A volume without a node half (a raw
    block volume, a driver that needs none) never passes here: its controller half is all of it."""
    def pending(name: str) -> bool:
        claim = observed.claims.get(name)
        return claim is not None and claim.exists and claim.expand_to is not None and _node_resize_pending(claim)
    return pending


def claim_seen(observed: Observed, terminal: frozenset[str]) -> Judge:
    """WaitForFirstConsumer: provisioning happens at publish; createVolume ends when the API stored the claim."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.claims.get(name)
        return DONE if state is not None and state.exists else None
    return judge


def pod_ready(observed: Observed, terminal: frozenset[str]) -> Judge:
    return _ready_with(observed, terminal, POD, observed.pods.get, lambda pod: pod.ready,
                       lambda pod: Verdict(False, "PodFailed", "the pod failed") if pod.phase == "Failed" else None)


def pod_finished(observed: Observed, terminal: frozenset[str]) -> Judge:
    """A run-to-completion pod (the data path's): done when Succeeded, failed when Failed or a terminal Warning
    (a mount failure, a container the kubelet refused) came."""
    return _ready_with(observed, terminal, POD, observed.pods.get, lambda pod: pod.phase == "Succeeded",
                       lambda pod: Verdict(False, "PodFailed", "the pod failed") if pod.phase == "Failed" else None)


def pod_started(observed: Observed) -> Callable[[str], bool]:
    """A boundary: the pod's containers run (its init containers, if any, are done)."""
    def started(name: str) -> bool:
        pod = observed.pods.get(name)
        return pod is not None and pod.phase == "Running"
    return started


def pod_gone_and_detached(observed: Observed, terminal: frozenset[str]) -> Judge:
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.pods.get(name)
        if state is None:
            return DONE
        if state.exists:
            return None
        if any(observed.volume_attached(observed.volume_of(claim), state.node) for claim in state.claims):
            return None
        return DONE
    return judge


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
        return _warning_verdict(observed, terminal, (POD, name), submitted)
    return judge


def pod_attached(observed: Observed) -> Callable[[str], bool]:
    """The pod is on a node and every volume it mounts has a VolumeAttachment to that node that says attached."""
    def attached(name: str) -> bool:
        state = observed.pods.get(name)
        if state is None or not state.exists or not state.node:
            return False
        return all(observed.volume_attach_done(observed.volume_of(claim), state.node) for claim in state.claims)
    return attached


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


def group_create_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    """Where the parts of taking a group snapshot end: the snapshot-controller created its group content; the
    content carries the storage's handle (csi-snapshotter's CreateVolumeGroupSnapshot returned and its answer was
    written); the last part (the controller creating and binding a VolumeSnapshot and content per member, and the
    group and every member ready) ends when the group is done."""
    def content(name: str) -> str | None:  # the group names its content as soon as the controller made it
        state = observed.groups.get(name)
        return state.content if state is not None else None

    def taken(name: str) -> bool:
        made = content(name)
        return made is not None and observed.group_content_taken(made)
    return [lambda name: content(name) is not None, taken]


def group_delete_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    """Where the parts of deleting a group snapshot end: its group content gone (the controller asked for its
    deletion, csi-snapshotter's DeleteVolumeGroupSnapshot returned and it let the content go); the group gone (the
    controller removed its finalizer); the last part ends when every member snapshot and member content is gone."""
    def content_gone(name: str) -> bool:
        state = observed.groups.get(name)
        bound = state.content if state is not None else None
        return not observed.contents_of_group.get(name) and (bound is None or bound not in observed.group_contents)

    def group_gone(name: str) -> bool:
        state = observed.groups.get(name)
        return state is None or not state.exists
    return [content_gone, group_gone]


def move_nodes(observed: Observed) -> Callable[[str], str | None]:
    """What the report keeps of each moved pod: the node it left and the node its successor runs on,
    'sim-node-0 → sim-node-2'."""
    before = _placed(observed)

    def said(name: str) -> str | None:
        state, old_node = observed.pods.get(name), before.get(name, ("", None))[1]
        return f"{old_node} → {state.node}" if state is not None and old_node and state.node else None
    return said


def snapshot_ready(observed: Observed, terminal: frozenset[str]) -> Judge:
    return _ready_with(observed, terminal, SNAPSHOT, observed.snapshots.get, lambda snapshot: snapshot.ready,
                       lambda snapshot: Verdict(False, "SnapshotError", snapshot.error)
                       if snapshot.error and not is_transient(snapshot.error) else None)


def snapshot_settled(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Restore: a snapshot is deleted only once its creation is over: ready, failed for good (not an error
    csi-snapshotter retries) or gone. Deleted while the driver is still taking it, the snapshot-controller may
    create a content nothing would delete; and deleted while csi-snapshotter still marks its content as being
    created (the bound finalizer already on it), its deletion waited for the sidecar's next resync, minutes (seen
    on the local cluster: two snapshots of twenty stuck for four minutes). A snapshot that is never ready (a
    driver that uploads for longer than the step's timeout) is deleted at that timeout all the same."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.snapshots.get(name)
        settled = (state is None or not state.exists or state.ready
                   or (state.error is not None and not is_transient(state.error)))
        return DONE if settled else None
    return judge


def group_snapshot_ready(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the group is ready to use and so is each of its member snapshots, all of them there; failed on the
    group's status error (not a call still in progress), a terminal Warning, or its deletion."""
    def members_ready(name: str) -> bool:
        group = observed.groups[name]
        members = [observed.members[m] for m in observed.group_members.get(name, ())
                   if observed.members[m].exists and observed.member_owner.get(m) == group.uid]
        return len(members) >= max(1, group.members_expected) and all(member.ready for member in members)
    return _ready_with(observed, terminal, GROUP_SNAPSHOT, observed.groups.get, lambda group: group.ready,
                       lambda group: Verdict(False, "GroupSnapshotError", group.error)
                       if group.error and not is_transient(group.error) else None, complete=members_ready)


def group_snapshot_settled(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Restore and cleanup: a group snapshot may be deleted once it is ready to use (its members made), failed, or
    gone. Deleted while its CreateVolumeGroupSnapshot call is in flight, external-snapshotter v8.7.0 removes the
    group, its content and its members from the API without ever deleting the group on the storage (seen on the
    local cluster: the array kept it), so nothing could reclaim it afterwards."""
    def judge(name: str, submitted: float) -> Verdict | None:
        return DONE if group_settled(observed.groups.get(name)) else None
    return judge


def group_settled(state: GroupSnapshotState | None) -> bool:
    return state is None or not state.exists or state.ready or (state.error is not None and
                                                                 not is_transient(state.error))


def group_snapshot_gone(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the group snapshot, any group content pointing at it, each member snapshot owned by a group of its
    name (a namesake's too: the controller would take them for the group's) and each member's content are gone."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.groups.get(name)
        if (state is not None and state.exists) or observed.contents_of_group.get(name):
            return None
        for member in observed.group_members.get(name, ()):
            if observed.members[member].exists or member in observed.member_contents:
                return None
        return DONE
    return judge


def _gone_with(lookup: Callable[[str], ClaimState | SnapshotState | None],
               dependent_present: Callable[[Any], bool]) -> Judge:
    """Done when the object is gone and so is what depended on it (its PV, its snapshot content)."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = lookup(name)
        if state is None:
            return DONE
        return None if state.exists or dependent_present(state) else DONE
    return judge


def claim_and_volume_gone(observed: Observed, terminal: frozenset[str]) -> Judge:
    return _gone_with(observed.claims.get, lambda claim: bool(claim.volume and claim.volume in observed.pv_claim))


def snapshot_and_content_gone(observed: Observed, terminal: frozenset[str]) -> Judge:
    return _gone_with(observed.snapshots.get,
                      lambda snapshot: bool(snapshot.content and snapshot.content in observed.contents))
