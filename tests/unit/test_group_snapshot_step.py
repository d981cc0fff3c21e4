"""The group snapshot steps against the in-memory API server, whose snapshot-controller makes a group's content,
one unlabelled member snapshot (owned by the group) and content per selected claim, then marks the group ready:
the run labels its claims by group, a group is done only with every member ready, deleting waits for the members
and every content, bad classes fail before anything is created, and an interrupted step is redone."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunSpec
from csibench.engine import judges, manifests
from csibench.engine.kinds.group_snapshot import MEMBERS
from csibench.engine.observed import Observed
from csibench.engine.steps import group_snapshot
from csibench.kube.watch import WatchEvent
from csibench.report.html import build_run_html
from csibench.report.render import render_table
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import (
    LABEL,
    NAMES,
    kill_when,
    owned_left,
    resume,
    run,
    running,
    spec,
    steps_of,
    stored_report,
)

GROUPS = {"volumesPerGroup": 4, "volumeGroupSnapshotClassName": "group"}  # 6 volumes: groups of 4 and 2
STEPS = ["createVolume", "createGroupSnapshot", "deleteGroupSnapshot", "deleteVolume"]


def group_posts(fake: FakeKube) -> list[str]:
    return [path for verb, path in fake.log if verb == "POST" and "/volumegroupsnapshots" in path
            and "dryRun" not in path]


def test_each_group_selects_its_own_claims_and_is_done_with_every_member_ready() -> None:
    fake = FakeKube()
    status = run(fake, spec(groupSnapshot=GROUPS, steps=STEPS))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert steps_of(status) == {"createVolume": ("Succeeded", 6, 6, 0, 0),
                                "createGroupSnapshot": ("Succeeded", 2, 2, 0, 0),
                                "deleteGroupSnapshot": ("Succeeded", 2, 2, 0, 0),
                                "deleteVolume": ("Succeeded", 6, 6, 0, 0)}
    assert len(group_posts(fake)) == 2 and owned_left(fake) == []
    run_object = {"metadata": {"name": "bench", "namespace": "runs"},
                  "status": status.model_dump(mode="json", exclude_none=True)}
    table = render_table(run_object)
    assert "Create Group Snapshot" in table and "Delete Group Snapshot" in table and "group/s" in table, table
    assert "Create Group Snapshot" in build_run_html(run_object, stored_report(fake))
    manifest = group_snapshot.build_group_snapshot("g", "group", 4, LABEL, {**LABEL, manifests.GROUP_LABEL: "g"})
    assert manifest["spec"]["source"]["selector"]["matchLabels"] == {**LABEL, manifests.GROUP_LABEL: "g"}
    assert manifest["metadata"]["annotations"] == {MEMBERS: "4"}


def test_claims_carry_their_groups_label_and_nobody_elses_claims_join_a_group() -> None:
    fake = FakeKube()
    fake.put("persistentvolumeclaims", "runs", {"metadata": {"name": "users", "labels": {
        manifests.GROUP_LABEL: NAMES.group_snapshot(0)}}, "spec": {"volumeName": "pv-users"}})
    run_spec = spec(groupSnapshot=GROUPS, steps=STEPS[:2], targetNamespace="runs", cleanup="Never")
    status = run(fake, run_spec)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    claims = fake.named("persistentvolumeclaims", "runs")
    groups = {name: (claim["metadata"].get("labels") or {}).get(manifests.GROUP_LABEL) for name, claim in
              claims.items() if name != "users"}
    assert groups == {NAMES.volume(i): NAMES.group_snapshot(i // 4) for i in range(6)}
    members = [s for s in fake.named("volumesnapshots", "runs").values()
               if s["metadata"]["ownerReferences"][0]["name"] == NAMES.group_snapshot(0)]
    sources = sorted(m["spec"]["source"]["persistentVolumeClaimName"] for m in members)
    assert sources == [NAMES.volume(i) for i in range(4)]  # not "users": it lacks the run's uid label


def test_a_group_is_not_done_before_all_its_members_are_there_and_ready() -> None:
    observed = Observed("ns", NAMES.prefix)
    group = NAMES.group_snapshot(0)

    def event(source: str, kind: str, obj: dict[str, Any]) -> None:
        observed.apply(WatchEvent(source, kind, obj, at=1.0))
    event("groups", "ADDED", {"metadata": {"name": group, "uid": "g1", "annotations": {MEMBERS: "2"}},
                              "status": {"readyToUse": True}})
    judge = group_snapshot.group_snapshot_ready(observed, frozenset())
    owner = [{"kind": "VolumeGroupSnapshot", "name": group, "uid": "g1"}]
    event("members", "ADDED", {"metadata": {"name": "snapshot-a", "uid": "m1", "ownerReferences": owner},
                               "status": {"readyToUse": True}})
    assert judge(group, 0.0) is None  # one of two
    event("members", "ADDED", {"metadata": {"name": "snapshot-b", "uid": "m2", "ownerReferences": owner},
                               "status": {"readyToUse": False}})
    assert judge(group, 0.0) is None  # the second not ready
    event("members", "ADDED", {"metadata": {"name": "snapshot-c", "uid": "m3", "ownerReferences": [
        {"kind": "VolumeGroupSnapshot", "name": group, "uid": "a-namesake"}]}, "status": {"readyToUse": True}})
    assert judge(group, 0.0) is None  # a namesake's member is not this group's
    event("members", "MODIFIED", {"metadata": {"name": "snapshot-b", "uid": "m2", "ownerReferences": owner},
                                  "status": {"readyToUse": True}})
    assert judge(group, 0.0) == judges.DONE


def test_deleting_waits_for_members_and_every_content() -> None:
    observed = Observed("ns", NAMES.prefix)
    group = NAMES.group_snapshot(0)
    owner = [{"kind": "VolumeGroupSnapshot", "name": group, "uid": "g1"}]
    events: list[tuple[str, str, dict[str, Any]]] = [
        ("groups", "ADDED", {"metadata": {"name": group, "uid": "g1"},
                             "status": {"boundVolumeGroupSnapshotContentName": "gc"}}),
        ("group_contents", "ADDED", {"metadata": {"name": "gc"}, "spec": {"volumeGroupSnapshotRef": {
            "namespace": "ns", "name": group, "uid": "g1"}}}),
        ("contents", "ADDED", {"metadata": {"name": "snapcontent-a", "annotations": {
            "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle": "h"}},
            "spec": {"volumeSnapshotRef": {"namespace": "ns", "name": "snapshot-a"}}}),
        ("members", "ADDED", {"metadata": {"name": "snapshot-a", "uid": "m1", "ownerReferences": owner}}),
    ]
    for source, kind, obj in events:
        observed.apply(WatchEvent(source, kind, obj, at=1.0))
    gone = group_snapshot.group_snapshot_gone(observed, frozenset())
    for source, _kind, obj in events:  # each removal alone leaves something: not gone until the last
        assert gone(group, 0.0) is None
        observed.apply(WatchEvent(source, "DELETED", obj, at=2.0))
    assert gone(group, 0.0) == judges.DONE


def test_a_missing_or_foreign_group_class_fails_before_anything_is_created() -> None:
    fake = FakeKube()
    status = run(fake, spec(groupSnapshot={**GROUPS, "volumeGroupSnapshotClassName": "nope"}, steps=STEPS))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "VolumeGroupSnapshotClassNotFound"
    fake.put("volumegroupsnapshotclasses", "", {"metadata": {"name": "other"}, "driver": "other.example.com"})
    status = run(fake, spec(groupSnapshot={**GROUPS, "volumeGroupSnapshotClassName": "other"}, steps=STEPS))
    assert status.conditions[0].reason == "InvalidSpec" and "other.example.com" in (status.message or "")
    fake = FakeKube(Behaviour(group_snapshots_served=False))
    status = run(fake, spec(groupSnapshot=GROUPS, steps=STEPS))
    assert status.conditions[0].reason == "GroupSnapshotAPINotInstalled"
    assert not fake.named("persistentvolumeclaims", NAMES.namespace) and owned_left(fake) == []


def test_steps_list_create_group_snapshot_exactly_when_group_snapshot_is_set() -> None:
    with pytest.raises(ValidationError, match=r"exactly when spec\.groupSnapshot is set"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", "steps": ["createVolume", "createGroupSnapshot"]})
    with pytest.raises(ValidationError, match="volumeGroupSnapshotClassName"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", "groupSnapshot": {"volumesPerGroup": 2}})
    with pytest.raises(ValidationError, match="volumesPerGroup"):
        BenchmarkRunSpec.model_validate({"storageClassName": "sc", "groupSnapshot": {
            "volumesPerGroup": 0, "volumeGroupSnapshotClassName": "g"}})


@pytest.mark.parametrize("step", ["createGroupSnapshot", "deleteGroupSnapshot"])
def test_an_interrupted_group_snapshot_step_is_redone_and_leaves_nothing(step: str) -> None:
    fake = FakeKube(Behaviour(snapshot_delay=0.3, release_delay=0.3))
    run_spec = spec(groupSnapshot=GROUPS, steps=STEPS)
    previous = kill_when(fake, run_spec, running(step), extra_sleep=0.05)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    redone = next(s for s in status.steps if s.name == step)
    assert (redone.state.value, redone.attempts, redone.succeeded) == ("Succeeded", 2, 2)
    assert owned_left(fake) == [] and fake.unready_group_deletes == [] and fake.groups_made_over_members == []


def test_cleanup_waits_for_a_group_being_taken_before_deleting_it() -> None:
    """Killed mid-createGroupSnapshot with restartPolicy Fail: cleanup deletes the groups only once they are ready
    (deleted while the storage takes one, external-snapshotter forgets it and the storage keeps it)."""
    fake = FakeKube(Behaviour(snapshot_delay=0.5))
    run_spec = spec(groupSnapshot=GROUPS, steps=STEPS, restartPolicy="Fail")
    previous = kill_when(fake, run_spec, running("createGroupSnapshot"), extra_sleep=0.05)
    status = run(fake, run_spec, previous)  # restartPolicy Fail: recover_after_restart
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "OperatorRestarted"
    assert owned_left(fake) == [] and fake.unready_group_deletes == []
    assert [path for verb, path in fake.log if verb == "DELETE" and "volumegroupsnapshots" in path]


def test_a_group_still_being_taken_when_its_step_timed_out_is_not_deleted_until_it_settles() -> None:
    """createGroupSnapshot times out while the storage is still taking the groups: deleteGroupSnapshot skips them
    (deleted now, they would be removed from the API and kept by the storage), and cleanup deletes them once ready."""
    fake = FakeKube(Behaviour(snapshot_delay=2.0))
    status = run(fake, spec(groupSnapshot=GROUPS, steps=STEPS, timeouts={"createGroupSnapshot": 1}))
    assert steps_of(status)["createGroupSnapshot"] == ("Failed", 2, 0, 2, 0)
    assert steps_of(status)["deleteGroupSnapshot"] == ("Succeeded", 2, 0, 0, 2)
    assert owned_left(fake) == [] and fake.unready_group_deletes == []


def test_groups_with_a_claim_left_unbound_are_skipped() -> None:
    """On a WaitForFirstConsumer class createVolume ends when a claim is stored, so a claim that never binds has not
    failed: the snapshot-controller would refuse it as a member, so its group is skipped, not failed."""
    fake = FakeKube(Behaviour(never_bind={NAMES.volume(2)}))
    fake.put("storageclasses", "", {"metadata": {"name": "wffc"}, "provisioner": "sim.csibench.io",
                                    "volumeBindingMode": "WaitForFirstConsumer"})
    status = run(fake, spec(storageClassName="wffc", groupSnapshot=GROUPS,
                            steps=["createVolume", "publish", "unpublish", *STEPS[1:]]))
    assert steps_of(status)["createVolume"] == ("Succeeded", 6, 6, 0, 0)
    assert steps_of(status)["createGroupSnapshot"] == ("Succeeded", 2, 1, 0, 1)
    assert len(group_posts(fake)) == 1 and owned_left(fake) == []


def test_the_group_steps_latency_splits_where_the_storage_answered() -> None:
    """Taking a group: the controller's group content appears, then carries the storage's handle (the array's
    CreateVolumeGroupSnapshot returned), then the members are made; deleting: the group content goes (the array's
    delete returned), then the group, then the members. The boundaries follow those events, in order."""
    observed = Observed("ns", NAMES.prefix)
    group = NAMES.group_snapshot(0)
    ref = {"namespace": "ns", "name": group, "uid": "g1"}
    content = {"metadata": {"name": "gc"}, "spec": {"volumeGroupSnapshotRef": ref}}
    content_exists, taken = group_snapshot.group_create_boundaries(observed)
    observed.apply(WatchEvent("groups", "ADDED", {"metadata": {"name": group, "uid": "g1"}}, at=1.0))
    assert not content_exists(group) and not taken(group)
    observed.apply(WatchEvent("group_contents", "ADDED", content, at=2.0))
    assert not content_exists(group)  # the group names its content once the controller bound them
    observed.apply(WatchEvent("groups", "MODIFIED", {"metadata": {"name": group, "uid": "g1"},
                                                     "status": {"boundVolumeGroupSnapshotContentName": "gc"}}, at=2.0))
    assert content_exists(group) and not taken(group)
    observed.apply(WatchEvent("group_contents", "MODIFIED", {**content, "status": {
        "volumeGroupSnapshotHandle": "h", "readyToUse": True}}, at=3.0))
    assert taken(group)
    content_gone, group_gone = group_snapshot.group_delete_boundaries(observed)
    assert not content_gone(group) and not group_gone(group)
    observed.apply(WatchEvent("group_contents", "DELETED", content, at=4.0))
    assert content_gone(group) and not group_gone(group) and not taken(group)
    observed.apply(WatchEvent("groups", "DELETED", {"metadata": {"name": group, "uid": "g1"}}, at=5.0))
    assert group_gone(group)


def test_the_group_steps_report_their_parts_and_the_parts_add_up() -> None:
    fake = FakeKube()
    status = run(fake, spec(groupSnapshot=GROUPS, steps=STEPS))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    steps = {s.name: s for s in status.steps}
    assert [p.name for p in steps["createGroupSnapshot"].phases] == ["content", "taken", "members"]
    assert [p.name for p in steps["deleteGroupSnapshot"].phases] == ["content", "group", "members"]
    for name in ("createGroupSnapshot", "deleteGroupSnapshot"):
        record = next(s for s in stored_report(fake)["steps"] if s["status"]["name"] == name)
        for latency, parts in zip(record["latencyMs"], record["phaseMs"], strict=True):
            assert abs(sum(parts) - latency) <= 0.2, (name, parts, latency)
