"""The suite controller against the in-memory API server: what it creates, in which order, and what it never does
(start a cell twice after a restart, adopt a run it did not create, create anything for a bad cell)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from csibench.api.suite import BenchmarkSuiteSpec
from csibench.kube.client import ApiError
from csibench.kube.resources import SuiteRef
from csibench.suite import controller as suite_controller
from csibench.suite.controller import SuiteController, SuiteRetry
from csibench.suite.progress import DELETED_MESSAGE, decide
from tests.support.fake_kube import FakeKube

NAMESPACE = "runs"
TEMPLATE = {"volumes": 2, "steps": ["createVolume", "deleteVolume"]}


def make_suite(kube: FakeKube, name: str = "s", **spec: Any) -> tuple[SuiteRef, BenchmarkSuiteSpec]:
    body = {"template": TEMPLATE, "matrix": {"storageClassName": ["a", "b"]}, **spec}
    obj = kube.put("benchmarksuites", NAMESPACE, {"metadata": {"name": name}, "spec": body})
    return SuiteRef(NAMESPACE, name, obj["metadata"]["uid"]), BenchmarkSuiteSpec.model_validate(body)


def created_runs(kube: FakeKube) -> list[str]:
    return [body["metadata"]["name"] for path, body in kube.created if path.endswith("/benchmarkruns")]


def finish_runs(kube: FakeKube, phase: str = "Succeeded") -> int:
    """Every run not yet ended ends now (as the engine would); the number ended."""
    ended = 0
    for run in kube.named("benchmarkruns", NAMESPACE).values():
        if (run.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            kube.put("benchmarkruns", NAMESPACE, {**run, "status": {"phase": phase, "verdict": "Pass"}}, "MODIFIED")
            ended += 1
    return ended


def suite_status(kube: FakeKube, name: str = "s") -> dict[str, Any]:
    status: dict[str, Any] = kube.named("benchmarksuites", NAMESPACE)[name].get("status") or {}
    return status


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite_controller, "POLL_SECONDS", 0.01)


async def start_then_kill(controller: SuiteController, kube: FakeKube, runs: int) -> None:
    """Run the controller until ``runs`` runs exist, then cancel it (an operator killed), ending none of them."""
    task = asyncio.create_task(controller.run())
    while len(created_runs(kube)) < runs:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def drive(kube: FakeKube, controller: SuiteController, most_at_once: list[int], stop_after: int = 1000) -> None:
    """Run the controller; meanwhile end each run a moment after it appears, noting how many ran at once."""
    task = asyncio.create_task(controller.run())
    ended = 0
    while not task.done() and ended < stop_after:
        await asyncio.sleep(0.02)
        running = [r for r in kube.named("benchmarkruns", NAMESPACE).values()
                   if (r.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        most_at_once.append(len(running))
        ended += finish_runs(kube)
    if not task.done():
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        await task


def test_interleaved_runs_go_round_by_round_one_at_a_time_and_the_suite_succeeds() -> None:
    kube = FakeKube()
    ref, spec = make_suite(kube, repeat=2)
    at_once: list[int] = []
    asyncio.run(drive(kube, SuiteController(ref, spec, kube), at_once))
    assert created_runs(kube) == ["s-c0-r1", "s-c1-r1", "s-c0-r2", "s-c1-r2"]
    assert max(at_once) == 1
    status = suite_status(kube)
    assert status["phase"] == "Succeeded" and status["progress"] == "4/4" and status["verdict"] == "Pass"
    assert "current" not in status and status["conditions"][0]["reason"] == "Succeeded"
    run = kube.named("benchmarkruns", NAMESPACE)["s-c1-r2"]
    assert run["spec"] == {**TEMPLATE, "storageClassName": "b"}
    assert run["metadata"]["ownerReferences"][0]["uid"] == ref.uid
    assert run["metadata"]["labels"]["csibench.io/cell"] == "c1"
    assert run["metadata"]["labels"]["csibench.io/round"] == "2"


def test_parallelism_two_runs_two_at_a_time_in_order() -> None:
    kube = FakeKube()
    ref, spec = make_suite(kube, repeat=2, parallelism=2, order="Sequential")
    at_once: list[int] = []
    asyncio.run(drive(kube, SuiteController(ref, spec, kube), at_once))
    assert created_runs(kube) == ["s-c0-r1", "s-c0-r2", "s-c1-r1", "s-c1-r2"]
    assert max(at_once) == 2


def test_a_restarted_controller_adopts_the_run_it_created_and_never_creates_a_cell_twice() -> None:
    kube = FakeKube()
    ref, spec = make_suite(kube, repeat=2)
    # The first operator created the first run and died before its status said so.
    asyncio.run(start_then_kill(SuiteController(ref, spec, kube), kube, 1))
    assert created_runs(kube) == ["s-c0-r1"]
    first_uid = kube.named("benchmarkruns", NAMESPACE)["s-c0-r1"]["metadata"]["uid"]
    for _ in range(2):  # two restarts, each from the status as stored
        restarted = SuiteController(ref, spec, kube, suite_status(kube))
        asyncio.run(drive(kube, restarted, [], stop_after=1))
    asyncio.run(drive(kube, SuiteController(ref, spec, kube, suite_status(kube)), []))
    assert created_runs(kube) == ["s-c0-r1", "s-c1-r1", "s-c0-r2", "s-c1-r2"]
    assert kube.named("benchmarkruns", NAMESPACE)["s-c0-r1"]["metadata"]["uid"] == first_uid
    assert suite_status(kube)["phase"] == "Succeeded"


def test_a_run_deleted_by_hand_counts_as_failed_and_is_not_created_again() -> None:
    kube = FakeKube()
    ref, spec = make_suite(kube)
    asyncio.run(start_then_kill(SuiteController(ref, spec, kube), kube, 1))
    kube.remove("benchmarkruns", NAMESPACE, "s-c0-r1")
    asyncio.run(drive(kube, SuiteController(ref, spec, kube, suite_status(kube)), []))
    status = suite_status(kube)
    assert created_runs(kube) == ["s-c0-r1", "s-c1-r1"]
    assert status["phase"] == "Failed" and status["conditions"][0]["reason"] == "RunsFailed"
    assert status["runs"][0]["message"] == DELETED_MESSAGE and DELETED_MESSAGE in status["message"]


def test_a_failed_run_fails_the_suite_but_the_other_cells_still_run() -> None:
    kube = FakeKube()
    ref, spec = make_suite(kube)

    async def scenario() -> None:
        task = asyncio.create_task(SuiteController(ref, spec, kube).run())
        while "s-c0-r1" not in kube.named("benchmarkruns", NAMESPACE):
            await asyncio.sleep(0.01)
        finish_runs(kube, "Failed")
        while not task.done():
            await asyncio.sleep(0.02)
            finish_runs(kube)
        await task

    asyncio.run(scenario())
    status = suite_status(kube)
    assert created_runs(kube) == ["s-c0-r1", "s-c1-r1"]
    assert status["phase"] == "Failed" and status["message"].startswith("1 of 2 runs failed: s-c0-r1 (Failed)")


def test_a_name_taken_by_a_run_that_is_not_the_suites_fails_it_and_leaves_that_run_alone() -> None:
    kube = FakeKube()
    ref, spec = make_suite(kube)
    theirs = kube.put("benchmarkruns", NAMESPACE, {"metadata": {"name": "s-c0-r1"}, "spec": {"volumes": 99}})
    asyncio.run(SuiteController(ref, spec, kube).run())
    status = suite_status(kube)
    assert status["phase"] == "Failed" and status["conditions"][0]["reason"] == "NameTaken"
    assert kube.named("benchmarkruns", NAMESPACE)["s-c0-r1"] == theirs
    assert created_runs(kube) == []  # every name is checked before the first run: none of the suite's started
    assert not any(verb == "DELETE" and "benchmarkruns" in path for verb, path in kube.log)


def test_a_cell_that_is_not_a_valid_run_fails_the_suite_before_any_run_is_created() -> None:
    kube = FakeKube()
    bound = {"step": "publish", "metric": "throughput", "min": 1}  # a step these runs do not run
    ref, spec = make_suite(kube, template={**TEMPLATE, "thresholds": [bound]})
    asyncio.run(SuiteController(ref, spec, kube).run())
    status = suite_status(kube)
    condition = status["conditions"][0]
    assert status["phase"] == "Failed" and condition["reason"] == "InvalidSpec"
    assert condition["message"].startswith("cell c0 (storageClassName=a) is not a valid run spec"), condition
    assert created_runs(kube) == []
    assert [cell["id"] for cell in status["cells"]] == ["c0", "c1"]  # its report still shows the matrix


def test_decide_creates_in_order_up_to_the_parallelism() -> None:
    kube = FakeKube()
    _, spec = make_suite(kube, repeat=3)
    from csibench.api.suite import schedule

    decision = decide("s", schedule(spec), {}, {}, 2)
    assert [slot.child_name("s") for slot in decision.create] == ["s-c0-r1", "s-c1-r1"]
    assert not decision.finished and decision.done == 0


def test_each_cells_median_over_its_rounds_is_a_metric_labelled_by_its_axis_values() -> None:
    from prometheus_client import REGISTRY

    kube = FakeKube()
    ref, spec = make_suite(kube, name="m", repeat=3)
    throughputs = iter([1.0, 10.0, 3.0, 30.0, 2.0, 20.0])  # c0 r1, c1 r1, c0 r2, ... (interleaved)

    async def scenario() -> None:
        task = asyncio.create_task(SuiteController(ref, spec, kube).run())
        while not task.done():
            await asyncio.sleep(0.01)
            for run in kube.named("benchmarkruns", NAMESPACE).values():
                if not run.get("status"):
                    step = {"name": "createVolume", "state": "Succeeded", "throughput": next(throughputs)}
                    kube.put("benchmarkruns", NAMESPACE, {**run, "status": {"phase": "Succeeded", "steps": [step]}},
                             "MODIFIED")
        await task

    asyncio.run(scenario())

    def sample(cell: str, storage_class: str) -> float | None:
        return REGISTRY.get_sample_value("csibench_suite_cell_throughput_objects_per_second", {
            "suite": f"{NAMESPACE}/m", "cell": cell, "step": "createVolume", "storage_class": storage_class,
            "volumes": "", "pvcs_per_pod": "", "size": "", "client": "", "data_path": "", "database": ""})

    assert (sample("c0", "a"), sample("c1", "b")) == (2.0, 20.0)
    assert REGISTRY.get_sample_value("csibench_suite_runs", {"suite": f"{NAMESPACE}/m", "state": "done"}) == 6


def test_a_run_the_api_server_refuses_fails_that_run_and_the_suite_goes_on() -> None:
    kube = FakeKube()
    kube.behaviour.refuse_create = lambda plural, name: (
        ApiError(422, "Invalid", "admission webhook said no") if name == "s-c1-r2" else None)
    ref, spec = make_suite(kube, repeat=2)
    asyncio.run(drive(kube, SuiteController(ref, spec, kube), []))
    status = suite_status(kube)
    assert sorted(kube.named("benchmarkruns", NAMESPACE)) == ["s-c0-r1", "s-c0-r2", "s-c1-r1"]
    assert created_runs(kube).count("s-c1-r2") == 1  # tried once, not again on every pass
    refused = next(run for run in status["runs"] if run["name"] == "s-c1-r2")
    assert refused["phase"] == "Failed" and "admission webhook said no" in refused["message"]
    assert status["phase"] == "Failed" and status["progress"] == "4/4"
    # The verdict: the refused run judged nothing, so the suite cannot say Pass.
    assert status["verdict"] == "Unknown"


def test_a_refusal_that_is_not_the_cells_fault_is_retried_and_said_in_status() -> None:
    kube = FakeKube()
    kube.behaviour.refuse_create = lambda plural, name: ApiError(403, "Forbidden", "exceeded quota: runs")
    ref, spec = make_suite(kube)
    with pytest.raises(SuiteRetry):
        asyncio.run(SuiteController(ref, spec, kube).run())
    condition = suite_status(kube)["conditions"][0]
    assert condition["reason"] == "RunRefused" and "exceeded quota" in condition["message"]
    assert suite_status(kube).get("phase") != "Failed" and created_runs(kube) == []
    kube.behaviour.refuse_create = lambda plural, name: None  # the quota is raised: the retry goes on
    asyncio.run(drive(kube, SuiteController(ref, spec, kube, suite_status(kube)), []))
    assert suite_status(kube)["phase"] == "Succeeded" and created_runs(kube) == ["s-c0-r1", "s-c1-r1"]
