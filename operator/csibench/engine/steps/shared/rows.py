"""What the probe pods' logs say (pure): each pod's ``CSIBENCH-SHARED {json}`` lines read back, and one row per
phase over every pod.

A phase's row is measured only when every pod reported it: the phases start together at barriers, so the row's
time is the slowest pod's and its rate all the pods' operations over that time, with no clock compared between
nodes. The pods' latency histograms (fio's bins, the probe's ``Samples``) are merged exactly, so the row's
percentiles are those of every operation of every pod. A pod's failure (the probe's own words, or Kubernetes' when
the pod never ran) fails the rows it did not report; rows every pod reported stay measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from csibench.api import histogram
from csibench.api.models import SharedLatency, SharedPhase, SharedRow, StepState
from csibench.api.skew import is_skewed
from csibench.api.text import shorten
from csibench.engine.steps.shared.probe import MARKER as MARKER
from csibench.engine.steps.shared.probe import PLAT_NR, plat_value

MAX_MESSAGE = 600
LISTING_CREATE = "listing-create"
POPULATE = "populate"  # the filling pod's line on ReadOnlyMany (its listing-create line goes with the listing row)
READ_ONLY_PHASES = (SharedPhase.FIO, SharedPhase.LISTING)  # what readers measure, in the order they run it
LOCK_COUNTER = "lock-counter"
FAILED = "failed"
MAX_COUNT = 10**12  # more operations than any spec asks for: a number past it is not the probe's
MAX_NUMBER = 10**13  # seconds, IOPS or bytes per second past any real one: a number past it is not the probe's
MIB = 1 << 20
MAX_EPOCH_MS = 10**14  # the year 5138: an instant past it is not the probe's
LAST_BIN_NS = plat_value(PLAT_NR - 1)  # fio's last bin: no probe sample lies beyond it


@dataclass
class PodReport:
    """One pod's log read back: its lines by phase, and its failure when it said one."""

    pod: str
    node: str | None
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None


def read_log(pod: str, node: str | None, log: str) -> PodReport:
    """The probe's lines of one pod's log (anything else in the log is left alone, a line cut short too)."""
    report = PodReport(pod, node)
    for line in log.splitlines():
        if not line.startswith(MARKER):
            continue
        try:
            fields = json.loads(line[len(MARKER):])
        except ValueError:
            continue
        if not isinstance(fields, dict) or not isinstance(fields.get("phase"), str):
            continue
        if fields["phase"] == FAILED:
            report.error = str(fields.get("error") or "the probe failed")
        else:
            report.phases[fields["phase"]] = fields
    return report


def pending_rows(list_files: int, fio_seconds: int, read_only: bool = False) -> list[SharedRow]:
    """The phases the spec runs: listing only with listFiles, fio only with fioSeconds; on a ReadOnlyMany volume
    only those two (the others write), fio first."""
    skipped = {SharedPhase.LISTING} if list_files <= 0 else set()
    skipped |= {SharedPhase.FIO} if fio_seconds <= 0 else set()
    phases = READ_ONLY_PHASES if read_only else tuple(SharedPhase)
    return [SharedRow(phase=phase) for phase in phases if phase not in skipped]


def _number(fields: Mapping[str, Any], key: str) -> float:
    """A duration or rate the probe printed; anything else (a bool, a negative, NaN, infinity, an absurd size) is
    0."""
    value = fields.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    if isinstance(value, int):
        return float(value) if 0 <= value <= MAX_NUMBER else 0.0
    return value if math.isfinite(value) and 0.0 <= value <= MAX_NUMBER else 0.0


def _count(fields: Mapping[str, Any], key: str) -> int:
    """A count the probe printed; anything else (a bool, a float, a negative, an absurd size) is 0."""
    value = fields.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else 0


def _epoch_ms(fields: Mapping[str, Any], key: str) -> int:
    """An instant the probe printed (ms since the epoch, by its node's clock); anything else is 0."""
    value = fields.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < MAX_EPOCH_MS else 0


def _bins(fields: Mapping[str, Any]) -> histogram.Histogram:
    """The line's histogram, without a bin no probe could have filled."""
    return {value: count for value, count in histogram.from_json(fields.get("bins")).items()
            if value <= LAST_BIN_NS and count <= MAX_COUNT}


def latency_of(histograms: Sequence[Mapping[int, int]], max_ns: int) -> SharedLatency | None:
    merged = histogram.merge(histograms)
    found = histogram.percentiles(merged, (50.0, 90.0, 99.0, 99.9))
    if any(value is None for value in found.values()):
        return None

    def ms(ns: int | None) -> float:  # a bin's midpoint may lie past the exact maximum: never shown above it
        return round(min(ns or 0, max_ns) / 1e6, 4)

    return SharedLatency(p50=ms(found[50.0]), p90=ms(found[90.0]), p99=ms(found[99.0]), p999=ms(found[99.9]),
                         max=ms(max_ns))


def build_row(phase: SharedPhase, reports: Sequence[PodReport], why_not: str | None,
              created: Mapping[str, Any] | None = None) -> SharedRow:
    """The phase over every pod; failed, with the first pod's reason, unless every pod reported it. ``created``:
    the listing-create line of the pod that filled a ReadOnlyMany volume (not a reader's)."""
    reported = [r for r in reports if phase.value in r.phases]
    nodes = len({r.node for r in reported if r.node})
    row = SharedRow(phase=phase, pods=len(reported), nodes=nodes)
    if not reports or len(reported) < len(reports):
        silent = [r for r in reports if phase.value not in r.phases]
        first = next((r for r in silent if r.error), silent[0] if silent else None)
        reason = (f"{first.pod}: {first.error}" if first is not None and first.error else why_not
                  or (f"{first.pod} did not report {phase.value}" if first is not None else "no pod ran"))
        row.state, row.message = StepState.FAILED, shorten(reason, MAX_MESSAGE)
        return row
    lines = [r.phases[phase.value] for r in reported]
    operations = sum(_count(line, "ops") for line in lines)
    seconds = max(_number(line, "seconds") for line in lines)
    row.operations, row.durationSeconds = operations, round(seconds, 6)
    row.latency = latency_of([_bins(line) for line in lines],
                             min(LAST_BIN_NS, max(_count(line, "maxNs") for line in lines)))
    if phase in (SharedPhase.LIST, SharedPhase.LISTING):
        row.entries = min(_count(line, "entries") for line in lines)
        row.missing = sum(max(0, _count(line, "expected") - _count(line, "entries")) for line in lines)
        row.opsPerSecond = round(row.entries / seconds, 3) if seconds > 0 else None
    elif phase == SharedPhase.FIO:  # fio's own rates, over its own runtime (the phase's seconds add its start)
        row.opsPerSecond = round(sum(_number(line, "iops") for line in lines), 3)
        rate = round(sum(_number(line, "bytesPerSecond") for line in lines) / MIB, 3)
        if all(line.get("direction") == "read" for line in lines):
            row.readMiBps = rate
        else:
            row.writeMiBps = rate
    else:
        row.opsPerSecond = round(operations / seconds, 3) if seconds > 0 and phase != SharedPhase.VISIBILITY else None
    if phase in (SharedPhase.STAT, SharedPhase.DELETE):
        row.missing = sum(_count(line, "missing") for line in lines)
    if phase == SharedPhase.LOCK:  # pod 0 reads the counter once every pod is done
        counted = next((r.phases[LOCK_COUNTER] for r in reported if LOCK_COUNTER in r.phases
                        and r.phases[LOCK_COUNTER].get("pod") == 0), None)
        row.lostUpdates = None if counted is None else operations - _count(counted, "counter")
    windows = [(_epoch_ms(line, "startMs"), _epoch_ms(line, "endMs")) for line in lines
               if _epoch_ms(line, "startMs") and _epoch_ms(line, "endMs") >= _epoch_ms(line, "startMs")]
    readers = all(line.get("direction") == "read" for line in lines) if phase == SharedPhase.FIO else True
    if readers and len(windows) == len(lines) and len(lines) > 1:  # the readers' own clocks: they met at no barrier
        starts, ends = [start for start, _ in windows], [end for _, end in windows]
        row.startSkewSeconds = round((max(starts) - min(starts)) / 1000, 3)
        row.togetherSeconds = round(max(0, min(ends) - max(starts)) / 1000, 3)
        span = max(end - start for start, end in windows) / 1000
        row.skewed = is_skewed(row.startSkewSeconds, span) if phase == SharedPhase.FIO else None
    if phase == SharedPhase.LISTING:
        created = created or next((r.phases[LISTING_CREATE] for r in reported if LISTING_CREATE in r.phases), None)
        row.createSeconds = round(_number(created, "seconds"), 6) if created is not None else None
    row.state = StepState.SUCCEEDED
    problem = problem_of(row)
    if problem is not None:
        row.state, row.message = StepState.FAILED, problem
    return row


def problem_of(row: SharedRow) -> str | None:
    """A measured phase whose check failed: a lost update under flock, or files another pod did not find."""
    if row.lostUpdates is not None and row.lostUpdates > 0:
        return (f"{row.lostUpdates} of {row.operations} increments under flock were lost: the lock did not "
                "serialise the pods")
    if row.lostUpdates is not None and row.lostUpdates < 0:
        return (f"the counter under flock holds {-row.lostUpdates} more than the {row.operations} increments "
                "made: it was not this attempt's")
    if row.missing:
        return f"{row.missing} files created on one node were not found from another"
    if row.skewed:
        return (f"the readers did not read together: their starts spread over {row.startSkewSeconds:g}s, more "
                f"than a tenth of the phase, and all read at once for {row.togetherSeconds:g}s only (a reader "
                "that ran late, or a node's clock); the sum would add up readers that did not overlap")
    return None


def build_rows(reports: Sequence[PodReport], list_files: int, fio_seconds: int, why_not: str | None = None,
               read_only: bool = False, created: Mapping[str, Any] | None = None) -> list[SharedRow]:
    return [build_row(row.phase, reports, why_not, created)
            for row in pending_rows(list_files, fio_seconds, read_only)]


def histograms_of(reports: Sequence[PodReport]) -> dict[str, dict[str, int]]:
    """Per phase, every pod's histogram merged (the stored report keeps them for the HTML page's CDF)."""
    merged: dict[str, dict[str, int]] = {}
    for phase in SharedPhase:
        found = [_bins(r.phases[phase.value]) for r in reports if phase.value in r.phases]
        if found:
            merged[phase.value] = histogram.to_json(histogram.merge(found))
    return merged
