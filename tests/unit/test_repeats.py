"""spec.repeat against the fake API server: iterations on fresh objects, aggregates in status, every iteration in
the report, failed iterations left out of the aggregates, and operator restarts at every iteration boundary."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

from csibench.api.models import BenchmarkRunStatus
from csibench.api.stored_report import iteration_records
from csibench.engine.iterations import build_aggregates, count_iterations
from csibench.engine.report_store import decode_report, encode_report
from tests.support.fake_kube import Behaviour, FakeKube
from tests.support.fake_runs import NAMES, REF, kill_when, owned_left, resume, run, spec, stored_report

PLAN = ["createVolume", "publish", "unpublish", "deleteVolume"]
Status = dict[str, Any]


def iteration_is(number: int, step: str, state: str = "Running") -> Any:
    def condition(status: Status) -> bool:
        current = (status.get("iterations") or {}).get("current")
        return current == number and any(s["name"] == step and s["state"] == state for s in status["steps"])
    return condition


def created_names(fake: FakeKube) -> set[str]:
    return {str(path).rsplit("/", 1)[-1] for verb, path in fake.timeline if verb == "POST"}


def test_three_iterations_on_fresh_objects_with_aggregates_and_every_iteration_in_the_report() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.02, ready_delay=0.02))
    status = run(fake, spec(steps=PLAN, repeat=3))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert status.iterations is not None
    assert (status.iterations.done, status.iterations.total, status.iterations.failed) == (3, 3, 0)
    assert status.iterations.summary == "3/3" and "in each of 3 iterations" in (status.message or "")
    assert [a.name for a in status.aggregates] == PLAN
    for aggregate in status.aggregates:
        assert aggregate.iterations == 3 and len(aggregate.durations) == 3
        assert aggregate.durationSeconds is not None and aggregate.latency is not None
        assert aggregate.durationSeconds.min <= aggregate.durationSeconds.median <= aggregate.durationSeconds.max
        assert aggregate.durationSeconds.median == sorted(aggregate.durations)[1]
    # Fresh objects: iteration 1 keeps the names a single run has, later ones add -i<n>.
    names = created_names(fake)
    for iteration in (1, 2, 3):
        assert NAMES.for_iteration(iteration).volume(5) in names
    assert NAMES.for_iteration(2).volume(0) == f"{NAMES.prefix}-i2-v00000"
    report = stored_report(fake)
    records = iteration_records(report)
    assert [r["iteration"] for r in records] == [1, 2, 3]
    for record in records:
        assert [s["status"]["name"] for s in record["steps"]] == PLAN
        assert all(len(s["latencyMs"]) == s["objectCount"] for s in record["steps"])
        assert record["steps"][0]["objectPrefix"].endswith("" if record["iteration"] == 1
                                                          else f"-i{record['iteration']}-v")
    # What status aggregates is exactly what the report holds per iteration.
    assert [r["state"] for r in records] == ["Succeeded"] * 3
    assert [a.durations for a in build_aggregates(records)] == [a.durations for a in status.aggregates]
    assert owned_left(fake) == []
    reasons = [o["reason"] for o in fake.named("events", REF.namespace).values()]
    assert reasons.count("IterationCompleted") == 3 and reasons.count("StepStarted") == 12


def test_iterations_are_cleaned_up_between_them_when_the_plan_leaves_objects() -> None:
    fake = FakeKube()
    status = run(fake, spec(steps=["createVolume"], repeat=2))
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    first, second = NAMES.for_iteration(1).volume(0), NAMES.for_iteration(2).volume(0)
    order = [str(path).rsplit("/", 1)[-1] for verb, path in fake.timeline if verb in ("POST", "DELETE")]
    # Every claim of iteration 1 is deleted (a labelled delete-collection) before iteration 2 creates any.
    assert order.index(first) < next(i for i, p in enumerate(order) if p == "persistentvolumeclaims") \
        < order.index(second)
    assert owned_left(fake) == []
    assert status.aggregates[0].durationSeconds is not None  # the cleanup is no step's time
    assert status.totalStepSeconds == round(sum(status.aggregates[0].durations), 3)


def test_a_failed_iteration_is_counted_named_and_left_out_of_the_aggregates() -> None:
    fake = FakeKube(Behaviour(provisioning_fails={NAMES.for_iteration(2).volume(1)}))
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], repeat=3))
    assert status.iterations is not None
    assert (status.iterations.done, status.iterations.failed) == (3, 1)
    assert status.iterations.summary == "3/3 (1 failed)"
    assert [f.iteration for f in status.iterations.failures] == [2]
    assert all(a.iterations == 2 and len(a.durations) == 2 for a in status.aggregates)
    assert status.phase is not None and status.phase.value == "Failed"
    assert status.conditions[0].reason == "ObjectsFailed"
    assert "1 of 3 iterations failed" in (status.message or "") and "iteration 2: createVolume: 1 of 6" in (
        status.message or "")
    records = iteration_records(stored_report(fake))
    assert [r.get("state") for r in records] == ["Succeeded", "Failed", "Succeeded"]
    assert owned_left(fake) == []


def test_counter_reads_current_while_running_and_done_at_the_end() -> None:
    ok = {"iteration": 1, "state": "Succeeded", "message": "", "steps": []}
    assert count_iterations([], 1, 5).summary == "1/5"
    assert count_iterations([ok], 2, 5).summary == "2/5"
    failed = {**ok, "iteration": 2, "state": "Failed", "message": "createVolume: 1 of 6 failed"}
    assert count_iterations([ok, failed, {**ok, "iteration": 3}], 3, 3).summary == "3/3 (1 failed)"


# -- operator restarts -----------------------------------------------------------------------------------------
def _durations(status: BenchmarkRunStatus | Status, iteration: int, fake: FakeKube) -> list[float]:
    record = next(r for r in iteration_records(stored_report(fake)) if r["iteration"] == iteration)
    return [s["status"]["durationSeconds"] for s in record["steps"]]


def test_a_restart_inside_a_later_iteration_keeps_the_finished_ones_and_redoes_only_the_step() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.05, ready_delay=0.2, release_delay=0.05, pod_termination=0.05))
    run_spec = spec(steps=PLAN, repeat=3)
    previous = kill_when(fake, run_spec, iteration_is(2, "publish"))
    first_iteration = _durations(previous, 1, fake)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert status.iterations is not None and (status.iterations.done, status.iterations.failed) == (3, 0)
    assert _durations(status, 1, fake) == first_iteration  # finished before the restart: the same measurement
    records = iteration_records(stored_report(fake))
    publish = next(s for s in records[1]["steps"] if s["status"]["name"] == "publish")["status"]
    assert publish["attempts"] == 2 and "not part of the step's time" in publish["restored"]
    assert [a["name"] for a in stored_report(fake)["interruptedAttempts"]] == ["publish"]
    assert all(a.iterations == 3 for a in status.aggregates)
    assert owned_left(fake) == []


def test_a_restart_during_the_cleanup_between_iterations_measures_no_iteration_twice() -> None:
    fake = FakeKube(Behaviour(release_delay=0.3))
    run_spec = spec(steps=["createVolume"], repeat=3)
    previous = kill_when(fake, run_spec, lambda s: s.get("progress") == "cleanup before iteration 2",
                         extra_sleep=0.05)
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    records = iteration_records(stored_report(fake))
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert status.aggregates[0].iterations == 3
    created = [p for verb, p in fake.timeline if verb == "POST" and str(p).endswith(NAMES.for_iteration(1).volume(0))]
    assert len(created) == 1  # iteration 1 was not run again
    assert owned_left(fake) == []


def test_a_restart_after_an_iteration_was_recorded_but_before_status_named_the_next() -> None:
    fake = FakeKube()
    original = fake.merge_patch

    async def slow_next_iteration(path: str, body: dict[str, Any],
                                  on_send: Callable[[float], None] | None = None) -> dict[str, Any] | None:
        if path.endswith("/status") and (body["status"].get("iterations") or {}).get("current") == 2:
            await asyncio.sleep(5)  # the kill lands after the report moved iteration 1, before status says so
        return await original(path, body, on_send)

    fake.merge_patch = slow_next_iteration  # type: ignore[method-assign]
    run_spec = spec(steps=["createVolume", "deleteVolume"], repeat=2)
    previous = kill_when(fake, run_spec, iteration_is(1, "deleteVolume", "Succeeded"), extra_sleep=0.3)
    fake.merge_patch = original  # type: ignore[method-assign]
    assert [r["iteration"] for r in stored_report(fake)["iterations"]] == [1]
    assert previous["iterations"]["current"] == 1
    status = resume(fake, run_spec, previous)
    assert status.phase is not None and status.phase.value == "Succeeded", status.message
    assert [r["iteration"] for r in iteration_records(stored_report(fake))] == [1, 2]
    assert status.aggregates[0].iterations == 2
    assert owned_left(fake) == []


def test_restart_policy_fail_keeps_the_finished_iterations_aggregates_and_cleans_up() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.05, ready_delay=0.2))
    run_spec = spec(steps=PLAN, repeat=3, restartPolicy="Fail")
    previous = kill_when(fake, run_spec, iteration_is(2, "publish"))
    status = run(fake, run_spec, previous)
    assert (status.conditions[0].reason, status.phase and status.phase.value) == ("OperatorRestarted", "Failed")
    assert status.iterations is not None and status.iterations.done == 1
    assert all(a.iterations == 1 for a in status.aggregates)  # the interrupted iteration is no measurement
    assert owned_left(fake) == []


def test_a_missing_record_of_an_earlier_iteration_ends_the_run_with_a_reason() -> None:
    fake = FakeKube(Behaviour(bind_delay=0.05, ready_delay=0.2))
    run_spec = spec(steps=PLAN, repeat=2)
    previous = kill_when(fake, run_spec, iteration_is(2, "publish"))
    configmap = fake.objects[("configmaps", REF.namespace, NAMES.report)]

    report = decode_report(base64.b64decode(configmap["binaryData"]["report.json.gz"]))
    report["iterations"] = []
    configmap["binaryData"]["report.json.gz"] = base64.b64encode(encode_report(report)).decode()
    status = resume(fake, run_spec, previous)
    assert status.conditions[0].reason == "OperatorRestarted" and "iteration 1" in (status.message or "")
    assert owned_left(fake) == []


def test_restart_policy_fail_between_iterations_is_not_a_success() -> None:
    """Killed once iteration 1's last step is written Succeeded, before iteration 2 starts: the run stops with
    OperatorRestarted (found by review: it used to end Succeeded after one of three iterations)."""
    fake = FakeKube(Behaviour(bind_delay=0.05, ready_delay=0.2))
    original = fake.merge_patch

    async def slow_second_iteration(path: str, body: dict[str, Any],  # hold status at the boundary, then kill
                                    on_send: Callable[[float], None] | None = None) -> dict[str, Any] | None:
        if path.endswith("/status") and (body["status"].get("iterations") or {}).get("current") == 2:
            await asyncio.sleep(5)
        return await original(path, body, on_send)
    fake.merge_patch = slow_second_iteration  # type: ignore[method-assign]
    run_spec = spec(steps=["createVolume", "deleteVolume"], repeat=3, restartPolicy="Fail")
    previous = kill_when(fake, run_spec, iteration_is(1, "deleteVolume", "Succeeded"), extra_sleep=0.3)
    fake.merge_patch = original  # type: ignore[method-assign]
    status = run(fake, run_spec, previous)
    assert (status.conditions[0].reason, status.phase and status.phase.value) == ("OperatorRestarted", "Failed")
    assert "after iteration 1 of 3" in (status.message or ""), status.message
    assert owned_left(fake) == []
