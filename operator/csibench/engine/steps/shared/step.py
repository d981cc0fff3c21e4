"""The sharedVolume step: a ReadWriteMany claim of the run's class, ``pods`` probe pods mounting it at once (spread
over the nodes by a preferred pod anti-affinity among them), each running ``probe.py``; when every pod has ended,
their logs are read through ``pods/log`` and become one row per phase (``rows.py``); then the pods and the claim
are deleted, each waited for until it and its volume are gone. The step's clock covers all of it; each row has
the phase's own time.

A claim that does not bind (a class that refuses ReadWriteMany says so in its ProvisioningFailed) fails the step
with the provisioner's words and no pod is made. A pod that fails says why in its row (the probe's words: which
pods never reached a barrier, an OSError with its path) and the others stop at their next barrier when their own
deadline (the step's timeout less a minute) passes, so every log is readable before the step's timeout. Every
object carries the run's labels; after an operator restart the step is restored (pods and claim deleted,
untimed) and measured again from scratch.

On ReadOnlyMany: the ReadWriteOnce claim first, filled by one pod (then deleted, so its volume is unmounted), then
its ReadOnlyMany clone, then the readers, given one start time once they all run (the data path's start barrier);
the rows are the listing and fio (reads). Every claim and pod is removed at the end, on every path.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Sequence

from csibench.api.models import SharedAccessMode, SharedRow, SharedSpec, StepState
from csibench.api.text import collapse_lines, shorten
from csibench.engine import barrier, judges
from csibench.engine.judges import Verdict
from csibench.engine.observed import CLAIM, POD
from csibench.engine.results import ResultTable, keep_rows
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.shared import rows as shared_rows
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches, finished_log, release_start, remove_pods, remove_pods_then_claim
from csibench.metrics import METRICS

BASE_SECONDS = 600  # pods start, claim bound, the phases' barriers
# Room per operation, far beyond a local array's (tens of microseconds) for a slow share: a visibility round waits
# up to two poll intervals besides; lock rounds of all pods are serialised; a pod's small files go through create,
# stat and delete; pod 0 creates the listing's files, then every pod reads them.
SECONDS_PER_OPERATION = 0.01
PROBE_MARGIN_SECONDS = 60  # the probes give up this long before the step does, so their logs say why
HISTOGRAMS = "histograms"
PROBE_FAILED = "ProbeFailed"
SEED, READ_ONLY_CLONE = 0, 1  # the companion claims on ReadOnlyMany: filled first, then cloned read-only
NOT_BOUND, NOT_FILLED = "ClaimNotBound", "NotFilled"  # why readers never ran: a claim, or the filling pod
START_TIMEOUT_SECONDS = 300  # the readers' start barrier: how long it waits for every reader to run


def timeout_of(context: StepContext) -> float:
    data = context.spec.shared
    assert data is not None
    own = context.spec.timeouts.own("sharedVolume")
    if own is not None:
        return float(own)
    rounds = data.files * (2 * data.pollMilliseconds / 1000 + SECONDS_PER_OPERATION)
    operations = (data.pods * data.lockRounds + 3 * data.smallFiles + 2 * data.listFiles) * SECONDS_PER_OPERATION
    return float(math.ceil(BASE_SECONDS + rounds + operations + data.fioSeconds))


def probe_timeout(step_timeout: float) -> int:
    """Whole seconds the probes have (their own deadline, before the step's): never under one."""
    return max(1, math.ceil(max(step_timeout / 2, step_timeout - PROBE_MARGIN_SECONDS)))


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """Claim, pods, rows, removal (the caller wrote status and started nothing yet)."""
    data = context.spec.shared
    assert data is not None and step.companion is not None
    rows = shared_rows.pending_rows(data.listFiles, data.fioSeconds, read_only(data))
    tracker.extra = {HISTOGRAMS: {}}
    keep_rows(tracker, rows)
    timeout = timeout_of(context)
    pods = list(tracker.objects)
    if read_only(data):
        with RESULTS.measuring(tracker, rows):
            await _measure_read_only(runner, step, tracker, context, rows, timeout)
        return
    with RESULTS.measuring(tracker, rows):
        claim = step.companion.object_name(context.names, 0)
        volume = StepTracker(f"{step.name}-volume", [claim])
        bound = judges.claim_seen if context.wffc else judges.claim_bound
        await runner.batch(CLAIM, volume, bound(context.observed, frozenset({"ProvisioningFailed"})),
                           runner.companion_creator(step, context, volume), timeout)
        outcome = volume.outcomes[claim]
        if not outcome.ok:
            why = shorten(f"the shared claim {claim} did not bind ({outcome.reason}): {outcome.message}", 600)
            rows[:] = shared_rows.build_rows([], data.listFiles, data.fioSeconds, why)
            for pod in pods:
                tracker.mark_submitted(pod, volume.submitted.get(claim, outcome.at))
                tracker.record(pod, Verdict(False, outcome.reason, why), outcome.at)
        else:
            for row in rows:
                row.state = StepState.RUNNING
            keep_rows(tracker, rows)
            await runner.show(f"{len(pods)} pods probing {claim}")
            rows[:] = await _run_pods(runner, step, tracker, context, pods, timeout)
        keep_rows(tracker, rows)
        await remove_pods_then_claim(runner, step, context, pods, claim, timeout=timeout)


def _pod_failure(reason: str, message: str | None, log: str) -> str:
    """Why a pod whose probe said nothing failed: its log's own lines (a probe that never started: python3's or
    the shell's words), else Kubernetes'."""
    words = collapse_lines([line for line in log.splitlines() if not line.startswith(shared_rows.MARKER)],
                           shared_rows.MAX_MESSAGE)
    return f"{reason}: {words or message or 'the pod did not finish'}"


def read_only(data: SharedSpec) -> bool:
    return data.accessMode == SharedAccessMode.READ_ONLY_MANY


async def _claim(runner: Batches, step: StepSpec, context: StepContext, index: int,
                 timeout: float) -> tuple[str, str | None]:
    """Companion claim ``index`` made and waited for until bound (seen, on a WaitForFirstConsumer class); its
    name, and why it did not bind (None: it did)."""
    assert step.companion is not None
    claim = step.companion.object_name(context.names, index)
    volume = StepTracker(f"{step.name}-volume-{index}", [claim])
    bound = judges.claim_seen if context.wffc else judges.claim_bound
    await runner.batch(CLAIM, volume, bound(context.observed, frozenset({"ProvisioningFailed"})),
                       runner.companion_creator(step, context, volume), timeout)
    outcome = volume.outcomes[claim]
    return claim, None if outcome.ok else shorten(f"the claim {claim} did not bind ({outcome.reason}): "
                                                  f"{outcome.message}", 600)


def _fail_all(tracker: StepTracker, pods: Sequence[str], reason: str, why: str) -> None:
    now = time.monotonic()
    for pod in pods:
        if pod not in tracker.outcomes:
            tracker.mark_submitted(pod, now)
            tracker.record(pod, Verdict(False, reason, why), now)


async def _measure_read_only(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext,
                             rows: list[SharedRow], timeout: float) -> None:
    """Fill a ReadWriteOnce claim, clone it ReadOnlyMany, read the clone from every reader at once."""
    data = context.spec.shared
    assert data is not None and step.companion is not None and tracker.extra is not None
    *readers, filler = list(tracker.objects)
    claims: list[str] = [step.companion.object_name(context.names, SEED)]
    try:
        seed, why = await _claim(runner, step, context, SEED, timeout)
        reason = NOT_BOUND
        if why is None:
            await runner.show(f"filling {seed}")
            why, reason = await _fill(runner, step, tracker, context, filler, timeout), NOT_FILLED
        if why is None:
            claims.append(step.companion.object_name(context.names, READ_ONLY_CLONE))
            _, why = await _claim(runner, step, context, READ_ONLY_CLONE, timeout)
            reason = NOT_BOUND
        if why is not None:
            rows[:] = shared_rows.build_rows([], data.listFiles, data.fioSeconds, why, read_only=True)
            keep_rows(tracker, rows)
            _fail_all(tracker, [*readers, filler], reason, why)
            return
        for row in rows:
            row.state = StepState.RUNNING
        keep_rows(tracker, rows)
        await runner.show(f"{len(readers)} pods reading {claims[-1]}")
        rows[:] = await _run_pods(runner, step, tracker, context, readers, timeout, start_barrier=True)
        keep_rows(tracker, rows)
    finally:
        await remove_pods_then_claim(runner, step, context, [*readers, filler], *reversed(claims), timeout=timeout)


async def _fill(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext, filler: str,
                timeout: float) -> str | None:
    """The filling pod run to its end, then deleted (its volume unmounted before the clone); why it failed, or
    None."""
    run = StepTracker(f"{step.name}-fill", [filler])
    await runner.batch(POD, run, step.judge_in(context), runner.creator(step, context, run), timeout)
    outcome = run.outcomes[filler]
    log, unavailable = await finished_log(runner, filler)
    report = shared_rows.read_log(filler, None, log)
    error = report.error or (None if outcome.ok else _pod_failure(outcome.reason, outcome.message, log))
    error = error or (f"{unavailable[0]}: {unavailable[1]}" if unavailable is not None else None)
    if error is None and shared_rows.POPULATE not in report.phases:
        error = "it ended without saying the volume was filled"
    tracker.mark_submitted(filler, run.submitted.get(filler, outcome.at))
    tracker.record(filler, Verdict(True) if error is None else Verdict(
        False, outcome.reason if not outcome.ok else PROBE_FAILED, shorten(error, 600)), outcome.at)
    if report.phases.get(shared_rows.LISTING_CREATE):
        assert tracker.extra is not None
        tracker.extra[shared_rows.LISTING_CREATE] = report.phases[shared_rows.LISTING_CREATE]
    await remove_pods(runner, step, context, [filler], timeout)
    return None if error is None else shorten(f"filling the volume failed ({filler}): {error}", 600)


async def _run_pods(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext,
                    pods: list[str], timeout: float, start_barrier: bool = False) -> list[SharedRow]:
    """The pods run to their end and their logs read into rows; with ``start_barrier`` (the readers), given one
    start time once they all run."""
    data = context.spec.shared
    assert data is not None and tracker.extra is not None
    run = StepTracker(f"{step.name}-pod", pods)
    release = asyncio.create_task(release_start(
        runner, run, context.spec, START_TIMEOUT_SECONDS, data.startDelaySeconds, f"{step.name} readers",
        lambda start: None, "SharedNoStartTime")) if start_barrier else None
    try:
        await runner.batch(POD, run, step.judge_in(context), runner.creator(step, context, run), timeout,
                           [lambda pod: barrier.started(context.observed.pods.get(pod))] if start_barrier else ())
    finally:
        if release is not None:
            release.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await release
    reports = []
    for pod in pods:
        outcome = run.outcomes[pod]
        log, unavailable = await finished_log(runner, pod)
        state = context.observed.pods.get(pod)
        report = shared_rows.read_log(pod, state.node if state is not None else None, log)
        if report.error is None and not outcome.ok:
            report.error = _pod_failure(outcome.reason, outcome.message, log)
        elif report.error is None and unavailable is not None:
            report.error = f"{unavailable[0]}: {unavailable[1]}"
        reports.append(report)
        tracker.mark_submitted(pod, run.submitted.get(pod, outcome.at))
        verdict = Verdict(True) if report.error is None else Verdict(
            False, outcome.reason if not outcome.ok else PROBE_FAILED, shorten(report.error, 600))
        tracker.record(pod, verdict, outcome.at)
    tracker.extra[HISTOGRAMS] = shared_rows.histograms_of(reports)
    colocated = len(pods) - len({r.node for r in reports if r.node})
    if colocated > 0:
        await runner.warn("SharedPodsColocated", f"{colocated} of the {len(pods)} probe pods shared a node with "
                          "another: fewer nodes the pods could use than spec.shared.pods, so some samples did "
                          "not cross nodes")
    created = tracker.extra.get(shared_rows.LISTING_CREATE)
    return shared_rows.build_rows(reports, data.listFiles, data.fioSeconds, read_only=read_only(data),
                                  created=created if isinstance(created, dict) else None)


def record_metrics(run_label: str, rows: Sequence[SharedRow]) -> None:
    """Measured rows into Prometheus, latency in seconds."""
    for row in rows:
        if row.state != StepState.SUCCEEDED:
            continue
        quantiles = {} if row.latency is None else {
            "0.5": row.latency.p50 / 1000, "0.99": row.latency.p99 / 1000, "1": row.latency.max / 1000}
        METRICS.record_shared(run_label, row.phase.value, row.opsPerSecond, quantiles)


RESULTS = ResultTable("shared", SharedRow, ("operations", "durationSeconds", "opsPerSecond", "latency",
                                            "lostUpdates", "missing", "entries", "createSeconds"), record_metrics)
