"""The data-path step: for each workload in order, one fio pod per selected volume at once, spread over the
usable nodes (volume i's pods prefer node i mod N: ``spread_node``); wait until all are done; read each pod's
log through the API (``pods/log``); parse; delete the pods (and wait until they are gone and their volumes
detached); then the next workload. Each row says per node what its pods there did.

The step's clock covers the whole matrix; each row records its own wall time (pods created to the last pod
done). A pod that fails (non-zero exit, refused by the kubelet, a mount failure, the workload's timeout) fails its
row with fio's own message when its log has one; the rest of the matrix still runs. Every pod carries the run's
labels, so cleanup removes whatever an interruption leaves. After an operator restart the step is restored
(its pods deleted, untimed) and measured again from scratch, like any step: the rows start over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import (
    BenchmarkRunSpec,
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
from csibench.engine import judges
from csibench.engine.datapath import barrier, checksum
from csibench.engine.datapath.fio import MIB, FioFailed, VolumeResult, messages_of, parse_fio_log
from csibench.engine.datapath.rows import (
    PER_POD_HISTOGRAMS,
    SLOW_SHOWN,
    build_row,
    pending_row,
    row_histograms,
    slow_volumes,
    volume_record,
)
from csibench.engine.judges import Verdict
from csibench.engine.observed import POD
from csibench.engine.results import INTERRUPTED_MESSAGE, ROWS, ResultTable, keep_rows
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches, finished_log
from csibench.kube.client import ApiError
from csibench.metrics import METRICS
from csibench.preflight.checks import pacing_floor

log = logging.getLogger(__name__)
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
    pods = WorkloadPods(runner, step, tracker, context, records)
    tracker.start()
    try:
        for w, workload in enumerate(data.workloads):
            rows[w].state = StepState.RUNNING
            keep_rows(tracker, rows)
            await runner.show(f"{workload.name} ({w + 1}/{len(data.workloads)})")
            ran = await pods.run(w, 0)
            rows[w] = build_row(data, workload, ran.results, ran.failures, ran.seconds, ran.nodes)
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
    except BaseException:
        RESULTS.interrupt_step(tracker, rows)
        raise
    tracker.stopped = time.monotonic()


@dataclass
class PodsRun:
    """What one run of a workload's pods (unthrottled, or at one rate level) measured."""

    results: list[VolumeResult] = field(default_factory=list)
    nodes: list[str | None] = field(default_factory=list)  # where each of results ran
    volumes: list[str] = field(default_factory=list)  # the volume of each of results
    failures: list[tuple[str, str]] = field(default_factory=list)  # (reason, message) of the pods that failed
    seconds: float = 0.0
    start_at: int | None = None  # the barrier's start time


@dataclass
class WorkloadPods:
    """Runs one workload's pods at once on the selected volumes, started together by the barrier; records each
    pod's outcome in the step's tracker and its volume in the report; deletes them before the next run."""

    runner: Batches
    step: StepSpec
    tracker: StepTracker
    context: StepContext
    records: list[dict[str, Any]]

    def names(self, w: int, slot: int) -> list[str]:
        data = self.context.spec.dataPath
        assert data is not None
        volumes = selected_volumes(self.context.spec.volumes, data)
        first = (w * data.slots + slot) * volumes
        return [self.step.object_name(self.context.names, first + i) for i in range(volumes)]

    def not_run(self, w: int, slot: int, reason: str, message: str) -> None:
        now = time.monotonic()
        for name in self.names(w, slot):
            if name not in self.tracker.skipped:
                self.tracker.mark_submitted(name, now)
                self.tracker.record(name, Verdict(False, reason, message), now)

    async def run(self, w: int, slot: int) -> PodsRun:
        data, context = self.context.spec.dataPath, self.context
        assert data is not None
        workload = data.workloads[w]
        names = self.names(w, slot)
        level, local = data.level_of(slot), data.is_baseline(slot)
        label = f"{workload.name}-local" if local else workload.name if level is None else f"{workload.name}-{level}"
        ran = PodsRun()
        active, run = await self._launch(names, label, ran)
        for index, name in enumerate(names):
            if name not in active:
                continue
            result, failure = await _outcome(self.runner, name, run)
            node = pod.node if (pod := context.observed.pods.get(name)) is not None else None
            self._record(name, run, failure)
            record = volume_record(workload.name, context.names.volume(index), name, result, failure, node,
                                   bins=level is None and not local
                                   and len(data.workloads) * len(names) <= PER_POD_HISTOGRAMS)
            if level is not None:
                record["ratePercent"] = level
            if local:
                record["local"] = True  # an emptyDir on the node, not the volume
            self.records.append(record)
            if result is not None:
                ran.results.append(result)
                ran.nodes.append(node)
                ran.volumes.append(context.names.volume(index))
            if failure is not None:
                ran.failures.append(failure)
        ran.seconds = (run.stopped or time.monotonic()) - (run.started or time.monotonic())
        await self._remove(active, "fio")
        return ran

    async def checksum(self) -> dict[str, dict[str, str]]:
        """spec.dataPath.verify: one pod per volume checksums fio's files there (what the snapshots then take);
        volume -> {file: sha256}. A volume whose pod failed, or that holds no file of fio's, has none."""
        data, context = self.context.spec.dataPath, self.context
        assert data is not None
        volumes = selected_volumes(context.spec.volumes, data)
        first = len(data.workloads) * data.slots * volumes
        names = [self.step.object_name(context.names, first + i) for i in range(volumes)]
        active, run = await self._launch(names, "checksum", None)
        found: dict[str, dict[str, str]] = {}
        for index, name in enumerate(names):
            if name not in active:
                continue
            outcome = run.outcomes[name]
            failure: tuple[str, str] | None = None
            log, unavailable = await finished_log(self.runner, name)
            if unavailable is not None and outcome.ok:  # a pod that never ran has no log: its outcome says why
                failure = unavailable
            sums = checksum.parse_checksums(log)
            if failure is None and not (outcome.ok and sums):
                failure = (outcome.reason or "NoData",
                           messages_of(log) or outcome.message or "no file of fio's to checksum")
            self._record(name, run, failure)
            if failure is None:
                found[context.names.volume(index)] = sums
        await self._remove(active, "checksum")
        return found

    def _record(self, name: str, run: StepTracker, failure: tuple[str, str] | None) -> None:
        outcome = run.outcomes[name]
        self.tracker.mark_submitted(name, run.submitted.get(name, outcome.at))
        self.tracker.record(name, Verdict(failure is None, *(failure or ("", ""))), outcome.at)

    async def _launch(self, names: list[str], label: str, ran: PodsRun | None) -> tuple[list[str], StepTracker]:
        """Create the pods of ``names`` not skipped and wait until each has finished; with ``ran``, they start
        together (the barrier, its start time kept in ``ran``)."""
        context, step = self.context, self.step
        active = [name for name in names if name not in self.tracker.skipped]
        run = StepTracker(f"{step.name}-{label}", active)
        release = asyncio.create_task(release_barrier(self.runner, run, context.spec, ran, label)) \
            if ran is not None else None
        try:
            await self.runner.batch(POD, run, step.judge_in(context), self.runner.creator(step, context, run),
                                    timeout_of(context), [judges.pod_started(context.observed)])
        finally:
            if release is not None:
                release.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await release
        return active, run

    async def _remove(self, active: list[str], label: str) -> None:
        """Delete the pods and wait until they are gone and their volumes detached."""
        context, step = self.context, self.step
        seen = context.observed.uids_of(POD)
        removal = StepTracker(f"{step.name}-{label}-delete", [n for n in active if n in seen])
        await self.runner.batch(POD, removal, judges.pod_gone_and_detached(context.observed, frozenset()),
                                self.runner.remover(step, removal), timeout_of(context))


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


ANNOTATE_ATTEMPTS = 5  # a late pod's start time: tries, 1 s apart doubling


async def release_barrier(runner: Batches, run: StepTracker, spec: BenchmarkRunSpec, ran: PodsRun,
                          label: str) -> None:
    """The start barrier (``barrier``): once every pod of the run runs (its files laid out), or once
    startTimeoutSeconds passed, give them all one start time, startDelaySeconds ahead plus the least time the
    run's client needs to send them all (its QPS and burst). A pod the first round missed (its create still in
    flight, a failed patch) gets the same start time once it runs: it starts late, and the row's skew says so."""
    data = spec.dataPath
    assert data is not None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(run.passed(name, 0) for name in run.active)),
                               data.startTimeoutSeconds)
    sending = pacing_floor(len(run.active), 1, spec.client.qps, spec.client.burst)
    ran.start_at = barrier.start_at(time.time(), data.startDelaySeconds + sending)
    annotation = {barrier.START_ANNOTATION: str(ran.start_at)}
    missed = await runner.annotate_pods(run.active, annotation)
    if missed:
        log.info("data path %s: the start time reaches %s once they run", label, ", ".join(missed))
        await asyncio.gather(*(_annotate_when_running(runner, run, name, annotation) for name in missed))


async def _annotate_when_running(runner: Batches, run: StepTracker, name: str, annotation: dict[str, str]) -> None:
    for attempt in range(ANNOTATE_ATTEMPTS):
        if not await run.passed(name, 0):
            return  # it ended without running: its outcome says why
        if not await runner.annotate_pods([name], annotation):
            return
        await asyncio.sleep(2.0 ** attempt)
    await runner.warn("DataPathNoStartTime", f"pod {name} could not be given its start time "
                      f"({ANNOTATE_ATTEMPTS} tries): it waits until the workload's timeout")


def container_states(status: dict[str, Any] | None) -> str:
    """How the pod's containers ended, as its status says ("init container layout: terminated, exit code 1
    (Error)"; a waiting one with its reason), for a pod that failed without a word in its logs (pure)."""
    if not status:
        return ""
    parts = []
    for kind, key in (("init container", "initContainerStatuses"), ("container", "containerStatuses")):
        for container in status.get(key) or []:
            state = container.get("state") or {}
            if "terminated" in state:
                ended = state["terminated"] or {}
                detail = f"terminated, exit code {ended.get('exitCode')} ({ended.get('reason') or 'no reason'})"
                if ended.get("message"):
                    detail += f": {ended['message']}"
            elif "waiting" in state:
                detail = f"waiting ({(state['waiting'] or {}).get('reason') or 'no reason'})"
            else:
                continue
            parts.append(f"{kind} {container.get('name')}: {detail}")
    if status.get("reason") or status.get("message"):
        parts.append(f"pod: {status.get('reason') or ''} {status.get('message') or ''}".strip())
    return shorten("; ".join(parts), 600)


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


async def _outcome(runner: Batches, name: str, run: StepTracker) -> tuple[VolumeResult | None,
                                                                          tuple[str, str] | None]:
    """The pod's result, or why it has none: fio's own words from its log when there are any."""
    outcome = run.outcomes[name]
    log, unavailable = await finished_log(runner, name)
    if unavailable is not None and outcome.ok:
        return None, unavailable
    if not outcome.ok:
        message = messages_of(log)
        if not message:  # it may never have started: its init container's log says why (fio laying out files)
            with contextlib.suppress(ApiError):
                message = messages_of(await runner.pod_log(name, barrier.LAYOUT_CONTAINER))
        if not message:  # no words of fio's: what the kubelet says of its containers (exit codes, reasons)
            with contextlib.suppress(ApiError):
                message = container_states(await runner.pod_status(name))
        return None, (outcome.reason, message or outcome.message or outcome.reason)
    try:
        return parse_fio_log(log), None
    except FioFailed as error:
        return None, ("FioError", str(error))
