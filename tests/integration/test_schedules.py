"""BenchmarkSchedule on the local cluster, run by an operator with only its ServiceAccount's rights (deploy/'s RBAC
and admission policies): runs made on time, never two for one time across an operator kill, the history limit
kept by deletes the policy admits, ``csibench history`` reading the series, and nothing left once the schedule is
deleted."""

from __future__ import annotations

import itertools
import signal
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from localcluster.kube import Kube, items, wait_until
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import GROUP, VERSION, describe_stuck_run, get_run, leftovers
from tests.support.cluster import cli

pytestmark = pytest.mark.integration
INTERVAL = 10  # seconds: "@every 10s"
KEPT = 2
LATE_SECONDS = 5.0  # a run made more than this after its time is late (a busy machine: list, create, a restart)


def scheduled_runs(kube: Kube, namespace: str, schedule: str) -> list[dict[str, Any]]:
    return items(kube.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "benchmarkruns",
                                                           label_selector=f"csibench.io/schedule={schedule}"))


def unix(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def test_a_schedule_makes_runs_on_time_never_twice_across_a_kill_and_keeps_its_history_limit(
        kube: Kube, namespace: str, cluster: LocalCluster, operator_as_service_account: OperatorProcess) -> None:
    operator = operator_as_service_account
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkSchedule", "metadata": {"name": "probe"},
            # Allow: a time never waits for the run before it (Forbid's hold is the unit tests'), so "on time" is
            # the controller's promptness, not a run's length on a busy machine.
            "spec": {"schedule": f"@every {INTERVAL}s", "concurrencyPolicy": "Allow",
                     "successfulRunsHistoryLimit": KEPT,
                     "failedRunsHistoryLimit": 1,
                     "template": {"storageClassName": "csibench-sim", "volumes": 2,
                                  "steps": ["createVolume", "deleteVolume"], "timeouts": {"default": 60}}}}
    kube.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "benchmarkschedules", body)
    seen: dict[str, tuple[str, float, float]] = {}  # name -> (uid, scheduled time, creation), every run ever seen
    doubles: list[str] = []

    def look() -> list[dict[str, Any]]:
        runs = scheduled_runs(kube, namespace, "probe")
        for run in runs:
            meta = run["metadata"]
            known = seen.setdefault(meta["name"], (meta["uid"], unix(meta["annotations"]["csibench.io/scheduled-at"]),
                                                   unix(meta["creationTimestamp"])))
            if known[0] != meta["uid"]:
                doubles.append(meta["name"])
        return runs

    def failure(what: str) -> str:
        schedule = get_run(kube, namespace, "probe", "benchmarkschedules") or {}
        runs = "\n".join(describe_stuck_run(kube, namespace, name) for name in sorted(seen))
        return f"{what}; schedule status: {schedule.get('status')}\nruns:\n{runs}\noperator log:\n{operator.log(60)}"

    def made(count: int) -> bool:
        look()
        return len(seen) >= count

    try:
        wait_until(lambda: made(2), 3 * INTERVAL + 40, "2 scheduled runs", 0.5)
        # Killed just after a time (a run being made, its status maybe not written), started again at once.
        next_time = (int(time.time()) // INTERVAL + 1) * INTERVAL
        time.sleep(max(0.0, next_time - time.time() + 0.3))
        operator.stop(signal.SIGKILL)
        operator.start()
        wait_until(lambda: made(4), 4 * INTERVAL + 60, "4 scheduled runs", 0.5)
        wait_until(lambda: sum(1 for run in look() if (run.get("status") or {}).get("phase") == "Succeeded"
                               and not run["metadata"].get("deletionTimestamp")) >= KEPT, 120,
                   "runs succeeded", 1)
    except AssertionError as error:
        raise AssertionError(failure(str(error))) from None
    assert not doubles, failure(f"a time got two runs: {doubles}")
    times = sorted(at for _, at, _ in seen.values())
    assert all(at % INTERVAL == 0 for at in times), times
    assert all(later - earlier >= INTERVAL for earlier, later in itertools.pairwise(times)), times
    late = {name: round(created - at, 1) for name, (_, at, created) in seen.items() if created - at > LATE_SECONDS}
    # Only the time of the kill may be late (the restarted operator made it); each of the others on time.
    assert len(late) <= 1, failure(f"runs made late: {late}")
    assert len(seen) - len(late) >= 3

    # The history limit: once more than KEPT runs succeeded, only the latest KEPT Succeeded runs remain.
    def within_limit() -> bool:
        runs = [run for run in look() if not run["metadata"].get("deletionTimestamp")]
        ended = [run for run in runs if (run.get("status") or {}).get("phase") == "Succeeded"]
        return len(ended) <= KEPT and len(seen) > KEPT

    try:
        wait_until(within_limit, 60, f"at most {KEPT} Succeeded runs kept", 1)
    except AssertionError as error:
        raise AssertionError(failure(str(error))) from None
    status = (get_run(kube, namespace, "probe", "benchmarkschedules") or {})["status"]
    assert status["conditions"][0]["reason"] == "Scheduling", status
    assert status["lastRun"]["name"] in seen and status["lastScheduleTime"] and status["nextScheduleTime"], status
    assert status["lastSuccessfulTime"], status

    printed = cli(cluster, "history", "-n", namespace, "-l", "csibench.io/schedule=probe")
    assert "Create Volume" in printed and "Delete Volume" in printed and "probe-" in printed, printed

    finished = scheduled_runs(kube, namespace, "probe")
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "benchmarkschedules", "probe")
    try:
        wait_until(lambda: not scheduled_runs(kube, namespace, "probe"), 180, "the schedule's runs gone", 1)
    except AssertionError as error:
        raise AssertionError(failure(str(error))) from None
    for run in finished:
        if (run.get("status") or {}).get("targetNamespace"):
            assert leftovers(kube, run) == {}, run["metadata"]["name"]
