"""The eight lifecycle steps: what each submits per object and when an object is done (DESIGN §3).

A step is data plus two functions: ``submit`` sends one object's request, ``evaluate`` decides from observed
state whether that object reached its terminal state (done or failed). The tracker in ``clock.py`` times all
steps alike. Creation steps skip objects whose prerequisite failed; deletion steps act on everything created.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from csibench.api.models import StepName
from csibench.engine.observed import CLAIM, POD, SNAPSHOT, Observed

# Warning reasons that end an object's step as failed (anything else, e.g. FailedScheduling, may resolve
# itself and is only quoted if the object then times out).
TERMINAL_WARNINGS: dict[StepName, frozenset[str]] = {
    StepName.CREATE_VOLUME: frozenset({"ProvisioningFailed"}),
    StepName.CLONE_FROM_SNAPSHOT: frozenset({"ProvisioningFailed"}),
    StepName.PUBLISH: frozenset({"FailedMount", "FailedAttachVolume", "FailedMapVolume", "FailedAttach"}),
    StepName.CREATE_SNAPSHOT: frozenset({"SnapshotCreationFailed", "SnapshotContentCreationFailed"}),
}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""
    message: str = ""


DONE = Verdict(True)


@dataclass(frozen=True)
class StepDefinition:
    name: StepName
    kind: str  # which of the run's object kinds the step's objects are (CLAIM, POD, SNAPSHOT)
    submit: Callable[[str], Awaitable[None]]  # send one object's request (create or delete)
    evaluate: Callable[[str, float], Verdict | None]  # (object, submitted at) -> terminal verdict or None
    note: str | None = None


def _warning_verdict(observed: Observed, step: StepName, key: tuple[str, str], submitted: float) -> Verdict | None:
    warning = observed.warnings.get(key)
    if warning and warning.at >= submitted and warning.reason in TERMINAL_WARNINGS.get(step, frozenset()):
        return Verdict(False, warning.reason, warning.message)
    return None


def claim_bound(observed: Observed, step: StepName) -> Callable[[str, float], Verdict | None]:
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.claims.get(name)
        if state is not None and state.exists and state.phase == "Bound":
            return DONE
        if state is not None and state.phase == "Lost":
            return Verdict(False, "ClaimLost", "the claim's volume was lost")
        return _warning_verdict(observed, step, (CLAIM, name), submitted)
    return evaluate


def claim_seen(observed: Observed) -> Callable[[str, float], Verdict | None]:
    """WaitForFirstConsumer: provisioning happens at publish; createVolume ends when the API stored the claim."""
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.claims.get(name)
        return DONE if state is not None and state.exists else None
    return evaluate


def pod_ready(observed: Observed) -> Callable[[str, float], Verdict | None]:
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.pods.get(name)
        if state is not None and state.exists and state.ready:
            return DONE
        if state is not None and state.phase == "Failed":
            return Verdict(False, "PodFailed", "the pod failed")
        return _warning_verdict(observed, StepName.PUBLISH, (POD, name), submitted)
    return evaluate


def pod_gone_and_detached(observed: Observed) -> Callable[[str, float], Verdict | None]:
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.pods.get(name)
        if state is None:
            return DONE
        if state.exists:
            return None
        if any(observed.volume_attached(observed.volume_of(claim), state.node) for claim in state.claims):
            return None
        return DONE
    return evaluate


def snapshot_ready(observed: Observed) -> Callable[[str, float], Verdict | None]:
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.snapshots.get(name)
        if state is not None and state.exists and state.ready:
            return DONE
        if state is not None and state.error:
            return Verdict(False, "SnapshotError", state.error)
        return _warning_verdict(observed, StepName.CREATE_SNAPSHOT, (SNAPSHOT, name), submitted)
    return evaluate


def claim_and_volume_gone(observed: Observed) -> Callable[[str, float], Verdict | None]:
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.claims.get(name)
        if state is None:
            return DONE
        if state.exists or (state.volume and state.volume in observed.pv_claim):
            return None
        return DONE
    return evaluate


def snapshot_and_content_gone(observed: Observed) -> Callable[[str, float], Verdict | None]:
    def evaluate(name: str, submitted: float) -> Verdict | None:
        state = observed.snapshots.get(name)
        if state is None:
            return DONE
        if state.exists or (state.content and state.content in observed.contents):
            return None
        return DONE
    return evaluate
