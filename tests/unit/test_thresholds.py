"""Thresholds (spec.thresholds): every kind judged against status by hand-built numbers, the verdict's relation
to the phase, the admission rules in the models (the CRD's CEL is exercised on the local cluster), the plan
table admission reads, and a whole run on the in-memory fake ending with the condition, Events and metric."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from csibench.api.baseline import SHARED_ANNOTATION, not_shared
from csibench.api.models import (
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    ConditionReason,
    Phase,
    StepName,
    Verdict,
)
from csibench.engine.plan import resolve_steps
from csibench.engine.thresholds import judge
from csibench.engine.verdict import RunVerdict
from csibench.metrics import METRICS
from tests.support.fake_kube import FakeKube
from tests.support.fake_runs import NAMES, REF, owned_left, run, spec

MEASURED = RunVerdict(Phase.SUCCEEDED, ConditionReason.SUCCEEDED, "done")
NOT_MEASURED = RunVerdict(Phase.FAILED, ConditionReason.OBJECTS_FAILED, "createVolume: 1 of 3 failed")
LATENCY = {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0, "mean": 1.5}


def _spec(*thresholds: dict[str, Any], **fields: Any) -> BenchmarkRunSpec:
    return BenchmarkRunSpec(storageClassName="sim", thresholds=list(thresholds), **fields)


def _status(**fields: Any) -> BenchmarkRunStatus:
    base: dict[str, Any] = {"steps": [
        {"name": "createVolume", "state": "Succeeded", "objects": 3, "succeeded": 3, "durationSeconds": 6.0,
         "throughput": 0.5, "latency": LATENCY},
        {"name": "deleteVolume", "state": "Succeeded", "objects": 3, "succeeded": 2, "failed": 1,
         "durationSeconds": 2.0, "throughput": 1.0, "latency": LATENCY}]}
    base.update(fields)
    return BenchmarkRunStatus.model_validate(base)


@pytest.mark.parametrize(("metric", "bound", "met", "measured"), [
    ("durationSeconds", {"max": 5}, False, 6.0), ("durationSeconds", {"max": 6}, True, 6.0),
    ("throughput", {"min": 0.6}, False, 0.5), ("throughput", {"min": 0.5}, True, 0.5),
    ("latencyP50", {"max": 0.9}, False, 1.0), ("latencyP90", {"max": 2}, True, 2.0),
    ("latencyP99", {"max": 2.5}, False, 3.0), ("latencyMax", {"min": 1, "max": 5}, True, 4.0),
    ("failed", {"max": 0}, True, 0.0),
])
def test_each_step_metric_reads_its_status_field(metric: str, bound: dict[str, float], met: bool,
                                                 measured: float) -> None:
    run_spec = _spec({"step": "createVolume", "metric": metric, **bound})
    judged = judge(run_spec, _status(), MEASURED)
    assert judged is not None
    (result,) = judged.results
    assert result.measured == measured and result.met is met
    assert judged.verdict == (Verdict.PASS if met else Verdict.FAIL)
    assert judged.condition_status == ("True" if met else "False")


def test_a_broken_bound_is_named_with_measured_and_allowed() -> None:
    run_spec = _spec({"step": "createVolume", "metric": "latencyP99", "max": 2},
                     {"step": "deleteVolume", "metric": "failed", "max": 0},
                     {"step": "deleteVolume", "metric": "throughput", "min": 0.5})
    judged = judge(run_spec, _status(), MEASURED)
    assert judged is not None and judged.verdict == Verdict.FAIL and judged.reason == "ThresholdsBroken"
    assert [r.met for r in judged.results] == [False, False, True]
    assert judged.message == ("2 of 3 broken: createVolume latencyP99 3 s > 2 s (max); "
                              "deleteVolume failed 1 > 0 (max)")


def test_repeats_judge_the_median_over_iterations() -> None:
    aggregates = [{"name": "createVolume", "iterations": 3, "throughput": {"median": 2.0, "min": 1.0, "max": 3.0},
                   "durationSeconds": {"median": 1.5, "min": 1.0, "max": 3.0}, "latency": dict(LATENCY, p99=0.7)}]
    run_spec = _spec({"step": "createVolume", "metric": "throughput", "min": 1.8},
                     {"step": "createVolume", "metric": "latencyP99", "max": 1}, repeat=3)
    judged = judge(run_spec, _status(aggregates=aggregates), MEASURED)
    assert judged is not None and [r.measured for r in judged.results] == [2.0, 0.7]
    assert judged.verdict == Verdict.PASS


_DATA_PATH = {"dataPath": {"workloads": [{"name": "seqRead", "pattern": "read", "blockSize": "64Ki"},
                                         {"name": "mix", "pattern": "randrw", "blockSize": "8Ki"}]},
              "steps": ["createVolume", "dataPath", "deleteVolume"]}
_ROWS = [{"name": "seqRead", "state": "Succeeded", "readMiBps": 100.0, "readIOPS": 1600.0,
          "latency": {"readP99": 0.004}},
         {"name": "mix", "state": "Succeeded", "readMiBps": 10.0, "writeMiBps": 12.5, "readIOPS": 1280.0,
          "writeIOPS": 1600.0, "latency": {"readP99": 0.002, "writeP99": 0.009}}]


@pytest.mark.parametrize(("workload", "metric", "bound", "met", "measured"), [
    ("seqRead", "mibps", {"min": 120}, False, 100.0), ("mix", "mibps", {"min": 22}, True, 22.5),
    ("mix", "iops", {"min": 3000}, False, 2880.0), ("seqRead", "readP99", {"max": 0.005}, True, 0.004),
    ("mix", "writeP99", {"max": 0.005}, False, 0.009),
])
def test_each_workload_metric_reads_its_row(workload: str, metric: str, bound: dict[str, float], met: bool,
                                            measured: float) -> None:
    run_spec = _spec({"workload": workload, "metric": metric, **bound}, **_DATA_PATH)
    judged = judge(run_spec, _status(dataPath=_ROWS), MEASURED)
    assert judged is not None
    assert judged.results[0].measured == pytest.approx(measured) and judged.results[0].met is met


def test_a_workload_with_repeats_is_judged_on_its_aggregate_per_direction() -> None:
    aggregates = [{"name": "mix", "iterations": 2, "mibps": {"median": 30.0, "min": 20.0, "max": 40.0},
                   "writeP99": {"median": 0.003, "min": 0.002, "max": 0.004}}]
    run_spec = _spec({"workload": "mix", "metric": "mibps", "min": 25},
                     {"workload": "mix", "metric": "writeP99", "max": 0.005}, repeat=2, **_DATA_PATH)
    judged = judge(run_spec, _status(dataPath=_ROWS, dataPathAggregates=aggregates), MEASURED)
    assert judged is not None and [r.measured for r in judged.results] == [30.0, 0.003]


_DATABASE = {"database": {"scales": [1, 10], "modes": ["readOnly", "readWrite"], "clients": [1, 4]}}


def _db_row(scale: int, mode: str, clients: int, tps: float, latency: float, failed: int) -> dict[str, Any]:
    return {"kind": "run", "scale": scale, "mode": mode, "clients": clients, "state": "Succeeded", "tps": tps,
            "latencyAverageMs": latency, "failedTransactions": failed}


_DB_ROWS = [{"kind": "initialize", "scale": 1, "state": "Succeeded", "durationSeconds": 3.0},
            _db_row(1, "readOnly", 1, 900.0, 1.1, 0), _db_row(1, "readOnly", 4, 2500.0, 1.6, 0),
            _db_row(1, "readWrite", 1, 300.0, 3.3, 2), _db_row(1, "readWrite", 4, 700.0, 5.7, 0)]


@pytest.mark.parametrize(("selector", "metric", "bound", "met", "measured"), [
    ({"scale": 1, "mode": "readOnly"}, "tps", {"min": 1000}, False, 900.0),  # the worse of 900 and 2500
    ({"mode": "readOnly", "clients": 4}, "tps", {"min": 1000}, True, 2500.0),
    ({"mode": "readWrite"}, "latencyAverageMs", {"max": 5}, False, 5.7),
    ({}, "failedTransactions", {"max": 0}, False, 2.0),
])
def test_a_database_selector_is_judged_on_its_worst_row(selector: dict[str, Any], metric: str,
                                                        bound: dict[str, float], met: bool, measured: float) -> None:
    run_spec = _spec({"database": selector, "metric": metric, **bound}, **_DATABASE)
    judged = judge(run_spec, _status(database=_DB_ROWS), MEASURED)
    assert judged is not None
    assert judged.results[0].measured == measured and judged.results[0].met is met


def test_a_run_that_failed_to_measure_has_verdict_unknown_even_with_a_bound_broken() -> None:
    run_spec = _spec({"step": "createVolume", "metric": "latencyP99", "max": 2},
                     {"step": "deleteVolume", "metric": "failed", "max": 1})
    judged = judge(run_spec, _status(), NOT_MEASURED)
    assert judged is not None and judged.verdict == Verdict.UNKNOWN and judged.condition_status == "Unknown"
    assert judged.reason == "RunFailed" and "ObjectsFailed" in judged.message
    latency, failed = judged.results
    assert latency.met is None and latency.measured == 3.0  # listed with what was measured, not judged
    assert latency.message == "createVolume latencyP99 3 s: not judged, the run failed to measure"
    assert failed.met is True and judged.broken == []


def test_a_failed_object_bound_is_judged_on_a_run_that_failed_and_fails_its_verdict() -> None:
    judged = judge(_spec({"step": "deleteVolume", "metric": "failed", "max": 0}), _status(), NOT_MEASURED)
    assert judged is not None and judged.verdict == Verdict.FAIL and judged.reason == "ThresholdsBroken"
    assert judged.message.startswith("the run failed to measure (ObjectsFailed), and 1 failed-object bound(s) "
                                     "broke: deleteVolume failed 1 > 0 (max)")


def test_a_value_is_shown_with_the_digits_that_tell_it_from_its_bound() -> None:
    status = _status()
    status.steps[0].latency.p99 = 2.0001  # type: ignore[union-attr]  # _status sets it
    judged = judge(_spec({"step": "createVolume", "metric": "latencyP99", "max": 2}), status, MEASURED)
    assert judged is not None and judged.results[0].message == "createVolume latencyP99 2.0001 s > 2 s (max)"


def test_a_bound_on_a_failed_step_is_not_measured() -> None:
    status = _status()
    status.steps[0].state = status.steps[0].state.__class__("Failed")
    judged = judge(_spec({"step": "createVolume", "metric": "throughput", "min": 0.1}), status, MEASURED)
    assert judged is not None and judged.results[0].met is None and judged.verdict == Verdict.UNKNOWN
    assert judged.message == "createVolume throughput: not measured"


def test_no_thresholds_no_verdict() -> None:
    assert judge(_spec(), _status(), MEASURED) is None


@pytest.mark.parametrize(("threshold", "fields", "words"), [
    ({"step": "createSnapshot", "metric": "latencyP99", "max": 1}, {}, "a step this run does not run"),
    ({"step": "publish", "metric": "latencyP99", "max": 1}, {"steps": ["createVolume", "deleteVolume"]},
     "a step this run does not run"),
    ({"step": "createVolume", "metric": "latencyP99", "max": -1}, {}, "greater than or equal to 0"),
    ({"step": "createVolume", "metric": "bogus", "max": 1}, {}, "Input should be"),
    ({"step": "createVolume", "metric": "tps", "min": 1}, {}, "a step threshold's metric is one of"),
    ({"step": "createVolume", "metric": "throughput"}, {}, "needs min, max or both"),
    ({"step": "createVolume", "workload": "seqRead", "metric": "throughput", "min": 1}, {}, "exactly one of"),
    ({"metric": "latencyP99", "max": 1}, {}, "or none for a bound on the whole run"),
    ({"step": "createVolume", "metric": "throughput", "min": 3, "max": 2}, {}, "min must be at most its max"),
    ({"workload": "seqRead", "metric": "mibps", "min": 1}, {}, "a data-path workload this run does not run"),
    ({"database": {"scale": 7}, "metric": "tps", "min": 1}, _DATABASE, "a scale, mode or clients count"),
    ({"workload": "seqRead", "metric": "writeP99", "max": 1}, _DATA_PATH, "workload seqRead does not write"),
    ({"workload": "mix", "metric": "readP99", "max": 1},
     {**_DATA_PATH, "dataPath": {"workloads": [{"name": "mix", "pattern": "randrw", "blockSize": "8Ki",
                                                "readPercent": 0}]}}, "workload mix does not read"),
])
def test_admission_refuses_what_cannot_be_judged(threshold: dict[str, Any], fields: dict[str, Any],
                                                 words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        _spec(threshold, **fields)


@pytest.mark.parametrize("fields", [
    {}, {"volumeSnapshotClassName": "snap"},
    {"volumeSnapshotClassName": "snap", "dataPath": {"verify": True}},
    {"dataPath": {}}, {"database": {}}, {"expand": {"by": "1Gi"}}, {"move": {}}, {"density": {"volumesPerNode": [2]}},
    {"groupSnapshot": {"volumeGroupSnapshotClassName": "group"}},
])
def test_admissions_reading_of_the_plan_is_the_plan(fields: dict[str, Any]) -> None:
    run_spec = BenchmarkRunSpec(storageClassName="sim", **fields)
    planned = {str(step.name) for step in resolve_steps(run_spec)}
    assert {str(name) for name in StepName if run_spec.runs_step(name)} == planned


def test_a_run_on_the_fake_ends_with_the_condition_the_events_and_the_metric() -> None:
    fake = FakeKube()
    status = run(fake, spec(thresholds=[{"step": "createVolume", "metric": "throughput", "min": 1e9},
                                        {"step": "deleteVolume", "metric": "failed", "max": 0}]))
    assert status.phase == Phase.SUCCEEDED  # a measurement that broke a bound is still a measurement
    assert status.verdict == Verdict.FAIL and [r.met for r in status.thresholds] == [False, True]
    condition = next(c for c in status.conditions if c.type == "ThresholdsMet")
    assert condition.status == "False" and condition.reason == "ThresholdsBroken"
    assert "createVolume throughput" in condition.message and "< 1e+09 (min)" in condition.message
    events = {o["reason"]: o for o in fake.named("events", REF.namespace).values()}
    assert events["ThresholdsBroken"]["type"] == "Warning" and "RunSucceeded" in events
    run_label = f"{REF.namespace}/{REF.name}"
    assert METRICS.verdict.labels(run_label, "Fail")._value.get() == 1
    assert METRICS.verdict.labels(run_label, "Pass")._value.get() == 0
    assert METRICS.thresholds_broken.labels(run_label)._value.get() == 1


def _baseline_run(name: str, throughputs: list[float]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": REF.namespace},
            "spec": {"storageClassName": "sim"},
            "status": {"phase": "Succeeded",
                       "steps": [{"name": "createVolume", "state": "Succeeded", "throughput": throughputs[-1]}],
                       "aggregates": [{"name": "createVolume", "iterations": len(throughputs),
                                       "throughputs": throughputs}]}}


def test_a_run_far_slower_than_its_baseline_is_a_regression_and_fails_the_verdict() -> None:
    fake = FakeKube()
    fake.put("benchmarkruns", REF.namespace, _baseline_run("fast", [1e7, 1.1e7, 0.9e7]))
    status = run(fake, spec(repeat=3, steps=["createVolume", "deleteVolume"], baseline="fast"))
    assert status.phase == Phase.SUCCEEDED and status.verdict == Verdict.FAIL, status.message
    assert status.baseline is not None and status.baseline.run == f"{REF.namespace}/fast"
    assert [(row.subject, row.change) for row in status.baseline.rows] == [("createVolume", "Regression")]
    condition = next(c for c in status.conditions if c.type == "NoRegression")
    assert (condition.status, condition.reason) == ("False", "Regression")
    events = {o["reason"]: o for o in fake.named("events", REF.namespace).values()}
    assert events["BaselineRegression"]["type"] == "Warning"
    assert not any(c.type == "ThresholdsMet" for c in status.conditions)  # no thresholds, no such condition


def test_a_missing_baseline_is_inconclusive_and_the_verdict_unknown() -> None:
    fake = FakeKube()
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], baseline="other-ns/gone"))
    assert status.phase == Phase.SUCCEEDED and status.verdict == Verdict.UNKNOWN
    assert status.baseline is not None and status.baseline.message == not_shared("other-ns/gone", REF.namespace)
    condition = next(c for c in status.conditions if c.type == "NoRegression")
    assert (condition.status, condition.reason) == ("Unknown", "Inconclusive")
    same_namespace = run(FakeKube(), spec(steps=["createVolume", "deleteVolume"], baseline="gone"))
    assert same_namespace.baseline is not None
    assert same_namespace.baseline.message == f"baseline {REF.namespace}/gone not found"


def _elsewhere(shared: str | None) -> dict[str, Any]:
    """A fast baseline in namespace 'other', shared (annotation value) or not (None)."""
    baseline = _baseline_run("fast", [1e7, 1.1e7, 0.9e7])
    baseline["metadata"]["namespace"] = "other"
    if shared is not None:
        baseline["metadata"]["annotations"] = {SHARED_ANNOTATION: shared}
    return baseline


def test_a_baseline_in_another_namespace_is_compared_only_when_shared_there_and_says_nothing_else() -> None:
    """Issue 41: the operator reads the baseline with its own rights; a run must not learn another namespace's
    numbers, or which runs exist there, unless the baseline's owner shared it with the run's namespace."""
    run_spec = spec(repeat=3, steps=["createVolume", "deleteVolume"], baseline="other/fast")
    messages = {}
    for case, shared in (("missing", None), ("unshared", None), ("elsewhere", "team-a, team-b")):
        fake = FakeKube()
        if case != "missing":
            fake.put("benchmarkruns", "other", _elsewhere(shared))
        status = run(fake, run_spec)
        assert status.phase == Phase.SUCCEEDED and status.verdict == Verdict.UNKNOWN, (case, status.baseline)
        assert status.baseline is not None and status.baseline.rows == [], case
        messages[case] = status.baseline.message
    assert set(messages.values()) == {not_shared("other/fast", REF.namespace)}, messages
    for shared in (f"team-a,{REF.namespace}", "*"):
        fake = FakeKube()
        fake.put("benchmarkruns", "other", _elsewhere(shared))
        status = run(fake, run_spec)
        assert status.baseline is not None and status.verdict == Verdict.FAIL, (shared, status.baseline)
        assert [(row.subject, row.change) for row in status.baseline.rows] == [("createVolume", "Regression")]


def test_a_baseline_of_another_shape_is_said_and_refused_when_the_run_requires_an_equal_shape() -> None:
    baseline = _baseline_run("fast", [1e7, 1.1e7, 0.9e7])
    baseline["spec"] = {"storageClassName": "fast-class", "volumes": 12, "pvcsPerPod": 2,
                        "steps": ["createVolume", "deleteVolume"]}
    fake = FakeKube()
    fake.put("benchmarkruns", REF.namespace, baseline)
    compared = run(fake, spec(repeat=3, steps=["createVolume", "deleteVolume"], baseline="fast"))
    assert compared.baseline is not None and compared.verdict == Verdict.FAIL
    assert compared.baseline.shapeDifferences == ['storageClassName "fast-class" vs "sim"', "volumes 12 vs 6"]
    assert compared.baseline.message.startswith('shapes differ (storageClassName "fast-class" vs "sim", volumes 12 '
                                                'vs 6): against')
    refused = run(fake, spec(repeat=3, steps=["createVolume", "deleteVolume"], baseline="fast",
                             baselineRequireSameShape=True))
    assert refused.baseline is not None and refused.verdict == Verdict.UNKNOWN and refused.baseline.rows == []
    assert refused.baseline.change == "Inconclusive"
    assert "baselineRequireSameShape" in refused.baseline.message and "volumes 12 vs 6" in refused.baseline.message
    condition = next(c for c in refused.conditions if c.type == "NoRegression")
    assert (condition.status, condition.reason) == ("Unknown", "Inconclusive") and "volumes 12 vs 6" in \
        condition.message
    baseline["spec"] = {"storageClassName": "sim", "volumes": 6, "pvcsPerPod": 2,
                        "steps": ["createVolume", "deleteVolume"]}
    fake.put("benchmarkruns", REF.namespace, baseline)
    same = run(fake, spec(repeat=3, steps=["createVolume", "deleteVolume"], baseline="fast",
                          baselineRequireSameShape=True))
    assert same.baseline is not None and same.baseline.shapeDifferences == [] and same.verdict == Verdict.FAIL


@pytest.mark.parametrize("baseline", ["Bad_Name", "a/b/c", "ns/", "x" * 41, "ns/" + "x" * 41])
def test_a_baseline_name_that_is_not_a_run_name_is_refused(baseline: str) -> None:
    with pytest.raises(ValidationError):
        _spec(baseline=baseline)


def test_a_finished_runs_verdict_series_come_back_after_an_operator_restart() -> None:
    from csibench.engine.report_store import restore_run_metrics

    status = {"phase": "Succeeded", "verdict": "Fail", "steps": [],
              "thresholds": [{"subject": "createVolume", "metric": "latencyP99", "bound": "<= 2", "met": False}],
              "baseline": {"run": "n/b", "change": "Regression", "thresholdPercent": 10,
                           "rows": [{"subject": "createVolume", "metric": "throughput", "change": "Regression"}]}}
    restore_run_metrics("bench/restored", "sim", status, None)
    assert METRICS.verdict.labels("bench/restored", "Fail")._value.get() == 1
    assert METRICS.verdict.labels("bench/restored", "Pass")._value.get() == 0
    assert METRICS.thresholds_broken.labels("bench/restored")._value.get() == 2


def test_a_run_that_names_itself_as_its_baseline_fails_before_anything_exists() -> None:
    fake = FakeKube()
    status = run(fake, spec(steps=["createVolume", "deleteVolume"], baseline=f"{REF.namespace}/{REF.name}"))
    assert status.phase == Phase.FAILED and status.conditions[0].reason == "InvalidSpec"
    assert "spec.baseline names this run itself" in (status.message or "")
    assert owned_left(fake) == [] and ("namespaces", "", NAMES.namespace) not in fake.objects


def _iteration(number: int, failed: int = 0) -> dict[str, Any]:
    """One finished iteration record with createVolume's objects, ``failed`` of them failed."""
    step = {"name": "createVolume", "state": "Succeeded", "objects": 3, "succeeded": 3 - failed, "failed": failed,
            "durationSeconds": 1.0, "throughput": 3.0, "latency": LATENCY}
    return {"iteration": number, "state": "Failed" if failed else "Succeeded", "message": "",
            "steps": [{"status": step}]}


@pytest.mark.parametrize("failed_in", [1, 2, 3])
def test_a_failed_bound_counts_the_failures_of_every_iteration(failed_in: int) -> None:
    # issue 42 point 4: a failed object in iteration 2 of 3 was missed (the bound read only the last iteration)
    from csibench.engine.iterations import build_aggregates, count_iterations

    records = [_iteration(n, failed=1 if n == failed_in else 0) for n in (1, 2, 3)]
    last = records[-1]["steps"][0]["status"]
    status = _status(steps=[last], iterations=count_iterations(records, 3, 3).model_dump(),
                     aggregates=[a.model_dump() for a in build_aggregates(records)])
    judged = judge(_spec({"step": "createVolume", "metric": "failed", "max": 0}, repeat=3), status, NOT_MEASURED)
    assert judged is not None and judged.verdict == Verdict.FAIL and judged.reason == "ThresholdsBroken"
    (result,) = judged.results
    assert result.measured == 1.0 and result.met is False
    assert "createVolume failed 1 > 0 (max)" in result.message


def test_a_bound_is_printed_with_the_digits_that_tell_it_from_the_value() -> None:
    # issue 42 point 7: 6.0 against a max of 5.999999999 read "6 > 6 (max)"
    judged = judge(_spec({"step": "createVolume", "metric": "durationSeconds", "max": 5.999999999}), _status(),
                   MEASURED)
    assert judged is not None and judged.results[0].met is False
    assert judged.results[0].bound == "<= 5.999999999"
    assert judged.results[0].message == "createVolume durationSeconds 6 s > 5.999999999 s (max)"


def test_microsecond_latencies_are_judged_at_full_precision_and_shown_in_microseconds() -> None:
    # issue 42 point 3: medians over iterations were rounded to 4 decimals of a second before they were judged
    from csibench.engine.iterations import build_data_path_aggregates

    def record(number: int, p99: float) -> dict[str, Any]:
        row = {"name": "seqRead", "state": "Succeeded", "readMiBps": 100.0, "readIOPS": 1600.0,
               "latency": {"readP99": p99}}
        return {"iteration": number, "state": "Succeeded", "message": "",
                "steps": [{"status": {"name": "dataPath", "state": "Succeeded"}, "extra": {"rows": [row]}}]}

    aggregates = build_data_path_aggregates([record(1, 0.000125), record(2, 0.000124), record(3, 0.000126)])
    assert aggregates[0].readP99 is not None and aggregates[0].readP99.median == 0.000125
    run_spec = BenchmarkRunSpec(storageClassName="sim", repeat=3, **_DATA_PATH,
                                thresholds=[{"workload": "seqRead", "metric": "readP99", "max": 0.00012}])
    status = _status(dataPath=_ROWS, dataPathAggregates=[a.model_dump() for a in aggregates])
    judged = judge(run_spec, status, MEASURED)
    assert judged is not None and judged.verdict == Verdict.FAIL
    assert judged.results[0].measured == 0.000125
    assert judged.results[0].message == "workload seqRead readP99 125 µs > 120 µs (max)"
    small = build_data_path_aggregates([record(1, 0.000040), record(2, 0.000042), record(3, 0.000044)])
    assert small[0].readP99 is not None and small[0].readP99.median == 0.000042  # was 0


def test_the_median_latency_of_repeated_steps_keeps_microseconds() -> None:
    from csibench.engine.iterations import build_aggregates

    records = [_iteration(n) for n in (1, 2, 3)]
    for record, p99 in zip(records, (0.000040, 0.000042, 0.000044), strict=True):
        record["steps"][0]["status"]["latency"] = dict(LATENCY, p99=p99)
    (aggregate,) = build_aggregates(records)
    assert aggregate.latency is not None and aggregate.latency.p99 == 0.000042


@pytest.mark.parametrize(("fail_on_slower", "verdict", "condition", "broken"), [
    (False, Verdict.PASS, "True", 0), (True, Verdict.FAIL, "False", 1)])
def test_slower_fails_the_verdict_condition_events_and_metric_only_when_the_spec_asks(
        fail_on_slower: bool, verdict: Verdict, condition: str, broken: int) -> None:
    # issue 42 point 1: one decision (baseline.fails) read by the verdict, NoRegression, its Event and the metric
    from csibench.api.baseline import compare_with_baseline
    from csibench.engine.judgement import Judgement

    comparison = compare_with_baseline(_baseline_run("base", [10.0, 10.6, 9.5]),
                                       _baseline_run("this", [8.2, 8.9, 7.8]), 10, fail_on_slower=fail_on_slower)
    assert comparison.change == "Slower" and comparison.failOnSlower is fail_on_slower
    judgement = Judgement(None, comparison)
    assert judgement.verdict == verdict and judgement.broken == broken
    assert judgement.baseline_condition() == (condition, "Slower", comparison.message)
    ((reason, _, warning),) = judgement.events()
    assert reason == "BaselineSlower" and warning is fail_on_slower
