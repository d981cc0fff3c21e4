"""The expandVolume step against the in-memory API server, whose resizer takes a filesystem claim through
FileSystemResizePending (the controller's half) before its capacity says the new size (the node's half): both
halves timed from watch events, online after publish or offline without it, the class checked before anything
is created, the resizer's Warning quoted, and an interrupted expansion redone on volumes made again."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec
from csibench.engine.kinds.claim import EXPAND_TO
from csibench.engine.steps import clone, expand
from csibench.kube.client import ApiError
from csibench.report.render import render_table
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, kill_when, owned_left, resume, run, running, spec, steps_of

GROWN = str(3 * 2**30)  # 1Gi by 2Gi, as the step writes it


def patches(fake: FakeKube) -> list[str]:
    return [path for verb, path in fake.log if verb == "PATCH" and "/persistentvolumeclaims/" in path]


def test_online_expansion_times_the_controllers_half_and_the_nodes() -> None:
    fake = FakeKube(Behaviour(resize_delay=0.1))
    status = run(fake, spec(size="1Gi", expand={"by": "2Gi"}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [s.name for s in status.steps] == ["createVolume", "publish", "expandVolume", "unpublish",
                                              "deleteVolume"]
    assert steps_of(status)["expandVolume"] == ("Succeeded", 6, 6, 0, 0)
    step = next(s for s in status.steps if s.name == "expandVolume")
    assert step.note is not None and step.note.startswith("online")
    controller, node = step.phases
    assert (controller.name, controller.objects, node.name, node.objects) == ("controller", 6, "node", 6)
    assert controller.latency is not None and node.latency is not None and step.latency is not None
    assert controller.latency.p50 >= 0.1 and node.latency.p50 >= 0.05  # each half ends on its own event
    assert controller.latency.max + node.latency.max >= step.latency.p50
    assert len(patches(fake)) == 6 and owned_left(fake) == []
    table = render_table({"metadata": {"name": "bench", "namespace": "runs"},
                          "status": status.model_dump(mode="json", exclude_none=True)})
    lines = table.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Expand Volume"))
    assert lines[at + 1].lstrip().startswith("└ controller") and lines[at + 2].lstrip().startswith("└ node")
    assert f"{node.latency.p50:.3f}" in lines[at + 2]


def test_offline_a_filesystem_claim_is_done_when_the_resizer_is_and_its_node_half_is_not_timed() -> None:
    """No pod mounts the claims, so the node's half waits for the next mount (the fake, like a cluster, leaves
    them FileSystemResizePending): the step ends with the controller's half and says so."""
    fake = FakeKube(Behaviour(resize_delay=0.05))
    status = run(fake, spec(expand={"to": "2Gi"}, steps=["createVolume", "expandVolume", "deleteVolume"]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "expandVolume")
    assert step.note is not None and "not timed here" in step.note
    assert [(p.name, p.objects) for p in step.phases] == [("controller", 6), ("node", 0)]
    assert step.latency is not None and step.latency.p50 >= 0.05


def test_claims_a_failed_publish_left_unbound_are_skipped_not_patched() -> None:
    """On a WaitForFirstConsumer class a claim binds when its pod is scheduled: a pod the API refused leaves its
    two claims unbound, which the API server would refuse to resize."""
    refused = NAMES.pod(1)
    fake = FakeKube(Behaviour(refuse_create=lambda plural, name: ApiError(403, "Forbidden", "exceeded quota")
                              if name == refused else None))
    fake.put("storageclasses", "", {"metadata": {"name": "wffc"}, "provisioner": "sim.csibench.io",
                                    "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True})
    status = run(fake, spec(storageClassName="wffc", expand={"to": "2Gi"}))
    assert steps_of(status)["expandVolume"] == ("Succeeded", 6, 4, 0, 2)
    assert len(patches(fake)) == 4 and owned_left(fake) == []


def test_offline_expansion_without_publish_and_a_block_volume_has_no_node_half() -> None:
    fake = FakeKube(Behaviour(resize_delay=0.05))
    status = run(fake, spec(volumeMode="Block", expand={"to": "2Gi"},
                            steps=["createVolume", "expandVolume", "deleteVolume"]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "expandVolume")
    assert step.note is not None and step.note.startswith("offline")
    assert [(p.name, p.objects) for p in step.phases] == [("controller", 6), ("node", 0)]


def test_a_class_that_does_not_allow_expansion_fails_before_anything_is_created() -> None:
    fake = FakeKube()
    fake.put("storageclasses", "", {"metadata": {"name": "fixed"}, "provisioner": "sim.csibench.io",
                                    "volumeBindingMode": "Immediate"})
    status = run(fake, spec(storageClassName="fixed", expand={"to": "2Gi"}))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "ExpansionNotAllowed" and "allowVolumeExpansion" in (status.message or "")
    assert not fake.named("persistentvolumeclaims", NAMES.namespace) and owned_left(fake) == []


def test_the_resizers_warning_fails_its_claim_with_the_message_quoted() -> None:
    fake = FakeKube(Behaviour(resize_fails={NAMES.volume(1), NAMES.volume(4)}))
    status = run(fake, spec(expand={"to": "2Gi"}, steps=["createVolume", "expandVolume", "deleteVolume"]))
    assert steps_of(status)["expandVolume"] == ("Failed", 6, 4, 2, 0)
    step = next(s for s in status.steps if s.name == "expandVolume")
    (reason,) = step.failureReasons
    assert (reason.reason, reason.count, reason.message) == ("VolumeResizeFailed", 2, "injected expansion failure")
    assert owned_left(fake) == []


def test_the_patch_raises_the_request_and_names_the_size_and_clones_request_the_new_size() -> None:
    run_spec = spec(size="1Gi", expand={"by": "2Gi"}, volumeSnapshotClassName="snap")
    assert expand.build_expansion(run_spec.volume_size) == {
        "metadata": {"annotations": {EXPAND_TO: GROWN}}, "spec": {"resources": {"requests": {"storage": GROWN}}}}
    claim = clone.build_clone_pvc("c", "s", run_spec, {})
    assert claim["spec"]["resources"] == {"requests": {"storage": GROWN}}  # a 3Gi snapshot restores into 3Gi
    fake = FakeKube()
    status = run(fake, run_spec)  # the whole lifecycle with the expansion in it
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert list(steps_of(status)) == ["createVolume", "publish", "expandVolume", "unpublish", "createSnapshot",
                                      "cloneFromSnapshot", "deleteClone", "deleteSnapshot", "deleteVolume"]


@pytest.mark.parametrize(("expand", "words"), [
    ({"to": "1Gi"}, "greater than size"),
    ({"to": "2Gi", "by": "1Gi"}, "exactly one of to and by"),
    ({}, "exactly one of to and by"),
    ({"by": "0"}, "greater than 0"),
    ({"by": "1Pi"}, "at most 1Pi"),
    ({"by": "0.5"}, "whole number of bytes"),
])
def test_an_expansion_that_cannot_grow_the_volumes_is_refused(expand: dict[str, str], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", "size": "1Gi", "expand": expand})


def test_steps_list_expand_volume_exactly_when_expand_is_set() -> None:
    with pytest.raises(ValidationError, match=r"exactly when spec\.expand is set"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", "steps": ["createVolume", "expandVolume"]})
    with pytest.raises(ValidationError, match=r"exactly when spec\.expand is set"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", "steps": ["createVolume"],
                                         "expand": {"to": "2Gi"}})


def test_an_interrupted_expansion_is_redone_on_volumes_made_again() -> None:
    """A volume cannot shrink back: the restore removes the publish pods and the claims, makes both again at the
    original size, and the redo measures every claim's expansion from scratch."""
    fake = FakeKube(Behaviour(bind_delay=0.05, ready_delay=0.05, release_delay=0.05, resize_delay=0.3))
    run_spec = spec(expand={"to": "2Gi"})
    previous = kill_when(fake, run_spec, running("expandVolume"), extra_sleep=0.1)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "expandVolume")
    assert (step.state.value, step.attempts, step.succeeded) == ("Succeeded", 2, 6)
    assert step.restored is not None and "pods of publish" in step.restored and "created 6 again" in step.restored
    assert len(patches(fake)) == 12  # every claim raised once per attempt
    assert owned_left(fake) == []
