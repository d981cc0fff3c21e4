"""The run's verdict on its thresholds (spec.thresholds), judged once when the run ends (pure).

Each threshold reads the value status already reports, so what the verdict judged is what a reader sees: a step's
duration, throughput and per-object percentiles (with spec.repeat > 1 the median over the iterations that measured
well, ``status.aggregates``), its failed objects (with repeats, the total over every iteration, failed ones
included: ``status.iterations.failedObjects``); a data-path workload's read + write MiB/s and IOPS and merged p99
per direction (``status.dataPathAggregates`` with repeats); a database selector's every matching run row, judged on
the worst of them. Values are judged at full precision; messages show them with the digits that tell them from
their bound, times in µs below a millisecond.

How the verdict relates to the phase: the phase says whether the run measured (Succeeded) or not (Failed); the
verdict says whether what it measured is within its bounds. A run that measured and broke a bound is Succeeded with
verdict Fail. A run that failed to measure has verdict Unknown, whatever its partial numbers say, because a bound
held or broken by a half-measured step proves nothing: its thresholds are listed unjudged, with what was measured.
One exception: a ``failed`` bound counts objects, which a failed run did measure, so it is judged, and when it
breaks the verdict is Fail (any failed object fails the run, so ``max: 0`` is the bound that says something).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from csibench.api.models import (
    SECONDS_METRICS,
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    DatabaseRowKind,
    DisruptionState,
    StepState,
    Threshold,
    ThresholdMetric,
    ThresholdResult,
    Verdict,
)
from csibench.api.text import distinguishing, seconds_text, shorten
from csibench.engine.verdict import RunVerdict

CONDITION = "ThresholdsMet"
MESSAGE_MAX = 2000  # a condition's and an Event's message: every bound is in status.thresholds anyway
M = ThresholdMetric
# The worse end of each metric: the row a database selector is judged on.
HIGHER_IS_WORSE = {M.DURATION_SECONDS, M.LATENCY_P50, M.LATENCY_P90, M.LATENCY_P99, M.LATENCY_MAX, M.FAILED,
                   M.READ_P99, M.WRITE_P99, M.LATENCY_AVERAGE_MS, M.FAILED_TRANSACTIONS, M.RECOVERY_SECONDS,
                   M.LEADER_SECONDS, M.STALL_SECONDS, M.UNRECOVERED, M.CONTAINER_RESTARTS}


@dataclass(frozen=True)
class ThresholdVerdict:
    verdict: Verdict
    results: list[ThresholdResult]
    reason: str  # the ThresholdsMet condition's reason
    message: str

    @property
    def condition_status(self) -> str:
        return {Verdict.PASS: "True", Verdict.FAIL: "False"}.get(self.verdict, "Unknown")

    @property
    def broken(self) -> list[ThresholdResult]:
        return [result for result in self.results if result.met is False]


def _step_value(spec: BenchmarkRunSpec, status: BenchmarkRunStatus, step: str, metric: ThresholdMetric,
                ) -> float | None:
    current = next((s for s in status.steps if s.name == step), None)
    if metric in (M.LEAKED, M.MEMORY_GROWTH_PERCENT):  # step churn's: what its drift read off its windows
        drift = status.churnDrift
        value = None if drift is None else drift.leaked if metric == M.LEAKED else drift.memoryGrowthPercent
        return float(value) if value is not None else None
    if metric == M.FAILED:
        return _failed_objects(spec, status, step, current)
    aggregate = next((a for a in status.aggregates if a.name == step), None) if spec.repeat > 1 else None
    if aggregate is not None:
        spread = {M.DURATION_SECONDS: aggregate.durationSeconds, M.THROUGHPUT: aggregate.throughput}.get(metric)
        if metric in (M.DURATION_SECONDS, M.THROUGHPUT):
            return spread.median if spread is not None else None
        return _latency(aggregate.latency, metric)
    if current is None or current.state != StepState.SUCCEEDED:
        return None
    if metric == M.DURATION_SECONDS:
        return current.durationSeconds
    if metric == M.THROUGHPUT:
        return current.throughput
    return _latency(current.latency, metric)


def _failed_objects(spec: BenchmarkRunSpec, status: BenchmarkRunStatus, step: str, current: Any) -> float | None:
    """Failed objects over every iteration: the finished iterations' total, plus the one under way when it ended
    before it was recorded (a failure in iteration 2 of 3 counts as much as one in the last)."""
    iterations = status.iterations if spec.repeat > 1 else None
    if iterations is None:
        return float(current.failed) if current is not None else None
    total = iterations.failedObjects.get(step)
    unrecorded = current is not None and iterations.done < iterations.current
    if total is None and not unrecorded:
        return None
    return float((total or 0) + (current.failed if unrecorded else 0))


def _latency(latency: Any, metric: ThresholdMetric) -> float | None:
    if latency is None:
        return None
    value: float = {M.LATENCY_P50: latency.p50, M.LATENCY_P90: latency.p90, M.LATENCY_P99: latency.p99,
                    M.LATENCY_MAX: latency.max}[metric]
    return value


def _workload_value(spec: BenchmarkRunSpec, status: BenchmarkRunStatus, workload: str, metric: ThresholdMetric,
                    ) -> float | None:
    aggregate = next((a for a in status.dataPathAggregates if a.name == workload), None) if spec.repeat > 1 \
        else None
    if aggregate is not None:
        spread = {M.MIBPS: aggregate.mibps, M.IOPS: aggregate.iops, M.READ_P99: aggregate.readP99,
                  M.WRITE_P99: aggregate.writeP99}[metric]
        return spread.median if spread is not None else None
    row = next((r for r in status.dataPath if r.name == workload), None)
    if row is None or row.state != StepState.SUCCEEDED:
        return None
    if metric == M.MIBPS:
        return (row.readMiBps or 0.0) + (row.writeMiBps or 0.0)
    if metric == M.IOPS:
        return (row.readIOPS or 0.0) + (row.writeIOPS or 0.0)
    latency = row.latency
    if latency is None:
        return None
    return latency.readP99 if metric == M.READ_P99 else latency.writeP99


def _database_value(status: BenchmarkRunStatus, threshold: Threshold) -> tuple[float | None, str]:
    """The worst value over the run rows the selector matches, and which row it was."""
    selector = threshold.database
    assert selector is not None
    rows = [row for row in status.database if row.kind == DatabaseRowKind.RUN
            and (selector.scale is None or row.scale == selector.scale)
            and (selector.mode is None or row.mode == selector.mode)
            and (selector.clients is None or row.clients == selector.clients)]
    read: dict[ThresholdMetric, Callable[[Any], float | None]] = {
        M.TPS: lambda row: row.tps, M.LATENCY_AVERAGE_MS: lambda row: row.latencyAverageMs,
        M.FAILED_TRANSACTIONS: lambda row: None if row.failedTransactions is None else float(row.failedTransactions)}
    measured = [(value, row) for row in rows if row.state == StepState.SUCCEEDED
                and (value := read[threshold.metric](row)) is not None]
    if not measured or len(measured) < len(rows):
        return None, ""
    value, row = (max if threshold.metric in HIGHER_IS_WORSE else min)(measured, key=lambda pair: pair[0])
    return value, f" (worst: scale {row.scale} {row.mode} {row.clients} clients)" if len(measured) > 1 else ""


def _disruption_value(status: BenchmarkRunStatus, index: int, metric: ThresholdMetric,
                      ) -> tuple[float | None, str, bool]:
    """(value, note, broken without a value): a component that never recovered breaks a bound on its recovery
    time even though there is no number to show."""
    result = status.disruptions[index] if index < len(status.disruptions) else None
    if result is None or result.state not in (DisruptionState.RECOVERED, DisruptionState.NOT_RECOVERED):
        return None, f" ({result.state})" if result is not None else "", False
    value = {M.RECOVERY_SECONDS: result.recoverySeconds, M.LEADER_SECONDS: result.leaderSeconds,
             M.STALL_SECONDS: result.stallSeconds,
             M.UNRECOVERED: None if result.unrecovered is None else float(result.unrecovered),
             M.CONTAINER_RESTARTS: None if result.containerRestarts is None else float(result.containerRestarts),
             M.LEAKED: None if status.leaks is None else float(status.leaks.leaked),  # the run's, after cleanup
             }[metric]
    never = value is None and metric == M.RECOVERY_SECONDS and result.state == DisruptionState.NOT_RECOVERED
    return value, "", never


def _shown(value: float, threshold: Threshold) -> tuple[str, dict[float, str]]:
    """The value and each bound with the digits that tell them apart (1.0001 is not '1', 6 is not 5.999999999),
    times in the unit that shows their digits ('125 µs > 120 µs')."""
    bounds = [b for b in (threshold.min, threshold.max) if b is not None]
    seconds = threshold.metric in SECONDS_METRICS
    mine, texts = distinguishing(value, bounds, lambda x, digits: seconds_text(x, digits) if seconds
                                 else f"{x:.{digits}g}")
    return mine, dict(zip(bounds, texts, strict=True))


def judge_one(spec: BenchmarkRunSpec, status: BenchmarkRunStatus, threshold: Threshold,
              measured: bool = True) -> ThresholdResult:
    """One bound against status; ``measured`` False: the run failed to measure, so only counts are judged."""
    where, never = "", False
    if threshold.step is not None:
        value = _step_value(spec, status, threshold.step, threshold.metric)
    elif threshold.workload is not None:
        value = _workload_value(spec, status, threshold.workload, threshold.metric)
    elif threshold.disruption is not None:
        value, where, never = _disruption_value(status, threshold.disruption, threshold.metric)
    elif threshold.database is None:  # the whole run: what its cleanup left behind
        value = None if status.leaks is None else float(status.leaks.leaked)
        where = "" if status.leaks is not None else " (no audit: the run's cleanup did not run)"
    else:
        value, where = _database_value(status, threshold)
    head = f"{threshold.subject} {threshold.metric}"
    base = {"subject": threshold.subject, "metric": str(threshold.metric), "bound": threshold.bound}
    if never and threshold.max is not None and measured:
        return ThresholdResult(**base, met=False, message=f"{head}: never, within any bound ({threshold.bound})")
    if value is None:
        return ThresholdResult(**base, message=f"{head}: not measured{where}")
    if not measured and threshold.metric != M.FAILED:
        return ThresholdResult(**base, measured=value,
                               message=f"{head} {_shown(value, threshold)[0]}: not judged, the run failed to measure")
    low = threshold.min is not None and value < threshold.min
    high = threshold.max is not None and value > threshold.max
    shown, bounds = _shown(value, threshold)
    if low and threshold.min is not None:
        message = f"{head} {shown} < {bounds[threshold.min]} (min){where}"
    elif high and threshold.max is not None:
        message = f"{head} {shown} > {bounds[threshold.max]} (max){where}"
    else:
        message = f"{head} {shown} within {threshold.bound}{where}"
    return ThresholdResult(**base, measured=value, met=not (low or high), message=message)


def judge(spec: BenchmarkRunSpec, status: BenchmarkRunStatus, run: RunVerdict) -> ThresholdVerdict | None:
    """The thresholds' verdict of a run that ends as ``run`` says; None without thresholds."""
    if not spec.thresholds:
        return None
    results = [judge_one(spec, status, threshold, run.succeeded) for threshold in spec.thresholds]
    broken = [result for result in results if result.met is False]
    unmeasured = [result for result in results if result.met is None]
    if not run.succeeded and broken:  # only ``failed`` bounds are judged on a failed run
        return ThresholdVerdict(Verdict.FAIL, results, "ThresholdsBroken",
                                shorten(f"the run failed to measure ({run.reason}), and {len(broken)} failed-object "
                                        "bound(s) broke: " + "; ".join(r.message for r in broken), MESSAGE_MAX))
    if not run.succeeded:
        return ThresholdVerdict(Verdict.UNKNOWN, results, "RunFailed",
                                f"the run failed to measure ({run.reason}), so its thresholds prove nothing")
    if broken:
        return ThresholdVerdict(Verdict.FAIL, results, "ThresholdsBroken", shorten(
            f"{len(broken)} of {len(results)} broken: " + "; ".join(r.message for r in broken), MESSAGE_MAX))
    if unmeasured:
        return ThresholdVerdict(Verdict.UNKNOWN, results, "NotMeasured",
                                shorten("; ".join(r.message for r in unmeasured), MESSAGE_MAX))
    return ThresholdVerdict(Verdict.PASS, results, "ThresholdsMet", f"all {len(results)} thresholds met")
