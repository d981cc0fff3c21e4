"""When one object of a step has reached its terminal state: pure functions over what the run observed.

A judge is ``(object name, submitted at) -> Verdict | None``: DONE, a failure with its reason, or None (not yet).
Judges read only ``Observed`` (kept current by the watches), so an object's verdict is decided on the watch event
that made it terminal and timed on that event's arrival. Which judge a step uses, and which Warning reasons end
its objects as failed, is declared in its entry (``engine/steps/``). These are the judges and Warning reasons several
steps share; a judge one step alone uses lives in that step's module.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from csibench.engine.observed import (
    CLAIM,
    POD,
    ClaimState,
    GroupSnapshotState,
    Key,
    Observed,
    PodState,
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


# Warning reasons that end an object as failed, as several steps declare them (``StepSpec.terminal_warnings``).
PROVISIONING_FAILED = frozenset({"ProvisioningFailed"})
# A pod's volumes that would not attach or mount. A move's successor may meet the volume limit only for a moment
# (the target's own pods are leaving): not terminal there.
MOUNT_FAILED = frozenset({"FailedMount", "FailedAttachVolume", "FailedMapVolume", "FailedAttach"})
PUBLISH_FAILED = MOUNT_FAILED | {AT_VOLUME_LIMIT}
WORKLOAD_FAILED = frozenset({"FailedMount", "FailedAttachVolume", "Failed"})  # a run-to-completion pod's


def _terminal_key(reason: str, message: str) -> str:
    return AT_VOLUME_LIMIT if reason == "FailedScheduling" and at_volume_limit(message) else reason


def warning_verdict(observed: Observed, terminal: frozenset[str], key: Key, submitted: float) -> Verdict | None:
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


def ready_with(observed: Observed, terminal: frozenset[str], kind: str, lookup: Callable[[str], Any],
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
        return failed or warning_verdict(observed, terminal, (kind, name), submitted)
    return judge


def claim_bound(observed: Observed, terminal: frozenset[str]) -> Judge:
    return ready_with(observed, terminal, CLAIM, observed.claims.get, lambda claim: claim.phase == "Bound",
                       lambda claim: Verdict(False, "ClaimLost", "the claim's volume was lost")
                       if claim.phase == "Lost" else None)


def claim_seen(observed: Observed, terminal: frozenset[str]) -> Judge:
    """WaitForFirstConsumer: provisioning happens at publish; createVolume ends when the API stored the claim."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.claims.get(name)
        return DONE if state is not None and state.exists else None
    return judge


def pod_ready(observed: Observed, terminal: frozenset[str]) -> Judge:
    return ready_with(observed, terminal, POD, observed.pods.get, lambda pod: pod.ready,
                       lambda pod: Verdict(False, "PodFailed", "the pod failed") if pod.phase == "Failed" else None)


def pod_finished(observed: Observed, terminal: frozenset[str]) -> Judge:
    """A run-to-completion pod (the data path's): done when Succeeded, failed when Failed or a terminal Warning
    (a mount failure, a container the kubelet refused) came."""
    return ready_with(observed, terminal, POD, observed.pods.get, lambda pod: pod.phase == "Succeeded",
                       lambda pod: Verdict(False, "PodFailed", "the pod failed") if pod.phase == "Failed" else None)


def pod_gone_and_detached(observed: Observed, terminal: frozenset[str]) -> Judge:
    return pod_gone_and_released(observed, lambda state: any(
        observed.volume_attached(observed.volume_of(claim), state.node) for claim in state.claims))


def pod_gone_and_released(observed: Observed, holding: Callable[[PodState], bool],
                          unseen_holding: Callable[[str], bool] = lambda name: False) -> Judge:
    """Done when the pod is gone and no longer ``holding`` what it had (its volumes attached, its claims);
    ``unseen_holding`` says the same of a pod the watches never saw, by its name."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.pods.get(name)
        if state is None:
            return None if unseen_holding(name) else DONE
        return None if state.exists or holding(state) else DONE
    return judge


def group_settled(state: GroupSnapshotState | None) -> bool:
    return state is None or not state.exists or state.ready or (state.error is not None and
                                                                 not is_transient(state.error))


def gone_with(lookup: Callable[[str], ClaimState | SnapshotState | None],
               dependent_present: Callable[[Any], bool]) -> Judge:
    """Done when the object is gone and so is what depended on it (its PV, its snapshot content)."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = lookup(name)
        if state is None:
            return DONE
        return None if state.exists or dependent_present(state) else DONE
    return judge


def claim_and_volume_gone(observed: Observed, terminal: frozenset[str]) -> Judge:
    return gone_with(observed.claims.get, lambda claim: bool(claim.volume and claim.volume in observed.pv_claim))
