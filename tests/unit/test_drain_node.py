"""DrainNode on the fake cluster: the node cordoned with the run's mark, the run's pods on it made again off it
(the failover measured), the node given back on every path, and a node somebody else cordoned left alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import DisruptionSpec, DisruptionState
from csibench.engine.cordoning import CORDONED_BY_LABEL, build_replacement, busiest_node, cordon, cordoned_by
from csibench.engine.disruptions import access_problem
from csibench.kube.client import ApiError, Json
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import UID, kill_when, owned_left, run, spec, steps_of

DRAIN = {"step": "publish", "kind": "DrainNode", "afterObjects": 3}


def node(fake: FakeKube, name: str = "node-0") -> Json:
    return fake.objects[("nodes", "", name)]


def pods_of_run(fake: FakeKube) -> list[Json]:
    return [o for (plural, _, _), o in fake.objects.items() if plural == "pods"
            and (o["metadata"].get("labels") or {}).get("csibench.io/run-uid") == UID]


@pytest.mark.parametrize("body", [
    {**DRAIN, "step": "createVolume"},  # no pod of the run holds a volume then
    {**DRAIN, "seconds": 5},  # it ends when its pods run elsewhere, not after a time
    {"step": "createVolume", "kind": "PauseEtcd", "seconds": 3, "afterObjects": 0, "node": "node-0"},
    {**DRAIN, "node": "Node_0"},  # a node's name is a DNS subdomain
])
def test_a_drain_names_a_node_at_most_and_happens_in_publish(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DisruptionSpec.model_validate(body)


def test_the_node_drained_is_the_one_running_most_of_the_run_s_pods() -> None:
    pods = [{"spec": {"nodeName": n}} for n in ("b", "a", "b", "a", "c")] + [{"spec": {}}]
    assert busiest_node(pods) == "a"  # a tie goes to the first by name
    assert busiest_node([{"spec": {}}]) is None
    pinned = {"spec": {"nodeName": "a", "affinity": {"nodeAffinity": {"x": 1}, "podAffinity": {"y": 2}}}}
    assert build_replacement(pinned) == {"spec": {"affinity": {"podAffinity": {"y": 2}}}}
    assert pinned["spec"]["nodeName"] == "a", "the step's own manifest is left as it was"
    assert cordoned_by({"metadata": {"labels": {CORDONED_BY_LABEL: "u"}}}) == "u"


def test_the_run_s_pods_on_a_drained_node_move_off_it_and_the_node_is_given_back() -> None:
    """3 pods on node-0 (the fake's scheduler's first choice); drained once all are Running: each is made again on
    node-1, the failover is the recovery, and node-0 ends schedulable without the run's mark."""
    fake = FakeKube(Behaviour(start_delay=0.05))
    status = run(fake, spec(volumes=6, steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                            disruptions=[DRAIN]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    (drain,) = status.disruptions
    assert drain.state == DisruptionState.RECOVERED and drain.target == "node node-0", drain
    assert drain.podsDeleted == 3 and len(drain.pods) == 3, drain
    assert drain.injectedAtSeconds is not None and drain.recoveredAtSeconds is not None
    assert drain.recoverySeconds == pytest.approx(drain.recoveredAtSeconds - drain.injectedAtSeconds, abs=0.002)
    assert drain.restoredAtSeconds is not None and drain.restoredAtSeconds >= drain.recoveredAtSeconds, drain
    assert steps_of(status)["publish"][2:4] == (3, 0)  # Running before the drain: the step's own figures stand
    moved = [name for kind, name in fake.pod_events if kind == "running"]
    assert sorted(moved) == sorted(drain.pods * 2), moved  # each ran twice: before and after the move
    assert not node(fake)["spec"].get("unschedulable") and cordoned_by(node(fake)) is None
    assert owned_left(fake) == []


def test_a_node_somebody_else_cordoned_is_left_alone_and_nothing_is_deleted() -> None:
    fake = FakeKube()
    node(fake).setdefault("spec", {})["unschedulable"] = True
    status = run(fake, spec(volumes=4, steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                            disruptions=[{**DRAIN, "afterObjects": 2, "node": "node-0"}]))
    (drain,) = status.disruptions
    assert drain.state == DisruptionState.FAILED and "cordoned already" in (drain.message or ""), drain
    assert drain.podsDeleted is None and node(fake)["spec"]["unschedulable"] is True
    assert cordoned_by(node(fake)) is None


def test_a_run_stopped_while_its_node_is_cordoned_gives_it_back() -> None:
    """The run's task cancelled while its pods move (the run deleted, the operator stopping): shielded uncordon,
    and the run's end uncordons whatever carries its mark."""
    fake = FakeKube(Behaviour(start_delay=30))  # on node-0 at once, Running only after 30 s
    run_spec = spec(volumes=4, steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                    disruptions=[{**DRAIN, "afterSeconds": 0.3, "afterObjects": None}])
    last = kill_when(fake, run_spec, lambda status: any(d.get("state") == "Injected"
                                                        for d in status.get("disruptions") or []))
    assert [d["state"] for d in last["disruptions"]] == ["Injected"], last  # stopped mid-drain, not at the end
    assert not node(fake)["spec"].get("unschedulable") and cordoned_by(node(fake)) is None, node(fake)


def test_a_restarted_operator_uncordons_what_its_run_had_cordoned() -> None:
    fake = FakeKube()
    fake.loop = None
    asyncio.run(cordon(fake, "node-1", UID))
    assert node(fake, "node-1")["spec"]["unschedulable"] is True
    previous = {"phase": "Running", "targetNamespace": "default", "currentStep": "publish",
                "disruptions": [{"step": "publish", "kind": "DrainNode", "target": "x", "state": "Injected"}]}
    status = run(fake, spec(volumes=6, restartPolicy="Fail", disruptions=[DRAIN]), previous)
    assert status.phase is not None and status.phase.value == "Failed"
    assert not node(fake, "node-1")["spec"].get("unschedulable") and cordoned_by(node(fake, "node-1")) is None


def test_a_drain_needs_the_right_to_patch_nodes() -> None:
    fake = FakeKube()
    fake.denied.add(("patch", "nodes", ""))
    problem = asyncio.run(access_problem(fake, DisruptionSpec.model_validate(DRAIN)))
    assert problem is not None and "patch nodes" in problem, problem
    fake.denied.clear()
    assert asyncio.run(access_problem(fake, DisruptionSpec.model_validate(DRAIN))) is None


def test_a_delete_refused_mid_drain_leaves_the_others_moving_and_says_so() -> None:
    """One of the three deletes refused (a policy, a conflict): the two others still move and count, the refused
    pod stays, and the message names it; the node is given back all the same."""
    fake = FakeKube(Behaviour(start_delay=0.05))
    delete = fake.delete
    refused: list[str] = []

    async def refuse_one(path: str, *args: Any, **kwargs: Any) -> bool:
        if "/pods/" in path and not refused:
            refused.append(path.rsplit("/", 1)[-1])
            raise ApiError(403, "Forbidden", "refused by a policy")
        return await delete(path, *args, **kwargs)
    fake.delete = refuse_one  # type: ignore[method-assign]  # the API server, refusing once
    status = run(fake, spec(volumes=6, steps=["createVolume", "publish"], cleanup="Never", disruptions=[DRAIN]))
    (drain,) = status.disruptions
    assert drain.state == DisruptionState.RECOVERED and drain.podsDeleted == 2, drain
    assert refused and refused[0] not in drain.pods and refused[0] in (drain.message or ""), (refused, drain)
    assert drain.injectedAtSeconds is not None and drain.recoverySeconds is not None
    assert not node(fake)["spec"].get("unschedulable") and cordoned_by(node(fake)) is None


def test_a_drain_may_come_once_every_pod_runs_and_only_once_a_run() -> None:
    spec(volumes=6, disruptions=[DRAIN])  # 3 pods: afterObjects 3 is once every pod runs
    with pytest.raises(ValidationError, match="at most them"):
        spec(volumes=6, disruptions=[{**DRAIN, "afterObjects": 4}])
    with pytest.raises(ValidationError, match="two DrainNodes"):
        spec(volumes=6, disruptions=[DRAIN, {**DRAIN, "afterObjects": 1}])


def test_a_drain_on_a_cluster_of_one_schedulable_node_fails_before_anything_is_created() -> None:
    """Nowhere for the pods to go: the run says so at its start (NotEnoughNodes), not after recoveryTimeoutSeconds."""
    fake = FakeKube()
    for name in ("node-1", "node-2"):
        node(fake, name)["spec"] = {"unschedulable": True}
    status = run(fake, spec(volumes=6, steps=["createVolume", "publish", "unpublish", "deleteVolume"],
                            disruptions=[DRAIN]))
    assert status.phase is not None and status.phase.value == "Failed", status
    assert status.conditions[0].reason == "NotEnoughNodes" and "DrainNode" in (status.message or ""), status
    assert owned_left(fake) == [] and not pods_of_run(fake)


def test_a_drained_pod_that_cannot_be_made_again_is_not_waited_for_and_counts_as_unrecovered() -> None:
    """Every create of a drained pod refused (a quota, a policy): the drain ends NotRecovered at once, not after
    recoveryTimeoutSeconds, naming the pods it could not make again; the node is given back."""
    fake = FakeKube(Behaviour(start_delay=0.05))
    create = fake.create

    async def refuse_while_cordoned(path: str, body: Json, *args: Any, **kwargs: Any) -> bool:
        if path.endswith("/pods") and fake.cordoned("node-0"):
            raise ApiError(403, "Forbidden", "exceeded quota")
        return await create(path, body, *args, **kwargs)
    fake.create = refuse_while_cordoned  # type: ignore[method-assign]  # the API server, refusing the drain's
    status = run(fake, spec(volumes=6, steps=["createVolume", "publish"], cleanup="Never",
                            disruptions=[{**DRAIN, "recoveryTimeoutSeconds": 300}]))
    (drain,) = status.disruptions
    assert drain.state == DisruptionState.NOT_RECOVERED and "not made again" in (drain.message or ""), drain
    assert drain.podsDeleted == 3 and drain.unrecovered == 3 and sorted(drain.unrecoveredNames) == sorted(drain.pods)
    assert drain.recoveredAtSeconds is None
    assert not node(fake)["spec"].get("unschedulable") and cordoned_by(node(fake)) is None
