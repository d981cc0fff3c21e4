"""The churn's drift verdict (status.churnDrift, the NoDrift condition), from its windows (pure).

Per phase, each compared window gives one sample: its median latency as a speed (1 / p50, higher is better, so the
baseline's judgement reads it unchanged). The last ``drift.windows`` windows are held against the first as many
after ``drift.warmupWindows``, by ``regression.judge_changes`` (Welch's t on the logarithms, Holm-adjusted over the
phases, against ``thresholdPercent``). Drift is about getting worse, so each phase is one of:

- **Drift**: shown slower beyond the threshold (the baseline's Regression, Holm-adjusted over the phases);
- **NoDrift**: shown not slower beyond it: the one-sided test of "slower by the threshold or more" rejects at 5%
  (non-inferiority: the lower end of the ratio's 90% interval lies above 1 / (1 + threshold)). A phase that got
  faster, by any amount, or slower by an amount shown within the threshold, is NoDrift;
- **Inconclusive**: anything else: too noisy for its windows (significantly slower or not), or completions in the
  first windows and none in the last (a stall).

The churn is Drift when a phase is, NoDrift when every phase with completions is (an intersection of one-sided
tests, so no correction is needed for the phases), Inconclusive otherwise, as a baseline's Inconclusive is Unknown.

The window is the sample, not the wave or the object: waves of one window overlap and share its minute, so they
are not independent, and counting them as samples would buy false certainty both ways (a slowdown at the
threshold called Drift, one beyond it called NoDrift, each well over 5% of the time when windows vary). Power comes
from more windows (``drift.windows``, up to 20), and the message says how many would decide.

The errors this controls, checked by simulation in the unit tests, for windows as independent as separate runs: a
true slowdown of at most the threshold is called Drift at most alpha (5%) of the time, and a true slowdown of at
least the threshold is called NoDrift at most 5% of the time, over all phases together. Windows of one churn
follow each other, and a load that lasts several windows makes neighbouring windows alike, which the tests do not
model: a machine busier during the last windows only is, to this verdict, a drift (as it is to a user; the rows
say when it began).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from csibench.api.churn import MAX_DRIFT_WINDOWS, PHASES, ChurnDrift, ChurnSpec, ChurnWindow, DriftChange, DriftMeasure
from csibench.api.regression import Change, Judged, Samples, judge_changes
from csibench.api.stats import ALPHA
from csibench.api.text import shorten
from csibench.engine.verdict import RunVerdict

MESSAGE_MAX = 1000
WINDOWS = Samples("one window on a side cannot be tested", "the windows do not vary, so there is no spread to test "
                  "against", "more than {most} windows a side (drift.windows' limit) would be needed to decide at "
                  "this spread", "about {n} windows a side would decide (80% power): a larger drift.windows, with a "
                  "durationSeconds long enough for it", MAX_DRIFT_WINDOWS)


def compared(rows: Sequence[ChurnWindow], spec: ChurnSpec) -> tuple[list[ChurnWindow], list[ChurnWindow]]:
    """(first, last): the windows held against each other; the tail never, the warm-up never."""
    full = [row for row in rows if not row.tail]
    usable = full[spec.drift.warmupWindows:]
    k = spec.drift.windows
    if len(usable) < 2 * k:
        return usable[:len(usable) // 2], usable[len(usable) - len(usable) // 2:]
    return usable[:k], usable[-k:]


def _p50s(rows: Sequence[ChurnWindow], phase: str) -> list[float]:
    return [p.latency.p50 for row in rows for p in row.phases if p.phase == phase and p.latency is not None]


def memory_growth(first: Sequence[ChurnWindow], last: Sequence[ChurnWindow]) -> tuple[float, str] | None:
    """The component whose peak memory grew most, last windows (mean) against first, in percent; None: no
    component was read at both ends."""
    def means(rows: Sequence[ChurnWindow]) -> dict[str, float]:
        found: dict[str, list[float]] = {}
        for row in rows:
            for reading in row.memory:
                found.setdefault(reading.component, []).append(reading.bytes)
        return {component: statistics.fmean(values) for component, values in found.items()}
    before, after = means(first), means(last)
    growth = [((after[c] / before[c] - 1.0) * 100.0, c) for c in before if c in after and before[c] > 0]
    return max(growth) if growth else None


def _measure(phase: str, first: list[float], last: list[float], result: Judged, threshold: float) -> DriftMeasure:
    """One phase's p50s, first windows against last, and what the judgement shows of them: Drift (slower beyond
    the threshold, Holm-adjusted), NoDrift (not slower beyond it: the one-sided test rejects at alpha, the lower end
    of the ratio's 90% interval above 1 / (1 + threshold)), or Inconclusive."""
    if first and not last:  # completions in the first windows, none in the last: a stall, not a pass
        change, message = DriftChange.INCONCLUSIVE, ("completions in the first windows and none in the last: "
                                                     "stalled, or ended after the duration")
    elif not first and not last:
        change, message = DriftChange.INCONCLUSIVE, "no completions in the windows compared"
    elif result.change == Change.REGRESSION:
        change, message = DriftChange.DRIFT, result.describe(threshold, WINDOWS)
    elif first and result.p_not_slower is not None and result.p_not_slower < ALPHA and result.ratio is not None:
        interval = f" [{result.low:.2f}, {result.high:.2f}]" if result.low is not None and result.high is not None \
            else ""
        change, message = DriftChange.NO_DRIFT, (
            f"{result.ratio:.2f}x{interval}, n={result.n_a}/{result.n_b}: not slower beyond {threshold:.0%}, shown "
            f"(one-sided p={result.p_not_slower:.2g})")
    else:
        change, message = DriftChange.INCONCLUSIVE, result.describe(threshold, WINDOWS)
    return DriftMeasure(measure=f"{phase} latencyP50", first=statistics.median(first) if first else None,
                        last=statistics.median(last) if last else None, ratio=result.ratio, low=result.low,
                        high=result.high, p=result.p, change=change.value, message=message)


def judge_drift(spec: ChurnSpec, rows: Sequence[ChurnWindow]) -> ChurnDrift:
    """The churn's drift from its rows."""
    first, last = compared(rows, spec)
    threshold = spec.drift.thresholdPercent / 100.0
    p50s = [(_p50s(first, phase), _p50s(last, phase)) for phase in PHASES]
    # A p50 of 0 is no speed: the judgement says so (Inconclusive) rather than the sample being dropped.
    samples = [([1.0 / x if x > 0 else 0.0 for x in a], [1.0 / x if x > 0 else 0.0 for x in b]) for a, b in p50s]
    measures = [_measure(phase, a, b, result, threshold)
                for phase, (a, b), result in zip(PHASES, p50s, judge_changes(samples, threshold), strict=True)]
    drifted = [m for m in measures if m.change == DriftChange.DRIFT]
    untold = [m for (a, b), m in zip(p50s, measures, strict=True)
              if (a or b) and m.change == DriftChange.INCONCLUSIVE]
    leaks = max((row.leaks.total for row in rows if row.leaks is not None), default=None)
    growth = memory_growth(first, last)
    span = (f"windows {first[0].index}-{first[-1].index} against {last[0].index}-{last[-1].index}"
            if first and last else "too few windows")
    said = ", ".join(f"{m.measure.split()[0]} {m.change}" for m in measures)
    if drifted:
        change = DriftChange.DRIFT
        message = f"{span}: " + "; ".join(f"{m.measure}: {m.message}" for m in drifted)
    elif untold or not any(a or b for a, b in p50s):
        change = DriftChange.INCONCLUSIVE
        message = (f"{span}: not shown either way ({said}); " + "; ".join(f"{m.measure}: {m.message}"
                                                                          for m in untold)) if untold else \
            f"{span}: no phase had completions in the windows compared"
    else:
        change = DriftChange.NO_DRIFT
        message = (f"{span}: every phase shown not slower beyond {spec.drift.thresholdPercent:g}% ({said})")
    return ChurnDrift(change=change, message=shorten(message, MESSAGE_MAX), windows=len(first),
                      thresholdPercent=spec.drift.thresholdPercent, measures=measures, leaked=leaks,
                      memoryGrowthPercent=round(growth[0], 2) if growth else None,
                      memoryComponent=growth[1] if growth else None)


def churn_drift(spec: ChurnSpec | None, rows: Sequence[ChurnWindow], run: RunVerdict) -> ChurnDrift | None:
    """status.churnDrift when the run ends: None without a churn or before any window closed; Inconclusive when
    the run failed to measure (half a churn proves nothing), with what its windows said."""
    if spec is None or not rows:
        return None
    drift = judge_drift(spec, rows)
    if not run.succeeded:
        return drift.model_copy(update={"change": DriftChange.INCONCLUSIVE, "message": shorten(
            f"the run failed to measure ({run.reason}), so its drift proves nothing; its windows said: "
            f"{drift.message}", MESSAGE_MAX)})
    return drift
