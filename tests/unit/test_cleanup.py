"""Cleanup's one unlabelled deletion: snapshot contents the snapshot-controller left without their snapshots; and
what a cleanup that cannot finish says of the objects it leaves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunStatus
from csibench.engine.cleanup import CleanupResult, cleanup
from csibench.engine.deletion import clean_up_deleted_run
from csibench.engine.observed import BEING_CREATED, CONTENT_FINALIZER, Observed
from csibench.engine.reclaim import BEING_DELETED
from csibench.kube.events import MAX_EVENT_MESSAGE
from csibench.kube.ownership import RunScope
from csibench.kube.watch import WatchEvent
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, REF, run, spec

PREFIX = "run-abcde"
SNAPSHOT = f"{PREFIX}-s00000"


def _snapshot(uid: str) -> dict[str, Any]:
    return {"metadata": {"name": SNAPSHOT, "uid": uid}, "status": {"boundVolumeSnapshotContentName": None}}


def _content(name: str, snapshot_uid: str, uid: str, source: dict[str, str] | None = None,
             policy: str = "Delete", namespace: str = "runs", snapshot: str = SNAPSHOT,
             finalizers: tuple[str, ...] = (CONTENT_FINALIZER,)) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "finalizers": list(finalizers)},
            "spec": {"volumeSnapshotRef": {"namespace": namespace, "name": snapshot, "uid": snapshot_uid},
                     "source": source or {"volumeHandle": "vol-1"}, "deletionPolicy": policy,
                     "driver": "sim.csibench.io"}}


def _seen(observed: Observed, source: str, kind: str, obj: dict[str, Any]) -> None:
    observed.apply(WatchEvent(source, kind, obj, 1.0))


def test_only_a_content_the_controller_made_for_a_snapshot_of_ours_that_is_gone_is_orphaned() -> None:
    observed = Observed("runs", PREFIX)
    _seen(observed, "snapshots", "ADDED", _snapshot("s1"))
    for content in (_content("snapcontent-s1", "s1", "c1"),
                    _content("imported", "s1", "c2", source={"snapshotHandle": "snap-9"}),  # pre-provisioned
                    _content("snapcontent-s2", "s2", "c3"),  # a snapshot uid the run never saw
                    _content("snapcontent-s1r", "s1r", "c4", policy="Retain")):
        _seen(observed, "contents", "ADDED", content)
    assert orphans(observed) == []  # the snapshot is still there: the controller deletes its content
    _seen(observed, "snapshots", "DELETED", _snapshot("s1"))
    assert orphans(observed) == [("snapcontent-s1", "c1")]
    _seen(observed, "snapshots", "ADDED", _snapshot("s1-again"))  # a namesake (a redo) does not adopt it
    assert orphans(observed) == [("snapcontent-s1", "c1")]
    _seen(observed, "contents", "ADDED", _content("snapcontent-s1-again", "s1-again", "c5"))
    assert orphans(observed) == [("snapcontent-s1", "c1")]  # the namesake's own content is bound
    _seen(observed, "contents", "DELETED", _content("snapcontent-s1", "s1", "c1"))
    assert orphans(observed) == []


def test_a_content_without_the_controllers_finalizer_yet_is_not_reclaimed() -> None:
    """Deleting it would remove the object at once, and the snapshot on the storage would stay behind."""
    observed = Observed("runs", PREFIX)
    _seen(observed, "snapshots", "ADDED", _snapshot("s1"))
    _seen(observed, "snapshots", "DELETED", _snapshot("s1"))
    _seen(observed, "contents", "ADDED", _content("snapcontent-s1", "s1", "c1", finalizers=()))
    assert orphans(observed) == []
    _seen(observed, "contents", "MODIFIED", _content("snapcontent-s1", "s1", "c1"))
    assert orphans(observed) == [("snapcontent-s1", "c1")]


def test_a_content_whose_create_call_is_still_in_flight_is_reclaimed_only_once_it_answered() -> None:
    """csi-snapshotter does not act on a deletion while its CreateSnapshot call is unanswered, and the array's
    snapshot has to exist to be deleted: cleanup waits until csi-snapshotter lifts its mark."""
    observed = Observed("runs", PREFIX)
    _seen(observed, "snapshots", "ADDED", _snapshot("s1"))
    _seen(observed, "snapshots", "DELETED", _snapshot("s1"))
    creating = _content("snapcontent-s1", "s1", "c1")
    creating["metadata"]["annotations"] = {BEING_CREATED: "yes"}
    _seen(observed, "contents", "ADDED", creating)
    assert orphans(observed) == []
    _seen(observed, "contents", "MODIFIED", _content("snapcontent-s1", "s1", "c1"))
    assert orphans(observed) == [("snapcontent-s1", "c1")]


def orphans(observed: Observed) -> list[tuple[str, str]]:
    return [(name, ref.uid) for name, ref in observed.orphaned_contents()]


def test_cleanup_marks_and_deletes_an_orphaned_content_by_its_uid_and_nothing_else() -> None:
    async def scenario() -> None:
        fake = FakeKube()
        observed = Observed("runs", PREFIX)
        _seen(observed, "snapshots", "ADDED", _snapshot("s1"))
        _seen(observed, "snapshots", "DELETED", _snapshot("s1"))
        orphan = fake.put("volumesnapshotcontents", "", _content("snapcontent-s1", "s1", "c1"))
        imported = fake.put("volumesnapshotcontents", "", _content("imported", "s1", "c2",
                                                                    source={"snapshotHandle": "snap-9"}))
        for content in (orphan, imported):
            _seen(observed, "contents", "ADDED", content)
        replaced = fake.put("volumesnapshotcontents", "", _content("snapcontent-s2", "s2", "c3"))
        _seen(observed, "snapshots", "ADDED", {**_snapshot("s2"), "metadata": {"name": f"{PREFIX}-s00001",
                                                                               "uid": "s2"}})
        _seen(observed, "contents", "ADDED", {**replaced, "spec": {**replaced["spec"], "volumeSnapshotRef": {
            "namespace": "runs", "name": f"{PREFIX}-s00001", "uid": "s2"}}})
        _seen(observed, "snapshots", "DELETED", {"metadata": {"name": f"{PREFIX}-s00001", "uid": "s2"}})
        # What the run saw of snapcontent-s2 is not what is there now: deleted and made again since (new uid).
        fake.remove("volumesnapshotcontents", "", "snapcontent-s2")
        fake.put("volumesnapshotcontents", "", _content("snapcontent-s2", "s2", "c3-new"))
        # A snapshot someone took the run's label off: the label-selected watch said DELETED, but it is there.
        kept = f"{PREFIX}-s00002"
        fake.put("volumesnapshots", "runs", {"metadata": {"name": kept, "uid": "s3"}})
        _seen(observed, "snapshots", "ADDED", {"metadata": {"name": kept, "uid": "s3"}})
        _seen(observed, "snapshots", "DELETED", {"metadata": {"name": kept, "uid": "s3"}})
        theirs = fake.put("volumesnapshotcontents", "", _content("snapcontent-s3", "s3", "c6", snapshot=kept))
        _seen(observed, "contents", "ADDED", theirs)
        scope = RunScope("runs", PREFIX, "uid-1", owned_namespace=None)
        patched: list[dict[str, Any]] = []
        real_patch = fake.merge_patch

        async def recording_patch(path: str, body: dict[str, Any],
                                  on_send: Callable[[float], None] | None = None) -> dict[str, Any] | None:
            patched.append({"path": path, **body})
            return await real_patch(path, body, on_send)

        fake.merge_patch = recording_patch  # type: ignore[method-assign]
        result = await cleanup(fake, observed, scope, deadline_seconds=0.5)
        contents = fake.named("volumesnapshotcontents")
        assert "snapcontent-s1" not in contents and {"imported", "snapcontent-s2", "snapcontent-s3"} <= set(contents)
        assert BEING_DELETED not in (contents["snapcontent-s3"]["metadata"].get("annotations") or {})
        assert patched[0]["metadata"] == {"uid": "c1", "annotations": {BEING_DELETED: "yes"}}
        assert result.reclaimed == ("snapcontent-s1",)
        assert result.reclaim_error is not None and "snapcontent-s2" in result.reclaim_error
        assert "422" in result.reclaim_error
        assert not result.complete  # the import and the replaced content still point at the run's snapshots
        assert "deleted 1 snapshot content the snapshot-controller had left" in result.describe()

    asyncio.run(scenario())


STUCK_STEPS = ["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"]


def test_a_cleanup_that_cannot_finish_names_what_is_left_and_why_in_status_and_a_warning() -> None:
    """Snapshots whose finalizer nothing removes (a driver no sidecar serves) outlive cleanup's deadline: the
    run's status (status.cleanup and the CleanedUp condition) and a Warning Event name each of them, why it is
    left, and how many more there are; deleting the run then says so again before its finalizer goes."""
    fake = FakeKube(Behaviour(finalizers_kept=frozenset({"volumesnapshots"})))
    run_spec = spec(volumeSnapshotClassName="snap", steps=["createVolume", "createSnapshot"],
                    timeouts={"cleanup": 1})
    status = run(fake, run_spec)
    assert status.phase is not None and status.phase.value == "Failed", status.message
    snapshots = sorted(fake.named("volumesnapshots", NAMES.namespace))
    assert len(snapshots) == 6
    condition = next(c for c in status.conditions if c.type == "CleanedUp")
    assert (condition.status, condition.reason) == ("False", "CleanupIncomplete")
    for name in snapshots:
        assert f"VolumeSnapshot {NAMES.namespace}/{name} (deleting since" in condition.message, condition.message
    assert "held by finalizer snapshot.storage.kubernetes.io/volumesnapshot-bound-protection" in condition.message
    assert "VolumeSnapshotContent snapcontent-" in condition.message and " and 2 more" in condition.message
    assert f"(not being deleted; bound to VolumeSnapshot {NAMES.namespace}/{NAMES.prefix}-s0000" in condition.message
    assert status.cleanup == condition.message
    warnings = [e["message"] for e in fake.named("events", REF.namespace).values()
                if e["reason"] == "CleanupIncomplete" and e["type"] == "Warning"]
    # The Event's message is shorter than status's: it names as many as fit and counts the rest.
    assert len(warnings[0]) <= MAX_EVENT_MESSAGE and warnings[0].startswith(condition.message.split("; left: ")[0])
    named = [name for name in snapshots if f"VolumeSnapshot {NAMES.namespace}/{name} (deleting since" in warnings[0]]
    assert named == snapshots[:len(named)] and len(named) >= 2, warnings[0]
    assert warnings[0].endswith(f" and {12 - len(named)} more"), warnings[0]

    deleted = asyncio.run(_delete_run(fake, status))
    assert deleted is not None and not deleted.complete
    stored = fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"]
    after = next(c for c in stored["conditions"] if c["type"] == "CleanedUp")
    assert after["message"].startswith("after the run was deleted: cleanup incomplete") and snapshots[0] in \
        after["message"]
    assert stored["cleanup"] == after["message"] and stored["phase"] == "Failed"
    assert any(e["message"].startswith("after the run was deleted: cleanup incomplete") and e["type"] == "Warning"
               for e in fake.named("events", REF.namespace).values())


async def _delete_run(fake: FakeKube, status: BenchmarkRunStatus) -> CleanupResult | None:
    fake.loop = asyncio.get_running_loop()
    recorded = status.model_dump(mode="json", exclude_none=True)
    fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"] = recorded
    return await clean_up_deleted_run(fake, REF, recorded, deadline_seconds=1.0)


def test_a_deleted_runs_status_another_version_wrote_keeps_its_conditions_beside_cleaned_up() -> None:
    fake = FakeKube(Behaviour(finalizers_kept=frozenset({"volumesnapshots"})))
    status = run(fake, spec(volumeSnapshotClassName="snap", steps=["createVolume", "createSnapshot"],
                            timeouts={"cleanup": 1}))
    recorded = status.model_dump(mode="json", exclude_none=True)
    recorded["fieldOfANewerVersion"] = {"x": 1}
    with pytest.raises(ValidationError):  # so the status is not this version's
        BenchmarkRunStatus.model_validate(recorded)
    recorded["conditions"] = [c for c in recorded["conditions"] if c["type"] != "CleanedUp"]
    kept = [c["type"] for c in recorded["conditions"]]

    async def deleted() -> CleanupResult | None:
        fake.loop = asyncio.get_running_loop()
        fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"] = json.loads(json.dumps(recorded))
        # 3 s, not 0.5: beside two burners the listing alone outlasted 0.5 s (TimeoutError before any result)
        return await clean_up_deleted_run(fake, REF, recorded, deadline_seconds=3.0)
    assert asyncio.run(deleted()) is not None
    stored = fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"]
    assert "Ready" in kept and [c["type"] for c in stored["conditions"]] == [*kept, "CleanedUp"], stored
