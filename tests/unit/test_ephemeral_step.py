"""createEphemeral and deleteEphemeral against the in-memory API server (its ephemeral-volume controller makes a
claim per template and its garbage collector deletes them with their pod), and their admission rules."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec
from csibench.engine.observed import Observed
from csibench.engine.steps.ephemeral import build_ephemeral_volume, pod_claims_and_volumes_gone
from csibench.kube.watch import WatchEvent
from localcluster.simulator import kubelet
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, UID, kill_when, owned_left, resume, run, running, spec


def ephemeral_spec(**more: Any) -> BenchmarkRunSpec:
    return spec(volumes=2, steps=["createVolume", "deleteVolume", "createEphemeral", "deleteEphemeral"],
                ephemeral={"pods": 3, "volumesPerPod": 2}, **more)


def test_pods_with_ephemeral_volumes_are_timed_to_ready_and_then_until_their_claims_and_volumes_are_gone() -> None:
    fake = FakeKube(Behaviour(release_delay=0.05))
    status = run(fake, ephemeral_spec())
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    steps = {s.name: s for s in status.steps}
    assert [s.name for s in status.steps][-2:] == ["createEphemeral", "deleteEphemeral"]
    for name in ("createEphemeral", "deleteEphemeral"):
        assert (steps[name].objects, steps[name].succeeded, steps[name].failed) == (3, 3, 0), steps[name]
    pods = [body for path, body in fake.created if path.endswith("/pods")
            and body["metadata"]["name"].startswith(NAMES.ephemeral_pod(0)[:-5])]
    assert len(pods) == 3
    for pod in pods:
        volumes = pod["spec"]["volumes"]
        assert [v["name"] for v in volumes] == ["vol-0", "vol-1"]
        template = volumes[0]["ephemeral"]["volumeClaimTemplate"]
        assert template["metadata"]["labels"]["csibench.io/run-uid"] == UID  # the claims are the run's
        assert template["spec"]["storageClassName"] == "sim" and template["spec"]["resources"] == {
            "requests": {"storage": "1Gi"}}
    # The controller's claims were made, owned by their pods, and are gone with them, their volumes too.
    assert not fake.named("persistentvolumeclaims", "runs") and not fake.named("persistentvolumes")


def test_a_pod_is_not_deleted_until_its_claims_and_their_volumes_are_gone() -> None:
    observed = Observed("ns", "r-abcde")
    judge = pod_claims_and_volumes_gone(observed, frozenset())

    def event(source: str, kind: str, obj: dict[str, Any]) -> None:
        observed.apply(WatchEvent(source, kind, obj, 1.0))

    pod = {"metadata": {"name": "r-abcde-e00000", "uid": "p"},
           "spec": {"volumes": [{"name": "vol-0", "ephemeral": {"volumeClaimTemplate": {}}}]}}
    claim = {"metadata": {"name": "r-abcde-e00000-vol-0", "uid": "c"}, "spec": {"volumeName": "pv-1"},
             "status": {"phase": "Bound"}}
    pv = {"metadata": {"name": "pv-1"}, "spec": {"claimRef": {"namespace": "ns", "name": "r-abcde-e00000-vol-0"}}}
    event("pods", "ADDED", pod)
    event("claims", "ADDED", claim)
    assert observed.pods["r-abcde-e00000"].claims == ["r-abcde-e00000-vol-0"]
    event("pvs", "ADDED", pv)
    event("pods", "DELETED", pod)
    assert judge("r-abcde-e00000", 0.0) is None  # the claim is still there
    woken = observed.apply(WatchEvent("claims", "DELETED", claim, 2.0))
    assert ("pod", "r-abcde-e00000") in woken  # a claim's change wakes the pod that mounts it
    assert judge("r-abcde-e00000", 0.0) is None  # its volume is still there
    woken = observed.apply(WatchEvent("pvs", "DELETED", pv, 3.0))
    assert ("pod", "r-abcde-e00000") in woken
    verdict = judge("r-abcde-e00000", 0.0)
    assert verdict is not None and verdict.ok


def test_the_ephemeral_volume_has_the_runs_claim_shape_and_labels() -> None:
    block = spec(volumeMode="Block", accessModes=["ReadWriteOncePod"], size="2Gi", ephemeral={"pods": 1})
    volume = build_ephemeral_volume(block, {"csibench.io/run-uid": UID})
    assert volume == {"ephemeral": {"volumeClaimTemplate": {
        "metadata": {"labels": {"csibench.io/run-uid": UID}},
        "spec": {"accessModes": ["ReadWriteOncePod"], "storageClassName": "sim", "volumeMode": "Block",
                 "resources": {"requests": {"storage": "2Gi"}}}}}}


@pytest.mark.parametrize(("bad", "words"), [
    ({"ephemeral": {"pods": 0}}, "greater than or equal to 1"),
    ({"ephemeral": {"pods": 1, "volumesPerPod": 17}}, "less than or equal to 16"),
    ({"ephemeral": {"pods": 1}, "steps": ["createVolume", "deleteVolume"]}, "createEphemeral"),
    ({"steps": ["createVolume", "createEphemeral"]}, "createEphemeral"),
])
def test_admission_refuses_a_bad_ephemeral_part(bad: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        BenchmarkRunSpec.model_validate({"storageClassName": "sim", **bad})


def test_the_example_runs_only_the_ephemeral_steps() -> None:
    import yaml

    from localcluster.launcher import REPO_ROOT
    example = yaml.safe_load((REPO_ROOT / "examples" / "ephemeral.yaml").read_text())
    run_spec = BenchmarkRunSpec.model_validate(example["spec"])
    status = run(FakeKube(), run_spec.model_copy(update={"storageClassName": "sim"}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [(s.name, s.succeeded) for s in status.steps] == [("createEphemeral", 20), ("deleteEphemeral", 20)]


def test_the_simulated_kubelet_mounts_an_ephemeral_volumes_claim_only_when_the_pod_owns_it() -> None:
    pod = {"metadata": {"name": "p", "uid": "u"}, "spec": {"volumes": [
        {"name": "a", "persistentVolumeClaim": {"claimName": "mine"}},
        {"name": "b", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}, {"name": "c", "emptyDir": {}}]}}
    assert kubelet.claim_volumes(pod) == {"a": "mine", "b": "p-b"}
    owned = {"metadata": {"ownerReferences": [{"uid": "u", "controller": True}]}}
    foreign = {"metadata": {"ownerReferences": [{"uid": "other", "controller": True}]}}
    assert not kubelet.foreign_ephemeral_claim(pod, "b", owned)
    assert kubelet.foreign_ephemeral_claim(pod, "b", foreign) and kubelet.foreign_ephemeral_claim(pod, "b", {
        "metadata": {}})
    assert not kubelet.foreign_ephemeral_claim(pod, "a", foreign)  # a claim the pod names: not the rule's


@pytest.mark.parametrize("interrupted", ["createEphemeral", "deleteEphemeral"])
def test_an_operator_killed_inside_an_ephemeral_step_redoes_it_and_leaves_nothing(interrupted: str) -> None:
    """The restore deletes the step's pods and waits until their claims and volumes are gone (the pod's own gone
    judge), then a redone deleteEphemeral makes the pods again first (recreated_by): nothing is counted twice."""
    fake = FakeKube(Behaviour(bind_delay=0.1, ready_delay=0.1, release_delay=0.1, pod_termination=0.1))
    run_spec = ephemeral_spec()
    previous = kill_when(fake, run_spec, running(interrupted))
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    redone = next(s for s in status.steps if s.name == interrupted)
    assert (redone.state.value, redone.attempts, redone.succeeded) == ("Succeeded", 2, 3), redone
    assert redone.restored and owned_left(fake) == []
    assert not fake.named("persistentvolumeclaims", "runs") and not fake.named("persistentvolumes")


def test_a_pod_whose_ephemeral_claim_cannot_be_provisioned_fails_at_once_quoting_the_claim() -> None:
    """ProvisioningFailed is said of the claim the controller made, not of the pod: it fails the pod, named, long
    before the step's timeout."""
    failing = f"{NAMES.ephemeral_pod(1)}-vol-1"
    fake = FakeKube(Behaviour(provisioning_fails={failing}, release_delay=0.05))
    status = run(fake, ephemeral_spec(timeouts={"default": 60}))
    create = next(s for s in status.steps if s.name == "createEphemeral")
    assert (create.succeeded, create.failed) == (2, 1), create
    reason = create.failureReasons[0]
    assert reason.reason == "ProvisioningFailed" and failing in reason.message, reason
    assert create.durationSeconds is not None and create.durationSeconds < 10  # not the 60 s timeout
