"""status.leaks on the fake cluster: a run with disruptions asks an array that answers audits what it still holds
of the run after cleanup (through a ConfigMap the run owns), counts by the cluster otherwise, and a ``leaked``
bound judges the count."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

from prometheus_client import REGISTRY

from csibench.api.models import DisruptionKind, DisruptionResult, StepName, StepStatus
from csibench.engine.array_requests import ANSWER_KEY, REQUEST_KEY
from csibench.engine.leak_audit import (
    ARRAY_AUDIT,
    answer_of,
    ask_array,
    leaks_from_answer,
    leaks_from_cleanup,
    repeat_times,
    repeats_per_disruption,
)
from csibench.kube.client import Json
from csibench.report import disruptions
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, REF, UID, run, spec
from tests.support.fake_workloads import scale_down_spec, with_deployment


def stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")

AUDIT = f"{NAMES.prefix}-array-audit"


def answering(fake: FakeKube, held: dict[str, Any]) -> list[str]:
    """The fake cluster's CSIDriver says its array answers audits, and the array answers each request with
    ``held``; returns the request ids it answered, in order."""
    fake.put("csidrivers", "", {"metadata": {"name": "sim.csibench.io", "annotations": {ARRAY_AUDIT: "configmap"}}})
    answered: list[str] = []
    create, patch = fake.create, fake.merge_patch

    def answer(path: str) -> None:
        configmap = fake.objects.get(("configmaps", REF.namespace, AUDIT))
        if configmap is None or not path.startswith(f"/api/v1/namespaces/{REF.namespace}/configmaps"):
            return
        request = json.loads(configmap["data"][REQUEST_KEY])
        if request["id"] in answered:
            return
        answered.append(request["id"])
        assert request["runUid"] == UID and configmap["metadata"]["labels"][ARRAY_AUDIT] == UID
        configmap["data"][ANSWER_KEY] = json.dumps({"id": request["id"], **held})

    async def create_then_answer(path: str, body: Json, on_send: Any = None, dry_run: bool = False) -> bool:
        created = await create(path, body, on_send, dry_run)
        answer(path)
        return created

    async def patch_then_answer(path: str, body: Json, on_send: Any = None) -> Json | None:
        patched = await patch(path, body, on_send)
        answer(path)
        return patched
    fake.create = create_then_answer  # type: ignore[method-assign]  # the array, for this test
    fake.merge_patch = patch_then_answer  # type: ignore[method-assign]
    return answered


HELD = {"volumeCount": 2, "volumes": ["pvc-a", "pvc-b"], "snapshotCount": 1, "snapshots": ["snapshot-c"],
        "repeatedCount": 1, "repeated": [{"operation": "createVolume", "object": "pvc-a", "times": 2}]}


def test_a_run_with_disruptions_counts_what_the_array_still_holds_and_a_leaked_bound_judges_it() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.3))  # the batch lasts past the moment (0.05 s into the step)
    with_deployment(fake, replicas=1, ready_after=0.05)
    answered = answering(fake, HELD)
    bounds = [{"disruption": 0, "metric": "leaked", "max": 0}]
    status = run(fake, spec(volumes=4, steps=["createVolume", "deleteVolume"], thresholds=bounds,
                            disruptions=[scale_down_spec(afterObjects=None, afterSeconds=0.05)]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    leaks = status.leaks
    assert leaks is not None and leaks.source == "Array", leaks
    assert (leaks.volumes, leaks.snapshots, leaks.leaked, leaks.repeatedOperations) == (2, 1, 3, 1), leaks
    assert leaks.names == ["pvc-a", "pvc-b", "snapshot-c"] and leaks.repeated == ["createVolume pvc-a x2"]
    assert len(answered) == 1
    # The request is the run's record, like its report: owned by the run, never labelled as one of its objects.
    audit = fake.objects[("configmaps", REF.namespace, AUDIT)]["metadata"]
    assert audit["ownerReferences"][0]["uid"] == UID and "csibench.io/run-uid" not in audit["labels"]
    assert audit["labels"]["csibench.io/report-of"] == REF.name
    assert status.verdict is not None and status.verdict.value == "Fail", status.thresholds
    assert "disruption 0 leaked 3 > 0 (max)" in (status.thresholds[0].message or ""), status.thresholds
    for figure, value in (("volumes", 2.0), ("snapshots", 1.0), ("leaked", 3.0), ("repeatedOperations", 1.0)):
        labels = {"run": REF.label, "source": "Array", "figure": figure}
        assert REGISTRY.get_sample_value("csibench_leaked", labels) == value, figure
    headers, rows = disruptions.leaks_table({"status": status.model_dump(mode="json")}) or ([], [])
    assert rows == [["Array", "2", "1", "3", "1", "pvc-a, pvc-b, snapshot-c", "-"]], (headers, rows)


def test_without_an_array_that_answers_the_cluster_counts_and_a_run_without_disruptions_is_not_audited() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.05))
    with_deployment(fake, replicas=1, ready_after=0.05)
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"],
                            disruptions=[scale_down_spec(afterObjects=1)]))
    assert status.leaks is not None and status.leaks.source == "Cluster", status.leaks
    assert (status.leaks.leaked, status.leaks.repeatedOperations, status.leaks.message) == (0, None, None)
    assert ("configmaps", REF.namespace, AUDIT) not in fake.objects  # nobody to ask
    plain = FakeKube(Behaviour(bind_delay=0.05))
    answering(plain, HELD)
    assert run(plain, spec(volumes=3, steps=["createVolume", "deleteVolume"])).leaks is None


def test_a_run_without_disruptions_with_a_bound_on_what_it_leaked_is_audited_and_judged() -> None:
    """A churn or a probe asks "did this leave anything?" without disrupting anything: the bound has no subject,
    and the run's cleanup is audited as a disrupted run's is."""
    fake = FakeKube(Behaviour(bind_delay=0.05))
    answered = answering(fake, HELD)
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"],
                            thresholds=[{"metric": "leaked", "max": 0}]))
    assert status.leaks is not None and status.leaks.source == "Array" and status.leaks.leaked == 3, status.leaks
    assert len(answered) == 1
    (judged,) = status.thresholds
    assert (judged.subject, judged.met, judged.measured) == ("run", False, 3.0), judged
    assert judged.message == "run leaked 3 > 0 (max)"
    assert status.verdict is not None and status.verdict.value == "Fail"
    clean = FakeKube(Behaviour(bind_delay=0.05))
    answering(clean, {"volumeCount": 0, "volumes": [], "snapshotCount": 0, "snapshots": [], "repeatedCount": 0,
                      "repeated": []})
    passed = run(clean, spec(volumes=3, steps=["createVolume", "deleteVolume"],
                             thresholds=[{"metric": "leaked", "max": 0}]))
    assert passed.verdict is not None and passed.verdict.value == "Pass", passed.thresholds


def test_an_array_that_does_not_answer_leaves_the_clusters_count_with_why() -> None:
    async def scenario() -> None:
        fake = FakeKube()
        fake.loop = asyncio.get_running_loop()
        assert await ask_array(fake, REF.namespace, AUDIT, REF.name, UID, wait_seconds=0.3) == (
            f"the array did not answer within 0.3s (ConfigMap {REF.namespace}/{AUDIT})")
        # Someone else's ConfigMap of that name: neither asked nor touched.
        fake.put("configmaps", REF.namespace, {"metadata": {"name": "theirs"}, "data": {"k": "v"}})
        said = await ask_array(fake, REF.namespace, "theirs", REF.name, UID, wait_seconds=0.3)
        assert said == f"ConfigMap {REF.namespace}/theirs exists and is not this run's: the array was not asked"
        assert fake.objects[("configmaps", REF.namespace, "theirs")]["data"] == {"k": "v"}

    asyncio.run(scenario())
    leaks = leaks_from_cleanup({"persistentvolumes": 1, "volumesnapshotcontents": 0}, {"persistentvolumes": ["pv-1"]},
                               message="the array did not answer")
    assert (leaks.source, leaks.leaked, leaks.clusterLeft, leaks.names, leaks.message) == (
        "Cluster", 1, 1, ["pv-1"], "the array did not answer")


def test_what_a_pv_of_the_run_still_names_is_not_leaked_and_a_malformed_answer_is_no_answer() -> None:
    leaks = leaks_from_answer({**HELD, "id": "r"}, still_named={"pvc-b"}, cluster_left=1)  # cleanup left pvc-b
    assert (leaks.volumes, leaks.snapshots, leaks.clusterLeft, leaks.leaked) == (1, 1, 1, 3), leaks
    assert leaks.names == ["pvc-a", "snapshot-c"] and leaks.message is None
    # More held than named, and cleanup left some: what the unnamed ones are is unknown, and status says so.
    many = leaks_from_answer({**HELD, "id": "r", "volumeCount": 60}, still_named={"pvc-b"}, cluster_left=1)
    assert many.volumes == 59 and many.message is not None and "more than it named" in many.message
    # The array's words are cut before they reach status: an answer or a refusal of any size keeps it small.
    huge = leaks_from_answer({**HELD, "id": "r", "volumes": ["pvc-" + "x" * 5000] * 50,
                              "repeated": [{"operation": "createVolume", "object": "y" * 5000, "times": 2}]},
                             still_named=set(), cluster_left=0)
    assert len(huge.names) == 20 and all(len(name) <= 253 for name in huge.names + huge.repeated), huge
    cut = leaks_from_cleanup({}, {}, message="z " * 5000)
    assert cut.message is not None and len(cut.message) <= 300
    good = {"data": {ANSWER_KEY: json.dumps({**HELD, "id": "r"})}}
    assert answer_of(good, "r") is not None and answer_of(good, "other") is None
    refused = {"data": {ANSWER_KEY: json.dumps({"id": "r", "error": "not yours"})}}
    assert answer_of(refused, "r") == {"id": "r", "error": "not yours"}
    for bad in ("{", "[]", json.dumps({**HELD, "id": "r", "volumeCount": -1}),
                json.dumps({**HELD, "id": "r", "repeatedCount": "1"}), json.dumps({**HELD, "id": "r", "volumes": 5}),
                json.dumps({**HELD, "id": "r", "volumes": "pvc-a"}), json.dumps({**HELD, "id": "r", "repeated": [1]}),
                json.dumps({**HELD, "id": "r", "volumeCount": True})):
        assert answer_of({"data": {ANSWER_KEY: bad}}, "r") is None, bad


def test_a_cleanup_resumed_by_a_restarted_operator_is_audited_too() -> None:
    """Every step had finished when the operator died in cleanup: the next one resumes cleanup, then asks the
    array, as the run's own end would have (the names PVs still give come from the resumed cleanup's watches)."""
    fake = FakeKube()
    with_deployment(fake, replicas=1)
    answering(fake, HELD)
    finished = {"name": "createVolume", "state": "Succeeded", "objects": 3, "succeeded": 3, "failed": 0,
                "skipped": 0}
    previous = {"phase": "CleaningUp", "targetNamespace": "default", "steps": [finished],
                "disruptions": [{"step": "createVolume", "kind": "ScaleDown", "target": "x", "state": "Recovered"}]}
    status = run(fake, spec(volumes=3, steps=["createVolume"], restartPolicy="Fail",
                            disruptions=[scale_down_spec(afterObjects=1)]), previous)
    assert status.cleanup is not None and "resumed" in status.cleanup, status.cleanup
    leaks = status.leaks
    assert leaks is not None and leaks.source == "Array" and leaks.leaked == 3, (leaks, status.message)


def test_each_disruption_is_given_the_repeats_that_began_in_its_window() -> None:
    """From its injection to its step's end or its recovery, whichever is later, on the step's wall clock; a repeat
    in two windows is the later injection's; a disruption never injected gets none; garbled stamps are skipped."""
    start = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC).timestamp()
    answer = {"repeated": [{"operation": "createVolume", "object": "pvc-a", "times": 3,
                            "at": [stamp(start + 4.0), stamp(start + 9.5), "not a time", 7]},
                           {"operation": "deleteVolume", "object": "pvc-b", "times": 2, "at": [stamp(start + 1.0)]},
                           {"operation": "createVolume", "object": "pvc-c", "times": 2, "at": "garbled"}]}
    times = repeat_times(answer)
    assert sorted(round(t - start, 3) for t in times) == [1.0, 4.0, 9.5]
    steps = [StepStatus(name=StepName.CREATE_VOLUME, startTime=stamp(start), durationSeconds=8.0)]
    late = DisruptionResult(step=StepName.CREATE_VOLUME, kind=DisruptionKind.RESTART_COMPONENT, target="x",
                            injectedAtSeconds=3.0, recoveredAtSeconds=10.0)
    early = DisruptionResult(step=StepName.CREATE_VOLUME, kind=DisruptionKind.RESTART_COMPONENT, target="x",
                             injectedAtSeconds=0.5)
    never = DisruptionResult(step=StepName.CREATE_VOLUME, kind=DisruptionKind.RESTART_COMPONENT, target="x")
    repeats_per_disruption([late, early, never], steps, times)
    # 4.0 is in both windows: the later injection's, so the shares add up to the three repeats
    assert (late.repeatedOperations, early.repeatedOperations, never.repeatedOperations) == (2, 1, None)


def test_a_resumed_cleanup_counts_the_pvs_of_claims_deleted_before_the_restart() -> None:
    """The operator died after the claims were deleted, while their PVs were still going: the resumed cleanup's
    watches never saw those claims, yet a PV naming one of the run's claims (its namespace, the run's prefix) is
    the run's: cleanup waits for it, and the array's volume it names is not counted as leaked."""
    fake = FakeKube()
    with_deployment(fake, replicas=1)
    answering(fake, HELD)
    fake.put("persistentvolumes", "", {"metadata": {"name": "pvc-b"}, "spec": {
        "claimRef": {"namespace": "default", "name": NAMES.volume(1), "uid": "a-claim-deleted-before-the-restart"},
        "csi": {"driver": "sim.csibench.io", "volumeHandle": "sim/pvc-b"}}, "status": {"phase": "Released"}})
    finished = {"name": "createVolume", "state": "Succeeded", "objects": 3, "succeeded": 3, "failed": 0,
                "skipped": 0}
    previous = {"phase": "CleaningUp", "targetNamespace": "default", "steps": [finished],
                "disruptions": [{"step": "createVolume", "kind": "ScaleDown", "target": "x", "state": "Recovered"}]}
    status = run(fake, spec(volumes=3, steps=["createVolume"], restartPolicy="Fail", timeouts={"cleanup": 1},
                            disruptions=[scale_down_spec(afterObjects=1)]), previous)
    assert status.cleanup is not None and "1 persistentvolumes" in status.cleanup, status.cleanup
    leaks = status.leaks
    assert leaks is not None and (leaks.volumes, leaks.clusterLeft) == (1, 1), leaks  # pvc-a held; pvc-b named
    assert "pvc-b" not in leaks.names and "pvc-a" in leaks.names, leaks
