"""Pure engine logic: plans, names, manifests, statistics, the step clock, observed state."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from typing import Any

import pytest

from csibench.api.models import BenchmarkRunSpec, StepName, StepState
from csibench.engine import manifests
from csibench.engine.clock import StepTracker
from csibench.engine.observed import CLAIM, POD, Observed
from csibench.engine.plan import Names, PlanError, pod_count, resolve_steps, volumes_of_pod
from csibench.engine.report_store import build_report_configmaps, decode_report, object_names
from csibench.engine.steps import DONE, Verdict, claim_and_volume_gone, pod_gone_and_detached
from csibench.engine.timing import human_duration, nearest_rank, summarize
from csibench.kube.client import TokenBucket
from csibench.kube.watch import WatchEvent


def spec(**fields: Any) -> BenchmarkRunSpec:
    return BenchmarkRunSpec.model_validate({"storageClassName": "sc", **fields})


def test_default_steps_depend_on_the_snapshot_class() -> None:
    assert resolve_steps(spec()) == [StepName.CREATE_VOLUME, StepName.PUBLISH, StepName.UNPUBLISH,
                                     StepName.DELETE_VOLUME]
    assert resolve_steps(spec(volumeSnapshotClassName="snap")) == list(StepName)


@pytest.mark.parametrize(("steps", "reason", "words"), [
    (["publish", "createVolume"], "InvalidSteps", "lifecycle order"),
    (["createVolume", "cloneFromSnapshot"], "InvalidSteps", "needs step createSnapshot"),
    (["publish"], "InvalidSteps", "needs step createVolume"),
    (["createVolume", "createVolume"], "InvalidSteps", "must not repeat"),
])
def test_bad_step_lists_fail_before_anything_is_created(steps: list[str], reason: str, words: str) -> None:
    with pytest.raises(PlanError) as failure:
        resolve_steps(spec(steps=steps, volumeSnapshotClassName="snap"))
    assert failure.value.reason == reason and words in str(failure.value)


def test_snapshot_steps_need_a_snapshot_class() -> None:
    with pytest.raises(PlanError) as failure:
        resolve_steps(spec(steps=["createVolume", "createSnapshot"]))
    assert failure.value.reason == "MissingVolumeSnapshotClass"


def test_names_are_deterministic_and_bounded() -> None:
    names = Names.for_run("seed-1000", "0123456789")
    assert names.volume(7) == "seed-1000-01234-v00007" and names.pod(0) == "seed-1000-01234-p00000"
    assert names.namespace == "csibench-seed-1000-01234" and len(Names.for_run("x" * 40, "u" * 36).namespace) <= 63
    with pytest.raises(PlanError):
        Names.for_run("x" * 41, "uid")


def test_pods_take_k_volumes_each() -> None:
    assert pod_count(10, 4) == 3
    assert [volumes_of_pod(p, 10, 4) for p in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_pods_meet_pod_security_restricted() -> None:
    pod = manifests.build_pod("p", ["a", "b"], spec(), {"l": "v"}, block=False)
    security, container = pod["spec"]["securityContext"], pod["spec"]["containers"][0]
    assert security["runAsNonRoot"] and security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]] == ["a", "b"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    block = manifests.build_pod("p", ["a"], spec(volumeMode="Block"), {}, block=True)
    assert "volumeDevices" in block["spec"]["containers"][0]


def test_clone_claims_point_at_their_snapshot() -> None:
    clone = manifests.build_clone_pvc("c", "s", spec(size="2Gi"), {"l": "v"})
    assert clone["spec"]["dataSource"] == {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot",
                                           "name": "s"}
    assert clone["spec"]["resources"]["requests"]["storage"] == "2Gi" and clone["metadata"]["labels"] == {"l": "v"}


def test_percentiles_are_nearest_rank_values() -> None:
    values = [float(v) for v in range(1, 101)]
    assert nearest_rank(values, 50) == 50 and nearest_rank(values, 99) == 99 and nearest_rank(values, 100) == 100
    latency = summarize([0.3, 0.1, 0.2])
    assert latency is not None and (latency.p50, latency.max, latency.mean) == (0.2, 0.3, 0.2)
    assert summarize([]) is None


@pytest.mark.parametrize(("seconds", "text"), [(3.21, "3.2s"), (630, "10m 30s"), (18052, "5h 00m 52s")])
def test_human_durations(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_step_clock_stops_at_the_last_terminal_event_and_fails_the_rest_at_timeout() -> None:
    async def scenario() -> StepTracker:
        tracker = StepTracker(StepName.CREATE_VOLUME, ["a", "b", "c"])
        tracker.start()
        assert tracker.started is not None
        for name in ("a", "b", "c"):
            tracker.mark_submitted(name, tracker.started)
        tracker.record("a", DONE, tracker.started + 0.5)
        tracker.record("b", Verdict(False, "ProvisioningFailed", "boom"), tracker.started + 0.2)
        tracker.record("a", Verdict(False, "Late", "ignored"), tracker.started + 9)  # first verdict wins
        await tracker.wait(0.05, lambda: {"c": "FailedScheduling: no nodes"})
        return tracker

    tracker = asyncio.run(scenario())
    status = tracker.status()
    assert (status.state, status.succeeded, status.failed) == (StepState.FAILED, 1, 2)
    reasons = {r.reason: r for r in status.failureReasons}
    assert set(reasons) == {"ProvisioningFailed", "Timeout"}
    assert "FailedScheduling" in reasons["Timeout"].message
    assert status.latency is not None and status.latency.max == pytest.approx(0.5)
    assert tracker.per_object()["result"] == ["ok", "ProvisioningFailed", "Timeout"]


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
    gone = pod_gone_and_detached(observed)
    observed.apply(_event("pods", "DELETED", pod))
    assert gone("run-abcde-p00000", 0.0) is None  # pod gone, volume still attached
    observed.apply(_event("attachments", "DELETED", attachment))
    assert gone("run-abcde-p00000", 0.0) == DONE

    deleted = claim_and_volume_gone(observed)
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


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    bucket = TokenBucket(qps=10, burst=5)
    waits = [bucket.reserve() for _ in range(7)]
    assert waits[:5] == [0.0] * 5
    assert waits[5] == pytest.approx(0.1, abs=0.01) and waits[6] == pytest.approx(0.2, abs=0.01)
    assert bucket.throttled_seconds == pytest.approx(0.3, abs=0.02)


def _report_of(volumes: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    steps = [{"objectPrefix": "run-abcde-v", "objectCount": volumes,
              "submitMs": [round(i * 0.8 + rng.random(), 1) for i in range(volumes)],
              "latencyMs": [round(rng.uniform(200, 90_000), 1) for _ in range(volumes)],
              "result": ["ok"] * volumes} for _ in range(8)]
    return {"steps": steps}


def test_a_10000_volume_report_fits_one_configmap_and_round_trips() -> None:
    report = _report_of(10_000, seed=1)
    configmaps = build_report_configmaps("run-abcde-report", "run", "uid", report)
    assert len(configmaps) == 1
    assert len(json.dumps(configmaps[0])) < 1024 * 1024  # the API server's object size limit
    encoded = base64.b64decode(configmaps[0]["binaryData"]["report.json.gz"])
    assert decode_report(encoded) == {"format": "csibench.io/report-v1", **report}
    assert object_names(report["steps"][0])[9999] == "run-abcde-v09999"


def test_a_100000_volume_report_is_split_into_configmaps_under_the_limit() -> None:
    report = _report_of(100_000, seed=2)
    configmaps = build_report_configmaps("big-report", "big", "uid", report)
    assert len(configmaps) > 1
    assert [c["metadata"]["name"] for c in configmaps[:2]] == ["big-report", "big-report-1"]
    assert all(len(json.dumps(c)) < 1024 * 1024 for c in configmaps)
    assert {c["metadata"]["annotations"]["csibench.io/report-chunks"] for c in configmaps} == {str(len(configmaps))}
    joined = b"".join(base64.b64decode(c["binaryData"]["report.json.gz"]) for c in configmaps)
    assert decode_report(joined)["steps"][7]["latencyMs"] == report["steps"][7]["latencyMs"]
