"""The significance test behind `csibench compare` on repeated runs: the distribution function against known
critical values, Welch's test and Holm's correction by hand, and compare's rows on repeated and single runs."""

from __future__ import annotations

import math
from typing import Any

import pytest

from csibench.api.stats import compare_samples, holm, ratio_interval, t_critical, t_two_sided_p, welch
from csibench.report.compare import render_compare
from csibench.report.render import render_table


@pytest.mark.parametrize(("t", "df"), [(12.706, 1), (4.303, 2), (3.182, 3), (2.776, 4), (2.228, 10), (1.960, 1e6)])
def test_two_sided_p_at_the_tabulated_95_percent_critical_values(t: float, df: float) -> None:
    assert t_two_sided_p(t, df) == pytest.approx(0.05, abs=2e-4)


def test_two_sided_p_exact_cases() -> None:
    assert t_two_sided_p(0.0, 3) == 1.0
    assert t_two_sided_p(1.0, 1) == pytest.approx(0.5)  # Cauchy: P(|T| >= 1) = 1/2
    assert t_two_sided_p(-2.776, 4) == t_two_sided_p(2.776, 4)
    assert t_two_sided_p(math.inf, 4) == 0.0


@pytest.mark.parametrize(("alpha", "df", "tabulated"),
                         [(0.10, 1, 6.314), (0.10, 4, 2.132), (0.10, 10, 1.812), (0.05, 3, 3.182),
                          (0.01, 5, 4.032), (0.10, 1e6, 1.645)])
def test_t_critical_matches_the_printed_tables(alpha: float, df: float, tabulated: float) -> None:
    assert t_critical(alpha, df) == pytest.approx(tabulated, abs=1e-3)


def test_ratio_interval_by_hand() -> None:
    # logs of both sides are {0, 1, 2} * ln 2 shifted by ln 2: ratio 2, each variance (ln 2)^2, Welch's df 4
    interval = ratio_interval([1.0, 2.0, 4.0], [2.0, 4.0, 8.0])
    half = 2.132 * math.log(2) * math.sqrt(2 / 3)
    assert interval.ratio == pytest.approx(2.0)
    assert interval.low == pytest.approx(2.0 * math.exp(-half), rel=1e-3)
    assert interval.high == pytest.approx(2.0 * math.exp(half), rel=1e-3)
    assert not interval.within(0.1)
    with pytest.raises(ValueError):
        ratio_interval([1.0, 0.0], [1.0, 2.0])


def test_within_a_margin_is_two_one_sided_tests() -> None:
    """Equivalence within 10% at 5% is both one-sided tests rejecting: that the ratio is <= 1/1.1, and >= 1.1."""
    cases = [([100.0, 104.0, 97.0, 101.0], [99.0, 102.0, 100.0, 98.0]),  # tight, equal: equivalent
             ([100.0, 130.0, 75.0], [95.0, 120.0, 80.0]),  # equal but noisy: inconclusive
             ([100.0, 101.0, 99.0], [118.0, 119.0, 121.0])]  # different: not equivalent
    verdicts = []
    for a, b in cases:
        log_a, log_b = [math.log(x) for x in a], [math.log(x) for x in b]
        result = welch(log_a, log_b)
        diff = sum(log_b) / len(b) - sum(log_a) / len(a)
        spread = diff / result.t if result.t else 0.0
        lower_t, upper_t = (diff + math.log(1.1)) / spread, (diff - math.log(1.1)) / spread
        p_lower = t_two_sided_p(lower_t, result.df) / 2 if lower_t > 0 else 1 - t_two_sided_p(lower_t, result.df) / 2
        p_upper = t_two_sided_p(upper_t, result.df) / 2 if upper_t < 0 else 1 - t_two_sided_p(upper_t, result.df) / 2
        tost = max(p_lower, p_upper) < 0.05
        assert ratio_interval(a, b).within(0.1) is tost
        verdicts.append(tost)
    assert verdicts == [True, False, False]


def test_welch_by_hand() -> None:
    result = welch([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])  # equal variances 1: t = 3 / sqrt(2/3), df = 4
    assert result.t == pytest.approx(3 / math.sqrt(2 / 3)) and result.df == pytest.approx(4.0)
    assert result.p == pytest.approx(0.02131, abs=1e-4)
    assert welch([2.0, 2.0], [2.0, 2.0]).p == 1.0 and welch([2.0, 2.0], [3.0, 3.0]).p == 0.0
    with pytest.raises(ValueError):
        welch([1.0], [1.0, 2.0])


def test_holm_adjusts_in_rank_order_and_keeps_monotone() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5] and holm([]) == []


def test_three_iterations_separate_a_tenfold_difference_and_not_noise() -> None:
    tenfold, noise, single = compare_samples([([1.0, 1.1, 0.9], [0.1, 0.11, 0.095]),
                                              ([1.0, 1.1, 0.9], [1.02, 0.95, 1.08]),
                                              ([1.0], [2.0])])
    assert tenfold.significant() is True and tenfold.ratio == pytest.approx(0.1)
    assert noise.significant() is False and noise.ratio == pytest.approx(1.02)
    assert single.significant() is None and single.p is None


def _repeated_run(name: str, throughputs: dict[str, list[float]]) -> dict[str, Any]:
    aggregates = []
    for step, values in throughputs.items():
        ordered = sorted(values)
        durations = [6 / v for v in values]
        aggregates.append({
            "name": step, "iterations": len(values), "throughputs": values, "durations": durations,
            "throughput": {"median": ordered[len(ordered) // 2], "min": ordered[0], "max": ordered[-1]},
            "durationSeconds": {"median": sorted(durations)[len(durations) // 2], "min": min(durations),
                                "max": max(durations)},
            "latency": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0, "mean": 1.5}})
    return {"metadata": {"namespace": "bench", "name": name}, "spec": {"storageClassName": "sim"},
            "status": {"phase": "Succeeded", "iterations": {"current": 3, "total": 3, "done": 3, "failed": 0,
                                                             "summary": "3/3"},
                       "steps": [{"name": step, "state": "Succeeded", "durationSeconds": 1.0, "throughput": 1.0}
                                 for step in throughputs],
                       "aggregates": aggregates}}


def test_compare_of_repeated_runs_marks_each_row_and_names_the_method() -> None:
    a = _repeated_run("a", {"createVolume": [2.0, 2.2, 1.9], "deleteVolume": [3.0, 3.1, 2.9]})
    b = _repeated_run("b", {"createVolume": [0.2, 0.21, 0.19], "deleteVolume": [3.05, 2.95, 3.1]})
    text = render_compare(a, b)
    create = next(line for line in text.splitlines() if line.startswith("Create Volume"))
    delete = next(line for line in text.splitlines() if line.startswith("Delete Volume"))
    assert "0.10× (significant, p=" in create and create.endswith("n=3)")
    assert delete.endswith("1.02× (not significant, n=3)")
    assert "significance: Welch's t-test on log per-iteration throughput" in text
    assert "(median, min-max)" in text.splitlines()[0]


def test_compare_of_single_runs_says_significance_is_unknown() -> None:
    a = _repeated_run("a", {"createVolume": [2.0, 2.2, 1.9]})
    single = {**a, "status": {**a["status"], "aggregates": [], "iterations": None}}
    text = render_compare(single, a)
    assert "significance unknown: A ran a single iteration" in text


def test_report_of_a_repeated_run_shows_medians_ranges_and_failed_iterations() -> None:
    run = _repeated_run("a", {"createVolume": [2.0, 2.4, 1.5]})
    run["status"]["iterations"].update(summary="4/4 (1 failed)", total=4, failed=1,
                                       failures=[{"iteration": 2, "message": "createVolume: 1 of 6 failed"}])
    lines = render_table(run).splitlines()
    create = next(line for line in lines if line.startswith("Create Volume"))
    assert "3.0s (2.5s-4.0s) · 2.00 vol/s" in create and "3/4" in create
    assert "iteration 2 failed (not in the aggregates): createVolume: 1 of 6 failed" in lines
    assert any(line.startswith("iterations 4/4 (1 failed): medians") for line in lines)


def test_no_spread_on_either_side_is_untestable_not_significant_at_p_zero() -> None:
    (difference,) = compare_samples([([0.017, 0.017, 0.017], [0.016, 0.016, 0.016])])
    assert difference.p is None and difference.significant() is None


@pytest.mark.parametrize("df", [2.0, 3.0, 4.5, 9.0, 75.0, 1e5])
def test_the_noncentral_t_at_zero_noncentrality_is_the_central_t_and_shifts_to_the_normal(df: float) -> None:
    from csibench.api.stats import noncentral_t_sf, normal_cdf, t_upper_p

    for t in (-2.0, -1.0, 0.3, 1.0, 2.0, 4.0):
        assert noncentral_t_sf(t, df, 0.0) == pytest.approx(t_upper_p(t, df), abs=1e-8)
    if df >= 1e5:  # T -> Z + delta
        assert noncentral_t_sf(2.0, df, 0.5) == pytest.approx(1 - normal_cdf(1.5), abs=1e-4)
