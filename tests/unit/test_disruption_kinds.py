"""ScaleDown and PauseApiServer/PauseEtcd on the fake cluster: what each asks for, what it measures, and that a
scaled-down workload is given back on every exit path, and only by the run that marked it."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from csibench.api.models import DisruptionSpec, DisruptionState, WorkloadTarget
from csibench.engine.pausing import ANSWER_ANNOTATION, PAUSABLE_ANNOTATION, REQUEST_ANNOTATION, answer_of
from csibench.engine.scaling import (
    REPLICAS_BEFORE_ANNOTATION,
    SCALED_BY_ANNOTATION,
    marked_replicas,
    pod_selector,
    restore,
    scale_down,
    whole_replicas,
)
from csibench.kube.client import Json
from csibench.report import disruptions
from csibench.report.html import build_run_html
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import REF, UID, kill_when, owned_left, run, spec, stored_report
from tests.support.fake_workloads import CONTROLLER, scale_down_spec, with_deployment


# -- admission ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    scale_down_spec(seconds=None),  # how long?
    scale_down_spec(workload=None),  # what?
    {**scale_down_spec(), "component": {"namespace": "kube-system", "selector": {"a": "b"}}},  # two targets
    {"step": "publish", "afterObjects": 0, "kind": "PauseApiServer"},  # how long?
    {"step": "publish", "afterObjects": 0, "kind": "PauseEtcd", "seconds": 5, "workload": CONTROLLER},
    {"step": "publish", "afterObjects": 0, "component": {"namespace": "kube-system", "selector": {"a": "b"}},
     "seconds": 5},  # a restart lasts no seconds
    scale_down_spec(seconds=601),
    scale_down_spec(workload={**CONTROLLER, "kind": "DaemonSet"}),  # nothing to scale
])
def test_each_kind_names_exactly_what_it_acts_on(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DisruptionSpec.model_validate({k: v for k, v in body.items() if v is not None})


@pytest.mark.parametrize("disruptions", [
    [scale_down_spec(), scale_down_spec(step="deleteVolume")],  # one workload twice: the second's mark is the first's
    [{"step": "createVolume", "afterObjects": 0, "kind": "PauseEtcd", "seconds": 3},
     {"step": "createVolume", "afterSeconds": 1.0, "kind": "PauseEtcd", "seconds": 3}],  # the first resume ends both
])
def test_two_disruptions_that_would_undo_each_other_are_refused(disruptions: list[dict[str, Any]]) -> None:
    with pytest.raises(ValidationError, match="would undo each other"):
        spec(volumes=3, disruptions=disruptions)
    spec(volumes=3, disruptions=[disruptions[0], {**disruptions[1], "step": "deleteVolume"}] if "workload" not in
         disruptions[0] else disruptions[:1])  # apart, or alone: admitted


# -- pure -----------------------------------------------------------------------------------------------------------
def test_the_mark_proves_which_run_scaled_a_workload_down() -> None:
    marked = {"metadata": {"annotations": {SCALED_BY_ANNOTATION: UID, REPLICAS_BEFORE_ANNOTATION: "3"}}}
    assert marked_replicas(marked, UID) == 3
    assert marked_replicas(marked, "another-run") is None and marked_replicas(marked, "") is None
    assert [whole_replicas(v) for v in ("2", "-1", "1e3", "", "99999999", None, 3)] == [2] + [None] * 6
    assert pod_selector({"spec": {"selector": {"matchLabels": {"b": "2", "a": "1"}}}}) == "a=1,b=2"
    with pytest.raises(Exception, match="matchLabels"):
        pod_selector({"spec": {"selector": {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b"}]}}})


def test_a_pause_answer_counts_only_for_its_own_request() -> None:
    def pod(answer: object) -> Json:
        return {"metadata": {"annotations": {ANSWER_ANNOTATION: answer if isinstance(answer, str)
                                             else json.dumps(answer)}}}
    ok = {"id": "r1", "stoppedAt": "2026-12-06T10:00:00.000000Z", "resumedAt": "2026-12-06T10:00:05.000000Z"}
    assert answer_of(pod(ok), "r1") == (ok["stoppedAt"], ok["resumedAt"])
    assert answer_of(pod(ok), "r2") is None
    assert answer_of(pod("{not json"), "r1") is None and answer_of(pod(["r1"]), "r1") is None
    assert answer_of(pod({**ok, "resumedAt": 5}), "r1") is None and answer_of({}, "r1") is None


# -- a workload on the fake cluster ---------------------------------------------------------------------------------
def deployment(fake: FakeKube) -> Json:
    return fake.objects[("deployments", "csi-driver", "csi-controller")]


def test_a_workload_scaled_down_inside_a_step_is_given_back_and_its_recovery_measured() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.3))
    scaled = with_deployment(fake, replicas=2, ready_after=0.2)
    bounds = [{"disruption": 0, "metric": "recoverySeconds", "max": 5}]
    status = run(fake, spec(volumes=4, steps=["createVolume", "deleteVolume"], thresholds=bounds,
                            disruptions=[scale_down_spec(afterObjects=None, afterSeconds=0.05)]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    (result,) = status.disruptions
    assert result.state == DisruptionState.RECOVERED, result
    assert scaled == [0, 2] and result.replicasBefore == 2 and result.podsDeleted == 2
    assert result.injectedAtSeconds is not None and result.restoredAtSeconds is not None
    assert result.restoredAtSeconds - result.injectedAtSeconds == pytest.approx(1.0, abs=0.3)
    assert result.recoverySeconds is not None and 0.15 <= result.recoverySeconds < 1.5, result
    assert result.recoveredAtSeconds == pytest.approx(result.restoredAtSeconds + result.recoverySeconds, abs=0.002)
    annotations = deployment(fake)["metadata"].get("annotations") or {}
    assert SCALED_BY_ANNOTATION not in annotations and REPLICAS_BEFORE_ANNOTATION not in annotations
    labels = {"run": REF.label, "disruption": "0", "step": "createVolume", "kind": "ScaleDown"}
    for figure, value in [("recoverySeconds", result.recoverySeconds), ("stallSeconds", result.stallSeconds),
                          ("recovered", 1.0), ("containerRestarts", 0.0)]:
        assert REGISTRY.get_sample_value("csibench_disruption", {**labels, "figure": figure}) == value, figure
    assert deployment(fake)["spec"]["replicas"] == 2
    assert status.verdict is not None and status.verdict.value == "Pass", status.thresholds
    assert owned_left(fake) == []


def test_a_run_stopped_while_the_workload_is_down_gives_it_back() -> None:
    """The run's task cancelled (run deleted, operator stopping) during the seconds down: shielded give back."""
    fake = FakeKube(Behaviour(bind_delay=0.2))
    scaled = with_deployment(fake)
    run_spec = spec(volumes=3, steps=["createVolume", "deleteVolume"],
                    disruptions=[scale_down_spec(afterObjects=0, seconds=60)])
    kill_when(fake, run_spec, lambda status: any(d.get("state") == "Injected"
                                                 for d in status.get("disruptions") or []))
    assert scaled == [0, 2], scaled
    assert deployment(fake)["spec"]["replicas"] == 2
    assert SCALED_BY_ANNOTATION not in (deployment(fake)["metadata"].get("annotations") or {})


def test_a_restarted_operator_gives_back_what_it_had_scaled_down_before_failing_the_run() -> None:
    """The operator died while the workload was down (nothing gave it back): the run's end gives it back."""
    fake = FakeKube()
    with_deployment(fake, replicas=3)
    fake.loop = None
    asyncio.run(scale_down(fake, WorkloadTarget.model_validate(CONTROLLER), UID))
    assert deployment(fake)["spec"]["replicas"] == 0
    previous = {"phase": "Running", "targetNamespace": "default", "currentStep": "createVolume",
                "disruptions": [{"step": "createVolume", "kind": "ScaleDown", "target": "x", "state": "Injected"}]}
    status = run(fake, spec(volumes=3, restartPolicy="Fail", disruptions=[scale_down_spec(seconds=60)]), previous)
    assert status.phase is not None and status.phase.value == "Failed"
    assert deployment(fake)["spec"]["replicas"] == 3
    assert SCALED_BY_ANNOTATION not in (deployment(fake)["metadata"].get("annotations") or {})


def test_only_the_run_that_marked_a_workload_gives_it_back_or_scales_it_again() -> None:
    fake = FakeKube()
    with_deployment(fake, replicas=2)
    target = WorkloadTarget.model_validate(CONTROLLER)

    async def go() -> None:
        assert await scale_down(fake, target, "run-a") == 2
        assert await restore(fake, target, "run-b") is None  # not its mark: untouched
        assert deployment(fake)["spec"]["replicas"] == 0
        with pytest.raises(Exception, match="scaled down by another run"):
            await scale_down(fake, target, "run-b")
        assert await scale_down(fake, target, "run-a") == 2  # again, from its mark, not from zero
        assert await restore(fake, target, "run-a") == 2
        assert await restore(fake, target, "run-a") is None  # done once
        # Scaled by hand while it was down: the run removes its mark and leaves the replicas someone set
        assert await scale_down(fake, target, "run-a") == 2
        await fake.merge_patch("/apis/apps/v1/namespaces/csi-driver/deployments/csi-controller",
                               {"spec": {"replicas": 5}})
        assert await restore(fake, target, "run-a") == 0
    asyncio.run(go())
    assert deployment(fake)["spec"]["replicas"] == 5
    assert SCALED_BY_ANNOTATION not in (deployment(fake)["metadata"].get("annotations") or {})


def test_scaling_down_needs_the_patch_right_and_says_so_before_anything_exists() -> None:
    fake = FakeKube()
    with_deployment(fake)
    fake.denied = {("patch", "deployments", "csi-driver")}
    status = run(fake, spec(volumes=3, disruptions=[scale_down_spec()]))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "MissingRights"
    assert "patch deployments in namespace csi-driver" in status.conditions[0].message
    assert not fake.named("persistentvolumeclaims", "default") and deployment(fake)["spec"]["replicas"] == 2


# -- a pause on the fake cluster ------------------------------------------------------------------------------------
def pausable_pod(component: str = "kube-apiserver") -> Json:
    return {"metadata": {"name": f"{component}-node-0", "labels": {"component": component},
                         "annotations": {PAUSABLE_ANNOTATION: component, "kubernetes.io/config.mirror": "x"}},
            "spec": {"nodeName": "node-0", "containers": [{"name": component, "image": component}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def rfc3339_micro(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def with_pauser(fake: FakeKube, seconds_scale: float = 0.1) -> list[dict[str, Any]]:
    """The local cluster's pauser: a request on the pod is answered after its seconds (times ``seconds_scale``,
    to keep the test short) with when it stopped and resumed. Returns the requests, filled as they come."""
    requests: list[dict[str, Any]] = []
    original = fake.merge_patch

    async def merge_patch(path: str, body: Json, on_send: Any = None) -> Json | None:
        answer = await original(path, body, on_send)
        request = ((body.get("metadata") or {}).get("annotations") or {}).get(REQUEST_ANNOTATION)
        if request and answer is not None:
            asked = json.loads(request)
            requests.append(asked)
            stopped = time.time()

            def answered(name: str = answer["metadata"]["name"]) -> None:
                resumed = time.time()

                def write(pod: Json) -> None:
                    pod["metadata"]["annotations"][ANSWER_ANNOTATION] = json.dumps(
                        {"id": asked["id"], "stoppedAt": rfc3339_micro(stopped), "resumedAt": rfc3339_micro(resumed)})
                fake._update("pods", "kube-system", name, write)
            fake._later(asked["seconds"] * seconds_scale, answered)
        return answer
    fake.merge_patch = merge_patch  # type: ignore[method-assign]  # the local cluster's pauser, for this test
    return requests


def restarted(count: int) -> Callable[[Json], None]:
    def change(pod: Json) -> None:
        pod["status"]["containerStatuses"] = [{"name": "c", "restartCount": count}]
    return change


def test_a_pause_is_asked_of_the_local_cluster_and_recovers_when_it_answers() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.3))
    fake.put("pods", "kube-system", pausable_pod())
    sidecar = {**pausable_pod("csi-provisioner"), "metadata": {"name": "csi-provisioner-0"}}
    fake.put("pods", "kube-system", sidecar)
    fake._update("pods", "kube-system", "csi-provisioner-0", restarted(2))  # restarted twice before: not counted
    requests = with_pauser(fake)
    # The sidecar lost its lease during the pause and was restarted once
    original_later = fake._later

    def later(delay: float, action: Callable[[], object]) -> None:
        original_later(delay, action)
        if requests and delay > 0.2:
            original_later(delay / 2, lambda: fake._update("pods", "kube-system", "csi-provisioner-0", restarted(3)))
    fake._later = later  # type: ignore[method-assign]  # the sidecar's restart, timed inside the pause
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"], disruptions=[
        {"step": "createVolume", "afterObjects": 0, "kind": "PauseApiServer", "seconds": 3}]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    (result,) = status.disruptions
    assert result.state == DisruptionState.RECOVERED, result
    assert [r["seconds"] for r in requests] == [3] and requests[0]["id"].startswith(f"{REF.uid}/createVolume/")
    assert result.injectedAtSeconds is not None and result.restoredAtSeconds is not None
    assert result.restoredAtSeconds - result.injectedAtSeconds == pytest.approx(0.3, abs=0.15)
    assert result.recoverySeconds is not None and 0 <= result.recoverySeconds < 0.2, result
    assert result.pods == ["kube-apiserver-node-0"] and result.target == "kube-apiserver of the local cluster"
    assert result.containerRestarts == 1, result


def test_a_pause_on_a_cluster_that_is_not_the_local_one_fails_before_anything_exists() -> None:
    fake = FakeKube()
    fake.put("pods", "kube-system", {**pausable_pod("etcd"), "metadata": {
        "name": "etcd-node-0", "labels": {"component": "etcd"}}})  # kubeadm's etcd: not marked pausable
    status = run(fake, spec(volumes=3, disruptions=[{"step": "createVolume", "afterObjects": 0, "kind": "PauseEtcd",
                                                     "seconds": 5}]))
    assert status.phase is not None and status.phase.value == "Failed"
    assert "works only on csibench's local cluster" in status.conditions[0].message
    assert not fake.named("persistentvolumeclaims", "default")


def test_cancelled_before_the_scale_down_left_changes_nothing() -> None:
    fake = FakeKube(Behaviour(bind_delay=5))
    scaled = with_deployment(fake)
    run_spec = spec(volumes=3, steps=["createVolume", "deleteVolume"],
                    disruptions=[scale_down_spec(afterObjects=2)])
    with contextlib.suppress(AssertionError):
        kill_when(fake, run_spec, lambda status: status.get("currentStep") == "createVolume")
    assert scaled == [] and deployment(fake)["spec"]["replicas"] == 2
    assert SCALED_BY_ANNOTATION not in (deployment(fake)["metadata"].get("annotations") or {})


# -- the report -----------------------------------------------------------------------------------------------------
def test_the_report_keeps_each_disruption_and_the_page_shades_it_on_its_steps_timeline() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.3))
    with_deployment(fake, replicas=1, ready_after=0.1)
    status = run(fake, spec(volumes=4, steps=["createVolume", "deleteVolume"],
                            disruptions=[scale_down_spec(afterObjects=None, afterSeconds=0.05)]))
    body = {"metadata": {"namespace": REF.namespace, "name": REF.name}, "spec": {"storageClassName": "sim"},
            "status": status.model_dump(mode="json", exclude_none=True)}
    report = stored_report(fake)
    (kept,) = report["disruptions"]
    assert kept["kind"] == "ScaleDown" and kept["recoverySeconds"] == status.disruptions[0].recoverySeconds
    headers, rows = disruptions.table(body) or ([], [])
    assert headers[:4] == ["step", "disruption", "target", "state"]
    assert rows[0][:4] == ["createVolume", "ScaleDown", "Deployment csi-driver/csi-controller", "Recovered"]
    assert disruptions.marks(body, "createVolume") == [("ScaleDown", status.disruptions[0].injectedAtSeconds,
                                                        status.disruptions[0].recoveredAtSeconds)]
    assert disruptions.marks(body, "deleteVolume") == []
    page = build_run_html(body, report)
    assert "Disruptions (spec.disruptions" in page and "Deployment csi-driver/csi-controller" in page
    create = page[page.index('id="step-createVolume"'):page.index('id="step-deleteVolume"')]
    assert ">ScaleDown<" in create  # the shaded span's legend entry on its own step's timeline


def test_what_an_admission_policy_would_refuse_fails_the_run_before_anything_exists() -> None:
    """RBAC may grant a delete an admission policy refuses (deploy/base grants deleting pods and admits only a
    run's own): the disruption's requests are asked as dry runs first."""
    fake = FakeKube()
    fake.put("pods", "kube-system", {**pausable_pod("csi-provisioner"), "metadata": {
        "name": "csi-provisioner-0", "labels": {"app.kubernetes.io/name": "csi-provisioner"}, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}]}})
    fake.refused_by_admission[("DELETE", "/api/v1/namespaces/kube-system/pods/csi-provisioner-0")] = (
        "403 Forbidden: csibench-operator may only delete pods created by a BenchmarkRun")
    status = run(fake, spec(volumes=3, disruptions=[{
        "step": "createVolume", "afterObjects": 0,
        "component": {"namespace": "kube-system", "selector": {"app.kubernetes.io/name": "csi-provisioner"}}}]))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "MissingRights", status.conditions[0]
    assert "would refuse its DELETE of csi-provisioner-0 in kube-system" in status.conditions[0].message
    assert "may only delete pods created by a BenchmarkRun" in status.conditions[0].message
    assert not fake.named("persistentvolumeclaims", "default")
    assert ("pods", "kube-system", "csi-provisioner-0") in fake.objects
    assert ("DELETE (dry run)", "/api/v1/namespaces/kube-system/pods/csi-provisioner-0") in fake.log
