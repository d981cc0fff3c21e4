"""Regression, improvement, equivalence or inconclusive: the judgement against a reference implementation's numbers
for fixed samples (SciPy 1.17.1's ``ttest_ind(equal_var=False)`` on the logarithms, its ``confidence_interval``,
and TOST as two one-sided Welch tests shifted by log 1.1, computed outside this project and written down here),
and the four answers on samples built to give each."""

from __future__ import annotations

import math
from typing import Any

import pytest

from csibench.api.baseline import compare_with_baseline, measures_of
from csibench.api.regression import Change, judge_change, judge_changes
from csibench.api.stats import ratio_interval, welch

TIGHT_A = [100.0, 104.0, 97.0, 101.0, 99.0]
TIGHT_B = [99.0, 102.0, 100.0, 98.0, 101.5]
SLOW_A, SLOW_B = [10.0, 12.0, 9.0], [0.6, 0.7, 0.65]
NOISY_A, NOISY_B = [100.0, 130.0, 75.0], [95.0, 120.0, 80.0]


@pytest.mark.parametrize(("a", "b", "p", "low", "high"), [
    # scipy.stats.ttest_ind(log(b), log(a), equal_var=False): pvalue; exp(confidence_interval(0.90))
    (TIGHT_A, TIGHT_B, 0.9526968080381397, 0.97342639877203, 1.0255650614573832),
    (SLOW_A, SLOW_B, 8.123387078090582e-05, 0.050611368864336564, 0.07899104222788826),
    (NOISY_A, NOISY_B, 0.9161421049865365, 0.6350504592023906, 1.5060934300310507),
])
def test_welch_and_the_ratio_interval_match_scipy(a: list[float], b: list[float], p: float, low: float,
                                                  high: float) -> None:
    assert welch([math.log(x) for x in a], [math.log(x) for x in b]).p == pytest.approx(p, rel=1e-6)
    interval = ratio_interval(a, b)
    assert interval.low == pytest.approx(low, rel=1e-6) and interval.high == pytest.approx(high, rel=1e-6)


def test_equivalence_matches_scipys_two_one_sided_tests() -> None:
    # scipy: ttest_ind(log b + log 1.1, log a, alternative='greater') p=1.284e-4 and ttest_ind(log b - log 1.1,
    # log a, alternative='less') p=1.153e-4: both below 5%, so equivalent within 10%.
    judged = judge_change(TIGHT_A, TIGHT_B, 0.10)
    assert judged.change == Change.EQUIVALENT and judged.iterations_needed is None
    assert judged.ratio == pytest.approx(0.9991556958156602, rel=1e-9)


def test_a_sixteen_fold_slowdown_is_a_regression() -> None:
    judged = judge_change(SLOW_A, SLOW_B, 0.10)
    assert judged.change == Change.REGRESSION and judged.ratio is not None and judged.ratio < 0.1
    assert "Regression (more than 10% slower)" in judged.describe(0.10)
    assert judge_change(SLOW_B, SLOW_A, 0.10).change == Change.IMPROVEMENT


def test_noise_is_inconclusive_and_says_how_many_iterations_would_decide() -> None:
    judged = judge_change(NOISY_A, NOISY_B, 0.10)
    assert judged.change == Change.INCONCLUSIVE and judged.iterations_needed is not None
    # by hand: pooled sd of the logs, observed |log ratio|, 2 * (1.6449 * sd / (log 1.1 - |d|))^2 rounded up
    log_a, log_b = [math.log(x) for x in NOISY_A], [math.log(x) for x in NOISY_B]

    def variance(xs: list[float]) -> float:
        mean = sum(xs) / len(xs)
        return sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    sd = math.sqrt((variance(log_a) + variance(log_b)) / 2)
    d = abs(sum(log_b) / 3 - sum(log_a) / 3)
    by_hand = math.ceil(2 * ((1.6449 + 0.8416) * sd / (math.log(1.1) - d)) ** 2)  # 80% power
    assert by_hand > 50 and judged.iterations_needed == 51  # out of a run's reach: said so, not a number
    assert "more than 50 iterations per run would be needed" in judged.describe(0.10)
    moderate = judge_change([10.0, 10.6, 9.5], [10.1, 9.6, 10.7], 0.10)
    log_a, log_b = [math.log(x) for x in (10.0, 10.6, 9.5)], [math.log(x) for x in (10.1, 9.6, 10.7)]
    sd = math.sqrt((variance(log_a) + variance(log_b)) / 2)
    d = abs(sum(log_b) / 3 - sum(log_a) / 3)
    expected = max(4, math.ceil(2 * ((1.6449 + 0.8416) * sd / (math.log(1.1) - d)) ** 2))  # never <= the 3 run
    assert moderate.change == Change.INCONCLUSIVE and moderate.iterations_needed == expected
    assert f"about {expected} iterations per run would decide (80% power)" in moderate.describe(0.10)


def test_iterations_that_do_not_vary_cannot_be_tested() -> None:
    judged = judge_change([0.012] * 3, [0.010] * 3, 0.10)  # throughputs rounded to the same figure
    assert judged.change == Change.INCONCLUSIVE and judged.p is None
    assert "the iterations do not vary" in judged.describe(0.10)


def test_a_significant_difference_inside_the_threshold_is_not_a_regression() -> None:
    """5% slower, tight: significant, but within the 10% threshold: equivalent, never a regression."""
    a = [100.0, 100.5, 99.5, 100.2, 99.8]
    b = [95.0, 95.4, 94.6, 95.2, 94.8]
    judged = judge_change(a, b, 0.10)
    assert judged.p is not None and judged.p < 0.001 and judged.change == Change.EQUIVALENT


def test_one_iteration_a_side_is_inconclusive_whatever_the_ratio() -> None:
    judged = judge_change([10.0], [0.5], 0.10)
    assert judged.change == Change.INCONCLUSIVE and judged.ratio == pytest.approx(0.05) and judged.p is None
    assert judge_change([], [1.0], 0.10).ratio is None


def test_holm_over_measures_can_turn_a_lone_significance_into_inconclusive() -> None:
    borderline = ([10.0, 10.6, 9.5], [8.2, 8.9, 7.8])
    alone = judge_change(*borderline, 0.10)
    together = judge_changes([borderline] + [(TIGHT_A, TIGHT_B)] * 7, 0.10)
    assert alone.p is not None and together[0].p is not None and together[0].p >= alone.p
    assert alone.change == Change.REGRESSION and together[0].change == Change.INCONCLUSIVE


def _repeated(name: str, create: list[float], delete: list[float], phase: str = "Succeeded") -> dict[str, Any]:
    aggregates = [{"name": step, "iterations": len(values), "throughputs": values}
                  for step, values in (("createVolume", create), ("deleteVolume", delete))]
    steps = [{"name": step, "state": "Succeeded", "throughput": values[-1]}
             for step, values in (("createVolume", create), ("deleteVolume", delete))]
    steps.append({"name": "dataPath", "state": "Succeeded", "throughput": 0.1})  # a table of its own: not compared
    return {"metadata": {"namespace": "bench", "name": name},
            "status": {"phase": phase, "steps": steps, "aggregates": aggregates,
                       "dataPath": [{"name": "seqRead", "state": "Succeeded", "readMiBps": 100.0, "readIOPS": 1600.0}],
                       "database": [{"kind": "run", "scale": 1, "mode": "readOnly", "clients": 4,
                                     "state": "Succeeded", "tps": 900.0}]}}


def test_the_measures_of_a_run_are_its_steps_and_workloads() -> None:
    measures = measures_of(_repeated("a", [10.0, 12.0, 9.0], [5.0, 5.1, 4.9]))
    assert measures == {("createVolume", "throughput"): [10.0, 12.0, 9.0],
                        ("deleteVolume", "throughput"): [5.0, 5.1, 4.9],
                        ("workload seqRead", "mibps"): [100.0], ("workload seqRead", "iops"): [1600.0]}
    # the database's runs are not measures: it cannot repeat, so they could never be more than Inconclusive


def test_a_run_against_its_baseline_names_the_regression_first() -> None:
    baseline = _repeated("a", SLOW_A, TIGHT_A)
    current = _repeated("b", SLOW_B, TIGHT_B)
    comparison = compare_with_baseline(baseline, current, 10)
    changes = {(row.subject, row.metric): row.change for row in comparison.rows}
    assert changes == {("createVolume", "throughput"): "Regression", ("deleteVolume", "throughput"): "Equivalent",
                       ("workload seqRead", "mibps"): "Inconclusive", ("workload seqRead", "iops"): "Inconclusive"}
    assert comparison.change == "Regression" and comparison.run == "bench/a"
    assert comparison.message.startswith("against bench/a (10% threshold): 1 regression, 1 equivalent, "
                                         "2 inconclusive; createVolume throughput: 0.06x")


def test_a_baseline_that_did_not_measure_or_shares_nothing_is_inconclusive() -> None:
    current = _repeated("b", SLOW_B, TIGHT_B)
    failed = compare_with_baseline(_repeated("a", SLOW_A, TIGHT_A, phase="Failed"), current, 10)
    assert failed.change == "Inconclusive" and "baseline bench/a is Failed, not a finished" in failed.message
    unfinished = compare_with_baseline(_repeated("a", SLOW_A, TIGHT_A), _repeated("b", SLOW_B, TIGHT_B, "Failed"), 10)
    assert unfinished.change == "Inconclusive" and "run bench/b is Failed, not a finished" in unfinished.message
    empty = compare_with_baseline({"metadata": {"namespace": "n", "name": "e"}, "status": {"phase": "Succeeded"}},
                                  current, 10)
    assert empty.change == "Inconclusive" and "measured nothing this run measured" in empty.message


STEADY = [100.0, 102.0, 98.0, 101.0, 99.0]


@pytest.mark.parametrize("bad", [0.0, -5.0, math.nan, math.inf])
def test_a_sample_that_cannot_be_a_throughput_makes_its_measure_inconclusive_with_the_reason(bad: float) -> None:
    # issue 42 point 5: [0, 100, 101, 99, 100.5] against a steady baseline was "Equivalent 1.00x, n = 5/4";
    # an infinite value raised ValueError in the iterations-needed computation
    judged = judge_change(STEADY, [bad, 100.0, 101.0, 99.0, 100.5], 0.10)
    assert judged.change == Change.INCONCLUSIVE and judged.iterations_needed is None
    assert (judged.n_a, judged.n_b) == (5, 5)
    assert "not a positive, finite throughput" in judged.describe(0.10)


def test_a_measure_with_a_bad_sample_never_changes_another_measures_verdict() -> None:
    # issue 42 point 5: a NaN p in Holm turned every other p into 1.0, so a clear 2x slowdown read "not significant"
    slow_a, slow_b = [100.0, 101.0, 99.0, 100.5, 99.5], [50.0, 50.5, 49.5, 50.2, 49.8]
    alone = judge_changes([(slow_a, slow_b)], 0.10)[0]
    poisoned = judge_changes([(STEADY, [math.nan, 100.0, 101.0, 99.0, 100.5]), (slow_a, slow_b)], 0.10)
    assert poisoned[0].change == Change.INCONCLUSIVE
    assert poisoned[1].change == Change.REGRESSION and poisoned[1].p == alone.p


def test_holm_treats_a_p_that_is_not_a_number_as_untested() -> None:
    from csibench.api.stats import compare_samples, holm

    assert holm([math.nan, 2e-12]) == [1.0, 2e-12]
    compared = compare_samples([([1.0, 2.0, math.nan], [1.0, 2.0, 3.0]), ([100.0, 101.0, 99.0], [50.0, 50.5, 49.5])])
    assert compared[0].p is None and compared[1].p is not None and compared[1].p < 0.001
