"""A series of finished runs of one shape, oldest first: per step the throughput and p99 over time, and whether the
latest runs differ from the ones before (``csibench history``; pure).

Which runs belong together: the finished, Succeeded runs the selector matched that have the latest run's shape
(class, volumes, PVCs per pod, size, access and volume mode, steps, pod, client limits, the data-path and database
parts); the others are counted and left out, because a change of shape is not a change of the storage.

The change point, stated: the latest ``window`` runs (default 3) against every run before them, per step, on the
runs' throughputs (with repeats, each run's median), by Welch's t-test on the logarithms (``api/stats.py``),
two-sided at alpha 0.05, Holm-adjusted over the steps; a step is marked when the difference is significant **and**
larger than the regression threshold (default 10%), as a baseline comparison would. It needs at least 2 runs on
each side; one unusual run is not a change point, a lasting step is.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from csibench.api.regression import Change, judge_changes
from csibench.api.shape import shape_of
from csibench.api.steps import has_own_table, title_and_unit

SPARKS = "▁▂▃▄▅▆▇█"


def _finished_at(run: dict[str, Any]) -> str:
    status = run.get("status") or {}
    return str(status.get("completionTime") or (run.get("metadata") or {}).get("creationTimestamp") or "")


@dataclass(frozen=True)
class Series:
    runs: list[dict[str, Any]]  # oldest first
    left_out: int  # matched but not Succeeded, or of another shape


def select(runs: list[dict[str, Any]]) -> Series:
    """The Succeeded runs of the latest run's shape, oldest first."""
    finished = sorted([r for r in runs if (r.get("status") or {}).get("phase") == "Succeeded"], key=_finished_at)
    if not finished:
        return Series([], len(runs))
    shape = shape_of(finished[-1])
    kept = [r for r in finished if shape_of(r) == shape]
    return Series(kept, len(runs) - len(kept))


def sparkline(values: list[float | None]) -> str:
    found = [v for v in values if v is not None]
    if not found:
        return ""
    low, high = min(found), max(found)
    span = high - low
    return "".join(" " if v is None else SPARKS[0 if span == 0 else min(7, int((v - low) / span * 8))]
                   for v in values)


def _step_values(run: dict[str, Any], step: str) -> tuple[float | None, float | None, list[float]]:
    """(throughput, p99, per-iteration throughputs) of one step in one run; medians with repeats."""
    status = run.get("status") or {}
    aggregate = next((a for a in status.get("aggregates") or [] if a["name"] == step), None)
    if aggregate is not None:
        throughput = (aggregate.get("throughput") or {}).get("median")
        return throughput, (aggregate.get("latency") or {}).get("p99"), list(aggregate.get("throughputs") or [])
    found = next((s for s in status.get("steps") or [] if s["name"] == step), None)
    if found is None or found.get("state") != "Succeeded":
        return None, None, []
    throughput = found.get("throughput")
    return throughput, (found.get("latency") or {}).get("p99"), [throughput] if throughput else []


@dataclass(frozen=True)
class StepHistory:
    step: str
    throughputs: list[float | None]  # one per run, oldest first
    p99s: list[float | None]
    change: Change | None  # the change point's verdict: None when there are too few runs to test
    ratio: float | None  # latest window / before, geometric means of the runs' throughputs


def step_histories(series: Series, window: int = 3, threshold: float = 0.10) -> list[StepHistory]:
    steps = [s["name"] for s in (series.runs[-1].get("status") or {}).get("steps") or []] if series.runs else []
    steps = [step for step in steps if not has_own_table(step)]
    values = {step: [_step_values(run, step) for run in series.runs] for step in steps}
    split = len(series.runs) - window
    testable = split >= 2 and window >= 2
    pairs = [([v[0] for v in values[step][:split] if v[0]], [v[0] for v in values[step][split:] if v[0]])
             for step in steps] if testable else []
    judged = judge_changes([(before, latest) for before, latest in pairs], threshold) if testable else []
    histories = []
    for index, step in enumerate(steps):
        result = judged[index] if testable else None
        histories.append(StepHistory(step, [v[0] for v in values[step]], [v[1] for v in values[step]],
                                     None if result is None else result.change,
                                     None if result is None else result.ratio))
    return histories


def _format(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}g}"


def table(series: Series, window: int = 3, threshold: float = 0.10) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, one row per step (oldest → latest throughput and p99, sparklines, the change point), notes."""
    histories = step_histories(series, window, threshold)
    rows = []
    for history in histories:
        title, unit = title_and_unit(history.step)
        found = [v for v in history.throughputs if v is not None]
        change = "-" if history.change is None else (
            f"{history.change} ({_format(history.ratio)}x)" if history.change in (Change.REGRESSION,
                                                                                   Change.IMPROVEMENT)
            else str(history.change))
        rows.append([title, f"{_format(found[0] if found else None)} → {_format(found[-1] if found else None)} "
                            f"{unit}/s", sparkline(history.throughputs),
                     f"{_format(statistics.median(found) if found else None)} {unit}/s", sparkline(history.p99s),
                     f"{_format(history.p99s[-1] if history.p99s else None)} s", change])
    names = [f"{(r.get('metadata') or {}).get('namespace', '')}/{(r.get('metadata') or {}).get('name', '')}"
             for r in series.runs]
    count = f"{len(series.runs)} run{'' if len(series.runs) == 1 else 's'}"
    notes = [f"{count}, oldest first: {', '.join(names)}" if names else "no finished run matched"]
    if series.left_out:
        notes.append(f"{series.left_out} matched runs left out: not Succeeded, or of another shape than the latest")
    notes.append(f"change point: the latest {window} runs against the {max(0, len(series.runs) - window)} before "
                 f"them, Welch's t-test on log throughput (alpha 0.05, Holm over the steps), marked when significant "
                 f"and beyond {threshold:.0%}" + ("" if len(series.runs) - window >= 2 and window >= 2 else
                                                  "; too few runs to test (2 needed on each side)"))
    return (["Step", "throughput oldest → latest", "throughput", "median", "p99", "latest p99", "change point"],
            rows, notes)
