"""The density ramp and Pack placement against the in-memory API server: each level's pods pinned to one node,
timed to Ready and to every volume attached, then removed; a level above the driver's per-node limit (CSINode) and
too few usable nodes refused before anything is created; Pack filling nodes in order up to their limits; the
scheduler's refusal at the limit failing a pod at once with its words."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from csibench.engine import judges
from csibench.engine.judges import PUBLISH_FAILED
from csibench.engine.observed import Observed
from csibench.engine.steps.density import level_of, levels_of
from csibench.engine.steps.publish import packed_node
from csibench.kube.watch import WatchEvent
from csibench.report.compare import render_compare
from csibench.report.render import render_table
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, Status, kill_when, owned_left, resume, run, running, spec, steps_of

RAMP = ["createVolume", "density", "deleteVolume"]


def limits(fake: FakeKube, count: int, nodes: tuple[str, ...] = ("node-0", "node-1", "node-2")) -> None:
    for node in nodes:
        fake.put("csinodes", "", {"metadata": {"name": node}, "spec": {"drivers": [
            {"name": "other.example.com", "nodeID": node, "allocatable": {"count": 1}},
            {"name": "sim.csibench.io", "nodeID": node, "allocatable": {"count": count}}]}})


def pinned(body: dict[str, Any]) -> str:
    terms = body["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return str(terms["nodeSelectorTerms"][0]["matchFields"][0]["values"][0])


def test_levels_are_consecutive_runs_of_pods() -> None:
    assert levels_of([1, 2, 5], 2) == [(1, 0, 1), (2, 1, 1), (5, 2, 3)]
    assert [level_of([1, 2, 5], 2, i) for i in range(5)] == [(1, 0), (2, 0), (5, 0), (5, 1), (5, 2)]
    with pytest.raises(IndexError):
        level_of([1, 2, 5], 2, 5)


def test_each_level_is_published_on_one_node_and_measured_in_a_row() -> None:
    fake = FakeKube(Behaviour(ready_delay=0.05, start_delay=0.02))
    limits(fake, 8)
    status = run(fake, spec(volumes=4, pvcsPerPod=1, steps=RAMP, density={"volumesPerNode": [1, 2, 4]}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert steps_of(status)["density"] == ("Succeeded", 7, 7, 0, 0)
    assert [(r.volumesPerNode, r.pods, r.node, r.state.value) for r in status.density] == [
        (1, 1, "node-0", "Succeeded"), (2, 2, "node-0", "Succeeded"), (4, 4, "node-0", "Succeeded")]
    for row in status.density:
        assert row.latency is not None and row.attach is not None and row.throughput and row.detachSeconds
        assert row.attach.p50 < row.latency.p50  # attached before the pod started
    pods = [body for path, body in fake.created if path.endswith("/pods")]
    assert [body["metadata"]["name"] for body in pods] == [NAMES.density_pod(i) for i in range(7)]
    assert {pinned(body) for body in pods} == {"node-0"}
    # Level 4 mounts volumes 0..3; level 1 only volume 0.
    assert [v["persistentVolumeClaim"]["claimName"] for v in pods[0]["spec"]["volumes"]] == [NAMES.volume(0)]
    step = next(s for s in status.steps if s.name == "density")
    assert step.note == ("on node node-0, which had room for 8 volumes of the class's driver when the run started "
                         "(CSINode allocatable.count less those attached there)")
    table = render_table(status_json(status))
    assert "Density (volumes per node)" in table and "Volumes/node" in table
    compared = render_compare(status_json(status), status_json(status))
    assert "Density, B vs A per level" in compared and "carry no significance test" in compared
    assert owned_left(fake) == [] and not fake.named("volumeattachments")


def status_json(status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "bench", "namespace": "runs"}, "spec": {"storageClassName": "sim"},
            "status": status.model_dump(mode="json", exclude_none=True)}


def test_a_driver_without_a_limit_is_said_and_a_chosen_node_is_used() -> None:
    fake = FakeKube()
    status = run(fake, spec(volumes=2, pvcsPerPod=1, steps=RAMP,
                            density={"volumesPerNode": [2], "node": "node-2"}))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "density")
    assert step.note is not None and "reports no per-node volume limit" in step.note and "node-2" in step.note
    assert {pinned(body) for path, body in fake.created if path.endswith("/pods")} == {"node-2"}


@pytest.mark.parametrize(("density", "attached", "reason", "words"), [
    ({"volumesPerNode": [2, 4]}, 0, "AboveVolumeLimit", "goes to 4, above node node-0's limit of 3 volumes of "
                                                        "driver sim.csibench.io (CSINode allocatable.count):"),
    ({"volumesPerNode": [2]}, 2, "AboveVolumeLimit", "limit of 3 volumes of driver sim.csibench.io (CSINode "
                                                     "allocatable.count), 2 of them attached there already"),
    ({"volumesPerNode": [2], "node": "node-9"}, 0, "NotEnoughNodes", "density.node 'node-9' cannot run"),
])
def test_a_ramp_the_node_cannot_take_fails_before_anything_is_created(density: dict[str, Any], attached: int,
                                                                      reason: str, words: str) -> None:
    fake = FakeKube()
    limits(fake, 3)
    for index in range(attached):  # someone else's volumes on the node
        fake.put("volumeattachments", "", {"metadata": {"name": f"other-{index}"}, "spec": {
            "attacher": "sim.csibench.io", "nodeName": "node-0", "source": {"persistentVolumeName": f"pv-{index}"}}})
    status = run(fake, spec(volumes=4, pvcsPerPod=1, steps=RAMP, density=density))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == reason and words in (status.message or ""), status.message
    assert [path for path, _ in fake.created if not path.endswith("/events")] == []  # nothing created


def test_the_ramp_is_validated_at_admission() -> None:
    for density, words in (({"volumesPerNode": [4, 2]}, "strictly increasing"),
                           ({"volumesPerNode": [2, 2]}, "strictly increasing"),
                           ({"volumesPerNode": [8]}, "each level must be at most volumes"),
                           ({"volumesPerNode": []}, "at least 1 item")):
        with pytest.raises(ValidationError, match=words):
            spec(volumes=4, steps=RAMP, density=density)
    with pytest.raises(ValidationError, match="density needs unpublish when publish runs"):
        spec(volumes=4, steps=["createVolume", "publish", "density", "deleteVolume"],
             density={"volumesPerNode": [2]})
    with pytest.raises(ValidationError, match="density cannot be combined with repeat > 1"):
        spec(volumes=4, steps=RAMP, density={"volumesPerNode": [2]}, repeat=2)
    with pytest.raises(ValidationError, match=r"steps must list density exactly when spec\.density is set"):
        spec(volumes=4, steps=["createVolume", "deleteVolume"], density={"volumesPerNode": [2]})


def test_pack_fills_nodes_in_order_up_to_their_limits() -> None:
    nodes = ("node-0", "node-1", "node-2")
    assert [packed_node(i, 2, nodes, dict.fromkeys(nodes, 5)) for i in range(8)] == [
        "node-0", "node-0", "node-1", "node-1", "node-2", "node-2", "node-2", "node-2"]  # 2 pods of 2 per node
    assert [packed_node(i, 1, nodes, {"node-0": 1, "node-1": None}) for i in range(3)] == ["node-0", "node-1",
                                                                                          "node-1"]
    fake = FakeKube()
    limits(fake, 2)
    status = run(fake, spec(volumes=6, pvcsPerPod=1, pod={"placement": "Pack"},
                            steps=["createVolume", "publish", "unpublish", "deleteVolume"]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [pinned(body) for path, body in fake.created if path.endswith("/pods")] == [
        "node-0", "node-0", "node-1", "node-1", "node-2", "node-2"]
    publish = next(s for s in status.steps if s.name == "publish")
    assert publish.note == "Pack: pods pinned to the first node with room under its volume limit (room when the " \
                           "run started: node-0 2, node-1 2, node-2 2)"


@pytest.mark.parametrize("message", [
    "0/3 nodes are available: 1 node(s) exceed max volume count, 2 node(s) didn't match Pod's node "
    "affinity/selector.",
    "0/3 nodes are available: 1 node(s) exceed max volume count, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
    "no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming "
    "pod, 2 Preemption is not helpful for scheduling.",  # kube-scheduler v1.36.3's words, seen on the local cluster
])
def test_the_schedulers_refusal_at_the_volume_limit_fails_a_pod_at_once(message: str) -> None:
    observed = Observed("ns", "run-abcde")
    observed.apply(_event("pods", "ADDED", {"metadata": {"name": "run-abcde-p00000", "uid": "p1"}}))
    judge = judges.pod_ready(observed, PUBLISH_FAILED)
    warning = {"metadata": {"name": "e1"}, "type": "Warning", "reason": "FailedScheduling",
               "involvedObject": {"uid": "p1"}, "message": "0/3 nodes are available: 3 Insufficient cpu."}
    observed.apply(_event("events", "ADDED", warning, at=2.0))
    assert judge("run-abcde-p00000", 1.0) is None  # may resolve itself
    mixed = {**warning, "metadata": {"name": "e3"}, "message": "0/3 nodes are available: 1 node(s) exceed max volume "
             "count, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found."}
    observed.apply(_event("events", "ADDED", mixed, at=2.5))
    assert judge("run-abcde-p00000", 1.0) is None  # CPU may free up: not only the volume limit
    observed.apply(_event("events", "ADDED", {**warning, "metadata": {"name": "e2"}, "message": message}, at=3.0))
    verdict = judge("run-abcde-p00000", 1.0)
    assert verdict is not None and (verdict.ok, verdict.reason, verdict.message) == (False, "FailedScheduling",
                                                                                     message)


def _event(source: str, kind: str, obj: dict[str, Any], at: float = 1.0) -> WatchEvent:
    return WatchEvent(source, kind, obj, at)


def test_operator_killed_inside_the_ramp_redoes_it_from_the_first_level() -> None:
    fake = FakeKube(Behaviour(ready_delay=0.2, release_delay=0.05))
    run_spec = spec(volumes=4, pvcsPerPod=1, steps=RAMP, density={"volumesPerNode": [2, 4]})
    first_level_pod = NAMES.density_pod(0)

    def inside_the_ramp(status: Status) -> bool:
        # A level's pods exist: the kill lands while the ramp runs, however slowly the loop turns (a sleep did not).
        with fake.lock:
            started = any(k[0] == "pods" and k[2] == first_level_pod for k in fake.objects)
        return started and running("density")(status)
    previous = kill_when(fake, run_spec, inside_the_ramp, extra_sleep=0)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    step = next(s for s in status.steps if s.name == "density")
    assert step.attempts == 2 and step.restored is not None, step
    assert [(r.volumesPerNode, r.state.value) for r in status.density] == [(2, "Succeeded"), (4, "Succeeded")]
    assert owned_left(fake) == [] and not fake.named("volumeattachments")
