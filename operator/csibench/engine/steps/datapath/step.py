"""The data-path step: for each workload in order, one fio pod per selected volume at once, spread over the
usable nodes (volume i's pods prefer node i mod N: ``spread_node``); wait until all are done; read each pod's
log through the API (``pods/log``); parse; delete the pods (and wait until they are gone and their volumes
detached); then the next workload. Each row says per node what its pods there did.

The step's clock covers the whole matrix; each row records its own wall time (pods created to the last pod
done). A pod that fails (non-zero exit, refused by the kubelet, a mount failure, the workload's timeout) fails its
row with fio's own message when its log has one; the rest of the matrix still runs. Every pod carries the run's
labels, so cleanup removes whatever an interruption leaves. After an operator restart the step is restored
(its pods deleted, untimed) and measured again from scratch, like any step: the rows start over.

This module is what the step measures and reports (the matrix's order, rate levels, the local baseline, the rows'
warnings, metrics); how one batch of its pods is driven through the API and read back is ``pods.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from csibench.api.models import (
    DataPathBaseline,
    DataPathLatency,
    DataPathLevel,
    DataPathRow,
    DataPathSpec,
    DataPathWorkload,
    StepState,
)
from csibench.api.skew import skew_message
from csibench.api.text import shorten
from csibench.engine.results import INTERRUPTED_MESSAGE, ROWS, ResultTable, keep_rows
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.datapath import checksum
from csibench.engine.steps.datapath.fio import MIB
from csibench.engine.steps.datapath.pods import PodsRun, WorkloadPods
from csibench.engine.steps.datapath.rows import SLOW_SHOWN, build_row, pending_row, row_histograms, slow_volumes
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches
from csibench.metrics import METRICS

SLACK_SECONDS = 300  # beyond ramp + runtime: pod start, file layout, log read
VOLUMES = "volumes"
HISTOGRAMS = "histograms"  # workload -> its merged histograms (and per node): rows.row_histograms
READS, WRITES = frozenset({"read", "randread", "randrw"}), frozenset({"write", "randwrite", "randrw"})


def selected_volumes(spec_volumes: int, data: DataPathSpec) -> int:
    return min(data.volumes or spec_volumes, spec_volumes)


def spread_node(volume: int, nodes: Sequence[str]) -> str | None:
    """The node volume i's data-path pods are placed on: the usable nodes in turn, so N volumes over M nodes put
    N // M or N // M + 1 on each (None: the nodes are unknown, the scheduler alone decides)."""
    return nodes[volume % len(nodes)] if nodes else None


def nodes_in(context: StepContext, zones: Sequence[str]) -> tuple[str, ...]:
    """The usable nodes in ``zones`` (all of them without zones), in name order."""
    return tuple(node for node in context.nodes if not zones or context.node_zones.get(node) in zones)


def timeout_of(context: StepContext) -> float:
    data = context.spec.dataPath
    assert data is not None
    own = context.spec.timeouts.own("dataPath")
    return float(own if own is not None else data.startTimeoutSeconds + data.startDelaySeconds + data.rampSeconds
                 + data.runtimeSeconds + SLACK_SECONDS)


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """Run the matrix (the caller wrote status and started nothing yet); the tracker's clock covers it all. Each
    workload runs unthrottled, then once per rate level, throttled to that share of what it reached."""
    data = context.spec.dataPath
    assert data is not None
    volumes = selected_volumes(context.spec.volumes, data)
    rows = [pending_row(data, workload, volumes) for workload in data.workloads]
    records: list[dict[str, Any]] = []
    histograms: dict[str, Any] = {}
    tracker.extra = {ROWS: [row.model_dump(mode="json", exclude_none=True) for row in rows], VOLUMES: records,
                     HISTOGRAMS: histograms}
    pods = WorkloadPods(runner, step, tracker, context, records, volumes, timeout_of(context))
    with RESULTS.measuring(tracker, rows):
        for w, workload in enumerate(data.workloads):
            rows[w].state = StepState.RUNNING
            keep_rows(tracker, rows)
            await runner.show(f"{workload.name} ({w + 1}/{len(data.workloads)})")
            ran = await pods.run(w, 0)
            rows[w] = build_row(data, workload, ran.results, ran.failures, ran.seconds, ran.nodes,
                                context.node_zones)
            rows[w].startAt = ran.start_at
            slow = slow_volumes(ran.results, ran.volumes)
            rows[w].slowVolumes = [volume for volume, _ in slow[:SLOW_SHOWN]]
            histograms[workload.name] = row_histograms(ran.results, ran.nodes)
            keep_rows(tracker, rows)
            if rows[w].skewed:
                await runner.warn("DataPathStartSkew", f"{workload.name}: " + skew_message(
                    rows[w].startSkewSeconds or 0.0, rows[w].togetherSeconds or 0.0, data.runtimeSeconds))
            if slow:
                where = dict(zip(ran.volumes, ran.nodes, strict=True))
                await runner.warn("DataPathSlowVolume", shorten(
                    f"{workload.name}: {len(slow)} of {len(ran.results)} volumes ran under half the median "
                    "per-volume bandwidth: " + ", ".join(f"{volume} on {where.get(volume) or 'an unknown node'} "
                                                         f"({rate:g} MiB/s)" for volume, rate in slow[:SLOW_SHOWN]),
                    1000))
            for slot, percent in enumerate(data.rateLevels, start=1):
                rates = level_rates(rows[w], percent, len(ran.results) * data.jobsPerVolume)
                if rates is None:
                    pods.not_run(w, slot, "NotMeasured", f"{workload.name} measured no IOPS unthrottled: no "
                                 f"{percent}% of it to run at")
                    rows[w].levels.append(DataPathLevel(percent=percent, state=StepState.FAILED,
                                                        message="no unthrottled IOPS to take a share of"))
                    continue
                context.rates[(w, slot)] = rates
                rows[w].levels.append(DataPathLevel(percent=percent, state=StepState.RUNNING))
                keep_rows(tracker, rows)
                await runner.show(f"{workload.name} at {percent}% ({w + 1}/{len(data.workloads)})")
                throttled = await pods.run(w, slot)
                rows[w].levels[-1] = build_level(data, workload, percent, rates, throttled)
                keep_rows(tracker, rows)
            if data.localBaseline:
                await runner.show(f"{workload.name} on the nodes' own disk ({w + 1}/{len(data.workloads)})")
                rows[w].baseline = DataPathBaseline(state=StepState.RUNNING)
                keep_rows(tracker, rows)
                local = await pods.run(w, data.slots - 1)
                rows[w].baseline = build_baseline(data, workload, local, rows[w])
                keep_rows(tracker, rows)
        if data.verify:
            await runner.show("checksums of the volumes' data")
            tracker.extra[checksum.CHECKSUMS] = await pods.checksum()


def build_baseline(data: DataPathSpec, workload: DataPathWorkload, ran: PodsRun, row: DataPathRow) -> DataPathBaseline:
    """The local baseline from its pods' results (sums and merged p99 as a row's), held against the class's row."""
    local = build_row(data, workload, ran.results, ran.failures, ran.seconds, ran.nodes)
    faster = None
    if local.state == StepState.SUCCEEDED and row.state == StepState.SUCCEEDED:
        faster = (row.readMiBps or 0) + (row.writeMiBps or 0) > (local.readMiBps or 0) + (local.writeMiBps or 0)
    return DataPathBaseline(state=local.state, readMiBps=local.readMiBps, writeMiBps=local.writeMiBps,
                            readIOPS=local.readIOPS, writeIOPS=local.writeIOPS,
                            readP99=local.latency.readP99 if local.latency else None,
                            writeP99=local.latency.writeP99 if local.latency else None,
                            fasterThanLocal=faster, message=local.message)


def level_rates(row: DataPathRow, percent: int, jobs: int) -> tuple[int, int] | None:
    """fio --rate_iops per job, (read, write), for ``percent`` of what the unthrottled row reached over ``jobs``
    jobs (None: it reached nothing). A direction the row did not drive stays 0 (fio: not limited; it has no I/O)."""
    if row.state != StepState.SUCCEEDED or jobs <= 0:
        return None
    wanted = [(iops or 0.0) * percent / 100 / jobs for iops in (row.readIOPS, row.writeIOPS)]
    if not any(wanted):
        return None
    read, write = (max(1, round(value)) if value > 0 else 0 for value in wanted)
    return read, write


def build_level(data: DataPathSpec, workload: DataPathWorkload, percent: int, rates: tuple[int, int],
                ran: PodsRun) -> DataPathLevel:
    """A rate level from its pods' results: achieved IOPS against the target, merged p99 (as a row's)."""
    row = build_row(data, workload, ran.results, ran.failures, ran.seconds, ran.nodes)
    jobs = len(ran.results) * data.jobsPerVolume
    return DataPathLevel(percent=percent, state=row.state, targetIOPS=float(sum(rates) * jobs),
                         readIOPS=row.readIOPS, writeIOPS=row.writeIOPS,
                         readP99=row.latency.readP99 if row.latency else None,
                         writeP99=row.latency.writeP99 if row.latency else None,
                         startSkewSeconds=row.startSkewSeconds, skewed=row.skewed, message=row.message)


def record_metrics(run_label: str, rows: Sequence[DataPathRow]) -> None:
    """Measured rows into Prometheus, in base units (a failed or interrupted row has no measurement)."""
    for row in rows:
        if row.state != StepState.SUCCEEDED:
            continue
        latency = row.latency or DataPathLatency()
        directions = {}
        reads, writes = row.pattern in READS, row.pattern in WRITES  # only the directions the workload drives
        if reads and row.readMiBps is not None:
            directions["read"] = (row.readMiBps * MIB, row.readIOPS or 0.0, _quantiles(latency, "read"))
        if writes and row.writeMiBps is not None:
            directions["write"] = (row.writeMiBps * MIB, row.writeIOPS or 0.0, _quantiles(latency, "write"))
        METRICS.record_datapath(run_label, row.name, row.durationSeconds, directions)


QUANTILES = {"0.5": "P50", "0.9": "P90", "0.99": "P99", "0.999": "P999"}  # Prometheus quantile -> status field


def _quantiles(latency: DataPathLatency, direction: str) -> dict[str, float | None]:
    return {quantile: getattr(latency, direction + field) for quantile, field in QUANTILES.items()}


def interrupt_parts(row: DataPathRow) -> None:
    """A rate level or the local baseline under way when the step was cut short: interrupted, without numbers."""
    parts: list[DataPathLevel | DataPathBaseline] = [*row.levels, *([row.baseline] if row.baseline else [])]
    for part in parts:
        if part.state == StepState.RUNNING:
            for name in ("targetIOPS", "readIOPS", "writeIOPS", "readP99", "writeP99", "readMiBps", "writeMiBps",
                         "startSkewSeconds", "skewed", "fasterThanLocal"):
                if name in type(part).model_fields:
                    setattr(part, name, None)
            part.state = StepState.INTERRUPTED
            part.message = INTERRUPTED_MESSAGE


RESULTS = ResultTable("dataPath", DataPathRow, ("readMiBps", "writeMiBps", "readIOPS", "writeIOPS",
                                                "minVolumeMiBps", "maxVolumeMiBps", "latency"), record_metrics,
                      interrupt_parts)


