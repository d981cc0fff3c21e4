"""How many windows a side would decide a churn phase's drift (pure): the power of the test that decides it.

A baseline's "iterations needed" is the power of equivalence (TOST) or of a change beyond the threshold; the drift
is decided by other tests, one-sided: NoDrift by non-inferiority (the last windows not slower beyond the threshold,
at alpha), Drift by a slowdown beyond it (Holm-adjusted over the phases). So the number a user is told is that of
the test that would decide at the observed spread and difference: non-inferiority while the last windows are not
slower beyond the threshold, the slowdown's test otherwise, at alpha / phases (Bonferroni, Holm's first step: at
most a window or two more than Holm needs). The t statistic is taken as noncentral t with 1.5 (n - 1) degrees of
freedom, as ``regression.power`` does (Welch's df at equal sizes lies between n - 1 and 2n - 2). A guide, not a
promise: the spread it reads is itself noisy.
"""

from __future__ import annotations

import math
import statistics

from csibench.api.regression import POWER, fewest_reaching, one_sided_critical
from csibench.api.stats import ALPHA, noncentral_t_sf


def _power(n: int, spread: float, d: float, margin: float, phases: int) -> float:
    se = spread * math.sqrt(2.0 / n)
    df = 1.5 * (n - 1.0)
    if d > -margin:  # non-inferiority: H0 d <= -margin
        return noncentral_t_sf(one_sided_critical(ALPHA, df), df, (d + margin) / se)
    return noncentral_t_sf(one_sided_critical(ALPHA / phases, df), df, (-d - margin) / se)


def windows_needed(log_first: list[float], log_last: list[float], threshold: float, phases: int,
                   most: int) -> int | None:
    """The fewest windows a side, 2 to ``most``, at which the deciding test reaches 80% power (it may be no more
    than the churn has: then its windows were unlucky); None when ``most`` is not enough (or the difference sits on
    the threshold, where no number decides). ``log_first``, ``log_last``: the windows' log speeds, at least 2 a side
    with some spread."""
    spread = math.sqrt((statistics.variance(log_first) + statistics.variance(log_last)) / 2.0)
    d = statistics.fmean(log_last) - statistics.fmean(log_first)
    if spread <= 0.0 or not math.isfinite(spread) or not math.isfinite(d):
        return None
    margin = math.log1p(threshold)
    # Bisection: 5 powers for 20 windows, not 19 one after the other.
    return fewest_reaching(lambda n: _power(n, spread, d, margin, phases), most, POWER)
