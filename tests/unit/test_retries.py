"""Slow storage is not failed storage: Warnings Kubernetes retries past are counted, not failures; causes no retry
fixes still fail at once; spec.failAfterWarnings fails fast; a step says what its retries cost."""

from __future__ import annotations

from typing import Any

import pytest

from csibench.engine.judges import claim_bound, pod_ready
from csibench.engine.observed import CLAIM, POD, Observed
from csibench.engine.tracker import StepTracker
from csibench.kube.watch import WatchEvent

PROVISION = 'failed to provision volume with StorageClass "sim": rpc error: code = '
ATTACH_WAIT = ('AttachVolume.Attach failed for volume "pvc-1" : timed out waiting for external-attacher of '
               'sim.csibench.io CSI driver to attach volume 1@sim')


def _event(source: str, kind: str, obj: dict[str, Any], at: float = 1.0) -> WatchEvent:
    return WatchEvent(source, kind, obj, at)


def _warning(uid: str, reason: str, message: str, name: str, count: int = 1) -> dict[str, Any]:
    return {"type": "Warning", "reason": reason, "message": message, "count": count,
            "involvedObject": {"uid": uid}, "metadata": {"name": name}}


def _claims(observed: Observed, count: int) -> list[str]:
    names = [f"run-abcde-v{index:05d}" for index in range(count)]
    for index, name in enumerate(names):
        observed.apply(_event("claims", "ADDED", {"metadata": {"name": name, "uid": f"c{index}"}}))
    return names


def test_the_attach_detach_controllers_wait_running_out_does_not_fail_the_pod_and_is_counted() -> None:
    """Attaches slower than the controller's two-minute wait: it says FailedAttachVolume and waits again; the pod
    starts on a later try, so it has not failed, and the Warning is counted."""
    observed = Observed("ns", "run-abcde")
    observed.apply(_event("pods", "ADDED", {"metadata": {"name": "run-abcde-p00000", "uid": "p1"}}))
    judge = pod_ready(observed, frozenset({"FailedMount", "FailedAttachVolume"}))
    observed.apply(_event("events", "ADDED", _warning("p1", "FailedAttachVolume", ATTACH_WAIT, "e1"), at=130.0))
    assert judge("run-abcde-p00000", 1.0) is None
    assert observed.retried_count((POD, "run-abcde-p00000"), 1.0) == 1
    mount = "Unable to attach or mount volumes: unmounted volumes=[v0], unattached volumes=[]: timed out waiting " \
            "for the condition"
    observed.apply(_event("events", "ADDED", _warning("p1", "FailedMount", mount, "e2"), at=131.0))
    assert judge("run-abcde-p00000", 1.0) is None
    assert observed.retried_count((POD, "run-abcde-p00000"), 1.0) == 2


@pytest.mark.parametrize("code", ["InvalidArgument", "NotFound", "AlreadyExists", "FailedPrecondition",
                                  "Unimplemented", "PermissionDenied"])
def test_a_cause_no_retry_fixes_fails_the_object_at_once(code: str) -> None:
    observed = Observed("ns", "run-abcde")
    (name,) = _claims(observed, 1)
    judge = claim_bound(observed, frozenset({"ProvisioningFailed"}))
    observed.apply(_event("events", "ADDED", _warning("c0", "ProvisioningFailed", f"{PROVISION}{code} desc = no",
                                                      "e1"), at=2.0))
    verdict = judge(name, 1.0)
    assert verdict is not None and not verdict.ok and verdict.reason == "ProvisioningFailed"
    assert observed.retried_count((CLAIM, name), 1.0) == 0


def test_fail_after_warnings_fails_an_object_at_its_nth_retried_warning() -> None:
    observed = Observed("ns", "run-abcde")
    observed.fail_after = 3
    (name,) = _claims(observed, 1)
    judge = claim_bound(observed, frozenset({"ProvisioningFailed"}))
    slow = f"{PROVISION}DeadlineExceeded desc = context deadline exceeded"
    observed.apply(_event("events", "ADDED", _warning("c0", "ProvisioningFailed", slow, "e1"), at=2.0))
    observed.apply(_event("events", "MODIFIED", _warning("c0", "ProvisioningFailed", slow, "e1", 2), at=13.0))
    assert judge(name, 1.0) is None
    observed.apply(_event("events", "MODIFIED", _warning("c0", "ProvisioningFailed", slow, "e1", 3), at=25.0))
    verdict = judge(name, 1.0)
    assert verdict is not None and not verdict.ok and verdict.reason == "ProvisioningFailed"
    assert verdict.message.startswith("3 retried Warnings (spec.failAfterWarnings: 3)")
    # a Warning of a reason the step does not fail on is counted but fails nothing
    other = pod_ready(observed, frozenset())
    observed.apply(_event("pods", "ADDED", {"metadata": {"name": "run-abcde-p00000", "uid": "p1"}}))
    observed.apply(_event("events", "ADDED", _warning("p1", "FailedAttachVolume", ATTACH_WAIT, "e2", 5), at=3.0))
    assert other("run-abcde-p00000", 1.0) is None


def test_a_step_counts_retried_warnings_per_object_and_by_reason_and_cause_and_says_what_they_cost() -> None:
    """Three claims on a serial array slower than the provisioner's --timeout: two get DeadlineExceeded
    (one twice, as one Event whose count grows), one Unavailable; the last retried Warning came 40 s before the
    step's end."""
    observed = Observed("ns", "run-abcde")
    names = _claims(observed, 3)
    tracker = StepTracker("createVolume", names)
    tracker.start()
    assert tracker.started is not None
    start = tracker.started
    for name in names:
        tracker.mark_submitted(name, start)
    slow = f"{PROVISION}DeadlineExceeded desc = context deadline exceeded"
    observed.apply(_event("events", "ADDED", _warning("c0", "ProvisioningFailed", slow, "e0"), at=start + 10))
    observed.apply(_event("events", "MODIFIED", _warning("c0", "ProvisioningFailed", slow, "e0", 2),
                          at=start + 21))
    observed.apply(_event("events", "ADDED", _warning("c1", "ProvisioningFailed", slow, "e1"), at=start + 15))
    gone = f"{PROVISION}Unavailable desc = connection refused"
    observed.apply(_event("events", "ADDED", _warning("c2", "ProvisioningFailed", gone, "e2"), at=start + 30))
    from csibench.engine.judges import DONE
    for index, name in enumerate(names):
        tracker.record(name, DONE, start + 60 + index * 5)
    tracker.stopped = start + 70
    tracker.note_retries(observed.retried_since(CLAIM, names, start), {"csi-provisioner": "--timeout=10s"})
    status = tracker.status()
    assert [(r.reason, r.cause, r.count, r.objects) for r in status.retriedWarnings] == [
        ("ProvisioningFailed", "DeadlineExceeded", 3, 2), ("ProvisioningFailed", "Unavailable", 1, 1)]
    deadline = status.retriedWarnings[0]
    assert deadline.firstTime is not None and deadline.lastTime is not None
    assert deadline.firstTime < deadline.lastTime
    assert status.retries is not None
    assert (status.retries.warnings, status.retries.objects) == (4, 3)
    assert status.retries.tailSeconds == pytest.approx(40.0)
    assert "csi-provisioner --timeout=10s" in status.retries.message
    assert "40.0s past the storage's last sign of work (its last retried Warning)" in status.retries.message
    assert tracker.per_object()["retries"] == [2, 1, 1]
    assert (status.succeeded, status.failed) == (3, 0)


def test_a_volume_attached_after_the_last_retried_warning_is_the_storage_at_work_not_backoff() -> None:
    """publish of one pod whose attach (125 s) outlasts the attach/detach controller's 2 m wait: its Warning comes
    at 120 s, the VolumeAttachment says attached at 125 s, the pod is Ready at 125.2 s. The 5 s after the Warning
    were the array attaching: only the 0.2 s after the attach count as the step's time past the storage's work."""
    observed = Observed("ns", "run-abcde")
    claim = {"metadata": {"name": "run-abcde-v00000", "uid": "c1"}, "spec": {"volumeName": "pv-1"},
             "status": {"phase": "Bound"}}
    observed.apply(_event("claims", "ADDED", claim))
    observed.apply(_event("pvs", "ADDED", {"metadata": {"name": "pv-1"}, "spec": {"claimRef": {
        "namespace": "ns", "name": "run-abcde-v00000", "uid": "c1"}}}))
    attachment = {"metadata": {"name": "va-1"}, "spec": {"source": {"persistentVolumeName": "pv-1"},
                                                          "nodeName": "n1"}, "status": {"attached": False}}
    observed.apply(_event("attachments", "ADDED", attachment, at=0.5))
    assert observed.last_attached_at is None
    observed.apply(_event("attachments", "MODIFIED", {**attachment, "status": {"attached": True}}, at=125.0))
    assert observed.last_attached_at == 125.0

    from csibench.engine.retries import RetriedWarning, retry_cost
    waited = {"run-abcde-p00000": [RetriedWarning("FailedAttachVolume", "WaitTimedOut", ATTACH_WAIT, 1, 120.0,
                                                  120.0)]}
    cost = retry_cost("publish", waited, 125.2, {"csi-attacher": "--timeout=300s"}, progress=125.0)
    assert cost is not None and cost.tailSeconds == pytest.approx(0.2)
    assert "fixed 2m wait" in cost.message and "csi-attacher --timeout=300s" in cost.message
    without = retry_cost("publish", waited, 125.2, {})
    assert without is not None and without.tailSeconds == pytest.approx(5.2)
