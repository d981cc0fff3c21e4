"""The database step: a PVC of the class under test, one pod with PostgreSQL on it and pgbench beside it running
the whole matrix, its rows read from the pod's log while it runs, then the pod and the PVC deleted.

Order: create the claim and wait until it is Bound (on a WaitForFirstConsumer class, until the API stored it:
it binds when the pod is scheduled), create the pod, and while it runs read its log through ``pods/log`` every
``LOG_INTERVAL_SECONDS``; each finished row goes into status at once (``kubectl get br`` shows "5/12 runs").
The log is read whole each time rather than followed: rows are keyed by their index, so a re-read is idempotent
and survives an API server restart or a dropped stream, and the log stays small (``pgbench -i -q``, progress
every 10 s). When the pod has ended (or the step's timeout came) the log is read once more, the rows are final,
the pod is deleted (PostgreSQL gets a fast shutdown) and then the claim, each waited for until it and its volume
are gone. The step's clock covers all of it; each row has its own wall time.

A row fails with the tools' own words (``pgbench -i failed (exit 1): PANIC: could not write to file
"pg_wal/xlogtemp.42": No space left on device; pgbench: error: PQputline failed``); rows after a failed
initialization are not run and say so. A server that never starts (initdb fails, a setting PostgreSQL refuses)
fails the step with ``ServerFailedToStart`` and its own words, before any row: every row says it was not run.
Every object carries the run's labels, so cleanup removes whatever an interruption leaves; after an operator
restart the step is restored (its pod and claim deleted, untimed) and measured again from scratch, and a row cut
short is never a measurement.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from csibench.api.models import DatabaseRow, DatabaseRowKind, StepState
from csibench.api.text import shorten
from csibench.engine import judges
from csibench.engine.judges import Verdict
from csibench.engine.observed import CLAIM, POD
from csibench.engine.results import ResultTable, keep_rows
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.database import pgbench
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches, finished_log, remove_pods_then_claim
from csibench.kube.client import ApiError
from csibench.metrics import METRICS

LOG_INTERVAL_SECONDS = 2.0
SLACK_SECONDS = 300  # pod start, initdb, PostgreSQL's start and shutdown
INIT_SECONDS = 300  # per scale, plus one second per scale unit (measured: scale 10000 in 41 minutes elsewhere)
SUMMARIES = "summaries"
GRACE_SECONDS = 30  # the pod's terminationGracePeriodSeconds: PostgreSQL's fast shutdown ends with a checkpoint


def timeout_of(context: StepContext) -> float:
    """timeouts.database, else the matrix's own length plus room for each initialization."""
    data = context.spec.database
    assert data is not None
    own = context.spec.timeouts.own("database")
    if own is not None:
        return float(own)
    runs = sum(data.durationSeconds.of(mode) + data.pauseSeconds for mode in data.modes) * len(data.clients)
    phases = data.phasePauseSeconds * len(data.modes)
    return float(sum(INIT_SECONDS + scale + runs + phases for scale in data.scales) + SLACK_SECONDS)


def progress_of(rows: Sequence[DatabaseRow]) -> str:
    """"5/12 runs", and which initialization is under way."""
    runs = [row for row in rows if row.kind == DatabaseRowKind.RUN]
    done = sum(1 for row in runs if row.state in (StepState.SUCCEEDED, StepState.FAILED))
    text = f"{done}/{len(runs)} runs"
    initializing = next((row for row in rows if row.kind == DatabaseRowKind.INITIALIZE
                         and row.state == StepState.RUNNING), None)
    return text + (f", initializing scale {initializing.scale}" if initializing else "")


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """Run the matrix (the caller wrote status and started nothing yet); the tracker's clock covers it all."""
    data = context.spec.database
    assert data is not None and step.companion is not None
    planned = pgbench.matrix(data)
    rows = [row.model_copy() for row in planned]
    tracker.extra = {SUMMARIES: []}
    keep_rows(tracker, rows)
    timeout = timeout_of(context)
    pod = tracker.objects[0]
    with RESULTS.measuring(tracker, rows):
        claim = step.companion.object_name(context.names, 0)
        volume = StepTracker(f"{step.name}-volume", [claim])
        bound = judges.claim_seen if context.wffc else judges.claim_bound
        await runner.batch(CLAIM, volume, bound(context.observed, frozenset({"ProvisioningFailed"})),
                           runner.companion_creator(step, context, volume), timeout)
        if not volume.outcomes[claim].ok:
            outcome = volume.outcomes[claim]
            why = f"the database's claim {claim} did not bind ({outcome.reason}): {outcome.message}"
            pgbench.not_run(rows, why)
            rows[0].message = shorten(why, pgbench.MAX_MESSAGE)
            keep_rows(tracker, rows)
            tracker.mark_submitted(pod, volume.submitted.get(claim, outcome.at))
            tracker.record(pod, Verdict(False, outcome.reason, shorten(why, 600)), outcome.at)
        else:
            rows[:] = await _run_pod(runner, step, tracker, context, planned, rows, timeout)  # in place: measuring
        await remove_pods_then_claim(runner, step, context, [pod], claim, timeout=timeout)


async def _run_pod(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext,
                   planned: list[DatabaseRow], rows: list[DatabaseRow], timeout: float) -> list[DatabaseRow]:
    pod = tracker.objects[0]
    run = StepTracker(f"{step.name}-pod", [pod])
    reader = asyncio.create_task(_follow(runner, tracker, pod, planned, rows))
    try:
        await runner.batch(POD, run, step.judge_in(context), runner.creator(step, context, run), timeout)
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
    outcome = run.outcomes[pod]
    log, unavailable = await finished_log(runner, pod)
    if unavailable is not None and outcome.ok:
        outcome = type(outcome)(False, outcome.at, *unavailable)
    rows, summaries = pgbench.build_rows(planned, log)
    startup = pgbench.startup_failure(pgbench.read_log(log))
    told = next((row for row in rows if row.state == StepState.FAILED), None)  # the tools' own words
    if not outcome.ok:
        why = outcome.message or outcome.reason
        pgbench.not_run(rows, f"{outcome.reason}: {why}" if outcome.reason == "Timeout" else why)
    else:
        pgbench.not_run(rows, "the pod ended before this row ran")
    failed = told or next((row for row in rows if row.state == StepState.FAILED), None)
    if startup is not None:  # no row ran: the server's own failure, not the first row's
        verdict = Verdict(False, pgbench.SERVER_FAILED_TO_START, startup)
    elif failed is None:
        verdict = Verdict(True)
    elif told is not None:
        verdict = Verdict(False, "InitializationFailed" if told.kind == DatabaseRowKind.INITIALIZE else "RunFailed",
                          told.message or "")
    else:
        verdict = Verdict(False, outcome.reason if not outcome.ok else "RowsNotRun", failed.message or "")
    tracker.mark_submitted(pod, run.submitted.get(pod, outcome.at))
    tracker.record(pod, verdict, outcome.at)
    assert tracker.extra is not None
    tracker.extra[SUMMARIES] = summaries
    keep_rows(tracker, rows)
    await runner.show(progress_of(rows))
    return rows


async def _follow(runner: Batches, tracker: StepTracker, pod: str, planned: list[DatabaseRow],
                  rows: list[DatabaseRow]) -> None:
    """While the pod runs: its log every few seconds; status gets each row as it finishes."""
    shown = ""
    while True:
        try:
            log = await runner.pod_log(pod)
        except ApiError:
            log = ""  # not started yet (or the API is away): try again
        if log:
            rows[:] = pgbench.build_rows(planned, log)[0]
            keep_rows(tracker, rows)
        progress = progress_of(rows)
        states = progress + "".join(row.state.value for row in rows)
        if states != shown:
            shown = states
            await runner.show(progress)
        await asyncio.sleep(LOG_INTERVAL_SECONDS)


def record_metrics(run_label: str, rows: Sequence[DatabaseRow]) -> None:
    """Measured rows into Prometheus, in base units (a failed or interrupted row has no measurement)."""
    for row in rows:
        if row.state != StepState.SUCCEEDED:
            continue
        if row.kind == DatabaseRowKind.INITIALIZE and row.durationSeconds is not None:
            METRICS.record_database_initialize(run_label, row.scale, row.durationSeconds)
        elif row.kind == DatabaseRowKind.RUN and row.tps is not None and row.mode is not None:
            METRICS.record_database_run(
                run_label, row.scale, row.mode.value, row.clients or 0, row.tps,
                row.latencyAverageMs / 1000 if row.latencyAverageMs is not None else None,
                row.latencyStddevMs / 1000 if row.latencyStddevMs is not None else None,
                row.walBytes, row.failedTransactions)


RESULTS = ResultTable("database", DatabaseRow, ("durationSeconds", "tps", "latencyAverageMs", "latencyStddevMs",
                                                "transactions", "failedTransactions", "walBytes"), record_metrics)

