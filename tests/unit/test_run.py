"""The run engine end to end against the in-memory fake API server: steps, skip rules, verdicts, restart
recovery and cleanup decisions, in seconds and without a cluster."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from csibench.api.models import StepName
from csibench.api.steps import STEP_FACTS, StepFacts
from csibench.engine import catalog, judges
from csibench.engine.actions import CREATE
from csibench.engine.cleanup import cleanup
from csibench.engine.context import scope_of
from csibench.engine.observed import CLAIM
from csibench.engine.skips import skip_nothing
from csibench.engine.step import StepContext, StepSpec
from csibench.kube import resources as r
from csibench.kube.client import ApiError
from csibench.report.render import render_table
from tests.support.catalog_rules import assert_consistent_entry
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import (
    NAMES,
    REF,
    leave_objects_of_a_lost_run,
    owned_left,
    run,
    spec,
    status_of_a_lost_run,
    steps_of,
)


def test_a_full_lifecycle_counts_every_object_and_leaves_nothing() -> None:
    fake = FakeKube()
    status = run(fake, spec(volumeSnapshotClassName="snap"))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert steps_of(status) == {
        "createVolume": ("Succeeded", 6, 6, 0, 0), "publish": ("Succeeded", 3, 3, 0, 0),
        "unpublish": ("Succeeded", 3, 3, 0, 0), "createSnapshot": ("Succeeded", 6, 6, 0, 0),
        "cloneFromSnapshot": ("Succeeded", 6, 6, 0, 0), "deleteClone": ("Succeeded", 6, 6, 0, 0),
        "deleteSnapshot": ("Succeeded", 6, 6, 0, 0), "deleteVolume": ("Succeeded", 6, 6, 0, 0)}
    assert status.conditions[0].reason == "Succeeded" and status.conditions[0].status == "True"
    assert status.ownedNamespace == NAMES.namespace and owned_left(fake) == []
    assert ("namespaces", "", NAMES.namespace) not in fake.objects
    reasons = [o["reason"] for o in fake.named("events", REF.namespace).values()]
    assert reasons.count("StepStarted") == 8 and reasons.count("StepCompleted") == 8 and "RunSucceeded" in reasons


def test_each_step_is_running_in_status_before_its_first_request() -> None:
    fake = FakeKube()
    run(fake, spec(volumeSnapshotClassName="snap"))
    states: dict[str, str] = {}
    first_request: dict[str, dict[str, str]] = {}
    letters = {"v": "createVolume", "p": "publish", "s": "createSnapshot", "c": "cloneFromSnapshot"}
    for entry, detail in fake.timeline:
        if entry == "status":
            states = {s["name"]: s["state"] for s in detail.get("steps") or []}
        elif match := re.search(re.escape(NAMES.prefix) + r"-([vpsc])\d{5}$", str(detail)):
            letter = match.group(1)
            step = letters[letter] if entry == "POST" else {"v": "deleteVolume", "p": "unpublish",
                                                             "s": "deleteSnapshot", "c": "deleteClone"}[letter]
            first_request.setdefault(step, dict(states))
    assert len(first_request) == 8
    for step, seen in first_request.items():
        assert seen[step] == "Running", (step, seen)


def test_status_writes_send_what_changed_and_the_stored_status_is_the_whole_status() -> None:
    fake = FakeKube()
    status = run(fake, spec(volumeSnapshotClassName="snap"))
    first, later = fake.status_patches[0], fake.status_patches[1:]
    assert "phase" in first and "conditions" in first  # a recorder's first write sends everything
    assert "environment" in first or any("environment" in patch for patch in later)
    assert sum("environment" in patch for patch in fake.status_patches) == 1  # written once, never again
    assert all(patch for patch in fake.status_patches)  # nothing written when nothing changed
    stored = fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"]
    assert stored == status.model_dump(mode="json", exclude_none=True)


def test_a_recorder_sends_one_status_write_at_a_time() -> None:
    """Two writes in flight could reach the server in the other order, leaving it with the older value of a field
    the recorder then believes written (the database step's log follower and the progress timer both write)."""
    from csibench.engine.status import StatusRecorder
    fake = FakeKube()
    fake.put("benchmarkruns", REF.namespace, {"metadata": {"name": REF.name, "uid": REF.uid}})
    in_flight, most = 0, 0
    original = fake.merge_patch

    async def slow(path: str, body: dict[str, Any],
                   on_send: Callable[[float], None] | None = None) -> dict[str, Any] | None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return await original(path, body, on_send)

    fake.merge_patch = slow  # type: ignore[method-assign]

    async def go() -> None:
        recorder = StatusRecorder(REF, fake)
        writes = []
        for progress in ("1/6 rows", "2/6 rows", "3/6 rows"):
            recorder.status.progress = progress
            writes.append(asyncio.create_task(recorder.write()))
            await asyncio.sleep(0)
        await asyncio.gather(*writes)

    asyncio.run(go())
    assert most == 1
    assert fake.objects[("benchmarkruns", REF.namespace, REF.name)]["status"]["progress"] == "3/6 rows"


def test_skip_rules_follow_the_catalog() -> None:
    """Volume 1 fails: its snapshot and clone are skipped, and so is the pod that mounts it; deletions act
    only on what exists."""
    fake = FakeKube(Behaviour(provisioning_fails={NAMES.volume(1)}))
    status = run(fake, spec(volumeSnapshotClassName="snap"))
    assert steps_of(status) == {
        "createVolume": ("Failed", 6, 5, 1, 0), "publish": ("Succeeded", 3, 2, 0, 1),
        "unpublish": ("Succeeded", 3, 2, 0, 1), "createSnapshot": ("Succeeded", 6, 5, 0, 1),
        "cloneFromSnapshot": ("Succeeded", 6, 5, 0, 1), "deleteClone": ("Succeeded", 6, 5, 0, 1),
        "deleteSnapshot": ("Succeeded", 6, 5, 0, 1), "deleteVolume": ("Succeeded", 6, 6, 0, 0)}
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "ObjectsFailed"
    assert "createVolume: 1 of 6 failed (ProvisioningFailed): injected failure" in (status.message or "")
    assert owned_left(fake) == []


def test_deletion_steps_skip_objects_the_api_refused_to_create() -> None:
    refused = NAMES.volume(2)

    def quota(plural: str, name: str) -> ApiError | None:
        return ApiError(403, "Forbidden", "exceeded quota: few") if name == refused else None

    fake = FakeKube(Behaviour(refuse_create=quota))
    status = run(fake, spec(steps=["createVolume", "deleteVolume"]))
    assert steps_of(status)["createVolume"] == ("Failed", 6, 5, 1, 0)
    assert steps_of(status)["deleteVolume"] == ("Succeeded", 6, 5, 0, 1)
    assert "exceeded quota" in (status.message or "")


def test_an_existing_object_of_the_runs_name_is_a_conflict_and_is_never_deleted() -> None:
    fake = FakeKube()
    fake.put("namespaces", "", {"metadata": {"name": "shared"}})
    fake.put("persistentvolumeclaims", "shared", {"metadata": {"name": NAMES.volume(0)}, "spec": {}})
    status = run(fake, spec(targetNamespace="shared", steps=["createVolume", "deleteVolume"]))
    create = next(s for s in status.steps if s.name == "createVolume")
    assert (create.failed, create.failureReasons[0].reason) == (1, "NameConflict")
    assert steps_of(status)["deleteVolume"] == ("Succeeded", 6, 5, 0, 1)
    assert ("persistentvolumeclaims", "shared", NAMES.volume(0)) in fake.objects
    assert status.ownedNamespace is None and ("namespaces", "", "shared") in fake.objects


def test_an_incomplete_cleanup_fails_the_run() -> None:
    fake = FakeKube(Behaviour(release_delay=3.0))
    status = run(fake, spec(steps=["createVolume"], timeouts={"cleanup": 1}))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "CleanupIncomplete" and "still present" in (status.message or "")


def test_recovery_marks_the_running_step_interrupted_and_cleans_up() -> None:
    fake = FakeKube()
    leave_objects_of_a_lost_run(fake)
    previous = status_of_a_lost_run([("createVolume", "Running"), ("deleteVolume", "Pending")])
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], restartPolicy="Fail"), previous)
    assert steps_of(status)["createVolume"][0] == "Interrupted"
    assert (status.conditions[0].reason, status.phase and status.phase.value) == ("OperatorRestarted", "Failed")
    assert "during step createVolume" in (status.message or "")
    assert "resumed after an operator restart" in (status.cleanup or "")
    assert owned_left(fake) == [] and ("namespaces", "", NAMES.namespace) not in fake.objects


def test_recovery_after_the_last_step_resumes_cleanup_and_keeps_the_verdict() -> None:
    fake = FakeKube()
    leave_objects_of_a_lost_run(fake)
    previous = status_of_a_lost_run([("createVolume", "Succeeded"), ("deleteVolume", "Succeeded")])
    status = run(fake, spec(steps=["createVolume", "deleteVolume"]), previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert "cleanup resumed after an operator restart" in (status.message or "")
    reasons = [o["reason"] for o in fake.named("events", REF.namespace).values()]
    assert reasons == ["RunSucceeded"]  # the same verdict path as a normal run, Event included


def test_cleanup_never_deletes_a_namespace_without_the_runs_label() -> None:
    fake = FakeKube()
    fake.put("namespaces", "", {"metadata": {"name": NAMES.namespace}})  # a namesake, not the run's
    fake.put("configmaps", NAMES.namespace, {"metadata": {"name": "precious"}})

    async def go() -> str:
        fake.loop = asyncio.get_running_loop()
        result = await cleanup(fake, None, scope_of(REF, None), 5.0)
        return result.describe()

    described = asyncio.run(go())
    assert ("namespaces", "", NAMES.namespace) in fake.objects
    assert ("configmaps", NAMES.namespace, "precious") in fake.objects
    assert "does not carry this run's label" in described
    assert ("DELETE", r.NAMESPACES.path(name=NAMES.namespace)) not in fake.log


def _watch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("csibench-watch-") and t.is_alive()]


def test_cleanup_stops_its_watches_when_they_cannot_start() -> None:
    """They used to keep relisting (a failing request each) after every timed-out cleanup."""
    fake = FakeKube()
    fake.list_failures = 10_000
    before = set(_watch_threads())  # earlier tests' threads may still be winding down: only ours count

    async def go() -> None:
        fake.loop = asyncio.get_running_loop()
        await cleanup(fake, None, scope_of(REF, "runs"), 0.5)

    with pytest.raises(TimeoutError):
        asyncio.run(go())
    deadline = time.monotonic() + 5
    while set(_watch_threads()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(_watch_threads()) - before
    requests = fake.requests
    time.sleep(0.7)
    assert fake.requests == requests  # nobody is relisting any more


def _scratch_volume(context: StepContext, index: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{context.names.prefix}-x{index:05d}", "labels": context.labels},
            "spec": {"storageClassName": context.spec.storageClassName}}


SCRATCH = StepSpec(facts=StepFacts("createScratchVolume", "Create Scratch Volume", "vol"), kind=CLAIM,
                   resource=r.PVCS, action=CREATE,
                   object_name=lambda names, index: f"{names.prefix}-x{index:05d}", count=lambda s: s.volumes,
                   judge=judges.claim_bound, skip=skip_nothing, terminal_warnings=frozenset({"ProvisioningFailed"}),
                   manifest=_scratch_volume, report_key="scratch", gone=judges.claim_and_volume_gone)


def test_an_entry_put_straight_into_the_catalog_joins_the_default_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(STEP_FACTS, SCRATCH.name, SCRATCH.facts)
    monkeypatch.setitem(catalog.STEPS, SCRATCH.name, SCRATCH)
    fake = FakeKube()
    status = run(fake, spec())  # the default plan: every step the classes allow, now with this one
    assert [s.name for s in status.steps] == ["createVolume", "publish", "unpublish", "deleteVolume",
                                              "createScratchVolume"]
    assert steps_of(status)["createScratchVolume"] == ("Succeeded", 6, 6, 0, 0)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert owned_left(fake) == []
    table = render_table({"metadata": {"name": "bench", "namespace": "runs"},
                          "status": status.model_dump(mode="json", exclude_none=True)})
    assert "Create Scratch Volume" in table and "vol/s" in table


def test_every_step_name_has_one_consistent_catalog_entry() -> None:
    assert list(catalog.STEPS) == [s.value for s in StepName] == list(STEP_FACTS)
    for name, step in catalog.STEPS.items():
        assert_consistent_entry(name, step)
    with pytest.raises(KeyError, match="not in the step catalog"):
        catalog.step_named("teleport")
