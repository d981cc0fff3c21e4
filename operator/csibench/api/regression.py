"""Is this run a regression against its baseline? Four answers, each claimed only when the statistics support it
(pure; read by the engine at a run's end, by ``csibench compare --max-regression`` and by ``csibench gate``).

Per measure (a step's throughput, a workload's MiB/s or IOPS, a database row's TPS: higher is better), with the
baseline's per-iteration values A and this run's B:

- **Regression**: B is slower, the difference is significant (Welch's t on the logarithms, as ``compare``, at
  ``alpha``, Holm-adjusted over the measures judged together) **and** larger than the threshold (the ratio of
  geometric means below 1 / (1 + threshold)).
- **Improvement**: the same, faster.
- **Equivalent**: the whole 90% interval of the ratio lies within [1 / (1 + threshold), 1 + threshold]: the two
  one-sided tests (TOST) at 5% each on the log ratio. Only this says "no regression" with evidence.
- **Inconclusive**: anything else: too few iterations (fewer than 2 on a side), no spread at all (identical values,
  e.g. throughputs rounded to the same figure: nothing to test against, as ``compare`` says), or a spread too wide
  to tell. The answer then carries how many iterations per side the observed spread would need to decide with 80%
  power: for equivalence when the observed ratio lies within the threshold, for a difference otherwise (the normal
  approximation of the t test's sample size, rounded up, and always more than the iterations already run; past
  ``MAX_REPEAT`` it says so instead of a number). A guide, not a promise: the spread it reads is itself noisy.

"Not significant" alone is never reported as "no regression": on a noisy cluster a real 30% slowdown is often
not significant at 3 iterations.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import StrEnum

from csibench.api.stats import ALPHA, holm, ratio_interval, usable, welch

Z_90 = 1.6449  # the normal quantile of 95%: a 90% two-sided interval, TOST at 5%
Z_95 = 1.9600  # two-sided 5%: a significant difference
Z_POWER = 0.8416  # the normal quantile of 80%: the power the estimate of iterations needed aims at
MAX_REPEAT = 50  # models.MAX_REPEAT (this module is below the models' import of it)


class Change(StrEnum):
    REGRESSION = "Regression"
    IMPROVEMENT = "Improvement"
    EQUIVALENT = "Equivalent"
    INCONCLUSIVE = "Inconclusive"


@dataclass(frozen=True)
class Judged:
    change: Change
    ratio: float | None  # B / A, geometric means (None: a side has no value)
    low: float | None  # the 90% interval of the ratio
    high: float | None
    p: float | None  # Welch's two-sided p on the logarithms
    n_a: int
    n_b: int
    iterations_needed: int | None  # per side, to decide (Inconclusive only); MAX_REPEAT + 1: more than a run can
    problem: str | None = None  # Inconclusive because a sample cannot be a throughput (zero, negative, NaN, inf)

    def describe(self, threshold: float) -> str:
        """'0.06x [0.05, 0.07], p=1e-06: Regression (beyond 10%)'."""
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
        if min(self.n_a, self.n_b) < 2:
            return f"{head}: one iteration on a side cannot be tested (repeat 2 or more on both runs)"
        if self.iterations_needed is None:
            return f"{head}: the iterations do not vary, so there is no spread to test against"
        if self.iterations_needed > MAX_REPEAT:
            return f"{head}: more than {MAX_REPEAT} iterations per run would be needed to decide at this spread"
        return f"{head}: need more repeats; about {self.iterations_needed} iterations per run would decide (80% power)"


def _needed(log_a: list[float], log_b: list[float], threshold: float) -> int | None:
    """Iterations per side that the observed spread and difference would need to decide with 80% power (normal
    approximation), more than already run; MAX_REPEAT + 1 when out of reach."""
    spread = math.sqrt((statistics.variance(log_a) + statistics.variance(log_b)) / 2)
    diff = abs(statistics.fmean(log_b) - statistics.fmean(log_a))
    margin = math.log1p(threshold)
    if spread == 0.0:
        return None
    # Equivalence: (Z_90 + Z_POWER) * spread * sqrt(2 / n) <= margin - diff;
    # a difference: (Z_95 + Z_POWER) * spread * sqrt(2 / n) <= diff.
    room, z = (margin - diff, Z_90) if diff < margin else (diff, Z_95)
    if room <= 0.0:
        return MAX_REPEAT + 1
    needed = math.ceil(2 * ((z + Z_POWER) * spread / room) ** 2)
    return min(MAX_REPEAT + 1, max(needed, max(len(log_a), len(log_b)) + 1))


def judge_changes(samples: list[tuple[list[float], list[float]]], threshold: float,
                  alpha: float = ALPHA) -> list[Judged]:
    """Each (baseline, current) pair judged, the significance Holm-adjusted over the pairs that can be tested."""
    first = [judge_change(a, b, threshold, alpha) for a, b in samples]  # p None: untestable, left out of Holm
    tested = [i for i, judged in enumerate(first) if judged.p is not None]
    adjusted = dict(zip(tested, holm([first[i].p or 0.0 for i in tested]), strict=True))
    return [judge_change(a, b, threshold, alpha, adjusted.get(i)) for i, (a, b) in enumerate(samples)]


def judge_change(baseline: list[float], current: list[float], threshold: float, alpha: float = ALPHA,
                 p_adjusted: float | None = None) -> Judged:
    """B (``current``) against A (``baseline``), per-iteration values where higher is better; ``p_adjusted``
    replaces Welch's own p when the caller corrected it for multiple measures."""
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
    if len(a) < 2 or len(b) < 2:
        return Judged(Change.INCONCLUSIVE, ratio, None, None, None, len(a), len(b), None)
    log_a, log_b = [math.log(x) for x in a], [math.log(x) for x in b]
    if statistics.variance(log_a) == 0.0 and statistics.variance(log_b) == 0.0:  # no spread to test against
        return Judged(Change.INCONCLUSIVE, ratio, None, None, None, len(a), len(b), None)
    p = welch(log_a, log_b).p if p_adjusted is None else p_adjusted
    interval = ratio_interval(a, b)
    lower, upper = 1.0 / (1.0 + threshold), 1.0 + threshold
    if p < alpha and ratio < lower:
        change = Change.REGRESSION
    elif p < alpha and ratio > upper:
        change = Change.IMPROVEMENT
    elif interval.within(threshold):
        change = Change.EQUIVALENT
    else:
        change = Change.INCONCLUSIVE
    needed = _needed(log_a, log_b, threshold) if change == Change.INCONCLUSIVE else None
    return Judged(change, ratio, interval.low, interval.high, p, len(a), len(b), needed)
