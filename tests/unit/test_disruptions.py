"""spec.disruptions: admission, the rights checked before anything exists, the figures, and a component restarted
inside a step of a run on the fake cluster (a controller there replaces the deleted pod)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import BenchmarkRunStatus, DisruptionResult, DisruptionSpec, DisruptionState
from csibench.engine.disruption_figures import Ending, disruption_figures
from csibench.engine.disruptions import never_reached
from csibench.engine.thresholds import judge_one
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, owned_left, run, spec

PROVISIONER = {"namespace": "kube-system", "selector": {"app.kubernetes.io/name": "csi-provisioner"}}


def disruption(**fields: Any) -> dict[str, Any]:
    return {"step": "createVolume", "afterObjects": 2, "component": PROVISIONER, **fields}


# -- admission ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("fields", "problem"), [
    ({"afterSeconds": 1.0}, "exactly one"),  # both moments
    ({"afterObjects": None}, "exactly one"),  # neither
    ({"step": "dataPath"}, "must be one of"),  # not a batch step
    ({"component": {"namespace": "kube-system", "selector": {}}}, "at least 1"),
    ({"component": {"namespace": "Kube_System", "selector": {"a": "b"}}}, "pattern"),
    ({"component": {"namespace": "kube-system", "selector": {"bad key!": "b"}}}, "selector key"),
])
def test_a_disruption_needs_one_moment_a_batch_step_and_a_valid_target(fields: dict[str, Any],
                                                                        problem: str) -> None:
    body = disruption(**fields)
    if fields.get("afterObjects", 0) is None:
        body.pop("afterObjects")
    with pytest.raises(ValidationError, match=problem):
        DisruptionSpec.model_validate(body)


@pytest.mark.parametrize(("fields", "problem"), [
    ({"steps": ["createVolume", "deleteVolume"], "disruptions": [disruption(step="publish")]}, "does not run"),
    ({"volumes": 2, "disruptions": [disruption(afterObjects=2)]}, "less than its step's objects"),
    ({"volumes": 6, "pvcsPerPod": 2, "disruptions": [disruption(step="publish", afterObjects=3)]},
     "publish has 3"),
    ({"repeat": 2, "disruptions": [disruption()]}, "repeat"),
])
def test_the_run_refuses_a_disruption_it_could_never_inject(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        spec(**fields)


# -- the figures ----------------------------------------------------------------------------------------------------
def test_figures_split_the_step_at_the_injection_and_find_the_stall_around_it() -> None:
    endings = [Ending("a", 1.0, True), Ending("b", 2.0, True), Ending("c", 9.0, True), Ending("d", 10.0, True),
               Ending("e", 11.0, False), Ending("f", 30.0, True)]
    figures = disruption_figures(endings, ["g"], injected=3.0, recovered=4.0, step_end=31.0)
    assert (figures.completed_before, figures.completed_after) == (2, 4)
    assert figures.throughput_before == pytest.approx(2 / 3, abs=1e-3)
    assert figures.throughput_after == pytest.approx(3 / 27, abs=1e-3)  # c, d, f (e failed) from 4 s to 31 s
    # from the injection at 3 to 9 (the second before it is idle time of its own); 11 -> 30 is longer but begins
    # after the recovery: not the fault's
    assert figures.stall_seconds == 6.0
    assert (figures.unrecovered, figures.unrecovered_names) == (2, ["e", "g"])


def test_figures_of_a_component_that_never_recovered_stall_to_the_steps_end() -> None:
    figures = disruption_figures([Ending("a", 1.0, True)], ["b", "c"], injected=0.0, recovered=None, step_end=60.0)
    assert figures.throughput_before is None and figures.throughput_after is None
    assert figures.stall_seconds == 59.0 and figures.unrecovered == 2


# -- on the fake cluster -------------------------------------------------------------------------------------------
def component_pod(name: str, **metadata: Any) -> dict[str, Any]:
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "csi-provisioner-5d9f", "uid": "rs",
              "controller": True}]
    return {"metadata": {"name": name, "labels": {"app.kubernetes.io/name": "csi-provisioner"},
                         "ownerReferences": owner, **metadata},
            "spec": {"nodeName": "node-0", "containers": [{"name": "csi-provisioner", "image": "p"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def lease(holder: str, transitions: int, acquired: float) -> dict[str, Any]:
    return {"metadata": {"name": "sim-csibench-io"}, "spec": {
        "holderIdentity": holder, "leaseTransitions": transitions, "leaseDurationSeconds": 15,
        "acquireTime": dt.datetime.fromtimestamp(acquired, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def replaced_after(fake: FakeKube, delay: float, leader_after: float | None = None,
                   then: Callable[[], object] | None = None) -> list[str]:
    """A Deployment in kube-system: a deleted pod comes back Ready (new uid) ``delay`` seconds later, and with
    ``leader_after``, its process takes the provisioner's Lease that much after the delete, and no claim binds
    before it has (as no create is done without a leader; a timer racing the binds flaked on a loaded machine).
    Returns the list of uids it deleted, filled as it goes."""
    deleted: list[str] = []
    original = fake._delete_one
    led = threading.Event()
    if leader_after is not None:  # no claim binds without a leader: the provisioner's work waits for its Lease
        bind = fake._bind

        def bind_once_led(namespace: str, name: str) -> None:
            if led.is_set() or not deleted:  # before the restart, the old leader binds
                bind(namespace, name)
            else:
                fake._later(0.02, lambda: bind_once_led(namespace, name))
        fake._bind = bind_once_led  # type: ignore[method-assign]  # the provisioner's leader, for this test

    def delete_one(plural: str, namespace: str, name: str) -> None:
        if plural == "pods" and namespace == "kube-system":
            deleted.append(fake.objects[(plural, namespace, name)]["metadata"]["uid"])
            original(plural, namespace, name)
            fake._later(delay, lambda: fake.put("pods", "kube-system", component_pod(name)))
            if leader_after is not None:
                def lead() -> None:
                    fake.put("leases", "kube-system", lease(f"{name}-b2mc7", 4, time.time()), event="MODIFIED")
                    led.set()
                fake._later(leader_after, lead)
            if then is not None:
                fake._later(0.1, then)
            return
        original(plural, namespace, name)
    fake._delete_one = delete_one  # type: ignore[method-assign]  # the fake's controller, for this test
    return deleted


def test_a_component_restarted_inside_create_volume_is_measured_and_the_batch_still_finishes() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.8))  # every claim binds at 0.8 s: the restart comes first
    fake.put("pods", "kube-system", component_pod("csi-provisioner-0"))
    first_uid = fake.objects[("pods", "kube-system", "csi-provisioner-0")]["metadata"]["uid"]
    bystander = fake.put("pods", "kube-system", {**component_pod("other"), "metadata": {
        "name": "other", "labels": {"app.kubernetes.io/name": "csi-attacher"}}})
    fake.put("leases", "kube-system", lease("csi-provisioner-0-x7k2p", 3, time.time() - 60))
    fake.put("leases", "kube-system", {**lease("someone-else", 9, time.time()), "metadata": {"name": "other"}})
    def provisioner_timed_out() -> None:  # what a sidecar says of a call cut by the restart: retried, not failed
        claim = next(o for k, o in list(fake.objects.items())
                     if k[0] == "persistentvolumeclaims" and k[2] == NAMES.volume(0))
        fake.warn(claim, "ProvisioningFailed", "failed to provision volume with StorageClass \"sim\": rpc error: "
                  "code = DeadlineExceeded desc = context deadline exceeded")
    deleted = replaced_after(fake, 0.3, leader_after=0.6, then=provisioner_timed_out)
    bounds = [{"disruption": 0, "metric": "recoverySeconds", "max": 5}, {"disruption": 0, "metric": "unrecovered",
                                                                          "max": 0},
              {"disruption": 0, "metric": "stallSeconds", "max": 0.1}]  # the last breaks: the batch stood still
    status = run(fake, spec(volumes=6, steps=["createVolume", "deleteVolume"], thresholds=bounds,
                            disruptions=[disruption(afterObjects=None, afterSeconds=0.1)]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    (result,) = status.disruptions
    assert result.state == DisruptionState.RECOVERED, result
    assert result.pods == ["csi-provisioner-0"] and deleted == [first_uid]
    assert result.injectedAtSeconds is not None and result.recoverySeconds is not None
    assert 0.3 <= result.recoverySeconds < 5, result
    # Not before its afterSeconds, and before the first bind (completedBefore 0): order, not the wall clock, which a
    # busy machine stretches (3.6 s once, with two CPU burners beside the test command).
    assert result.injectedAtSeconds >= 0.1, result
    assert (result.completedBefore, result.completedAfter, result.unrecovered) == (0, 6, 0)
    # Nothing completed from the start to the binds at 0.8 s: the stall is that stretch.
    assert result.stallSeconds is not None and 0.5 <= result.stallSeconds <= 2, result
    assert [(w.reason, w.cause, w.count, w.objects) for w in result.warnings] == [
        ("ProvisioningFailed", "DeadlineExceeded", 1, 1)]
    # The Lease the deleted pod held moved once; the new leader took it after the pod was Ready.
    assert result.leases == ["sim-csibench-io"] and result.leaseTransitions == 1, result
    assert result.leaderSeconds is not None and 0.5 <= result.leaderSeconds < 3, result
    assert result.leaderAcquiredAtSeconds == pytest.approx(result.injectedAtSeconds + result.leaderSeconds,
                                                           abs=0.01)
    # Only the selected component was touched; the run's own objects are gone.
    assert fake.objects[("pods", "kube-system", "other")]["metadata"]["uid"] == bystander["metadata"]["uid"]
    assert owned_left(fake) == []
    assert [(t.subject, t.metric, t.met) for t in status.thresholds] == [
        ("disruption 0", "recoverySeconds", True), ("disruption 0", "unrecovered", True),
        ("disruption 0", "stallSeconds", False)]


@pytest.mark.parametrize("takeovers", [1, 0, 2])
def test_a_leader_lease_taken_over_after_the_step_ended_is_measured_after_the_runs_last_step(takeovers: int) -> None:
    """The sidecars' successor waits for the old lease to expire, and that wait often falls in the next step: the
    Lease is read again after the run's last step; only then does a run say it was never taken over. A Lease that
    changed holder twice keeps only the last takeover's time: no leader time is given."""
    fake = FakeKube(Behaviour(bind_delay=0.05, release_delay=1.5))  # createVolume is quick, deleteVolume is not
    fake.put("pods", "kube-system", component_pod("csi-provisioner-0"))
    fake.put("leases", "kube-system", lease("csi-provisioner-0-x7k2p", 3, time.time() - 60))

    def new_leader() -> None:
        fake.put("leases", "kube-system", lease("csi-provisioner-0-b2mc7", 3 + takeovers, time.time()),
                 event="MODIFIED")
    replaced_after(fake, 0.05, then=(lambda: fake._later(0.7, new_leader)) if takeovers else None)
    status = run(fake, spec(volumes=2, pvcsPerPod=1, steps=["createVolume", "deleteVolume"],
                            disruptions=[disruption(afterObjects=None, afterSeconds=0.0)]))
    (result,) = status.disruptions
    create = next(s for s in status.steps if s.name == "createVolume")
    assert result.state == DisruptionState.RECOVERED and result.injectedAtSeconds is not None, result
    assert create.durationSeconds is not None and create.durationSeconds < 0.8, create
    assert result.leaseTransitions == takeovers, result
    if takeovers == 1:
        assert result.leaderSeconds is not None and 0.7 <= result.leaderSeconds < 2, result
        assert result.leaderAcquiredAtSeconds is not None and result.leaderAcquiredAtSeconds > create.durationSeconds
        assert "still named" not in (result.message or ""), result.message
    elif takeovers == 0:
        assert result.leaderSeconds is None, result
        assert "still named a deleted pod's identity after the run's last step" in (result.message or "")
    else:
        assert result.leaderSeconds is None and "changed holder more than once" in (result.message or ""), result


def test_a_component_that_never_recovered_breaks_a_bound_on_its_recovery() -> None:
    run_spec = spec(volumes=3, disruptions=[disruption()], thresholds=[
        {"disruption": 0, "metric": "recoverySeconds", "max": 30}, {"disruption": 0, "metric": "leaderSeconds",
                                                                    "max": 30}])
    status = BenchmarkRunStatus(disruptions=[DisruptionResult(
        step="createVolume", kind="RestartComponent", target="pods", state=DisruptionState.NOT_RECOVERED,
        injectedAtSeconds=1.0)])
    recovery, leader = (judge_one(run_spec, status, t) for t in run_spec.thresholds)
    assert recovery.met is False and "never" in recovery.message
    assert leader.met is None and "not measured" in leader.message  # no Lease seen: nothing to judge


def test_a_threshold_on_a_disruption_the_run_does_not_have_is_refused() -> None:
    with pytest.raises(ValidationError, match="disruption this run does not have"):
        spec(disruptions=[disruption()], thresholds=[{"disruption": 1, "metric": "stallSeconds", "max": 1}])
    with pytest.raises(ValidationError, match="metric is one of recoverySeconds"):
        spec(disruptions=[disruption()], thresholds=[{"disruption": 0, "metric": "throughput", "max": 1}])


def test_a_component_of_two_pods_recovers_when_both_replacements_are_ready() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.8))
    for name in ("csi-provisioner-0", "csi-provisioner-1"):
        fake.put("pods", "kube-system", component_pod(name))
    deleted = replaced_after(fake, 0.3)
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"],
                            disruptions=[disruption(afterObjects=None, afterSeconds=0.0)]))
    (result,) = status.disruptions
    assert result.state == DisruptionState.RECOVERED and sorted(result.pods) == ["csi-provisioner-0",
                                                                                 "csi-provisioner-1"], result
    assert len(deleted) == 2 and result.recoverySeconds is not None and result.recoverySeconds >= 0.3, result


def test_a_daemonset_of_many_pods_is_named_in_bounds_and_an_odd_lease_is_not_an_exception() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.5))
    for index in range(20):
        fake.put("pods", "kube-system", component_pod(f"csi-provisioner-{index:02d}"))
    odd = lease("csi-provisioner-00-x", 3, time.time())
    odd["spec"].update(leaseTransitions="many", acquireTime="not a time")
    fake.put("leases", "kube-system", odd)
    deleted = replaced_after(fake, 0.1, then=lambda: fake.put("leases", "kube-system", {**odd, "spec": {
        **odd["spec"], "holderIdentity": "someone-new"}}, event="MODIFIED"))
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"],
                            disruptions=[disruption(afterObjects=None, afterSeconds=0.0)]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    (result,) = status.disruptions
    assert result.state == DisruptionState.RECOVERED and len(deleted) == result.podsDeleted == 20, result
    assert result.pods == [f"csi-provisioner-{index:02d}" for index in range(16)]
    assert result.leases == ["sim-csibench-io"] and result.leaderSeconds is None and result.leaseTransitions == 0


def test_a_moment_the_step_never_reaches_injects_nothing() -> None:
    fake = FakeKube()
    fake.put("pods", "kube-system", component_pod("csi-provisioner-0"))
    deleted = replaced_after(fake, 0.1)
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"],
                            disruptions=[disruption(afterSeconds=600.0, afterObjects=None)]))
    (result,) = status.disruptions
    assert result.state == DisruptionState.NOT_REACHED and deleted == [] and result.pods == []


def test_no_pod_matching_the_component_fails_the_disruption_not_the_run() -> None:
    fake = FakeKube()
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"], disruptions=[disruption(
        afterObjects=0)]))
    (result,) = status.disruptions
    assert result.state == DisruptionState.FAILED and "no pod matches" in (result.message or "")
    assert status.phase is not None and status.phase.value == "Succeeded"


@pytest.mark.parametrize(("metadata", "problem"), [
    ({"annotations": {"kubernetes.io/config.mirror": "x"}}, "static pod's mirror: deleting it restarts nothing"),
    ({"ownerReferences": []}, "no controller: deleting it would remove it for good"),
])
def test_a_pod_that_would_not_come_back_is_not_deleted(metadata: dict[str, Any], problem: str) -> None:
    fake = FakeKube()
    fake.put("pods", "kube-system", component_pod("csi-provisioner-0", **metadata))
    deleted = replaced_after(fake, 0.1)
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"], disruptions=[disruption(
        afterObjects=0)]))
    (result,) = status.disruptions
    assert result.state == DisruptionState.FAILED and problem in (result.message or ""), result
    assert deleted == [] and ("pods", "kube-system", "csi-provisioner-0") in fake.objects


def test_a_run_that_ends_before_the_disruptions_step_says_it_never_reached_it() -> None:
    specs = [DisruptionSpec.model_validate(disruption()), DisruptionSpec.model_validate(disruption(step="publish"))]
    results: list[DisruptionResult] = []  # the run failed before its first step: none listed yet
    never_reached(results, specs)
    assert [(r.step, r.state) for r in results] == [("createVolume", DisruptionState.NOT_REACHED),
                                                    ("publish", DisruptionState.NOT_REACHED)]
    assert all("the run ended before" in (r.message or "") for r in results)
    done = results[0].model_copy(update={"state": DisruptionState.RECOVERED, "message": None})
    later = [done, results[1].model_copy(update={"state": DisruptionState.PENDING, "message": None})]
    never_reached(later, specs)
    assert [r.state for r in later] == [DisruptionState.RECOVERED, DisruptionState.NOT_REACHED]


def test_without_the_rights_the_run_fails_before_creating_anything_and_names_them() -> None:
    fake = FakeKube()
    fake.put("pods", "kube-system", component_pod("csi-provisioner-0"))
    fake.denied = {("delete", "pods", "kube-system"), ("watch", "pods", "kube-system")}
    status = run(fake, spec(volumes=3, disruptions=[disruption()]))
    assert status.phase is not None and status.phase.value == "Failed"
    ready = status.conditions[0]
    assert ready.reason == "MissingRights", ready
    assert "watch pods, delete pods in namespace kube-system" in ready.message, ready
    assert not fake.named("persistentvolumeclaims", "default") and owned_left(fake) == []
    assert ("pods", "kube-system", "csi-provisioner-0") in fake.objects
