"""How one batch of the data path's pods runs on the cluster: create them on the selected volumes, release the
start barrier once they all run (its start time set as a pod annotation, retried for a pod that runs late), wait
until each has finished, read each pod's outcome (its log through ``pods/log``; for a pod that failed without a
word of fio's, its layout container's log or what the kubelet says of its containers), record it in the step's
tracker, then delete the pods and wait until they are gone and their volumes detached.

Apart from ``step.py`` because it changes with the pods' lifecycle and the API they are driven through, while
``step.py`` changes with what the step measures (the matrix's order, rate levels, the local baseline, the rows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import BenchmarkRunSpec
from csibench.api.text import shorten
from csibench.engine import barrier, judges
from csibench.engine.fio_log import messages_of
from csibench.engine.judges import Verdict
from csibench.engine.observed import CLAIM, POD
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.datapath import checksum
from csibench.engine.steps.datapath.fio import FioFailed, VolumeResult, parse_fio_log
from csibench.engine.steps.datapath.rows import PER_POD_HISTOGRAMS, volume_record
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches, finished_log, release_start
from csibench.kube.client import ApiError

log = logging.getLogger(__name__)


PV_WAIT_SECONDS = 10.0  # a workload with zones: how long it waits for its volumes' PVs to be seen (their zones)
PV_POLL_SECONDS = 0.05


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
    volumes: int  # how many of the run's volumes the step uses (``step.selected_volumes``)
    timeout: float  # each batch's (``step.timeout_of``)

    def names(self, w: int, slot: int) -> list[str]:
        data = self.context.spec.dataPath
        assert data is not None
        first = (w * data.slots + slot) * self.volumes
        return [self.step.object_name(self.context.names, first + i) for i in range(self.volumes)]

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
        conflicts = {} if local else await self._zone_conflicts(w, names)
        active, run = await self._launch(names, label, ran, set(conflicts))
        for index, name in enumerate(names):
            if name in conflicts:
                conflict = ("VolumeZoneConflict", conflicts[name])
                self.records.append(volume_record(workload.name, context.names.volume(index), name, None, conflict))
                ran.failures.append(conflict)
                continue
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

    async def _zone_conflicts(self, w: int, names: list[str]) -> dict[str, str]:
        """Pods of workload ``w`` that could never be scheduled: their volume's PV allows one zone, not among the
        workload's zones. Each is recorded as failed at once (never created), with why. The PVs' watch may lag the
        claims' (a claim Bound before its PV is seen): up to PV_WAIT_SECONDS for the bound claims' PVs first."""
        data, context = self.context.spec.dataPath, self.context
        assert data is not None
        zones = data.workloads[w].zones
        found: dict[str, str] = {}
        if not zones:
            return found
        claims = [context.names.volume(index) for index in range(len(names))]
        deadline = time.monotonic() + PV_WAIT_SECONDS
        while not all(map(context.observed.volume_seen, claims)) and time.monotonic() < deadline:
            await asyncio.sleep(PV_POLL_SECONDS)
        for index, name in enumerate(names):
            claim = context.names.volume(index)
            zone = context.observed.zone_of(CLAIM, claim)
            if zones and zone is not None and zone not in zones and name not in self.tracker.skipped:
                found[name] = (f"volume {claim} lives in zone {zone} (its PV's node affinity), and workload "
                               f"{data.workloads[w].name} runs only in {', '.join(zones)}: a pod there cannot use it")
        now = time.monotonic()
        for name, message in found.items():
            self.tracker.mark_submitted(name, now)
            self.tracker.record(name, Verdict(False, "VolumeZoneConflict", message), now)
        return found

    async def checksum(self) -> dict[str, dict[str, str]]:
        """spec.dataPath.verify: one pod per volume checksums fio's files there (what the snapshots then take);
        volume -> {file: sha256}. A volume whose pod failed, or that holds no file of fio's, has none."""
        data, context = self.context.spec.dataPath, self.context
        assert data is not None
        first = len(data.workloads) * data.slots * self.volumes
        names = [self.step.object_name(context.names, first + i) for i in range(self.volumes)]
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

    async def _launch(self, names: list[str], label: str, ran: PodsRun | None,
                      excluded: set[str] | None = None) -> tuple[list[str], StepTracker]:
        """Create the pods of ``names`` not skipped (nor ``excluded``) and wait until each has finished; with
        ``ran``, they start together (the barrier, its start time kept in ``ran``)."""
        context, step = self.context, self.step
        active = [name for name in names if name not in self.tracker.skipped and name not in (excluded or set())]
        run = StepTracker(f"{step.name}-{label}", active)
        release = asyncio.create_task(release_barrier(self.runner, run, context.spec, ran, label)) \
            if ran is not None else None
        try:
            await self.runner.batch(POD, run, step.judge_in(context), self.runner.creator(step, context, run),
                                    self.timeout, [lambda pod: barrier.started(context.observed.pods.get(pod))])
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
                                self.runner.remover(step, removal), self.timeout)


async def release_barrier(runner: Batches, run: StepTracker, spec: BenchmarkRunSpec, ran: PodsRun,
                          label: str) -> None:
    """The data path's start barrier (``workload.release_start``), its start time kept in ``ran``."""
    data = spec.dataPath
    assert data is not None

    def started_at(start: int) -> None:
        ran.start_at = start

    await release_start(runner, run, spec, data.startTimeoutSeconds, data.startDelaySeconds, f"data path {label}",
                        started_at)


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
