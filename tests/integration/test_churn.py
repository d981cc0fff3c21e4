"""The churn step on the local cluster: waves of volumes through create, publish, unpublish and delete for a
duration, one row per window, leaks counted per window against the array's ground truth, memory per window from
Prometheus, and the drift verdict. Two runs side by side (a steady class and one that leaks), to keep it short."""

from __future__ import annotations

import datetime as dt
from typing import Any

from csibench.api.churn import ChurnSpec, ChurnWindow
from csibench.engine.drift import judge_drift
from localcluster.kube import Kube
from localcluster.launcher import LocalCluster
from localcluster.operator_process import OperatorProcess
from localcluster.runs import TERMINAL, benchmark_run, leftovers, read_report, step, wait_for_phase
from tests.support.runs import create_run

WINDOW = 5  # seconds
DURATION = 35  # 7 windows: one of warm-up, then 3 held against 3
WAVE, EVERY = 4, 5  # 4 volumes every 5 s: 7 waves, 28 volumes
WAVES = DURATION // EVERY
LEAK_EVERY = 4  # the leaky array acknowledges every 4th delete without doing it: 7 of 28


def churn_run(name: str, storage_class: str, prometheus: str, **extra: Any) -> dict[str, Any]:
    return benchmark_run(name, storageClassName=storage_class, steps=["churn"],
                         churn={"durationSeconds": DURATION, "waveSize": WAVE, "everySeconds": EVERY,
                                "maxWavesInFlight": 3, "windowSeconds": WINDOW, "drift": {"windows": 3}},
                         collect={"prometheusUrl": prometheus}, timeouts={"default": 120, "cleanup": 120}, **extra)


def epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def check_windows(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows are the windows in order, the measured ones 5 s each (the last to the duration's end); every volume
    went through every phase once (the completions over the windows add up to the waves' volumes); returns the
    measured (non-tail) rows."""
    rows = run["status"]["churn"]
    measured = [row for row in rows if not row.get("tail")]
    assert [row["index"] for row in rows] == list(range(len(rows))), rows
    assert len(measured) == -(-DURATION // WINDOW), rows
    assert all(row["startSeconds"] == WINDOW * row["index"] and
               row["endSeconds"] == min(row["startSeconds"] + WINDOW, DURATION) for row in measured), measured
    for phase in ("create", "publish", "unpublish", "delete"):
        done = sum(p["completed"] for row in rows for p in row["phases"] if p["phase"] == phase)
        assert done == WAVE * WAVES, (phase, rows)
    assert sum(row["wavesStarted"] for row in rows) == WAVES, rows
    churn = step(run, "churn")
    assert churn["state"] == "Succeeded" and churn["succeeded"] == WAVE * WAVES, churn
    return measured


def test_a_churn_counts_its_windows_leaks_exactly_and_judges_its_drift(
        kube: Kube, namespace: str, operator: OperatorProcess, storage_class: Any, cluster: LocalCluster) -> None:
    """A steady class and one whose array acknowledges every 4th delete without doing it, churned side by side for
    35 s. Both: 7 windows of 5 s whose completions add up to every volume's four phases, the CSI components'
    memory per window, a drift judged on 3 windows against 3. The steady one leaks nothing in any window. The
    leaky one's windows count 7 leaked volumes in all, each within two windows of when the array leaked it, as the
    array's own record says; the whole-run audit after cleanup counts the same 7, and the leak bound fails its
    verdict. Nothing is left of either."""
    prometheus = cluster.prometheus_url
    steady_class = storage_class()
    leaky_class = storage_class(leakEvery=str(LEAK_EVERY), leakOperations="deleteVolume")
    steady = churn_run("churn-steady", steady_class, prometheus)
    leaky = churn_run("churn-leaky", leaky_class, prometheus,
                      thresholds=[{"step": "churn", "metric": "leaked", "max": 0}])
    create_run(kube, namespace, steady)
    create_run(kube, namespace, leaky)
    # Bounded: a hung churn ends with the run's status and the operator's log in the failure (conftest)
    done_steady = wait_for_phase(kube, namespace, "churn-steady", TERMINAL, 300)
    done_leaky = wait_for_phase(kube, namespace, "churn-leaky", TERMINAL, 300)
    for run in (done_steady, done_leaky):
        assert run["status"]["phase"] == "Succeeded", (run["status"], operator.log())

    # The steady class: nothing left behind in any window; memory read per window; the drift judged
    rows = check_windows(done_steady)
    assert all(row["leaks"]["source"] == "Array" and row["leaked"] == 0 for row in rows), rows
    assert all(0 < len(row.get("memory", [])) <= 4 for row in rows), rows  # the 4 largest components each
    drift = done_steady["status"]["churnDrift"]
    assert len(drift["measures"]) == 4 and drift["windows"] == 3, drift
    changes = {m["change"] for m in drift["measures"]}
    expected_change = "Drift" if "Drift" in changes else "NoDrift" if changes == {"NoDrift"} else "Inconclusive"
    assert drift["change"] == expected_change, drift  # the verdict follows its phases' judgements
    # ... and can be checked from the status alone: the rows it published, judged again, give the same verdict
    again = judge_drift(ChurnSpec.model_validate(done_steady["spec"]["churn"]),
                        [ChurnWindow.model_validate(row) for row in done_steady["status"]["churn"]])
    assert again.model_dump(mode="json", exclude_none=True) == drift, (again, drift)
    condition = next(c for c in done_steady["status"]["conditions"] if c["type"] == "NoDrift")
    assert condition["reason"] == drift["change"] and condition["status"] == {
        "Drift": "False", "NoDrift": "True", "Inconclusive": "Unknown"}[drift["change"]], condition
    assert drift["leaked"] == 0 and drift["memoryGrowthPercent"] is not None, drift

    # The leaky class: per window, against the array's record of each leaked delete
    rows = check_windows(done_leaky)
    status = done_leaky["status"]
    truth = sorted(r["finish"] for r in cluster.ground_truth_records()
                   if r["storageClass"] == leaky_class and r["op"] == "deleteVolume" and r.get("leaked"))
    expected = WAVE * WAVES // LEAK_EVERY
    assert len(truth) == expected, truth
    all_rows = status["churn"]
    assert sum(row["leaked"] for row in all_rows) == expected == all_rows[-1]["leaks"]["volumes"], all_rows
    started = epoch(step(done_leaky, "churn")["startTime"])
    for row in all_rows:
        counted, end = row["leaks"]["volumes"], started + row["endSeconds"]
        # Counted once its wave finished, at the first window's end after that: within two windows on a busy machine
        assert sum(t <= end - 2 * WINDOW for t in truth) <= counted <= sum(t <= end + WINDOW for t in truth), (
            row, [t - started for t in truth])
    assert status["leaks"]["volumes"] == expected, status["leaks"]  # the whole-run audit agrees
    assert status["churnDrift"]["leaked"] == expected, status["churnDrift"]
    (bound,) = status["thresholds"]
    assert status["verdict"] == "Fail" and bound["message"] == f"churn leaked {expected} > 0 (max)", bound
    record = next(s for s in read_report(kube, done_leaky)["steps"] if s["status"]["name"] == "churn")
    assert len(record["extra"]["rows"]) == len(all_rows), record.get("extra")  # the stored report keeps the rows
    for run in (done_steady, done_leaky):
        assert leftovers(kube, run) == {}, run["metadata"]["name"]
