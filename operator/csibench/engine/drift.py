"""The churn's drift verdict (status.churnDrift, the NoDrift condition), from its windows (pure).

Per phase, each compared window gives one sample: its median latency as a speed (1 / p50, higher is better, so the
baseline's judgement reads it unchanged). The last ``drift.windows`` windows are held against the first as many
after ``drift.warmupWindows``, by ``regression.judge_changes`` (Welch's t on the logarithms, Holm-adjusted over the
phases, against ``thresholdPercent``): a phase shown slower beyond the threshold is Drift. NoDrift only when every
phase with completions was shown within the threshold or faster (Equivalent or Improvement); Inconclusive
otherwise, as a baseline's Inconclusive is Unknown: a phase too noisy for its windows, one significantly slower but
shown neither beyond the threshold nor within it (Slower: a slowdown of unknown size is not "no drift"), or one
with completions in the first windows and none in the last (a stall).

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
from csibench.api.regression import Change, Samples, judge_changes
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


def judge_drift(spec: ChurnSpec, rows: Sequence[ChurnWindow]) -> ChurnDrift:
    """The churn's drift from its rows."""
    first, last = compared(rows, spec)
    threshold = spec.drift.thresholdPercent / 100.0
    p50s = [(_p50s(first, phase), _p50s(last, phase)) for phase in PHASES]
    # A p50 of 0 is no speed: the judgement says so (Inconclusive) rather than the sample being dropped.
    samples = [([1.0 / x if x > 0 else 0.0 for x in a], [1.0 / x if x > 0 else 0.0 for x in b]) for a, b in p50s]
    judged = judge_changes(samples, threshold)
    measures = []
    for phase, (a, b), result in zip(PHASES, p50s, judged, strict=True):
        vanished = bool(a) and not b  # completions in the first windows, none in the last: a stall, not a pass
        message = ("completions in the first windows and none in the last: stalled, or ended after the duration"
                   if vanished else result.describe(threshold, WINDOWS))
        measures.append(DriftMeasure(
            measure=f"{phase} latencyP50", first=statistics.median(a) if a else None,
            last=statistics.median(b) if b else None, ratio=result.ratio, low=result.low, high=result.high,
            p=result.p, change=result.change.value, message=message))
    drifted = [m for m, r in zip(measures, judged, strict=True) if r.change == Change.REGRESSION]
    shown = {Change.EQUIVALENT, Change.IMPROVEMENT}  # Slower: significant, of unknown size: not shown within
    untold = [m for (a, b), m, r in zip(p50s, measures, judged, strict=True)
              if (a or b) and (r.change not in shown or not a or not b)]
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
        message = f"{span}: every phase shown within {spec.drift.thresholdPercent:g}% or faster ({said})"
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
