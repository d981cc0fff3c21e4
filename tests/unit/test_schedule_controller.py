"""The schedule controller against the in-memory API server, on a clock the test moves: a run per due time and
never two, CronJob's Forbid, Replace, suspend and starting deadline, the history limits, and what it never does
(adopt or delete a run it did not make, create anything for a bad spec)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest

from csibench.api.schedule import SCHEDULE_UID_LABEL
from csibench.kube.client import ApiError
from csibench.kube.resources import ScheduleRef
from csibench.schedule import controller as schedule_controller
from csibench.schedule.controller import ScheduleController, change_point
from tests.support.fake_kube import Behaviour, FakeKube

NAMESPACE = "runs"
TEMPLATE = {"storageClassName": "fast", "volumes": 2, "steps": ["createVolume", "deleteVolume"]}
START = 1_796_601_600  # 2026-12-07 00:00:00 UTC, a multiple of every interval used here


class Clock:
    def __init__(self) -> None:
        self.now = float(START)

    def __call__(self) -> float:
        return self.now


def make(kube: FakeKube, clock: Clock, status: dict[str, Any] | None = None,
         **spec: Any) -> tuple[ScheduleController, dict[str, Any]]:
    body = {"schedule": "@every 60s", "template": TEMPLATE, **spec}
    obj = kube.put("benchmarkschedules", NAMESPACE, {"metadata": {"name": "nightly"}, "spec": body})
    ref = ScheduleRef(NAMESPACE, "nightly", obj["metadata"]["uid"])
    return ScheduleController(ref, kube, status, datetime.fromtimestamp(START, UTC), clock), body


def step(controller: ScheduleController, body: dict[str, Any], generation: int = 1) -> float:
    return asyncio.run(controller.step(generation, body))


def runs(kube: FakeKube) -> list[str]:
    return sorted(kube.named("benchmarkruns", NAMESPACE))


def status(kube: FakeKube) -> dict[str, Any]:
    found: dict[str, Any] = kube.named("benchmarkschedules", NAMESPACE)["nightly"].get("status") or {}
    return found


def end(kube: FakeKube, name: str, phase: str = "Succeeded", **fields: Any) -> None:
    run = kube.named("benchmarkruns", NAMESPACE)[name]
    kube.put("benchmarkruns", NAMESPACE, {**run, "status": {"phase": phase, **fields}}, "MODIFIED")


def test_a_run_is_made_at_each_due_time_from_the_template_and_owned_by_the_schedule() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    clock.now += 30
    assert 0 < step(controller, body) <= 30  # it sleeps until the time
    assert runs(kube) == [] and status(kube)["nextScheduleTime"] == "2026-12-07T00:01:00Z"
    clock.now += 30.2
    step(controller, body)
    name = f"nightly-{START + 60}"
    assert runs(kube) == [name]
    run = kube.named("benchmarkruns", NAMESPACE)[name]
    assert run["spec"] == TEMPLATE
    assert run["metadata"]["labels"][SCHEDULE_UID_LABEL] == controller.ref.uid
    assert run["metadata"]["labels"]["csibench.io/schedule"] == "nightly"
    assert run["metadata"]["annotations"]["csibench.io/scheduled-at"] == "2026-12-07T00:01:00Z"
    (owner,) = run["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("BenchmarkSchedule", controller.ref.uid, True)
    said = status(kube)
    assert said["lastScheduleTime"] == "2026-12-07T00:01:00Z" and said["active"] == [name]
    assert said["lastRun"]["name"] == name and said["conditions"][0]["reason"] == "Scheduling"
    step(controller, body)
    assert runs(kube) == [name], "a second pass at the same time makes nothing more"


def test_a_restarted_operator_whose_status_was_never_written_makes_no_second_run() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    clock.now += 61
    step(controller, body)
    kube.put("benchmarkschedules", NAMESPACE, {**kube.named("benchmarkschedules", NAMESPACE)["nightly"],
                                               "status": {}}, "MODIFIED")  # the write lost with the old operator
    restarted, _ = make(kube, clock, status={})
    step(restarted, body)
    assert runs(kube) == [f"nightly-{START + 60}"]
    assert status(kube)["lastScheduleTime"] == "2026-12-07T00:01:00Z"


def test_forbid_holds_a_due_time_while_a_run_goes_and_starts_it_when_the_run_ends_as_cronjob() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    clock.now += 61
    step(controller, body)
    first = f"nightly-{START + 60}"
    clock.now += 60
    step(controller, body)
    assert runs(kube) == [first]
    assert "waits" in status(kube)["message"] and "Forbid" in status(kube)["message"]
    end(kube, first)
    clock.now += 10
    step(controller, body)
    assert runs(kube) == [first, f"nightly-{START + 120}"], "started late, once the run ended"


def test_with_a_starting_deadline_a_time_held_too_long_is_skipped_not_started_late() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, startingDeadlineSeconds=20)
    clock.now += 61
    step(controller, body)
    first = f"nightly-{START + 60}"
    clock.now += 60
    step(controller, body)  # 00:02 waits under Forbid
    end(kube, first)
    clock.now += 30  # 00:02:31: past 00:02's deadline
    step(controller, body)
    assert runs(kube) == [first]
    clock.now += 30  # 00:03:01: on time
    step(controller, body)
    assert runs(kube) == [first, f"nightly-{START + 180}"]
    assert status(kube)["skipped"] == 1, "00:02 never got a run"


def test_missed_times_start_only_the_latest_and_are_counted() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    clock.now += 60 * 5 + 1  # the operator was down: 00:01 ... 00:05 missed
    step(controller, body)
    assert runs(kube) == [f"nightly-{START + 300}"] and status(kube)["skipped"] == 4


def test_replace_deletes_the_going_run_and_starts_the_new_one() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, concurrencyPolicy="Replace")
    clock.now += 61
    step(controller, body)
    clock.now += 60
    step(controller, body)
    assert runs(kube) == [f"nightly-{START + 120}"]


def test_allow_starts_beside_a_going_run() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, concurrencyPolicy="Allow")
    for _ in range(2):
        clock.now += 60
        step(controller, body)
    assert runs(kube) == [f"nightly-{START + 60}", f"nightly-{START + 120}"]
    assert len(status(kube)["active"]) == 2


def test_history_limits_delete_the_oldest_finished_runs_and_nothing_that_is_not_the_schedules() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, successfulRunsHistoryLimit=2, failedRunsHistoryLimit=1)
    made = []
    for index in range(5):
        clock.now += 60
        step(controller, body)
        made.append(f"nightly-{START + 60 * (index + 1)}")
        end(kube, made[-1], "Failed" if index in (1, 3) else "Succeeded", completionTime=f"2026-12-07T00:0{index}:59Z")
    # A user's run carrying the schedule's label but not owned by it: never counted, never deleted.
    kube.put("benchmarkruns", NAMESPACE, {"metadata": {"name": "copied", "labels": {
        SCHEDULE_UID_LABEL: controller.ref.uid}}, "status": {"phase": "Succeeded"}})
    clock.now += 1
    step(controller, body)
    assert runs(kube) == sorted(["copied", made[2], made[3], made[4]])
    assert status(kube)["lastSuccessfulTime"] == "2026-12-07T00:04:59Z"


def test_suspend_makes_nothing_and_says_so() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, suspend=True)
    clock.now += 125
    step(controller, body)
    assert runs(kube) == []
    condition = status(kube)["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "Suspended")
    resumed = {**body, "suspend": False}
    step(controller, resumed, generation=2)
    assert runs(kube) == [f"nightly-{START + 120}"], "as CronJob: the latest time missed while suspended starts"


def test_a_bad_spec_says_invalid_spec_and_creates_nothing_not_even_a_dry_run() -> None:
    for spec, said in (({"schedule": "61 * * * *"}, "minute"),
                       ({"template": {"volumes": 2}}, "spec.template is not a valid run spec"),
                       ({"successfulRunsHistoryLimit": -1}, "successfulRunsHistoryLimit")):
        kube, clock = FakeKube(), Clock()
        controller, body = make(kube, clock, **spec)
        clock.now += 600
        step(controller, body)
        condition = status(kube)["conditions"][0]
        assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec") and said in condition["message"]
        assert not [path for verb, path in kube.log if verb.startswith("POST") and "benchmarkruns" in path]


def test_a_namesake_run_that_is_not_the_schedules_is_left_alone_and_its_time_skipped() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    taken = f"nightly-{START + 60}"
    kube.put("benchmarkruns", NAMESPACE, {"metadata": {"name": taken}, "spec": {"volumes": 9}})
    clock.now += 61
    step(controller, body)
    assert kube.named("benchmarkruns", NAMESPACE)[taken]["spec"] == {"volumes": 9}
    said = status(kube)
    assert said["skipped"] == 1 and "not this schedule's" in said["message"]
    assert said["conditions"][0]["reason"] == "RunRefused"
    clock.now += 60
    step(controller, body)
    assert f"nightly-{START + 120}" in runs(kube)


def _finished(name: str, throughput: float) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": TEMPLATE, "status": {
        "phase": "Succeeded", "completionTime": f"2026-12-07T{name[-2:]}:00:00Z",
        "steps": [{"name": "createVolume", "state": "Succeeded", "throughput": throughput}]}}


def test_the_change_point_is_csibench_historys_on_the_schedules_runs() -> None:
    steady = [_finished(f"r-{i:02d}", 10.0 + 0.1 * (i % 2)) for i in range(6)]
    assert change_point(steady) is None
    slower = steady[:4] + [_finished(f"r-{i:02d}", 5.0 + 0.1 * (i % 2)) for i in range(4, 7)]
    found = change_point(slower)
    assert found is not None and found.run == "r-06"
    assert found.steps.startswith("createVolume Regression (0.5")


def test_an_api_server_that_refuses_for_a_reason_not_the_runs_is_said_and_retried_never_crashing_the_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_controller, "POLL_SECONDS", 0.01)
    quota: list[ApiError] = [ApiError(403, "Forbidden", "exceeded quota: runs")]
    kube = FakeKube(Behaviour(refuse_create=lambda plural, name: quota[0] if quota else None))
    deleting: list[bool] = []
    clock = Clock()
    controller, body = make(kube, clock)
    clock.now += 61

    async def drive() -> None:
        task = asyncio.create_task(controller.run(lambda: (1, body) if not deleting else None))
        try:
            async with asyncio.timeout(10):  # a loop that died on the error would leave status empty for ever
                while not status(kube).get("conditions") and not task.done():
                    await asyncio.sleep(0.01)
                assert not task.done(), task.exception()
                condition = status(kube)["conditions"][0]
                assert (condition["reason"], condition["status"]) == ("Retrying", "False")
                assert "exceeded quota" in condition["message"] and runs(kube) == []
                quota.clear()  # the quota raised: the held time is made at the next pass, not skipped
                while not runs(kube):
                    await asyncio.sleep(0.01)
                deleting.append(True)  # the schedule being deleted: the loop ends by itself
                await task
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(drive())
    assert runs(kube) == [f"nightly-{START + 60}"] and status(kube)["skipped"] == 0


def test_the_latest_run_and_verdict_never_go_back_when_a_history_limit_of_0_deletes_the_newest() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, failedRunsHistoryLimit=0)
    clock.now += 61
    step(controller, body)
    end(kube, f"nightly-{START + 60}", verdict="Pass")
    clock.now += 60
    step(controller, body)
    end(kube, f"nightly-{START + 120}", "Failed", verdict="Fail")
    step(controller, body)  # the failed run is recorded, then deleted (limit 0)
    step(controller, body)  # only the older, passing run is left
    said = status(kube)
    assert said["lastRun"]["name"] == f"nightly-{START + 120}" and said["lastVerdict"] == "Fail", said
    assert runs(kube) == [f"nightly-{START + 60}"]


def test_a_run_whose_time_cannot_be_believed_does_not_stop_or_crash_the_schedule() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock, concurrencyPolicy="Allow")
    clock.now += 61
    step(controller, body)
    owned = kube.named("benchmarkruns", NAMESPACE)[f"nightly-{START + 60}"]
    for name, notes in ((f"nightly-{START + 60}", {"csibench.io/scheduled-at": "2099-01-01T00:00:00Z"}),
                        ("nightly-99999999999999", {})):
        meta = {**owned["metadata"], "name": name, "annotations": notes}
        kube.put("benchmarkruns", NAMESPACE, {**owned, "metadata": meta}, "MODIFIED")
    clock.now += 60
    step(controller, body)
    assert f"nightly-{START + 120}" in runs(kube)
    assert status(kube)["lastScheduleTime"] == "2026-12-07T00:02:00Z"


def test_forbid_holds_while_a_run_deleted_by_hand_still_cleans_up() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    clock.now += 61
    step(controller, body)
    first = f"nightly-{START + 60}"
    run = kube.named("benchmarkruns", NAMESPACE)[first]
    kube.put("benchmarkruns", NAMESPACE, {**run, "metadata": {**run["metadata"],
                                                             "deletionTimestamp": "2026-12-07T00:01:30Z"}},
             "MODIFIED")
    clock.now += 60
    step(controller, body)
    assert runs(kube) == [first] and "waits" in status(kube)["message"]


def test_an_invalid_edit_says_so_for_its_generation_and_a_valid_one_schedules_again() -> None:
    kube, clock = FakeKube(), Clock()
    controller, body = make(kube, clock)
    clock.now += 30
    step(controller, body)
    assert status(kube)["nextScheduleTime"]
    step(controller, {**body, "schedule": "0 0 30 2 *"}, generation=2)
    said = status(kube)
    assert said["observedGeneration"] == 2 and "nextScheduleTime" not in said, said
    condition = said["conditions"][0]
    assert (condition["reason"], condition["observedGeneration"]) == ("InvalidSpec", 2)
    assert "no time in the next five years" in condition["message"]
    clock.now += 31
    step(controller, body, generation=3)
    assert runs(kube) == [f"nightly-{START + 60}"] and status(kube)["observedGeneration"] == 3
