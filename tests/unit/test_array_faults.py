"""ArrayFault: the spec's rules, the operator asking an array that takes faults (on the fake cluster, an array
that answers as the local one does), and the local array's windows themselves."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.models import ArrayOperation, DisruptionSpec, DisruptionState
from csibench.engine.array_faults import (
    ARRAY_FAULTS,
    FaultPlace,
    build_fault_request,
    fault_answer,
    send_fault_request,
)
from csibench.engine.array_requests import ANSWER_KEY, REQUEST_KEY
from csibench.kube.client import ApiError, Json
from localcluster.simulator.backend import Backend, GroundTruth
from localcluster.simulator.config import Operation, parse_backend_model
from localcluster.simulator.faults import FaultRequestError, FaultWindows, Window, foreign_request, parse_request
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, REF, UID, owned_left, run, spec

FAULT = {"step": "createVolume", "afterSeconds": 0.05, "kind": "ArrayFault", "seconds": 1,
         "arrayFault": {"latencyMs": 200, "operations": ["createVolume"]}}
REQUEST = f"{NAMES.prefix}-array-fault-0"


# -- the spec -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("body", [
    {**FAULT, "seconds": None},  # how long?
    {**FAULT, "arrayFault": None},  # what?
    {**FAULT, "arrayFault": {"operations": ["attach"]}},  # neither latency nor failures
    {**FAULT, "arrayFault": {"failureRate": 0}},
    {**FAULT, "arrayFault": {"failureRate": 1.5}},
    {**FAULT, "arrayFault": {"latencyMs": 200, "operations": ["format"]}},  # no such operation
    {**FAULT, "component": {"namespace": "kube-system", "selector": {"a": "b"}}},
    {"step": "createVolume", "afterObjects": 0, "kind": "PauseEtcd", "seconds": 5, "arrayFault": {"latencyMs": 1}},
])
def test_an_array_fault_names_what_the_array_does_wrong_and_for_how_long(body: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        DisruptionSpec.model_validate({k: v for k, v in body.items() if v is not None})
    DisruptionSpec.model_validate(FAULT)


def test_two_array_faults_in_one_step_are_refused_and_the_operations_are_the_arrays() -> None:
    with pytest.raises(ValidationError, match="two array faults in one step"):
        spec(volumes=3, disruptions=[FAULT, {**FAULT, "afterSeconds": 0.5}])
    spec(volumes=3, disruptions=[FAULT, {**FAULT, "step": "deleteVolume"}])
    assert {str(o) for o in ArrayOperation} == {o.value for o in Operation}  # the local array's names


# -- the operator, against an array that answers as the local one does ----------------------------------------------
def _stamp(at: float) -> str:
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def fault_taker(fake: FakeKube, refuse: str | None = None) -> list[dict[str, Any]]:
    """The CSIDriver says its array takes faults; each request is answered at once (started) and again when its
    window closes (ended), or refused with ``refuse``. Returns the requests."""
    fake.put("csidrivers", "", {"metadata": {"name": "sim.csibench.io", "annotations": {ARRAY_FAULTS: "configmap"}}})
    requests: list[dict[str, Any]] = []
    create = fake.create

    def answer(name: str, **fields: object) -> None:
        def write(configmap: Json) -> None:
            asked = json.loads(configmap["data"][REQUEST_KEY])
            configmap["data"][ANSWER_KEY] = json.dumps({"id": asked["id"], **fields})
        fake._update("configmaps", REF.namespace, name, write)

    async def create_then_answer(path: str, body: Json, on_send: Any = None, dry_run: bool = False) -> bool:
        created = await create(path, body, on_send, dry_run)
        if created and not dry_run and ARRAY_FAULTS in (body["metadata"].get("labels") or {}):
            asked = json.loads(body["data"][REQUEST_KEY])
            requests.append(asked)
            name, started = body["metadata"]["name"], time.time()
            if refuse is not None:
                fake._later(0.05, lambda: answer(name, error=refuse))
            else:
                fake._later(0.01, lambda: answer(name, startedAt=_stamp(started)))
                fake._later(asked["seconds"], lambda: answer(name, startedAt=_stamp(started),
                                                             endedAt=_stamp(time.time()), operations=3))
        return created
    fake.create = create_then_answer  # type: ignore[method-assign]  # the array, for this test
    return requests


def test_an_array_fault_is_asked_of_the_array_and_recovers_when_its_window_closes() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.3))
    requests = fault_taker(fake)
    status = run(fake, spec(volumes=4, steps=["createVolume", "deleteVolume"], disruptions=[FAULT]))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    (result,) = status.disruptions
    assert result.state == DisruptionState.RECOVERED, result
    assert requests == [{"id": requests[0]["id"], "runUid": UID, "storageClass": "sim", "seconds": 1,
                         "latencySeconds": 0.2, "failureRate": 0.0, "operations": ["createVolume"]}]
    assert result.arrayOperations == 3, result
    assert result.target == "the array: +200 ms on createVolume" and result.pods == []
    assert result.injectedAtSeconds is not None and result.restoredAtSeconds is not None
    assert result.restoredAtSeconds - result.injectedAtSeconds == pytest.approx(1.0, abs=0.3), result
    assert result.recoverySeconds is not None and 0 <= result.recoverySeconds < 0.5, result  # read every 20 ms
    assert result.containerRestarts is None and result.stallSeconds is not None, result
    # The request is the run's record (owned by it, labelled report-of), not one of the objects cleanup removes.
    meta = fake.objects[("configmaps", REF.namespace, REQUEST)]["metadata"]
    assert meta["ownerReferences"][0]["uid"] == UID and meta["labels"]["csibench.io/report-of"] == REF.name
    assert owned_left(fake) == []


def test_a_window_the_array_will_not_open_fails_the_disruption_with_its_words() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.3))
    fault_taker(fake, refuse="a window asked by runs/other is open on sim for 3.0 s more")
    status = run(fake, spec(volumes=4, steps=["createVolume", "deleteVolume"], disruptions=[FAULT]))
    (result,) = status.disruptions
    assert result.state == DisruptionState.FAILED, result
    assert result.message == ("the array did not open the window: a window asked by runs/other is open on sim for "
                              "3.0 s more"), result
    assert result.recoverySeconds is None and result.restoredAtSeconds is None and result.injectedAtSeconds is None


def test_a_request_left_by_an_earlier_attempt_is_asked_again_only_if_it_is_the_runs() -> None:
    """A step redone after an operator restart finds its request's ConfigMap there, with the old answer: it asks
    again (the old answer removed, the moment stamped when the new request leaves); one that is not the run's is
    left as it is."""
    async def scenario() -> None:
        fake = FakeKube()
        fake.loop = asyncio.get_running_loop()
        place = FaultPlace(REF.namespace, REF.name, UID, NAMES.prefix, "sim")
        old = build_fault_request(place, 0, "old", DisruptionSpec.model_validate(FAULT))
        old["data"][ANSWER_KEY] = json.dumps({"id": "old", "startedAt": "x", "endedAt": "y"})
        fake.put("configmaps", REF.namespace, old)
        stamps: list[float] = []
        await send_fault_request(fake, place, build_fault_request(place, 0, "new", DisruptionSpec.model_validate(
            FAULT)), on_send=stamps.append)
        data = fake.objects[("configmaps", REF.namespace, REQUEST)]["data"]
        assert json.loads(data[REQUEST_KEY])["id"] == "new" and ANSWER_KEY not in data and len(stamps) == 1
        theirs = FaultPlace(REF.namespace, REF.name, "another-run", NAMES.prefix, "sim")
        with pytest.raises(ApiError) as refused:
            await send_fault_request(fake, theirs, build_fault_request(theirs, 0, "x", DisruptionSpec.model_validate(
                FAULT)), on_send=stamps.append)
        assert refused.value.status == 409 and len(stamps) == 1
        assert json.loads(fake.objects[("configmaps", REF.namespace, REQUEST)]["data"][REQUEST_KEY])["id"] == "new"

    asyncio.run(scenario())


def test_an_array_that_does_not_take_faults_is_refused_before_anything_is_created() -> None:
    fake = FakeKube()
    fake.put("csidrivers", "", {"metadata": {"name": "sim.csibench.io"}})
    status = run(fake, spec(volumes=3, steps=["createVolume", "deleteVolume"], disruptions=[FAULT]))
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "InvalidSpec", status.conditions[0]
    assert "does not carry csibench.io/array-faults" in (status.message or ""), status.message
    assert not [path for path, _ in fake.created if "persistentvolumeclaims" in path or "configmaps" in path]


def test_an_answer_counts_only_for_its_own_request() -> None:
    def configmap(answer: object) -> Json:
        return {"data": {ANSWER_KEY: answer if isinstance(answer, str) else json.dumps(answer)}}
    ended = {"id": "r1", "startedAt": "2026-12-06T10:00:00.000000Z", "endedAt": "2026-12-06T10:00:05.000000Z"}
    found = fault_answer(configmap(ended), "r1")
    assert found is not None and found.ended_at == ended["endedAt"] and found.error is None
    assert fault_answer(configmap(ended), "r2") is None and fault_answer(configmap("{"), "r1") is None
    assert fault_answer(configmap({**ended, "endedAt": 5}), "r1") is None and fault_answer({}, "r1") is None


# -- the local array's windows --------------------------------------------------------------------------------------
def test_a_request_is_checked_before_a_window_opens() -> None:
    good = {"id": "r", "storageClass": "gold", "seconds": 2, "latencySeconds": 0.5, "operations": ["attach"]}
    assert parse_request(good) == ("gold", 2.0, 0.5, 0.0, frozenset({Operation.ATTACH}))
    for bad in ({**good, "seconds": 0}, {**good, "seconds": 601}, {**good, "latencySeconds": 0},
                {**good, "latencySeconds": -1}, {**good, "failureRate": 2}, {**good, "operations": ["format"]},
                {k: v for k, v in good.items() if k != "storageClass"}, {**good, "seconds": "soon"}):
        with pytest.raises(FaultRequestError):
            parse_request(bad)


def test_a_window_slows_and_fails_only_its_operations_while_open_and_one_requester_holds_a_class(
        tmp_path: Path) -> None:
    windows = FaultWindows(seed=1)
    mine = Window("runs/a", "r1", time.monotonic() + 0.3, 0.2, 1.0, frozenset({Operation.CREATE_VOLUME}))
    windows.open("gold", mine)
    with pytest.raises(FaultRequestError, match="runs/a"):
        windows.open("gold", Window("runs/b", "r2", time.monotonic() + 5, 0.1, 0.0, frozenset()))
    mine = Window("runs/a", "r1", time.monotonic() + 0.3, 0.2, 1.0, frozenset({Operation.CREATE_VOLUME}))
    windows.open("gold", mine)  # its own request again (a redone step): replaces it
    assert windows.effect("gold", Operation.ATTACH, "r1") is None
    assert windows.effect("silver", Operation.CREATE_VOLUME, "r1") is None
    assert windows.effect("gold", Operation.CREATE_VOLUME, "r2") is None  # another run on the class: untouched

    truth = GroundTruth(tmp_path / "truth.jsonl")
    backend = Backend("gold", parse_backend_model({}), truth, windows)

    async def scenario() -> None:
        began = time.monotonic()
        with pytest.raises(RuntimeError, match="injected failure of createVolume"):
            await backend.run(Operation.CREATE_VOLUME, "ns/a", run_uid="r1")
        assert time.monotonic() - began >= 0.2  # slowed, then failed
        await backend.run(Operation.ATTACH, "pvc-a:node", run_uid="r1")  # not its operation: neither
        await backend.run(Operation.CREATE_VOLUME, "other/c", run_uid="r2")  # not its run: neither
        await asyncio.sleep(0.35)
        await backend.run(Operation.CREATE_VOLUME, "ns/b", run_uid="r1")  # the window closed: as the class says

    asyncio.run(scenario())
    assert windows.close("gold", mine) == 1  # one operation touched
    truth.close()
    records = [json.loads(line) for line in (tmp_path / "truth.jsonl").read_text().splitlines()]
    assert [(r["op"], r["result"], r.get("fault", False)) for r in records] == [
        ("createVolume", "error", True), ("attach", "ok", False), ("createVolume", "ok", False),
        ("createVolume", "ok", False)]


def test_a_window_is_opened_only_for_the_run_that_owns_its_request() -> None:
    def configmap(label: str, owner: str, kind: str = "BenchmarkRun") -> Json:
        return {"metadata": {"labels": {ARRAY_FAULTS: label}, "ownerReferences": [{"uid": owner, "kind": kind}]}}

    assert foreign_request(configmap("u1", "u1"), {"id": "r", "runUid": "u1"}) is None
    for found, asked in ((configmap("u1", "u2"), "u1"), (configmap("u2", "u1"), "u1"), (configmap("u1", "u1"), "u2"),
                         (configmap("u1", "u1", "Deployment"), "u1"), (configmap("", ""), "")):
        assert foreign_request(found, {"id": "r", "runUid": asked}) is not None, (found, asked)
