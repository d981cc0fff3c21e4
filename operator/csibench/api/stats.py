"""Is a difference between two repeated runs distinguishable from noise? (pure Python, no scipy)

The method is Welch's t-test on the logarithm of one step's per-iteration throughput, two-sided at 95%, with
Holm's correction over the steps compared together. Why this one: rank tests cannot reach significance at the
small repeat counts benchmarks use (a Mann-Whitney U test with 3 iterations per side has a smallest two-sided
p of 0.1), and a bootstrap of medians from 3 values has too few distinct resamples to trust its interval;
Welch's test uses the spread of the iterations themselves, so a 10x slower class separates at n=3 while two
runs of the same class rarely do. Logarithms make the test about ratios (what ``compare`` prints) and tame the
right skew of timings. Holm keeps the chance that any of the 8 steps reads "significant" by luck at 5%.

Limits, said where the result is printed: it assumes iterations are independent and roughly log-normal; with
n=2 per side it has little power (a "not significant" then means little); a real but small drift on a shared
cluster between two runs made one after the other is a real difference, so run the two being compared under
the same load. The headline ratio is the ratio of medians; the test compares means of logs.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import lru_cache

ALPHA = 0.05
METHOD = ("Welch's t-test on log per-iteration throughput, two-sided, alpha {alpha:g}, Holm-adjusted over the steps "
          "compared; assumes independent, roughly log-normal iterations; little power below 3 iterations per run")


def _continued_fraction(a: float, b: float, x: float) -> float:
    """Lentz's method for the incomplete beta function's continued fraction (Numerical Recipes' betacf)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < eps:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return regularized_beta(df / 2.0, 0.5, df / (df + t * t))


def t_upper_p(t: float, df: float) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom: a one-sided p."""
    half = t_two_sided_p(t, df) / 2.0
    return half if t >= 0 else 1.0 - half


def normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@lru_cache(maxsize=256)
def _chi_nodes(df: float, steps: int) -> tuple[tuple[float, float], ...]:
    """Simpson's nodes over U = sqrt(V / df), V chi-squared with ``df`` degrees of freedom: (u, weight x density),
    over U's mean +- 10 of its standard deviations (about 1 / sqrt(2 df))."""
    spread = 10.0 / math.sqrt(2.0 * df)
    lower, upper = max(0.0, 1.0 - spread), 1.0 + spread
    width = (upper - lower) / steps
    log_norm = math.log(2.0) + (df / 2.0) * math.log(df / 2.0) - math.lgamma(df / 2.0)
    nodes = []
    for i in range(steps + 1):
        u = lower + i * width
        if u <= 0.0:
            continue  # the density is 0 at u = 0 for df > 1
        weight = 1.0 if i in (0, steps) else (4.0 if i % 2 else 2.0)
        nodes.append((u, weight * width / 3.0 * math.exp(log_norm + (df - 1.0) * math.log(u) - df * u * u / 2.0)))
    return tuple(nodes)


def noncentral_t_sf(t: float, df: float, delta: float, steps: int = 600) -> float:
    """P(T >= t) for the noncentral t with ``df`` degrees of freedom and noncentrality ``delta``:
    T = (Z + delta) / sqrt(V / df) with V chi-squared, so P(T >= t) = E[1 - Phi(t * U - delta)] over
    U = sqrt(V / df). The expectation is integrated by Simpson's rule over U's density: at delta 0 within 1e-8
    of the central t's p for df from 2 to 1e5 (1e-4 at df 1.5, where the density is steep at 0); what the power
    of a t test at n iterations per side needs."""
    if df <= 0:
        raise ValueError("df must be positive")
    root2 = math.sqrt(2.0)
    total = sum(mass * math.erfc((t * u - delta) / root2) for u, mass in _chi_nodes(df, steps)) / 2.0
    return min(1.0, max(0.0, total))


@dataclass(frozen=True)
class Welch:
    t: float
    df: float
    p: float


def welch(a: list[float], b: list[float]) -> Welch:
    """Welch's unequal-variance t-test of mean(b) - mean(a); at least 2 values per side."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError("Welch's test needs at least 2 values per side")
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.fmean(b) - statistics.fmean(a)
    if va + vb == 0.0:
        return Welch(0.0 if diff == 0 else math.copysign(math.inf, diff), math.inf, 1.0 if diff == 0 else 0.0)
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / ((va * va / (len(a) - 1) if va else 0.0) + (vb * vb / (len(b) - 1) if vb else 0.0))
    return Welch(t, df, t_two_sided_p(t, df))


def holm(pvalues: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order. A p that is not a number (NaN, or outside 0..1)
    was not tested: it comes back as 1.0 and is left out of the family, so it cannot change the others (sorting
    with a NaN in the list would otherwise put it anywhere and raise every later p to 1)."""
    tested = [i for i, p in enumerate(pvalues) if 0.0 <= p <= 1.0]  # False for NaN
    order = sorted(tested, key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def usable(value: float) -> bool:
    """Can this be one iteration's throughput: positive and finite (a zero, negative, NaN or infinite value is a
    failed measurement, and its logarithm is no number)."""
    return math.isfinite(value) and value > 0.0


@dataclass(frozen=True)
class Difference:
    """One step of B against A."""

    ratio: float  # median(B) / median(A)
    n_a: int
    n_b: int
    p: float | None  # None: cannot be tested (fewer than 2 iterations on a side)

    @property
    def n(self) -> str:
        return str(self.n_a) if self.n_a == self.n_b else f"{self.n_a}/{self.n_b}"

    def significant(self, alpha: float = ALPHA) -> bool | None:
        return None if self.p is None else self.p < alpha


def compare_samples(samples: list[tuple[list[float], list[float]]]) -> list[Difference]:
    """Per step (A's per-iteration values, B's), the ratio of medians and the Holm-adjusted p of Welch's test on
    logarithms; steps with a side under 2 values, or without any spread on either side (identical values, e.g.
    throughputs rounded to the same figure: no variance to test against), or with a value that cannot be a
    throughput (zero, negative, NaN, infinite), get p None and do not count in the correction."""
    tested = [i for i, (a, b) in enumerate(samples) if len(a) >= 2 and len(b) >= 2
              and all(usable(x) for x in a + b) and (len(set(a)) > 1 or len(set(b)) > 1)]
    raw = [welch([math.log(x) for x in samples[i][0]], [math.log(x) for x in samples[i][1]]).p for i in tested]
    adjusted = dict(zip(tested, holm(raw), strict=True))
    return [Difference(statistics.median(b) / statistics.median(a) if a and b and statistics.median(a) else math.nan,
                       len(a), len(b), adjusted.get(i)) for i, (a, b) in enumerate(samples)]


def t_density(t: float, df: float) -> float:
    """Student's t probability density."""
    log_c = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def t_critical(alpha: float, df: float) -> float:
    """The t with P(|T| >= t) = ``alpha`` for ``df`` degrees of freedom: Newton's method on the distribution
    function, kept inside a bracket that bisection narrows whenever a Newton step would leave it (a few
    evaluations instead of bisection's forty: the simulation bench judges hundreds of thousands of runs)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie between 0 and 1")
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > alpha:
        low, high = high, high * 2.0
    t = (low + high) / 2.0
    for _ in range(200):
        excess = t_two_sided_p(t, df) - alpha  # decreasing in t
        if abs(excess) < 1e-15 or high - low < 1e-12 * high:
            break
        if excess > 0:
            low = t
        else:
            high = t
        slope = -2.0 * t_density(t, df)
        step = t - excess / slope if slope else math.nan
        t = step if low <= step <= high else (low + high) / 2.0
    return t


@dataclass(frozen=True)
class RatioInterval:
    """B against A as a ratio of geometric means, with its confidence interval from Welch's t on logarithms."""

    ratio: float
    low: float
    high: float
    confidence: float
    n_a: int
    n_b: int

    def within(self, margin: float) -> bool:
        """Equivalent within ``margin`` (0.1: 10%): the whole interval lies in [1 / (1 + margin), 1 + margin].
        With a 90% interval this is the two one-sided tests (TOST) at 5% each, on the log ratio."""
        return self.low >= 1.0 / (1.0 + margin) and self.high <= 1.0 + margin


def ratio_interval(a: list[float], b: list[float], confidence: float = 0.90) -> RatioInterval:
    """The ratio B / A of geometric means of positive samples and its ``confidence`` interval (Welch's t on the
    logarithms, so the interval is about ratios and not symmetric around them); at least 2 values per side."""
    if min(a + b, default=0.0) <= 0.0:
        raise ValueError("a ratio interval needs positive values")
    log_a, log_b = [math.log(x) for x in a], [math.log(x) for x in b]
    test = welch(log_a, log_b)
    diff = statistics.fmean(log_b) - statistics.fmean(log_a)
    spread = math.sqrt(statistics.variance(log_a) / len(a) + statistics.variance(log_b) / len(b))
    half = 0.0 if spread == 0.0 else t_critical(1.0 - confidence, test.df) * spread
    return RatioInterval(math.exp(diff), math.exp(diff - half), math.exp(diff + half), confidence, len(a), len(b))


def significance_cell(difference: Difference, alpha: float = ALPHA) -> str:
    """'1.04× (not significant, n=5)', '10.20× (significant, p=0.0003, n=3)'."""
    if difference.ratio != difference.ratio:  # NaN: a side measured nothing
        return "-"
    ratio = f"{difference.ratio:.2f}×"
    verdict = difference.significant(alpha)
    if verdict is None:
        return f"{ratio} (significance unknown, n={difference.n})"
    if verdict:
        return f"{ratio} (significant, p={difference.p:.2g}, n={difference.n})"
    return f"{ratio} (not significant, n={difference.n})"
