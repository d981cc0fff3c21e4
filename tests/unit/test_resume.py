"""Resuming a run after an operator restart (restartPolicy Redo) at awkward moments, against the fake API server:
kills during a restore, around a step's record being stored, twice in one run, with damaged records."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from typing import Any

import pytest

from csibench.api.models import BenchmarkRunStatus
from csibench.engine.resume import resume as resume_run
from csibench.engine.run import RunEngine
from csibench.kube.client import ApiError
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import (
    NAMES,
    REF,
    UID,
    kill_when,
    leave_objects_of_a_lost_run,
    owned_left,
    resume,
    run,
    running,
    spec,
    status_of_a_lost_run,
    steps_of,
    stored_report,
)

PLAN = ["createVolume", "publish", "unpublish", "deleteVolume"]


def test_a_kill_during_the_restore_keeps_the_attempt_count_and_restores_again() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.05, ready_delay=0.3, pod_termination=1.0, release_delay=0.05))
    run_spec = spec(steps=PLAN)
    first = kill_when(fake, run_spec, running("publish"), extra_sleep=0.05)
    second = kill_when(fake, run_spec, lambda s: s.get("progress") == "restoring",
                       start=lambda engine: resume_run(engine, first), extra_sleep=0.1)
    assert {s["name"]: (s["state"], s.get("attempts")) for s in second["steps"]}["publish"] == ("Running", 2)
    status = resume(fake, run_spec, second)
    publish = next(s for s in status.steps if s.name == "publish")
    assert (publish.attempts, publish.state.value, publish.succeeded) == (3, "Succeeded", 3), status.message
    assert publish.restored and owned_left(fake) == []


def test_a_kill_while_a_steps_record_is_stored_redoes_that_step() -> None:
    fake = FakeKube()
    original = fake.create

    async def slow_configmaps(path: str, body: dict[str, Any], on_send: Any = None, dry_run: bool = False) -> bool:
        if "/configmaps" in path:
            await asyncio.sleep(5)  # a slow API server: the kill lands here
        return await original(path, body, on_send, dry_run)

    fake.create = slow_configmaps  # type: ignore[method-assign]
    run_spec = spec(steps=PLAN)
    previous = kill_when(fake, run_spec, lambda s: any(x["name"] == "createVolume" and x.get("objects")
                                                       and x["state"] == "Running" for x in s["steps"]),
                         extra_sleep=0.3)
    fake.create = original  # type: ignore[method-assign]
    assert next(s for s in previous["steps"] if s["name"] == "createVolume")["state"] == "Running"
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert steps_of(status)["createVolume"][0] == "Succeeded"


def test_a_kill_after_the_record_but_before_its_name_reached_status_keeps_the_step() -> None:
    fake = FakeKube()
    original = fake.get

    async def slow_class_check(path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        if path.endswith("/storageclasses/sim") and any(k[0] == "configmaps" for k in fake.objects):
            await asyncio.sleep(5)  # the check before step 2, after step 1's record was stored
        return await original(path, query)

    fake.get = slow_class_check  # type: ignore[method-assign]
    run_spec = spec(steps=PLAN)
    previous = kill_when(fake, run_spec, lambda s: any(x["name"] == "createVolume" and x["state"] == "Succeeded"
                                                       for x in s["steps"]), extra_sleep=0.1)
    fake.get = original  # type: ignore[method-assign]
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    create = next(s for s in status.steps if s.name == "createVolume")
    assert create.attempts == 1 and create.durationSeconds == next(
        s for s in previous["steps"] if s["name"] == "createVolume")["durationSeconds"]


def _damage(kind: str, configmap: dict[str, Any]) -> None:
    raw = base64.b64decode(configmap["binaryData"]["report.json.gz"])
    if kind == "not-gzip":
        configmap["binaryData"]["report.json.gz"] = base64.b64encode(b"hello").decode()
    elif kind == "truncated":
        configmap["binaryData"]["report.json.gz"] = base64.b64encode(raw[: len(raw) // 2]).decode()
    elif kind == "no-binaryData":
        configmap.pop("binaryData")
    elif kind == "short-arrays":
        report = json.loads(gzip.decompress(raw))
        for step in report["steps"]:
            step["result"] = step["result"][:-1]
        configmap["binaryData"]["report.json.gz"] = base64.b64encode(gzip.compress(json.dumps(report).encode()))\
            .decode()


@pytest.mark.parametrize("kind", ["not-gzip", "truncated", "no-binaryData", "short-arrays"])
def test_a_damaged_record_ends_the_run_with_a_reason_and_cleans_up(kind: str) -> None:
    fake = FakeKube(Behaviour(bind_delay=0.1, ready_delay=0.1, release_delay=0.1))
    run_spec = spec(steps=PLAN)
    previous = kill_when(fake, run_spec, running("publish"))
    _damage(kind, fake.objects[("configmaps", REF.namespace, NAMES.report)])
    status = resume(fake, run_spec, previous)
    assert status.conditions[0].reason == "OperatorRestarted" and "record" in (status.message or "")
    assert owned_left(fake) == []


def test_two_restarts_keep_both_interrupted_attempts_in_the_report() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.1, ready_delay=0.1, release_delay=0.1, pod_termination=0.1))
    run_spec = spec(steps=PLAN)
    first = kill_when(fake, run_spec, running("publish"))
    second = kill_when(fake, run_spec, running("deleteVolume"), start=lambda engine: resume_run(engine, first))
    status = resume(fake, run_spec, second)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [a["name"] for a in stored_report(fake)["interruptedAttempts"]] == ["publish", "deleteVolume"]


def test_a_redone_deletion_does_not_count_what_the_restore_removed() -> None:
    failed = NAMES.volume(1)
    fake = FakeKube(Behaviour(provisioning_fails={failed}, release_delay=0.05))
    original = fake.delete

    async def slow_deletes(path: str, propagation: str = "Background", query: dict[str, str] | None = None,
                           on_send: Any = None, uid: str | None = None, grace_seconds: int | None = None) -> bool:
        if "/persistentvolumeclaims/" in path:
            await asyncio.sleep(5)  # the kill lands before attempt 1's deletes reach the API
        return await original(path, propagation, query, on_send, uid, grace_seconds)

    fake.delete = slow_deletes  # type: ignore[method-assign]
    run_spec = spec(steps=["createVolume", "deleteVolume"], timeouts={"createVolume": 1})
    previous = kill_when(fake, run_spec, running("deleteVolume"), extra_sleep=0.05)
    fake.delete = original  # type: ignore[method-assign]
    status = resume(fake, run_spec, previous)
    assert steps_of(status)["deleteVolume"] == ("Succeeded", 6, 5, 0, 1)
    record = next(s for s in stored_report(fake)["steps"] if s["status"]["name"] == "deleteVolume")
    assert record["result"][1] == "Skipped"


def test_a_status_this_version_cannot_read_still_cleans_up_where_the_run_worked() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.1, ready_delay=0.1, release_delay=0.1))
    run_spec = spec(steps=PLAN)
    previous = kill_when(fake, run_spec, running("publish"))
    previous["steps"][0]["retries"] = 1  # a field a newer operator wrote (a rollback), or a hand edit
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Failed"
    assert not [k for k, o in fake.objects.items()
                if (o["metadata"].get("labels") or {}).get("csibench.io/run-uid") == UID]


def test_on_wait_for_first_consumer_a_pod_whose_claim_was_refused_is_skipped() -> None:
    refused = NAMES.volume(2)
    fake = FakeKube(Behaviour(refuse_create=lambda plural, name: ApiError(403, "Forbidden", "exceeded quota")
                              if name == refused else None))
    fake.put("storageclasses", "", {"metadata": {"name": "wffc"}, "provisioner": "sim.csibench.io",
                                    "volumeBindingMode": "WaitForFirstConsumer"})

    async def go() -> BenchmarkRunStatus:
        fake.loop = asyncio.get_running_loop()
        run_spec = spec(storageClassName="wffc", steps=PLAN)
        fake.put("benchmarkruns", REF.namespace, {"metadata": {"name": REF.name, "uid": REF.uid}, "spec": {}})
        return await RunEngine(REF, run_spec, fake).execute()

    status = asyncio.run(go())
    assert steps_of(status)["publish"] == ("Succeeded", 3, 2, 0, 1)


def test_publish_on_wait_for_first_consumer_is_not_redone_but_fails_with_the_reason() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.1, ready_delay=0.2, release_delay=0.1))
    fake.put("storageclasses", "", {"metadata": {"name": "wffc"}, "provisioner": "sim.csibench.io",
                                    "volumeBindingMode": "WaitForFirstConsumer"})
    run_spec = spec(storageClassName="wffc", steps=PLAN)
    previous = kill_when(fake, run_spec, running("publish"))
    status = resume(fake, run_spec, previous)
    assert status.conditions[0].reason == "RestoreFailed" and "WaitForFirstConsumer" in (status.message or "")
    assert owned_left(fake) == []


@pytest.mark.parametrize("interrupted", ["publish", "unpublish", "createSnapshot", "deleteVolume"])
def test_an_interrupted_step_is_restored_and_measured_again(interrupted: str) -> None:
    fake = FakeKube(Behaviour(bind_delay=0.1, ready_delay=0.1, snapshot_delay=0.1, release_delay=0.1,
                              pod_termination=0.1))
    run_spec = spec(volumeSnapshotClassName="snap")
    previous = kill_when(fake, run_spec, running(interrupted))
    before = {s["name"]: s for s in previous["steps"]}
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    by_name = {s.name: s for s in status.steps}
    redone = by_name[interrupted]
    assert (redone.state.value, redone.attempts, redone.succeeded) == ("Succeeded", 2, redone.objects)
    assert redone.restored and "not part of the step's time" in redone.restored and redone.restoredObjects
    for name, step in by_name.items():
        if before[name]["state"] == "Succeeded":  # finished before the restart: the same measurement
            assert step.durationSeconds == before[name]["durationSeconds"] and step.attempts == 1
    assert owned_left(fake) == []
    reasons = [o["reason"] for o in fake.named("events", REF.namespace).values()]
    assert "StepRestored" in reasons and reasons[-1] == "RunSucceeded"


def test_a_restore_deletes_snapshots_only_once_bound_so_no_content_is_orphaned() -> None:
    """Killed while its snapshots are still unbound: a snapshot deleted now would leave the content the
    snapshot-controller is creating for it, and a later restart would no longer know that content is the run's
    (seen on the local cluster with a kill in every step). The restore waits for the bound finalizer first."""
    fake = FakeKube(Behaviour(snapshot_delay=0.6, release_delay=0.05))
    run_spec = spec(steps=["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"],
                    volumeSnapshotClassName="snap", timeouts={"cleanup": 3})  # an orphan would hold cleanup up
    previous = kill_when(fake, run_spec, running("createSnapshot"), extra_sleep=0.05)
    assert fake.named("volumesnapshots", NAMES.namespace) and not any(
        (o.get("status") or {}).get("boundVolumeSnapshotContentName")
        for o in fake.named("volumesnapshots", NAMES.namespace).values())  # the kill came before any was bound
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert steps_of(status)["createSnapshot"][0] == "Succeeded"
    assert fake.unbound_snapshot_deletes == [] and owned_left(fake) == []


def test_a_restore_deletes_snapshots_only_once_taken_not_while_the_driver_still_takes_them() -> None:
    """Killed while its snapshots are bound (the controller's finalizer on) but not yet ready: csi-snapshotter
    still marks their contents as being created, and a snapshot deleted then waited for the sidecar's next resync
    (seen on the local cluster: two of twenty stuck four minutes). The restore waits until each is ready."""
    fake = FakeKube(Behaviour(snapshot_delay=0.05, snapshot_cut_delay=1.5, release_delay=0.05))
    run_spec = spec(steps=["createVolume", "createSnapshot", "deleteSnapshot", "deleteVolume"],
                    volumeSnapshotClassName="snap", timeouts={"cleanup": 3})

    def all_bound(status: dict[str, Any]) -> bool:
        """The moment itself, read from the fake (a fixed sleep missed it on a busy machine: one not bound yet)."""
        taken = list(fake.named("volumesnapshots", NAMES.namespace).values())
        return running("createSnapshot")(status) and len(taken) == 6 and all(
            (o.get("status") or {}).get("boundVolumeSnapshotContentName") for o in taken)

    previous = kill_when(fake, run_spec, all_bound, extra_sleep=0.0)
    snapshots = fake.named("volumesnapshots", NAMES.namespace).values()
    assert snapshots and all((o.get("status") or {}).get("boundVolumeSnapshotContentName")
                             and not o["status"]["readyToUse"] for o in snapshots)  # bound, still being taken
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert fake.unbound_snapshot_deletes == [] and fake.unready_snapshot_deletes == [] and owned_left(fake) == []


def test_the_attempt_limit_ends_the_run_with_the_step_named() -> None:
    fake = FakeKube()
    leave_objects_of_a_lost_run(fake)
    previous = status_of_a_lost_run([("createVolume", "Running"), ("deleteVolume", "Pending")])
    previous["steps"][0]["attempts"] = 2
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], maxStepAttempts=2), previous)  # Redo
    assert status.conditions[0].reason == "RestartLimitReached"
    assert "step createVolume was interrupted by operator restarts 2 times" in (status.message or "")
    assert owned_left(fake) == []
