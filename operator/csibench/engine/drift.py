"""The churn's drift verdict (status.churnDrift, the NoDrift condition), from its windows (pure).

Per phase, each compared window gives one sample: its median latency as a speed (1 / p50, higher is better, so the
baseline's judgement reads it unchanged). The last ``drift.windows`` windows are held against the first as many
after ``drift.warmupWindows``, by ``regression.judge_changes`` (Welch's t on the logarithms, Holm-adjusted over the
phases, against ``thresholdPercent``). Drift is about getting worse, so each phase is one of:

- **Drift**: shown slower beyond the threshold (the baseline's Regression, Holm-adjusted over the phases);
- **NoDrift**: shown not slower beyond it: the one-sided test of "slower by the threshold or more" rejects at 5%
  (non-inferiority: the lower end of the ratio's 90% interval lies above 1 / (1 + threshold)). A phase that got
  faster, by any amount, or slower by an amount shown within the threshold, is NoDrift;
- **Inconclusive**: anything else: too noisy for its windows (significantly slower or not; the message says about
  how many windows a side would decide, from the power of the test that would, ``drift_power``), or a compared
  window without a completion of the phase (a stall, in one window or all of them, is never averaged away).

The churn is Drift when a phase is, NoDrift when every phase is (an intersection of one-sided
tests, so no correction is needed for the phases), Inconclusive otherwise, as a baseline's Inconclusive is Unknown.

The window is the sample, not the wave or the object: waves of one window overlap and share its minute, so they
are not independent, and counting them as samples would buy false certainty both ways (a slowdown at the
threshold called Drift, one beyond it called NoDrift, each well over 5% of the time when windows vary). Power comes
from more windows (``drift.windows``, up to 20).

The errors this controls, checked by simulation in the unit tests, for windows as independent as separate runs: a
true slowdown of at most the threshold is called Drift at most alpha (5%) of the time, and a true slowdown of at
least the threshold is called NoDrift at most 5% of the time, over all phases together. Windows of one churn
follow each other, and a load that lasts several windows makes neighbouring windows alike, which the tests do not
model: a machine busier during the last windows only is, to this verdict, a drift (as it is to a user; the rows
say when it began).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from csibench.api.churn import MAX_DRIFT_WINDOWS, PHASES, ChurnDrift, ChurnSpec, ChurnWindow, DriftChange, DriftMeasure
from csibench.api.regression import Change, Judged, judge_changes
from csibench.api.stats import ALPHA
from csibench.api.text import shorten
from csibench.engine.drift_power import windows_needed
from csibench.engine.verdict import RunVerdict

MESSAGE_MAX = 1000


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


def _gaps(rows: Sequence[ChurnWindow], phase: str) -> list[int]:
    """The compared windows in which a phase had no completion."""
    return [row.index for row in rows if not any(p.phase == phase and p.latency is not None for p in row.phases)]


def _head(result: Judged) -> str:
    """'0.83x [0.75, 0.92], n=10/10': the last windows' speed over the first's, its 90% interval, the windows."""
    interval = f" [{result.low:.2f}, {result.high:.2f}]" if result.low is not None and result.high is not None else ""
    ratio = f"{result.ratio:.2f}x{interval}, " if result.ratio is not None else ""
    return f"{ratio}n={result.n_a}/{result.n_b}"


def _undecided(first: list[float], last: list[float], result: Judged, threshold: float) -> str:
    """Why a phase's drift was not decided, or how many windows a side would decide it."""
    bad = [x for x in first + last if not (math.isfinite(x) and x > 0)]
    if bad:
        return f"{_head(result)}: Inconclusive: a window's p50 is not a positive, finite latency ({bad[0]!r})"
    if min(len(first), len(last)) < 2:
        return f"{_head(result)}: Inconclusive: fewer than 2 windows a side cannot be tested"
    log_first, log_last = [-math.log(x) for x in first], [-math.log(x) for x in last]  # log speeds
    if statistics.variance(log_first) == 0.0 and statistics.variance(log_last) == 0.0:
        return f"{_head(result)}: Inconclusive: the windows do not vary, so there is no spread to test against"
    needed = windows_needed(log_first, log_last, threshold, len(PHASES), MAX_DRIFT_WINDOWS)
    have = max(len(first), len(last))
    slower = (f"significantly slower, by an amount shown neither beyond {threshold:.0%} nor within it; "
              if result.change == Change.SLOWER else "")
    if needed is None:
        advice = f"more than {MAX_DRIFT_WINDOWS} windows a side (drift.windows' limit) would be needed at this spread"
    elif needed <= have:
        advice = (f"at this spread {needed} windows a side decide 80% of the time; this churn's {have} did not (the "
                  "spread and difference it reads are themselves noisy)")
    else:
        advice = (f"about {needed} windows a side would decide (80% power): a larger drift.windows, with a "
                  "durationSeconds long enough for it")
    return f"{_head(result)}: Inconclusive: {slower}{advice}"


def _measure(phase: str, first: list[float], last: list[float], gaps: list[int], result: Judged,
             threshold: float) -> DriftMeasure:
    """One phase's p50s, first windows against last, and what they show: Drift (slower beyond the threshold,
    Holm-adjusted), NoDrift (not slower beyond it: the one-sided test rejects at alpha, the lower end of the
    ratio's 90% interval above 1 / (1 + threshold)), or Inconclusive (also when a compared window has none of the
    phase's completions: a stall is never averaged away)."""
    p: float | None = result.p_not_slower
    if (first or last) and gaps:
        shown = ", ".join(str(i) for i in gaps[:10]) + (", ..." if len(gaps) > 10 else "")
        change, message, p = DriftChange.INCONCLUSIVE, (
            f"no completions in window{'s' if len(gaps) > 1 else ''} {shown} of those compared: stalled, ended "
            "after the duration, or a window shorter than the phase's waves need to fill it"), None
    elif not first and not last:  # a stall through every compared window (every wave runs every phase)
        change, message, p = DriftChange.INCONCLUSIVE, "no completions in the windows compared: stalled", None
    elif result.change == Change.REGRESSION and result.p_beyond is not None:
        change, message, p = DriftChange.DRIFT, (
            f"{_head(result)}: slower beyond {threshold:.0%}, shown (one-sided p={result.p_beyond:.2g}, "
            "Holm-adjusted over the phases)"), result.p_beyond
    elif result.p_not_slower is not None and result.p_not_slower < ALPHA:
        change, message = DriftChange.NO_DRIFT, (f"{_head(result)}: not slower beyond {threshold:.0%}, shown "
                                                 f"(one-sided p={result.p_not_slower:.2g})")
    else:
        change, message = DriftChange.INCONCLUSIVE, _undecided(first, last, result, threshold)
        if result.ratio is not None and result.ratio < 1.0 / (1.0 + threshold):  # the slowdown's test would decide
            p = result.p_beyond
    return DriftMeasure(measure=f"{phase} latencyP50", first=statistics.median(first) if first else None,
                        last=statistics.median(last) if last else None, ratio=result.ratio, low=result.low,
                        high=result.high, p=p, change=change.value, message=message)


def judge_drift(spec: ChurnSpec, rows: Sequence[ChurnWindow]) -> ChurnDrift:
    """The churn's drift from its rows."""
    first, last = compared(rows, spec)
    threshold = spec.drift.thresholdPercent / 100.0
    p50s = [(_p50s(first, phase), _p50s(last, phase)) for phase in PHASES]
    # A p50 of 0 is no speed: the judgement says so (Inconclusive) rather than the sample being dropped.
    samples = [([1.0 / x if x > 0 else 0.0 for x in a], [1.0 / x if x > 0 else 0.0 for x in b]) for a, b in p50s]
    measures = [_measure(phase, a, b, _gaps(first + last, phase), result, threshold)
                for phase, (a, b), result in zip(PHASES, p50s, judge_changes(samples, threshold), strict=True)]
    drifted = [m for m in measures if m.change == DriftChange.DRIFT]
    untold = [m for m in measures if m.change == DriftChange.INCONCLUSIVE]  # every wave runs every phase
    leaks = max((row.leaks.total for row in rows if row.leaks is not None), default=None)
    growth = memory_growth(first, last)
    span = (f"windows {first[0].index}-{first[-1].index} against {last[0].index}-{last[-1].index}"
            if first and last else "too few windows")
    said = ", ".join(f"{m.measure.split()[0]} {m.change}" for m in measures)
    if drifted:
        change = DriftChange.DRIFT
        message = f"{span}: " + "; ".join(f"{m.measure}: {m.message}" for m in drifted)
    elif not any(a or b for a, b in p50s):
        change, message = DriftChange.INCONCLUSIVE, f"{span}: no phase had completions in the windows compared"
    elif untold:
        change = DriftChange.INCONCLUSIVE
        message = f"{span}: not shown either way ({said}); " + "; ".join(f"{m.measure}: {m.message}" for m in untold)
    else:
        change = DriftChange.NO_DRIFT
        message = f"{span}: every phase shown not slower beyond {spec.drift.thresholdPercent:g}% ({said})"
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
