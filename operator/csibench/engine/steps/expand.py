"""expandVolume (``spec.expand``): every claim's request raised at once by a PATCH that also names the size asked
for (an annotation: an event that carries it is one after the PATCH), done when the claim's capacity says that
size and no resize is pending. Online while publish's pods mount the volumes, else offline (a claim is done with
the resizer: its node half waits for a mount). Its latency is split where the controller's half ends and the
node's begins. The class must allow expansion, checked before the run.
"""

from __future__ import annotations

from collections.abc import Callable

from csibench.api.models import ConditionReason, StepName
from csibench.api.steps import WFFC, facts_of
from csibench.api.validation import parse_quantity
from csibench.engine import judges
from csibench.engine.actions import Patch
from csibench.engine.checks import PlanCheck
from csibench.engine.errors import PlanError
from csibench.engine.judges import Judge, Verdict
from csibench.engine.kinds.claim import EXPAND_TO
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, ClaimState, Observed
from csibench.engine.skips import skip_claims_not_bound
from csibench.engine.step import Manifest, Phases, StepContext, StepSpec
from csibench.kube import resources as r

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
    return judges.ready_with(observed, terminal, CLAIM, observed.claims.get, _grown, _infeasible)


def claim_expanded_offline(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Offline (no pod holds the claims): as online, or done once the controller's half is over and the node's
    waits for the next mount (FileSystemResizePending): only a mount finishes it, and none comes in this step."""
    def ready(claim: ClaimState) -> bool:
        return _grown(claim) or (claim.expand_to is not None and _node_resize_pending(claim))
    return judges.ready_with(observed, terminal, CLAIM, observed.claims.get, ready, _infeasible)


def claim_node_resize_pending(observed: Observed) -> Callable[[str], bool]:
    """The controller's half of a claim's expansion is over and the node's has begun: the resizer marked the claim
    FileSystemResizePending (or its allocated resource status NodeResize*). A volume without a node half (a raw
    block volume, a driver that needs none) never passes here: its controller half is all of it."""
    def pending(name: str) -> bool:
        claim = observed.claims.get(name)
        return claim is not None and claim.exists and claim.expand_to is not None and _node_resize_pending(claim)
    return pending


def build_expansion(size: str) -> Manifest:
    """The merge patch that raises a claim's request to ``size`` and says so in the run's annotation."""
    return {"metadata": {"annotations": {EXPAND_TO: size}}, "spec": {"resources": {"requests": {"storage": size}}}}


def _expansion(context: StepContext, index: int) -> Manifest:
    """Claim i's request raised to the new size, with the size asked for as an annotation (an event that carries
    it is one after this PATCH: the judge reads nothing older)."""
    return build_expansion(context.spec.volume_size)


def _expansion_note(context: StepContext) -> str:
    if StepName.PUBLISH in context.trackers:
        return "online: the publish step's pods mount the volumes while they grow"
    return ("offline: no pod mounts the volumes while they grow; a claim is done when the resizer is (the node's "
            "half of a filesystem volume waits for its next mount and is not timed here)")


def _expansion_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    return [claim_node_resize_pending(observed)]


async def check_expansion(check: PlanCheck) -> None:
    """An expansion the class refuses fails here, not as a batch of claims the API server refuses one by one."""
    spec, storage_class, binding_mode, steps = check.spec, check.storage_class, check.binding_mode, check.steps
    if storage_class.get("allowVolumeExpansion") is not True:
        raise PlanError(ConditionReason.EXPANSION_NOT_ALLOWED, f"StorageClass {spec.storageClassName!r} does not set "
                        "allowVolumeExpansion: true, so the API server refuses to raise a claim's request; expand "
                        "needs a class that allows it")
    if binding_mode == WFFC and StepName.PUBLISH not in steps:
        raise PlanError(ConditionReason.INVALID_STEPS, f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes "
                        "are only provisioned when a pod uses them, so expandVolume needs the publish step")
ENTRIES = (
    StepSpec(facts=facts_of(StepName.EXPAND_VOLUME), kind=CLAIM, resource=r.PVCS, action=Patch(_expansion),
             object_name=Names.volume, count=lambda spec: spec.volumes, judge=claim_expanded,
             judge_unheld=claim_expanded_offline, skip=skip_claims_not_bound,
             terminal_warnings=frozenset({"VolumeResizeFailed", "FileSystemResizeFailed"}),
             gone=judges.claim_and_volume_gone, recreated_by=StepName.CREATE_VOLUME, holders=StepName.PUBLISH,
             note=_expansion_note,
             phases=Phases(("controller", "node"), _expansion_boundaries), check=check_expansion),
)
