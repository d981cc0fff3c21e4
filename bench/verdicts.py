"""Verdicts by simulation: how often each outcome of a baseline comparison is claimed when the truth is known.

No cluster: runs are drawn, judged by the operator's own judgement (``csibench.api.regression.judge_changes``,
what status, the gate and JUnit read) and counted. Each iteration's throughput is lognormal around its run's
truth, with coefficient of variation CV (5%: a quiet cluster; 20%: a noisy one); a true slowdown of s makes every
object take (1 + s) times as long, so the true throughput ratio is 1 / (1 + s). Threshold 10%, alpha 0.05,
TRIALS runs per cell, a fixed seed per cell (the tables are reproducible).

Three tables (Markdown, as docs/benchmarks.md records them):

1. Per CV and iterations n: the share of runs called Regression when the true slowdown is within the threshold
   (0, 5, 8% and exactly 10%: targets <= 5%), called Equivalent when it is at or beyond it (10, 12, 15%:
   targets <= 5%), how often Slower is said (unchanged, and inside the threshold), and the power to call
   Regression at a true 25% slowdown.
2. Eight measures in one run, all unchanged (and all exactly at the threshold): the share of runs with any
   false Regression (Holm over the eight: target <= 5%).
3. Iterations needed: for a true spread (sd of log throughput) and ratio, the n that ``iterations_for_power``
   suggests, and the share of runs of n iterations a side that reach the verdict the truth calls for
   (Equivalent within the threshold, Regression or Improvement beyond): target >= 78% in every cell. The normal
   approximation the operator used before is shown beside it.

Run by hand: ``.venv/bin/python -m bench.verdicts`` (about 3 minutes on 2 cores with ``--trials 2000``).
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from csibench.api.regression import MAX_REPEAT, Change, iterations_for_power, judge_changes

THRESHOLD = 0.10
CVS = (0.05, 0.20)
SIZES = (3, 5, 10)
WITHIN = (0.0, 0.05, 0.08, 0.10)  # true slowdowns at or inside the threshold: Regression is false
BEYOND = (0.10, 0.12, 0.15)  # at or beyond it: Equivalent is false
POWER_AT = 0.25
MEASURES = 8
NEEDED_CELLS = ((0.05, 1.0), (0.05, 0.95), (0.05, 0.8), (0.10, 1.0), (0.10, 0.8), (0.10, 1.25), (0.20, 1.0),
                (0.20, 0.7), (0.20, 1.5))


def log_sd(cv: float) -> float:
    """The sd of log throughput for a lognormal with coefficient of variation ``cv``."""
    return math.sqrt(math.log1p(cv * cv))


def _draw(rng: random.Random, n: int, sd: float, ratio: float) -> tuple[list[float], list[float]]:
    """One baseline and one current run of n iterations: lognormal around 100 and 100 x ``ratio``."""
    return ([100.0 * math.exp(rng.gauss(0.0, sd)) for _ in range(n)],
            [100.0 * ratio * math.exp(rng.gauss(0.0, sd)) for _ in range(n)])


def outcomes(cv: float, n: int, slowdown: float, trials: int, seed: int) -> Counter[str]:
    """How often each outcome is claimed for one measure."""
    rng = random.Random(seed)
    found: Counter[str] = Counter()
    for _ in range(trials):
        (judged,) = judge_changes([_draw(rng, n, log_sd(cv), 1.0 / (1.0 + slowdown))], THRESHOLD)
        found[judged.change] += 1
    return found


def family(cv: float, n: int, slowdown: float, trials: int, seed: int) -> float:
    """The share of runs with ``MEASURES`` measures, each truly ``slowdown`` slower, with any false Regression."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        judged = judge_changes([_draw(rng, n, log_sd(cv), 1.0 / (1.0 + slowdown)) for _ in range(MEASURES)],
                               THRESHOLD)
        hits += any(j.change == Change.REGRESSION for j in judged)
    return hits / trials


def normal_approximation(sd: float, ratio: float) -> int:
    """The estimate the operator used before issue 42: 2 ((z + z_power) sd / room)^2 rounded up."""
    d, margin = abs(math.log(ratio)), math.log1p(THRESHOLD)
    room, z = (margin - d, 1.6449) if d < margin else (d - margin, 1.9600)
    return math.ceil(2 * ((z + 0.8416) * sd / room) ** 2)


def reached(sd: float, ratio: float, n: int, trials: int, seed: int) -> float:
    """The share of runs of n iterations a side that reach the verdict the truth calls for."""
    rng = random.Random(seed)
    d, margin = math.log(ratio), math.log1p(THRESHOLD)
    intended = Change.EQUIVALENT if abs(d) < margin else Change.REGRESSION if d < 0 else Change.IMPROVEMENT
    hits = 0
    for _ in range(trials):
        (judged,) = judge_changes([_draw(rng, n, sd, ratio)], THRESHOLD)
        hits += judged.change == intended
    return hits / trials


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%"


def table_outcomes(pool: ProcessPoolExecutor, trials: int) -> list[str]:
    slowdowns = sorted(set(WITHIN + BEYOND + (POWER_AT,)))
    cells = [(cv, n, s) for cv in CVS for n in SIZES for s in slowdowns]
    futures = {cell: pool.submit(outcomes, *cell, trials, 1000 + index) for index, cell in enumerate(cells)}
    found = {cell: future.result() for cell, future in futures.items()}
    lines = ["| CV | n | Regression at a true slowdown of " + " / ".join(f"{s:.0%}" for s in WITHIN)
             + " (target ≤ 5%) | Equivalent at " + " / ".join(f"{s:.0%}" for s in BEYOND)
             + " (target ≤ 5%) | Slower at 0% / 8% / 10% | power: Regression at 25% |",
             "|---|---|---|---|---|---|"]
    for cv in CVS:
        for n in SIZES:
            def share(s: float, change: Change, cv: float = cv, n: int = n) -> float:
                return found[(cv, n, s)][change] / trials
            lines.append(f"| {cv:.0%} | {n} | " + " / ".join(_percent(share(s, Change.REGRESSION)) for s in WITHIN)
                         + " | " + " / ".join(_percent(share(s, Change.EQUIVALENT)) for s in BEYOND)
                         + " | " + " / ".join(_percent(share(s, Change.SLOWER)) for s in (0.0, 0.08, 0.10))
                         + f" | {_percent(share(POWER_AT, Change.REGRESSION))} |")
    return lines


def table_family(pool: ProcessPoolExecutor, trials: int) -> list[str]:
    cells = [(cv, n, s) for cv in CVS for n in SIZES for s in (0.0, THRESHOLD)]
    futures = {cell: pool.submit(family, *cell, trials, 2000 + index) for index, cell in enumerate(cells)}
    lines = [f"| CV | n | any false Regression, {MEASURES} unchanged measures | {MEASURES} measures exactly at "
             "the threshold |", "|---|---|---|---|"]
    for cv in CVS:
        for n in SIZES:
            lines.append(f"| {cv:.0%} | {n} | {_percent(futures[(cv, n, 0.0)].result())} | "
                         f"{_percent(futures[(cv, n, THRESHOLD)].result())} |")
    return lines


def table_needed(pool: ProcessPoolExecutor, trials: int) -> list[str]:
    lines = ["| sd of log throughput | true ratio | verdict intended | n suggested | reached at n (target ≥ 78%) "
             "| normal approximation's n | reached at it |", "|---|---|---|---|---|---|---|"]
    rows = []
    for index, (sd, ratio) in enumerate(NEEDED_CELLS):
        n = iterations_for_power(sd, math.log(ratio), THRESHOLD)
        old = max(2, normal_approximation(sd, ratio))
        at_n = pool.submit(reached, sd, ratio, n, trials, 3000 + index) if n <= MAX_REPEAT else None
        at_old = pool.submit(reached, sd, ratio, old, trials, 4000 + index) if old <= MAX_REPEAT else None
        rows.append((sd, ratio, n, old, at_n, at_old))
    for sd, ratio, n, old, at_n, at_old in rows:
        intended = "Equivalent" if abs(math.log(ratio)) < math.log1p(THRESHOLD) else \
            "Regression" if ratio < 1 else "Improvement"
        lines.append(f"| {sd:.2f} | {ratio:g} | {intended} | {n if n <= MAX_REPEAT else f'> {MAX_REPEAT}'} | "
                     f"{_percent(at_n.result()) if at_n else '-'} | {old} | "
                     f"{_percent(at_old.result()) if at_old else '-'} |")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=2000, help="runs per cell (default 2000)")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        tables = [("Outcomes per measure (threshold 10%)", table_outcomes(pool, args.trials)),
                  ("Eight measures in one run", table_family(pool, args.trials)),
                  ("Iterations needed for 80% power", table_needed(pool, args.trials))]
    for title, lines in tables:
        print(f"\n**{title}** ({args.trials} runs per cell)\n")
        print("\n".join(lines))
    print(f"\n({time.monotonic() - started:.0f} s, {args.workers} processes)")


if __name__ == "__main__":
    main()
