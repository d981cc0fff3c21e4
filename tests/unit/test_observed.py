"""What the run observes of its objects, and the judges that read it."""

from __future__ import annotations

import json
from typing import Any

from csibench.engine.judges import DONE, claim_and_volume_gone, pod_gone_and_detached
from csibench.engine.observed import CLAIM, POD, Observed
from csibench.kube.watch import WatchEvent


def _event(source: str, kind: str, obj: dict[str, Any], at: float = 1.0) -> WatchEvent:
    return WatchEvent(source, kind, obj, at)


def test_observed_state_follows_volumes_and_attachments_of_our_objects_only() -> None:
    observed = Observed("ns", "run-abcde")
    claim = {"metadata": {"name": "run-abcde-v00000", "uid": "c1"}, "spec": {"volumeName": "pv-1"},
             "status": {"phase": "Bound"}}
    assert observed.apply(_event("claims", "ADDED", claim)) == [(CLAIM, "run-abcde-v00000")]
    pv = {"metadata": {"name": "pv-1"}, "spec": {"claimRef": {"namespace": "ns", "name": "run-abcde-v00000"}}}
    foreign = {"metadata": {"name": "pv-x"}, "spec": {"claimRef": {"namespace": "ns", "name": "users-claim"}}}
    observed.apply(_event("pvs", "ADDED", pv))
    assert observed.apply(_event("pvs", "ADDED", foreign)) == [] and "pv-x" not in observed.pv_claim
    pod = {"metadata": {"name": "run-abcde-p00000", "uid": "p1"},
           "spec": {"nodeName": "n1", "volumes": [{"persistentVolumeClaim": {"claimName": "run-abcde-v00000"}}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    observed.apply(_event("pods", "ADDED", pod))
    attachment = {"metadata": {"name": "va-1"}, "spec": {"source": {"persistentVolumeName": "pv-1"},
                                                          "nodeName": "n1"}}
    assert observed.apply(_event("attachments", "ADDED", attachment)) == [(POD, "run-abcde-p00000")]
    gone = pod_gone_and_detached(observed, frozenset())
    observed.apply(_event("pods", "DELETED", pod))
    assert gone("run-abcde-p00000", 0.0) is None  # pod gone, volume still attached
    observed.apply(_event("attachments", "DELETED", attachment))
    assert gone("run-abcde-p00000", 0.0) == DONE

    deleted = claim_and_volume_gone(observed, frozenset())
    observed.apply(_event("claims", "DELETED", claim))
    assert deleted("run-abcde-v00000", 0.0) is None  # claim gone, PV still there
    observed.apply(_event("pvs", "SYNC", {"present": ["/pv-x"]}))  # a relist without pv-1: it was deleted
    assert deleted("run-abcde-v00000", 0.0) == DONE


def test_warnings_are_matched_by_uid() -> None:
    observed = Observed("ns", "run-abcde")
    observed.apply(_event("claims", "ADDED", {"metadata": {"name": "run-abcde-v00001", "uid": "u1"}}))
    warning = {"type": "Warning", "reason": "ProvisioningFailed", "message": "no space",
               "involvedObject": {"uid": "u1"}}
    assert observed.apply(_event("events", "ADDED", warning, at=5.0)) == [(CLAIM, "run-abcde-v00001")]
    assert observed.apply(_event("events", "ADDED", {**warning, "involvedObject": {"uid": "other"}})) == []
    assert observed.warnings[(CLAIM, "run-abcde-v00001")].at == 5.0


def test_a_warning_that_arrives_before_its_object_is_kept_until_the_object_is_seen() -> None:
    """Each watch is its own thread: the scheduler's FailedScheduling for a pod just created can be read before
    the pod's ADDED (seen on a busy machine: the pod then waited for the step's timeout)."""
    observed = Observed("ns", "run-abcde")
    early = {"type": "Warning", "reason": "FailedScheduling", "message": "0/3 nodes are available",
             "involvedObject": {"uid": "p9", "name": "run-abcde-p00009"}}
    assert observed.apply(_event("events", "ADDED", early, at=2.0)) == []
    foreign = {**early, "involvedObject": {"uid": "x", "name": "someone-elses"}}
    assert observed.apply(_event("events", "ADDED", foreign)) == []  # not ours: not kept
    pod = {"metadata": {"name": "run-abcde-p00009", "uid": "p9"}, "status": {"phase": "Pending"}}
    assert observed.apply(_event("pods", "ADDED", pod, at=3.0)) == [(POD, "run-abcde-p00009")]
    assert observed.warnings[(POD, "run-abcde-p00009")].at == 2.0
    assert list(observed.warnings) == [(POD, "run-abcde-p00009")]


def test_a_multi_attach_warning_is_transient_but_an_attach_failure_is_not() -> None:
    from csibench.engine.judges import pod_ready
    observed = Observed("ns", "run-abcde")
    observed.apply(_event("pods", "ADDED", {"metadata": {"name": "run-abcde-p00000", "uid": "p1"}}))
    judge = pod_ready(observed, frozenset({"FailedAttachVolume"}))
    warning = {"type": "Warning", "reason": "FailedAttachVolume", "involvedObject": {"uid": "p1"},
               "message": 'Multi-Attach error for volume "pv-1" Volume is already exclusively attached to one node'}
    observed.apply(_event("events", "ADDED", {**warning, "metadata": {"name": "e1"}}, at=2.0))
    assert judge("run-abcde-p00000", 1.0) is None
    # Counted as retried, with the Event's repeats (the recorder bumps one Event's count), once per Event.
    observed.apply(_event("events", "MODIFIED", {**warning, "metadata": {"name": "e1"}, "count": 3}, at=2.5))
    retried = observed.retried_since(POD, ["run-abcde-p00000"], 1.0)["run-abcde-p00000"]
    assert [(w.reason, w.cause, w.count) for w in retried] == [("FailedAttachVolume", "MultiAttach", 3)]
    assert observed.retried_since(POD, ["run-abcde-p00000"], 2.6) == {}  # none since
    observed.apply(_event("events", "ADDED", {**warning, "message": "rpc error: code = Internal"}, at=3.0))
    verdict = judge("run-abcde-p00000", 1.0)
    assert verdict is not None and not verdict.ok and verdict.reason == "FailedAttachVolume"


def test_the_pv_controllers_failed_claim_write_is_transient_but_a_provisioning_error_is_not() -> None:
    """An API server away for two seconds: the PV controller could not annotate the claim and says so as
    ProvisioningFailed, then retries; the storage never saw the claim, so the claim has not failed."""
    from csibench.engine.judges import claim_bound
    observed = Observed("ns", "run-abcde")
    observed.apply(_event("claims", "ADDED", {"metadata": {"name": "run-abcde-v00000", "uid": "c1"}}))
    judge = claim_bound(observed, frozenset({"ProvisioningFailed"}))
    warning = {"type": "Warning", "reason": "ProvisioningFailed", "involvedObject": {"uid": "c1"},
               "message": 'Error saving claim: Put "https://127.0.0.1:18443/api/v1/namespaces/ns/persistentvolumeclaims'
                          '/run-abcde-v00000": dial tcp 127.0.0.1:18443: connect: connection refused'}
    observed.apply(_event("events", "ADDED", warning, at=2.0))
    assert judge("run-abcde-v00000", 1.0) is None
    refused = 'failed to provision volume with StorageClass "sim": rpc error: code = InvalidArgument desc = bad fstype'
    observed.apply(_event("events", "ADDED", {**warning, "message": refused}, at=3.0))
    verdict = judge("run-abcde-v00000", 1.0)
    assert verdict is not None and not verdict.ok and verdict.message == refused


def test_a_csi_call_that_may_still_be_in_progress_does_not_fail_the_object() -> None:
    """A storage slower than the sidecar's --timeout: external-provisioner says ProvisioningFailed with
    DeadlineExceeded and calls again, and the volume comes (likewise after Internal and ResourceExhausted: a later
    call may succeed); FailedPrecondition is a failure no retry fixes, and final."""
    from csibench.engine.judges import claim_bound
    from csibench.engine.steps.snapshot import snapshot_ready
    observed = Observed("ns", "run-abcde")
    observed.apply(_event("claims", "ADDED", {"metadata": {"name": "run-abcde-v00000", "uid": "c1"}}))
    judge = claim_bound(observed, frozenset({"ProvisioningFailed"}))
    prefix = 'failed to provision volume with StorageClass "sim": rpc error: code = '
    warning = {"type": "Warning", "reason": "ProvisioningFailed", "involvedObject": {"uid": "c1"}}
    for code in ("DeadlineExceeded", "Canceled", "Unavailable", "Aborted", "Internal", "ResourceExhausted"):
        observed.apply(_event("events", "ADDED", {**warning, "message": f"{prefix}{code} desc = slow"}, at=2.0))
        assert judge("run-abcde-v00000", 1.0) is None, code
    nested = f"{prefix}FailedPrecondition desc = backend: rpc error: code = Unavailable desc = gone"  # the outer one
    observed.apply(_event("events", "ADDED", {**warning, "message": nested}, at=3.0))
    verdict = judge("run-abcde-v00000", 1.0)
    assert verdict is not None and verdict.reason == "ProvisioningFailed"

    snapshot: dict[str, Any] = {"metadata": {"name": "run-abcde-s00000", "uid": "s1"}, "status": {
        "readyToUse": False, "error": {
        "message": 'Failed to check and update snapshot content: failed to take snapshot of the volume pv-1: '
                   '"rpc error: code = DeadlineExceeded desc = context deadline exceeded"'}}}
    observed.apply(_event("snapshots", "ADDED", snapshot))
    ready = snapshot_ready(observed, frozenset())
    assert ready("run-abcde-s00000", 0.5) is None
    assert observed.complaints("snapshot") == {  # quoted if it times out: no Warning event says it
        "run-abcde-s00000": "status.error: " + snapshot["status"]["error"]["message"][:186]}
    snapshot["status"]["error"]["message"] = "rpc error: code = FailedPrecondition desc = volume in use"
    observed.apply(_event("snapshots", "MODIFIED", snapshot))
    verdict = ready("run-abcde-s00000", 0.5)
    assert verdict is not None and verdict.reason == "SnapshotError"


def test_an_object_deleted_by_someone_else_during_its_step_fails_at_once_but_an_earlier_namesake_does_not() -> None:
    """A user deleting one of the run's claims (or pods, or snapshots) while its step waits for it: the object
    fails when the deletion is seen, instead of waiting for the step's timeout; a deletion from before the
    object's submission (the previous incarnation a redo removed) says nothing about the new one."""
    from csibench.engine.judges import claim_bound, pod_ready
    from csibench.engine.steps.snapshot import snapshot_ready
    observed = Observed("ns", "run-abcde")
    claim = {"metadata": {"name": "run-abcde-v00000", "uid": "c1"}}
    observed.apply(_event("claims", "ADDED", claim, at=1.0))
    observed.apply(_event("claims", "DELETED", claim, at=2.0))
    judge = claim_bound(observed, frozenset())
    assert judge("run-abcde-v00000", 3.0) is None  # deleted before this submission: wait for the new one
    verdict = judge("run-abcde-v00000", 0.5)
    assert verdict is not None and not verdict.ok and verdict.reason == "Deleted"
    assert verdict.message == "the claim was deleted before it was ready"
    observed.apply(_event("claims", "ADDED", {"metadata": {"name": "run-abcde-v00000", "uid": "c2"}}, at=4.0))
    assert judge("run-abcde-v00000", 3.0) is None  # the new incarnation exists: not failed

    pod = {"metadata": {"name": "run-abcde-p00000", "uid": "p1"}}
    observed.apply(_event("pods", "ADDED", pod, at=1.0))
    observed.apply(_event("pods", "SYNC", {"present": []}, at=6.0))  # a relist without it: deleted meanwhile
    verdict = pod_ready(observed, frozenset())("run-abcde-p00000", 1.0)
    assert verdict is not None and verdict.reason == "Deleted"

    ready = {"metadata": {"name": "run-abcde-s00000", "uid": "s1"}, "status": {"readyToUse": True}}
    observed.apply(_event("snapshots", "ADDED", ready, at=1.0))
    observed.apply(_event("snapshots", "DELETED", ready, at=2.0))
    verdict = snapshot_ready(observed, frozenset())("run-abcde-s00000", 1.0)
    assert verdict is not None and verdict.reason == "Deleted"  # gone, whatever its last status said


def test_a_namesake_a_restore_deleted_says_nothing_about_the_object_created_again() -> None:
    """An operator restart interrupted a step: its objects are deleted and created again under the same names.
    The old pod's Failed phase and a Warning about the old claim that arrives after the new submission are not
    the new objects'."""
    from csibench.engine.judges import claim_bound, pod_finished
    observed = Observed("ns", "run-abcde")
    failed = {"metadata": {"name": "run-abcde-d00000", "uid": "old"}, "status": {"phase": "Failed"}}
    observed.apply(_event("pods", "ADDED", failed, at=1.0))
    observed.apply(_event("pods", "DELETED", failed, at=2.0))
    assert pod_finished(observed, frozenset())("run-abcde-d00000", 3.0) is None  # waits for the new pod

    claim = {"metadata": {"name": "run-abcde-v00000", "uid": "old-claim"}}
    observed.apply(_event("claims", "ADDED", claim, at=1.0))
    observed.apply(_event("claims", "DELETED", claim, at=2.0))
    observed.apply(_event("claims", "ADDED", {"metadata": {"name": "run-abcde-v00000", "uid": "new-claim"}},
                          at=4.0))
    late = {"type": "Warning", "reason": "ProvisioningFailed", "involvedObject": {"uid": "old-claim"},
            "message": "rpc error: code = Internal desc = the old claim's create failed at last"}
    assert observed.apply(_event("events", "ADDED", late, at=5.0)) == []
    assert claim_bound(observed, frozenset({"ProvisioningFailed"}))("run-abcde-v00000", 3.0) is None


def test_raw_lines_of_other_runs_volumes_are_recognised_without_decoding() -> None:
    """What the cluster-wide watches pass over undecoded must be exactly what ``apply`` would ignore."""
    observed = Observed("ns", "run-abcde")
    ours = {"metadata": {"name": "pv-1"}, "spec": {"claimRef": {"namespace": "ns", "name": "run-abcde-v00000"}}}
    repeated = {"metadata": {"name": "pv-2"}, "spec": {"claimRef": {"namespace": "ns", "name": "run-abcde-i2-v00000"}}}
    namesake = {"metadata": {"name": "pv-3"}, "spec": {"claimRef": {"namespace": "ns", "name": "xrun-abcde-v00000"}}}
    foreign = {"metadata": {"name": "pv-4"}, "spec": {"claimRef": {"namespace": "ns", "name": "users-claim"}}}
    for obj, wanted in ((ours, True), (repeated, True), (namesake, False), (foreign, False)):
        line = json.dumps({"type": "MODIFIED", "object": obj}, separators=(",", ":")).encode()
        assert observed.mentions_ours(line) is wanted
        assert bool(observed.apply(_event("pvs", "MODIFIED", obj))) is wanted


def test_a_groups_update_conflict_is_transient_but_a_failed_group_snapshot_is_not() -> None:
    """csi-snapshotter's status write raced the snapshot-controller's (HTTP 409): the controller copies the
    conflict into the group's status.error and both write again; a CSI call that failed ends the group."""
    from csibench.engine.steps.group_snapshot import group_snapshot_ready
    observed = Observed("ns", "run-abcde")
    conflict = ("Failed to create group snapshot: error updating status for volume group snapshot content gc: "
                "snapshot controller failed to update gc on API server: Operation cannot be fulfilled on "
                "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io \"gc\": the object has been modified; "
                "please apply your changes to the latest version and try again")
    group = {"metadata": {"name": "run-abcde-x00000", "uid": "g1"}, "status": {"error": {"message": conflict}}}
    observed.apply(_event("groups", "ADDED", group))
    judge = group_snapshot_ready(observed, frozenset())
    assert judge("run-abcde-x00000", 0.0) is None
    failed = "Failed to create group snapshot: rpc error: code = FailedPrecondition desc = members differ"
    observed.apply(_event("groups", "MODIFIED", {**group, "status": {"error": {"message": failed}}}))
    verdict = judge("run-abcde-x00000", 0.0)
    assert verdict is not None and (verdict.reason, verdict.message) == ("GroupSnapshotError", failed)
