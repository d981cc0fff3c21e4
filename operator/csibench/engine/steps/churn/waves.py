"""The churn's clock: waves started on time (or late, when ``maxWavesInFlight`` holds them), each through its four
phases as timed batches side by side with the other waves', and a window closed every ``windowSeconds``.

A wave starts at its time, or as soon as a slot frees after it (late: ``lateSeconds`` says by how much); a wave
that could not start before ``durationSeconds`` ended never starts, and its volumes fail as ``NotStarted``: the
storage did not keep up with the target rate, and the run says so instead of running past its duration. Each phase
of a wave has the step's timeout, so the tail (the waves still going at the duration's end) is bounded too.

A window is closed a second after its end (events stamped before its end may still be on their way to the loop);
its leaks are read then (the array asked with a wait shorter than a window), and its memory is asked of Prometheus
in a task of its own, so a slow Prometheus never delays the next window. The rows are rebuilt from every phase's
outcomes once the last wave ended, so an event that came late still lands in the window it belongs to; leaks and
memory are kept as read. A finished wave's phase trackers are folded into completions and dropped, so what the
churn holds grows with its completions, not with four trackers per wave.
"""

from __future__ import annotations

import asyncio
import contextlib
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

CLOSE_GRACE_SECONDS = 1.0  # a window closes this long after its end: events stamped before it reach the loop
ARRAY_WAIT_SECONDS = 10.0  # at most this (and half a window) for the array's answer at a window's end
NOT_STARTED = "NotStarted"


@dataclass
class Churn:
    """What the churn has done so far: the finished waves' completions, the going waves' phase trackers, when
    each wave started, what finished waves left, and the rows."""

    spec: ChurnSpec
    started: float  # monotonic: the step's clock started
    completed: list[w.Completion] = field(default_factory=list)  # of finished waves
    live: dict[int, list[tuple[str, StepTracker]]] = field(default_factory=dict)  # going waves' phases
    starts: list[tuple[float, float]] = field(default_factory=list)  # (seconds after start, seconds late)
    finished: dict[str, str | None] = field(default_factory=dict)  # claims of finished waves -> their volume
    leaked: set[str] = field(default_factory=set)  # volumes found leaked so far (they stay leaked)
    answered: bool = False  # the array answered at some window's end
    rows: list[ChurnWindow] = field(default_factory=list)
    in_flight: int = 0
    ended: float | None = None  # seconds after start: the last wave finished
    memory: list[asyncio.Task[None]] = field(default_factory=list)  # each window's ask of Prometheus

    def completions_of(self, phases: list[tuple[str, StepTracker]]) -> list[w.Completion]:
        found = []
        for phase, tracker in phases:
            for name, outcome in tracker.outcomes.items():
                submitted = tracker.submitted.get(name, outcome.at)
                found.append(w.Completion(phase, outcome.at - self.started, outcome.at - submitted, outcome.ok,
                                          outcome.reason, outcome.message))
        return found

    def all_completions(self) -> list[w.Completion]:
        return self.completed + [c for phases in self.live.values() for c in self.completions_of(phases)]

    def build_rows(self, indexes: range) -> list[ChurnWindow]:
        """Windows ``indexes``' rows from what is known now (leaks and memory kept from their first build)."""
        spec = self.spec
        windows, length, duration = spec.windows, float(spec.windowSeconds), float(spec.durationSeconds)
        ended = self.ended if self.ended is not None else time.monotonic() - self.started
        ended_in = w.by_window(self.all_completions(), length, windows, duration)
        lateness: dict[int, list[float]] = {}
        for at, late in self.starts:
            lateness.setdefault(w.window_of(at, length, windows, duration), []).append(late)
        rows = []
        for index in indexes:
            bounds = w.window_bounds(index, length, windows, duration, ended)
            row = w.build_window(index, bounds, index >= windows, ended_in.get(index, []), lateness.get(index, []))
            if index < len(self.rows):
                kept = self.rows[index]
                row.leaks, row.leaked, row.memory = kept.leaks, kept.leaked, kept.memory
            rows.append(row)
        return rows

    def tail_has_work(self) -> bool:
        duration = float(self.spec.durationSeconds)
        return any(c.at >= duration for c in self.all_completions()) or any(at >= duration for at, _ in self.starts)


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """Run the churn (the caller wrote status and started nothing yet); the tracker's clock covers it all, and
    stops when the last wave ended. A failure of the window task ends the step at once, not at the churn's end."""
    spec = context.spec.churn
    assert spec is not None and step.companion is not None
    rows: list[ChurnWindow] = []
    with RESULTS.measuring(tracker, rows):
        churn = Churn(spec, tracker.started or time.monotonic(), rows=rows)
        closing = asyncio.create_task(_close_windows(runner, step, churn, context, tracker), name="churn:windows")
        churn_waves = asyncio.create_task(_start_waves(runner, step, tracker, context, churn), name="churn:waves")
        try:
            done, _ = await asyncio.wait({closing, churn_waves}, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # an error of either ends the step now
            await asyncio.gather(*churn.memory)
        finally:
            for task in [churn_waves, closing, *churn.memory]:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(churn_waves, closing, *churn.memory, return_exceptions=True)
        rows[:] = churn.build_rows(range(len(rows)))
        keep_rows(tracker, rows)
    if churn.ended is not None:  # the clock stops when the last wave ended, not when the last window closed
        tracker.stopped = churn.started + churn.ended


async def _start_waves(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext,
                       churn: Churn) -> None:
    """Each wave at its time, or once a slot frees; none after the duration (its volumes: NotStarted)."""
    spec = churn.spec
    slots = asyncio.Semaphore(spec.maxWavesInFlight)
    waves: list[asyncio.Task[None]] = []
    try:
        for wave in range(spec.waves):
            due = churn.started + wave * spec.everySeconds
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            try:
                async with asyncio.timeout(max(0.0, churn.started + spec.durationSeconds - time.monotonic())):
                    await slots.acquire()
            except TimeoutError:
                _not_started(step, tracker, context, churn, range(wave, spec.waves))
                break
            now = time.monotonic()
            churn.starts.append((now - churn.started, max(0.0, now - due)))
            churn.in_flight += 1
            waves.append(asyncio.create_task(_wave(runner, step, tracker, context, churn, wave, slots),
                                             name=f"churn:wave-{wave}"))
        await asyncio.gather(*waves)
        churn.ended = time.monotonic() - churn.started  # the window task closes the tail then
    finally:
        for task in waves:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*waves, return_exceptions=True)


def _not_started(step: StepSpec, tracker: StepTracker, context: StepContext, churn: Churn, waves: range) -> None:
    spec, now = churn.spec, time.monotonic()
    message = (f"its wave was due before durationSeconds ({spec.durationSeconds} s), but maxWavesInFlight "
               f"({spec.maxWavesInFlight}) waves were still going until then: the storage did not keep up with the "
               "target rate")
    for wave in waves:
        for index in range(wave * spec.waveSize, (wave + 1) * spec.waveSize):
            claim = step.object_name(context.names, index)
            tracker.mark_submitted(claim, now)
            tracker.record(claim, Verdict(False, NOT_STARTED, message), now)


async def _close_windows(runner: Batches, step: StepSpec, churn: Churn, context: StepContext,
                         tracker: StepTracker) -> None:
    """Close each window at its end (the tail once the last wave ended): its row and what finished waves left
    behind by then; its memory is asked in a task of its own (``churn.memory``, awaited once the churn ended)."""
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
        if tail and not churn.tail_has_work():
            return  # nothing went on after durationSeconds: no tail
        (row,) = churn.build_rows(range(index, index + 1))
        array = await runner.array_volumes(min(ARRAY_WAIT_SECONDS, spec.windowSeconds / 2))
        churn.answered = churn.answered or not isinstance(array, str)
        row.leaks = w.count_leaks(churn.finished, set(context.observed.pv_claim),
                                  [pv for pv, _ in context.observed.attachments.values()], array, churn.leaked,
                                  churn.answered)
        before = churn.rows[-1].leaks.total if churn.rows and churn.rows[-1].leaks is not None else 0
        row.leaked = max(0, row.leaks.total - before)
        churn.rows.append(row)
        keep_rows(tracker, churn.rows)
        runner.record_rows(step, tracker)
        if tracker.anchor is not None:
            churn.memory.append(asyncio.create_task(_memory(runner, tracker, churn, row),
                                                    name=f"churn:memory-{index}"))
        where = "the tail" if tail else f"window {index + 1}/{spec.windows}"
        await runner.show(f"{where}: {len(churn.starts)}/{spec.waves} waves started, {churn.in_flight} going")
        if tail:
            return
        index += 1


async def _memory(runner: Batches, tracker: StepTracker, churn: Churn, row: ChurnWindow) -> None:
    """The CSI components' peak memory in a window (spec.collect), into its row once Prometheus answered."""
    anchor = tracker.anchor
    assert anchor is not None
    collection = await runner.collect_window(f"{tracker.name} window {row.index}", anchor.wall + row.startSeconds,
                                             anchor.wall + row.endSeconds)
    row.memory = w.memory_of(collection, MEMORY_NAME)
    keep_rows(tracker, churn.rows)


async def _wave(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext, churn: Churn,
                wave: int, slots: asyncio.Semaphore) -> None:
    """One wave through its four phases; its claims' outcomes into the step's tracker (done when every phase of
    a claim ended well; else its first failure). Its phase trackers are folded into completions at its end."""
    trackers: dict[str, StepTracker] = {}
    churn.live[wave] = []
    try:
        spec, observed, companion = churn.spec, context.observed, step.companion
        assert companion is not None and step.manifest is not None
        first = wave * spec.waveSize
        claim_index = {step.object_name(context.names, first + i): first + i for i in range(spec.waveSize)}
        pod_index = {companion.object_name(context.names, first + i): first + i for i in range(spec.waveSize)}
        claims, pods = list(claim_index), list(pod_index)
        pod_of = dict(zip(claims, pods, strict=True))
        timeout = float(context.spec.timeouts.for_step(step.name))
        manifest, pod_manifest = step.manifest, companion.manifest

        def phase(name: str, objects: list[str]) -> StepTracker:
            made = StepTracker(f"{step.name}-w{wave}-{name}", objects)
            trackers[name] = made
            churn.live[wave].append((name, made))
            return made
        create = phase(PHASES[0], claims)
        await runner.batch(CLAIM, create, step.judge_in(context), runner.creating(
            step.resource, lambda name: manifest(context, claim_index[name]), create), timeout, progress=False)
        publish = phase(PHASES[1], [pod_of[claim] for claim in claims if _ok(create, claim)])
        await runner.batch(POD, publish, judges.pod_ready(observed, judges.PUBLISH_FAILED), runner.creating(
            companion.resource, lambda name: pod_manifest(context, pod_index[name]), publish), timeout,
            progress=False)
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
            churn.finished[claim] = _volume(observed, claim)
    finally:
        churn.completed += churn.completions_of(churn.live.pop(wave, []))
        churn.in_flight -= 1
        slots.release()


def _ok(tracker: StepTracker, name: str) -> bool:
    outcome = tracker.outcomes.get(name)
    return outcome is not None and outcome.ok


def _volume(observed: Observed, claim: str) -> str | None:
    """The volume a claim was bound to; for one never seen bound, the name external-provisioner gives its
    volume (``pvc-<claim uid>``, its default prefix): a CreateVolume still going when the claim was deleted
    makes that volume, and it is the array's to say whether it is still there."""
    bound = observed.volume_of(claim)
    state = observed.claims.get(claim)
    return bound or (f"pvc-{state.uid}" if state is not None and state.uid else None)


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
            why = "the watch never saw it" if ends else "an earlier phase failed"
            tracker.record(claim, Verdict(False, "NotRun", f"its {name} did not run: {why}"),
                           max(ends or [time.monotonic()]))
            return
        if not outcome.ok:
            tracker.record(claim, Verdict(False, outcome.reason, f"{name}: {outcome.message}"), outcome.at)
            return
        ends.append(outcome.at)
    tracker.record(claim, judges.DONE, max(ends))
