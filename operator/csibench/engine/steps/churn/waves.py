"""The churn's clock: waves started on time (or late, when ``maxWavesInFlight`` holds them), each through its four
phases as timed batches side by side with the other waves', and a window closed every ``windowSeconds``.

Every planned wave starts, late if it must: the work is the same however slow the storage is, and lateness is a
measure of its own (``wavesLate``); each phase of a wave has the step's timeout. A window is closed a second after
its end (events stamped before its end may still be on their way to the loop), and its row rebuilt from every
phase's outcomes once the last wave ended, so an event that came late still lands in the window it belongs to.
Leaks and memory are read when a window closes and kept as read then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from csibench.api.churn import PHASES, ChurnSpec, ChurnWindow
from csibench.engine import judges
from csibench.engine.judges import Verdict
from csibench.engine.observed import CLAIM, POD, Observed
from csibench.engine.results import keep_rows
from csibench.engine.step import StepContext, StepSpec
from csibench.engine.steps.churn import windows as w
from csibench.engine.steps.churn.table import RESULTS
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches
from csibench.observe.queries import MEMORY_NAME

log = logging.getLogger(__name__)

CLOSE_GRACE_SECONDS = 1.0  # a window closes this long after its end: events stamped before it reach the loop
LATE_SECONDS = 1.0  # a wave that starts more than this after its time is late


@dataclass
class Churn:
    """What the churn has done so far: each wave's phase trackers, when each wave started, and the rows."""

    spec: ChurnSpec
    started: float  # monotonic: the step's clock started
    phases: list[tuple[str, StepTracker]] = field(default_factory=list)
    starts: list[tuple[float, bool]] = field(default_factory=list)  # (seconds after start, late)
    finished: dict[str, str | None] = field(default_factory=dict)  # claims of finished waves -> their PV
    rows: list[ChurnWindow] = field(default_factory=list)
    in_flight: int = 0
    ended: float | None = None  # seconds after start: the last wave finished

    def completions(self) -> list[w.Completion]:
        found = []
        for phase, tracker in self.phases:
            for name, outcome in tracker.outcomes.items():
                submitted = tracker.submitted.get(name, outcome.at)
                found.append(w.Completion(phase, outcome.at - self.started, outcome.at - submitted, outcome.ok,
                                          outcome.reason, outcome.message))
        return found

    def row(self, index: int) -> ChurnWindow:
        """Window ``index``'s row from what is known now (leaks and memory kept from its first build)."""
        windows, length = self.spec.windows, float(self.spec.windowSeconds)
        ended = self.ended if self.ended is not None else time.monotonic() - self.started
        bounds = w.window_bounds(index, length, windows, float(self.spec.durationSeconds), ended)
        duration = float(self.spec.durationSeconds)
        ended_in = [c for c in self.completions() if w.window_of(c.at, length, windows, duration) == index]
        waves = [late for at, late in self.starts if w.window_of(at, length, windows, duration) == index]
        row = w.build_window(index, bounds, index >= windows, ended_in, len(waves), sum(waves))
        if index < len(self.rows):
            kept = self.rows[index]
            row.leaks, row.leaked, row.memory = kept.leaks, kept.leaked, kept.memory
        return row


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """Run the churn (the caller wrote status and started nothing yet); the tracker's clock covers it all, and
    stops when the last wave ended."""
    spec = context.spec.churn
    assert spec is not None and step.companion is not None
    rows: list[ChurnWindow] = []
    with RESULTS.measuring(tracker, rows):
        churn = Churn(spec, tracker.started or time.monotonic(), rows=rows)
        closing = asyncio.create_task(_close_windows(runner, step, churn, context, tracker), name="churn:windows")
        slots = asyncio.Semaphore(spec.maxWavesInFlight)
        waves: list[asyncio.Task[None]] = []
        try:
            for wave in range(spec.waves):
                due = churn.started + wave * spec.everySeconds
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                await slots.acquire()
                now = time.monotonic()
                churn.starts.append((now - churn.started, now - due > LATE_SECONDS))
                churn.in_flight += 1
                waves.append(asyncio.create_task(_wave(runner, step, tracker, context, churn, wave, slots),
                                                 name=f"churn:wave-{wave}"))
            await asyncio.gather(*waves)
            churn.ended = time.monotonic() - churn.started
            await closing
        finally:
            for task in [*waves, closing]:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*waves, closing, return_exceptions=True)
        rows[:] = [churn.row(index) for index in range(len(rows))]
        keep_rows(tracker, rows)
    if churn.ended is not None:  # the clock stops when the last wave ended, not when the last window closed
        tracker.stopped = churn.started + churn.ended


async def _close_windows(runner: Batches, step: StepSpec, churn: Churn, context: StepContext,
                         tracker: StepTracker) -> None:
    """Close each window at its end (the tail once the last wave ended): its row, what finished waves left
    behind by then, and the components' memory in it."""
    spec = churn.spec
    index = 0
    while True:
        tail = index >= spec.windows
        if tail:
            while churn.ended is None:
                await asyncio.sleep(0.2)
            end = max(churn.ended, float(spec.durationSeconds))
        else:
            end = min((index + 1) * spec.windowSeconds, spec.durationSeconds)
        await asyncio.sleep(max(0.0, churn.started + end + CLOSE_GRACE_SECONDS - time.monotonic()))
        if tail and not any(w.window_of(c.at, spec.windowSeconds, spec.windows, spec.durationSeconds) == index
                            for c in churn.completions()):
            return  # nothing went on after durationSeconds: no tail
        row = churn.row(index)
        row.leaks = w.count_leaks(churn.finished, set(context.observed.pv_claim),
                                  [pv for pv, _ in context.observed.attachments.values()],
                                  await runner.array_volumes())
        before = churn.rows[-1].leaks.total if churn.rows and churn.rows[-1].leaks is not None else 0
        row.leaked = row.leaks.total - before
        anchor = tracker.anchor
        if anchor is not None:
            start = anchor.wall + row.startSeconds
            collection = await runner.collect_window(f"{tracker.name} window {index}", start,
                                                     anchor.wall + row.endSeconds)
            row.memory = w.memory_of(collection, MEMORY_NAME)
        churn.rows.append(row)
        keep_rows(tracker, churn.rows)
        runner.record_rows(step, tracker)
        await runner.show(f"window {index + 1}/{spec.windows}{' (tail)' if tail else ''}: "
                          f"{len(churn.starts)}/{spec.waves} waves started, {churn.in_flight} going")
        if tail:
            return
        index += 1


async def _wave(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext, churn: Churn,
                wave: int, slots: asyncio.Semaphore) -> None:
    """One wave through its four phases; its claims' outcomes into the step's tracker (done when every phase of
    a claim ended well; else its first failure)."""
    spec, observed = churn.spec, context.observed
    assert step.companion is not None
    first = wave * spec.waveSize
    claims = [step.object_name(context.names, first + i) for i in range(spec.waveSize)]
    pods = [step.companion.object_name(context.names, first + i) for i in range(spec.waveSize)]
    pod_of = dict(zip(claims, pods, strict=True))
    timeout = float(context.spec.timeouts.for_step(step.name))
    trackers: dict[str, StepTracker] = {}
    try:
        def phase(name: str, objects: list[str]) -> StepTracker:
            made = StepTracker(f"{step.name}-w{wave}-{name}", objects)
            trackers[name] = made
            churn.phases.append((name, made))
            return made
        create = phase(PHASES[0], claims)
        await runner.batch(CLAIM, create, step.judge_in(context), runner.creator(step, context, create), timeout,
                           progress=False)
        bound = [claim for claim in claims if _ok(create, claim)]
        publish = phase(PHASES[1], [pod_of[claim] for claim in bound])
        await runner.batch(POD, publish, judges.pod_ready(observed, judges.PUBLISH_FAILED),
                           runner.companion_creator(step, context, publish), timeout, progress=False)
        seen = observed.uids_of(POD)
        unpublish = phase(PHASES[2], [pod for pod in publish.active if pod in seen])
        await runner.batch(POD, unpublish, judges.pod_gone_and_detached(observed, frozenset()),
                           runner.companion_remover(step, unpublish), timeout, progress=False)
        made = observed.uids_of(CLAIM)
        delete = phase(PHASES[3], [claim for claim in claims if claim in made])
        await runner.batch(CLAIM, delete, judges.claim_and_volume_gone(observed, frozenset()),
                           runner.remover(step, delete), timeout, progress=False)
        for claim in claims:
            _record(tracker, claim, pod_of[claim], trackers)
            churn.finished[claim] = observed.volume_of(claim) or _volume_seen(observed, claim)
    finally:
        churn.in_flight -= 1
        slots.release()


def _ok(tracker: StepTracker, name: str) -> bool:
    outcome = tracker.outcomes.get(name)
    return outcome is not None and outcome.ok


def _volume_seen(observed: Observed, claim: str) -> str | None:
    state = observed.claims.get(claim)
    return state.volume if state is not None else None


def _record(tracker: StepTracker, claim: str, pod: str, phases: dict[str, StepTracker]) -> None:
    """A claim's outcome in the step: its whole cycle, from its create's submission to its delete's end; the
    first phase that failed (or never ran for it) decides a failure."""
    create = phases[PHASES[0]]
    tracker.mark_submitted(claim, create.submitted.get(claim))
    ends: list[float] = []
    for name in PHASES:
        made = phases.get(name)
        subject = pod if name in (PHASES[1], PHASES[2]) else claim
        outcome = made.outcomes.get(subject) if made is not None else None
        if outcome is None:
            tracker.record(claim, Verdict(False, "NotRun", f"its {name} did not run: an earlier phase failed"),
                           max(ends or [time.monotonic()]))
            return
        if not outcome.ok:
            tracker.record(claim, Verdict(False, outcome.reason, f"{name}: {outcome.message}"), outcome.at)
            return
        ends.append(outcome.at)
    tracker.record(claim, judges.DONE, max(ends))
