"""Slow storage is not failed storage: which Warnings Kubernetes retries past, and what the retries cost a step.

A sidecar whose CSI call outlives its ``--timeout`` says so in a Warning (ProvisioningFailed, FailedAttachVolume,
SnapshotCreationFailed, ... with ``DeadlineExceeded``) and calls again; the attach/detach controller gives up one
two-minute wait for the attacher ("timed out waiting for external-attacher") and waits again. In the user's
cluster those objects get there on a later try, so a run counts such Warnings (per step, per object) and fails
an object only at its step's timeout, on a cause no retry fixes (InvalidArgument, NotFound, ...: any gRPC code
not listed here), or, with ``spec.failAfterWarnings``, once it had that many. Pure: the engine's observed state,
judges and step runner call these.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from csibench.api.models import MAX_FAILURE_REASONS, RetriedWarnings, RetryCost
from csibench.api.text import shorten

# Warnings of the control plane's own bookkeeping, not of the storage, each retried by the controller that said it:
# - the attach/detach controller, while a volume's previous attachment is still being torn down (a pod moved to
#   another node);
# - the PV controller (ProvisioningFailed), when its write of the claim's provisioner annotation failed, before
#   any provisioner saw the claim (an API server that was briefly away: "connection refused"); it retries at its
#   next sync.
BOOKKEEPING = {"Multi-Attach error": "MultiAttach", "Error saving claim: ": "ClaimNotSaved"}
# The gRPC codes after which Kubernetes calls again and a later call may succeed: the call may still be in progress
# on the storage (Canceled, DeadlineExceeded, Unavailable, Aborted: external-provisioner's checkError calls these
# "ProvisioningInBackground"), or it failed in a way the storage may get over (Internal: a hiccup of the array;
# ResourceExhausted: out of something for now). The sidecars retry them with backoff and, in the user's cluster, the
# object gets there on a later try, so a run counts them and waits. Any other code (InvalidArgument, NotFound,
# AlreadyExists, FailedPrecondition, Unimplemented, ...) is one no retry fixes: the object fails at once. A run that
# wants a storage's first Internal to count as a failure (the local cluster's injected failures answer Internal) sets
# spec.failAfterWarnings: 1.
IN_PROGRESS_CODES = frozenset({"Canceled", "DeadlineExceeded", "Unavailable", "Aborted", "Internal",
                               "ResourceExhausted"})
# grpc-go's status text; only the outermost code counts (an Internal error may quote another call's Unavailable).
_GRPC_CODE = re.compile(r"rpc error: code = (\w+) desc = ")
# A wait that ran out without a gRPC code: the attach/detach controller's for the attacher (csiTimeout, 2 min:
# "timed out waiting for external-attacher of <driver> CSI driver to attach volume <handle>"), a kubelet's for its
# volumes ("Unable to attach or mount volumes: ...: timed out waiting for the condition"), a bare Go context's.
WAIT_TIMED_OUT = ("timed out waiting for external-attacher", "timed out waiting for the condition",
                  "context deadline exceeded")
# An optimistic-concurrency conflict (HTTP 409) a controller met writing an object; it writes again on its next sync.
# csi-snapshotter copies one into a group snapshot content's status.error (and the controller into the group's)
# when its status update raced the snapshot-controller's: "... failed to update groupsnapcontent-... on API server:
# Operation cannot be fulfilled on ...: the object has been modified; please apply your changes to the latest
# version and try again".
CONFLICT = "the object has been modified; please apply your changes to the latest version"

ATTACH_WAIT = "2m"  # Kubernetes' csiTimeout: how long the attach/detach controller waits for a VolumeAttachment
# Which component retries a Warning of this reason, and the flag that bounds each of its tries (for the finding).
RETRIED_BY: Mapping[str, tuple[str, str]] = {
    "ProvisioningFailed": ("csi-provisioner", "timeout"),
    "FailedAttachVolume": ("csi-attacher", "timeout"),
    "FailedDetachVolume": ("csi-attacher", "timeout"),
    "SnapshotCreationFailed": ("csi-snapshotter", "timeout"),
    "SnapshotContentCreationFailed": ("csi-snapshotter", "timeout"),
    "VolumeResizeFailed": ("csi-resizer", "timeout"),
}


def retry_cause(message: str) -> str | None:
    """Why Kubernetes will try again after this failure message, or None if no retry fixes it (pure):
    'rpc error: code = DeadlineExceeded desc = ...' -> 'DeadlineExceeded'; the attach/detach controller's 'timed
    out waiting for external-attacher ...' -> 'WaitTimedOut'; 'rpc error: code = InvalidArgument ...' -> None."""
    for prefix, cause in BOOKKEEPING.items():
        if message.startswith(prefix):
            return cause
    if CONFLICT in message:
        return "Conflict"
    code = _GRPC_CODE.search(message)
    if code is not None:
        return code.group(1) if code.group(1) in IN_PROGRESS_CODES else None
    return "WaitTimedOut" if any(phrase in message for phrase in WAIT_TIMED_OUT) else None


def is_transient(message: str) -> bool:
    """A failure message that does not end the object: control-plane bookkeeping that is retried, a CSI call that
    may still be in progress, or a wait that will be waited again. Such an object is only failed by its step's
    timeout (quoting the message) or by ``spec.failAfterWarnings``."""
    return retry_cause(message) is not None


@dataclass(frozen=True)
class RetriedWarning:
    """One Event (by its name: a repeated Event is one object whose count grows) about one object, as last seen."""

    reason: str
    cause: str
    message: str
    count: int
    first: float  # arrival of its first line (monotonic)
    at: float  # arrival of its latest line (monotonic)


@dataclass
class _Group:
    count: int
    objects: set[str]
    first: float
    last: float
    message: str


def aggregate(per_object: Mapping[str, Iterable[RetriedWarning]]) -> list[tuple[str, str, _Group]]:
    """(reason, cause, its Events counted with repeats, objects, first and last arrival, an example message), most
    frequent first, at most MAX_FAILURE_REASONS (pure)."""
    groups: dict[tuple[str, str], _Group] = {}
    for name, warnings in per_object.items():
        for warning in warnings:
            group = groups.setdefault((warning.reason, warning.cause),
                                      _Group(0, set(), warning.first, warning.at, shorten(warning.message, 300)))
            group.count += warning.count
            group.objects.add(name)
            group.first, group.last = min(group.first, warning.first), max(group.last, warning.at)
    rows = [(reason, cause, group) for (reason, cause), group in groups.items()]
    return sorted(rows, key=lambda row: (-row[2].count, row[0], row[1]))[:MAX_FAILURE_REASONS]


def retried_warnings(per_object: Mapping[str, Iterable[RetriedWarning]],
                     to_wall: Callable[[float], str]) -> list[RetriedWarnings]:
    """The step's ``retriedWarnings`` (pure)."""
    return [RetriedWarnings(reason=reason, cause=cause, count=group.count, objects=len(group.objects),
                            firstTime=to_wall(group.first), lastTime=to_wall(group.last), message=group.message)
            for reason, cause, group in aggregate(per_object)]


def retry_cost(step: str, per_object: Mapping[str, Iterable[RetriedWarning]], end: float,
               flags: Mapping[str, str], progress: float | None = None, unit: str = "objects") -> RetryCost | None:
    """What the retries cost the step, from its watch events alone (pure): how many Warnings on how many objects,
    and the step's time after the last sign of the storage at work (``tailSeconds``): its last retried Warning
    (a try of some object was still waiting at that moment, on the storage or on a sidecar's queue) or
    ``progress``, the last storage completion the events show during the step (a VolumeAttachment turning
    attached). After that no try ran out and nothing was seen done, so the step's remaining time is the retries'
    backoff before their next, successful, tries, or storage work that no try ran out on: an upper bound on the
    time the retries added after the storage was done (the storage was not done at its last sign of work), close
    where tries are dense (within one try's timeout), loose where they are sparse. ``flags``: component ->
    '--timeout=10s' of the components that retried, as the preflight read them."""
    warnings = [warning for found in per_object.values() for warning in found]
    if not warnings:
        return None
    objects = sum(1 for found in per_object.values() if list(found))
    count = sum(warning.count for warning in warnings)
    last = max([warning.at for warning in warnings] + ([progress] if progress is not None else []))
    tail = max(0.0, end - last)
    reasons = aggregate(per_object)
    said = ", ".join(f"{group.count}× {reason} ({cause})" for reason, cause, group in reasons)
    components = {RETRIED_BY[reason][0] for reason, _, _ in reasons if reason in RETRIED_BY}
    bounds = [f"{component} {flags[component]}" for component in sorted(components) if component in flags]
    if any(reason == "FailedAttachVolume" and cause == "WaitTimedOut" for reason, cause, _ in reasons):
        bounds.append(f"the attach/detach controller's fixed {ATTACH_WAIT} wait for the attacher")
    knobs = "; ".join(bounds)
    message = (f"{step}: {count} retried Warnings on {objects} {unit} ({said})"
               + (f", each try bounded by {knobs}" if knobs else "")
               + f"; the step ran {tail:.1f}s past the storage's last sign of work (its last retried Warning"
               + (" or volume attached" if progress is not None else "") + "): at most that much was retry "
                 "backoff after the storage was done")
    return RetryCost(warnings=count, objects=objects, tailSeconds=round(tail, 3), message=shorten(message, 600))
