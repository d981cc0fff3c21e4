"""Is this run a regression against its baseline? Five answers, each claimed only when the statistics support it
(pure; read by the engine at a run's end, by ``csibench compare --max-regression`` and by ``csibench gate``).

Per measure (a step's throughput, a workload's MiB/s or IOPS, a database row's TPS: higher is better), with the
baseline's per-iteration values A and this run's B, d the difference of the mean logarithms (log B - log A, the
log of the ratio of geometric means) and m = log(1 + threshold), every test Welch's t on the logarithms:

- **Regression**: the data show the slowdown *beyond* the threshold: the one-sided test of "d < -m" (B slower by
  more than the threshold) rejects its null "d >= -m" at ``alpha``, Holm-adjusted over the measures judged
  together. Equivalently, for one measure: the upper end of the ratio's one-sided 95% interval lies below
  1 / (1 + threshold). A true slowdown within the threshold, or exactly at it, is called Regression at most
  ``alpha`` of the time, and with 8 unchanged measures any false Regression stays within ``alpha`` (Holm).
- **Improvement**: the same, faster ("d > m").
- **Equivalent**: the whole 90% interval of the ratio lies within [1 / (1 + threshold), 1 + threshold]: the two
  one-sided tests (TOST) at 5% each. A true change beyond the threshold is called Equivalent at most 5% of the
  time. Only this says "no regression" with evidence.
- **Slower**: significantly slower (the two-sided test of "d = 0", Holm-adjusted) but shown neither beyond the
  threshold nor within it. It fails the verdict only when the spec asks (``failOnSlower``): a gate that failed
  every such run would fail good releases whose slowdown is inside the tolerance but not yet proven so.
- **Inconclusive**: anything else: too few iterations (fewer than 2 on a side), no spread at all, a value that
  cannot be a throughput (zero, negative, NaN, infinite: that measure only, the others are judged without it), or
  a spread too wide to tell.

Slower and Inconclusive carry how many iterations per side would decide with 80% power, computed for the test
that would decide: TOST when the observed ratio lies within the threshold, the one-sided test beyond it
otherwise, each from the noncentral t distribution (``power``), fed the observed spread and ratio (the normal
approximation it replaces gave too few: 52-78% instead of 80%). Past ``MAX_REPEAT`` it says so instead of a
number. A guide, not a promise: the spread it reads is itself noisy; ``bench/verdicts.py`` measures both.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from csibench.api.stats import ALPHA, holm, noncentral_t_sf, ratio_interval, t_critical, t_upper_p, usable, welch

POWER = 0.80  # what the estimate of iterations needed aims at
MAX_REPEAT = 50  # models.MAX_REPEAT (this module is below the models' import of it)


class Change(StrEnum):
    REGRESSION = "Regression"
    SLOWER = "Slower"
    IMPROVEMENT = "Improvement"
    EQUIVALENT = "Equivalent"
    INCONCLUSIVE = "Inconclusive"


@dataclass(frozen=True)
class Tests:
    """One measure's tests, before any correction for multiple measures."""

    d: float  # mean log B - mean log A
    p_two_sided: float  # Welch's test of d = 0
    p_regression: float  # one-sided: d < -m (slower beyond the threshold)
    p_improvement: float  # one-sided: d > m
    p_equivalent: float  # TOST: the larger of the two one-sided p's of |d| < m
    p_not_slower: float  # one-sided: d > -m (not slower beyond the threshold; non-inferiority)


def run_tests(log_a: list[float], log_b: list[float], margin: float) -> Tests:
    """Welch's t on the logarithms, at least 2 values a side with some spread; ``margin`` = log(1 + threshold)."""
    test = welch(log_a, log_b)
    se = math.sqrt(statistics.variance(log_a) / len(log_a) + statistics.variance(log_b) / len(log_b))
    d = statistics.fmean(log_b) - statistics.fmean(log_a)
    below, above = t_upper_p((d + margin) / se, test.df), t_upper_p((d - margin) / se, test.df)
    # P(T >= (d + m)/se) is the one-sided p of "d > -m"; its complement that of "d < -m" (a regression).
    return Tests(d, test.p, 1.0 - below, above, max(below, 1.0 - above), below)


@dataclass(frozen=True)
class Judged:
    change: Change
    ratio: float | None  # B / A, geometric means (None: a side has no value)
    low: float | None  # the 90% interval of the ratio
    high: float | None
    p: float | None  # Welch's two-sided p on the logarithms (Holm-adjusted when judged together)
    n_a: int
    n_b: int
    iterations_needed: int | None  # per side, to decide (Slower, Inconclusive); MAX_REPEAT + 1: more than a run can
    problem: str | None = None  # Inconclusive because a sample cannot be a throughput (zero, negative, NaN, inf)
    p_beyond: float | None = None  # the one-sided p of a change beyond the threshold, in the observed direction
    p_not_slower: float | None = None  # the one-sided p of "not slower beyond the threshold" (unadjusted)

    def describe(self, threshold: float) -> str:
        """'0.06x [0.05, 0.07], p=1e-06: Regression (more than 10% slower)'."""
        if self.problem is not None:
            return f"Inconclusive: {self.problem} (n={self.n_a}/{self.n_b})"
        if self.ratio is None:
            return f"Inconclusive: not measured on both sides (n={self.n_a}/{self.n_b})"
        interval = f" [{self.low:.2f}, {self.high:.2f}]" if self.low is not None and self.high is not None else ""
        p = f", p={self.p:.2g}" if self.p is not None else ""
        head = f"{self.ratio:.2f}x{interval}{p}, n={self.n_a}/{self.n_b}: {self.change}"
        if self.change == Change.REGRESSION:
            return f"{head} (more than {threshold:.0%} slower)"
        if self.change == Change.IMPROVEMENT:
            return f"{head} (more than {threshold:.0%} faster)"
        if self.change == Change.EQUIVALENT:
            return f"{head} (within {threshold:.0%} either way)"
        if self.change == Change.SLOWER:
            head = f"{head} (significantly slower, not shown beyond {threshold:.0%} nor within it)"
        return f"{head}: {why_undecided(self, ITERATIONS)}"


@dataclass(frozen=True)
class Samples:
    """How a reader names the samples of a comparison, for saying why it did not decide: a run's iterations (its
    baseline, ``compare``) or a suite cell's rounds. ``too_many`` takes ``{most}``, ``needed`` ``{n}``."""

    single: str  # a side has one sample
    flat: str  # the samples do not vary
    too_many: str  # deciding would take more samples than a run (or cell) may have
    needed: str  # how many would decide
    most: int


ITERATIONS = Samples("one iteration on a side cannot be tested (repeat 2 or more on both runs)",
                     "the iterations do not vary, so there is no spread to test against",
                     "more than {most} iterations per run would be needed to decide at this spread",
                     f"need more repeats; about {{n}} iterations per run would decide ({POWER:.0%} power)",
                     MAX_REPEAT)


def why_undecided(judged: Judged, samples: Samples) -> str:
    """Why a Slower or Inconclusive comparison did not decide, or what would decide it, in the samples' words."""
    if judged.ratio is None:
        return "not measured on both sides"
    if min(judged.n_a, judged.n_b) < 2:
        return samples.single
    if judged.iterations_needed is None:
        return samples.flat
    if judged.iterations_needed > samples.most:
        return samples.too_many.format(most=samples.most)
    return samples.needed.format(n=judged.iterations_needed)


@lru_cache(maxsize=512)
def one_sided_critical(alpha: float, df: float) -> float:
    """The t a one-sided test at ``alpha`` rejects beyond (cached: power searches ask for the same ones)."""
    return t_critical(2.0 * alpha, df)


def power(n: int, spread: float, d: float, threshold: float, alpha: float = ALPHA) -> float:
    """The chance that runs of ``n`` iterations per side, each side's log values with standard deviation
    ``spread`` and true difference ``d`` (log ratio), reach the verdict their truth calls for: Equivalent when
    |d| < log(1 + threshold), else Regression or Improvement. The t statistic is taken as noncentral t with
    1.5 (n - 1) degrees of freedom: Welch's df, estimated from the samples, falls between n - 1 and 2n - 2 at
    equal sizes, and 2n - 2 (the pooled test's) overstates the power at small n (at n = 3 it promised 80% where
    the test as run reached 75%); 1.5 (n - 1) matched the simulated test within 1% from n = 3 to 12. TOST's power
    is bounded below by the sum of its two one-sided powers minus 1, so the n it asks for is never too few."""
    margin = math.log1p(threshold)
    se = spread * math.sqrt(2.0 / n)
    df = 1.5 * (n - 1.0)
    critical = one_sided_critical(alpha, df)
    if abs(d) < margin:
        return max(0.0, noncentral_t_sf(critical, df, (margin + d) / se)
                   + noncentral_t_sf(critical, df, (margin - d) / se) - 1.0)
    return noncentral_t_sf(critical, df, (abs(d) - margin) / se)


def iterations_for_power(spread: float, d: float, threshold: float, alpha: float = ALPHA,
                         target: float = POWER) -> int:
    """The fewest iterations per side (2 to MAX_REPEAT) at which ``power`` reaches ``target``; MAX_REPEAT + 1
    when even MAX_REPEAT does not (or the truth sits on the threshold, where no n decides)."""
    if spread <= 0.0 or not math.isfinite(spread) or not math.isfinite(d):
        raise ValueError("a positive, finite spread and a finite difference are needed")
    found = fewest_reaching(lambda n: power(n, spread, d, threshold, alpha), MAX_REPEAT, target)
    return MAX_REPEAT + 1 if found is None else found


def fewest_reaching(power_at: Callable[[int], float], most: int, target: float) -> int | None:
    """The fewest n from 2 to ``most`` at which ``power_at(n)`` reaches ``target``, by bisection (a test's power
    grows with n); None when even ``most`` does not."""
    if most < 2 or power_at(most) < target:
        return None
    low, high = 1, most  # power_at(high) >= target
    while high - low > 1:
        middle = (low + high) // 2
        if power_at(middle) >= target:
            high = middle
        else:
            low = middle
    return max(2, high)


def _needed(log_a: list[float], log_b: list[float], threshold: float, alpha: float) -> int:
    """Iterations per side that the observed spread and difference would need to decide with 80% power, more
    than already run; MAX_REPEAT + 1 when out of reach."""
    spread = math.sqrt((statistics.variance(log_a) + statistics.variance(log_b)) / 2)
    needed = iterations_for_power(spread, statistics.fmean(log_b) - statistics.fmean(log_a), threshold, alpha)
    return min(MAX_REPEAT + 1, max(needed, max(len(log_a), len(log_b)) + 1))


def _testable(baseline: list[float], current: list[float]) -> tuple[list[float], list[float]] | None:
    """The logarithms when the pair can be tested: 2 or more usable values a side, some spread."""
    if len(baseline) < 2 or len(current) < 2 or not all(usable(x) for x in baseline + current):
        return None
    log_a, log_b = [math.log(x) for x in baseline], [math.log(x) for x in current]
    if statistics.variance(log_a) == 0.0 and statistics.variance(log_b) == 0.0:
        return None
    return log_a, log_b


def judge_changes(samples: list[tuple[list[float], list[float]]], threshold: float,
                  alpha: float = ALPHA) -> list[Judged]:
    """Each (baseline, current) pair judged; the regression, improvement and significance tests each
    Holm-adjusted over the pairs that can be tested (a pair that cannot, e.g. one with a NaN, is left out of
    every family, so it never changes another pair's answer)."""
    margin = math.log1p(threshold)
    logs = [_testable(a, b) for a, b in samples]
    tests = {i: run_tests(*pair, margin) for i, pair in enumerate(logs) if pair is not None}
    order = list(tests)
    families = [dict(zip(order, holm([getattr(tests[i], name) for i in order]), strict=True))
                for name in ("p_two_sided", "p_regression", "p_improvement")]
    return [_judge(a, b, threshold, alpha, logs[i], tests.get(i),
                   None if i not in tests else (families[0][i], families[1][i], families[2][i]))
            for i, (a, b) in enumerate(samples)]


def judge_change(baseline: list[float], current: list[float], threshold: float, alpha: float = ALPHA) -> Judged:
    """B (``current``) against A (``baseline``), per-iteration values where higher is better; one measure
    alone (no correction)."""
    return judge_changes([(baseline, current)], threshold, alpha)[0]


def _judge(baseline: list[float], current: list[float], threshold: float, alpha: float,
           logs: tuple[list[float], list[float]] | None, tests: Tests | None,
           adjusted: tuple[float, float, float] | None) -> Judged:
    bad = [(side, x) for side, values in (("baseline", baseline), ("this run", current)) for x in values
           if not usable(x)]
    if bad:  # never dropped silently: the other iterations alone would look like a cleaner measurement than it was
        shown = ", ".join(f"{x!r} ({side})" for side, x in bad[:4]) + (", ..." if len(bad) > 4 else "")
        return Judged(Change.INCONCLUSIVE, None, None, None, None, len(baseline), len(current), None,
                      problem=f"an iteration's value is not a positive, finite throughput: {shown}")
    a, b = list(baseline), list(current)
    if not a or not b:
        return Judged(Change.INCONCLUSIVE, None, None, None, None, len(a), len(b), None)
    ratio = math.exp(statistics.fmean(math.log(x) for x in b) - statistics.fmean(math.log(x) for x in a))
    if logs is None or tests is None or adjusted is None:  # one value a side, or no spread at all
        return Judged(Change.INCONCLUSIVE, ratio, None, None, None, len(a), len(b), None)
    p, p_regression, p_improvement = adjusted
    interval = ratio_interval(a, b)
    if p_regression < alpha:
        change = Change.REGRESSION
    elif p_improvement < alpha:
        change = Change.IMPROVEMENT
    elif tests.p_equivalent < alpha:
        change = Change.EQUIVALENT
    elif p < alpha and tests.d < 0:
        change = Change.SLOWER
    else:
        change = Change.INCONCLUSIVE
    needed = _needed(*logs, threshold, alpha) if change in (Change.INCONCLUSIVE, Change.SLOWER) else None
    return Judged(change, ratio, interval.low, interval.high, p, len(a), len(b), needed,
                  p_beyond=p_regression if tests.d < 0 else p_improvement, p_not_slower=tests.p_not_slower)
