"""The step tracker: one clock per step (start, submit the whole batch, wait for every terminal state, stop).

The tracker records, per object, when its request left (monotonic, stamped right before submission) and when
the watch event that made it terminal arrived (stamped in the watch thread). Latency is the difference. The
step's clock stops at the last terminal event, or at the timeout; objects still pending then count as failed
with reason Timeout (quoting the last warning seen for them, if any).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from csibench.api.collect import StepCollection
from csibench.api.models import (
    MAX_FAILURE_REASONS,
    MAX_ZONES,
    FailureReason,
    RetriedWarnings,
    RetryCost,
    StepPhase,
    StepState,
    StepStatus,
    StepZone,
)
from csibench.api.text import shorten
from csibench.engine.judges import Verdict
from csibench.engine.retries import RetriedWarning, retried_warnings, retry_cost
from csibench.engine.timing import Anchor, rfc3339, summarize


@dataclass(frozen=True)
class Outcome:
    ok: bool
    at: float  # monotonic time of the terminal event
    reason: str = ""
    message: str = ""


@dataclass
class StepTracker:
    name: str
    objects: list[str]  # every object of the step, in index order
    skipped: set[str] = field(default_factory=set)
    note: str | None = None
    submitted: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    # when each boundary between two parts of an object's latency was passed (see phases): name -> {boundary: at}
    boundaries: dict[str, dict[int, float]] = field(default_factory=dict)
    phase_names: tuple[str, ...] | None = None  # a step whose latency has parts: their names
    started: float | None = None
    anchor: Anchor | None = None
    stopped: float | None = None
    interrupted: bool = False
    announced: bool = False  # written to status as Running before the clock starts (a restart then knows)
    attempt: int = 1  # more than 1 when an operator restart interrupted the step and it is measured again
    restored: str | None = None  # what was restored before this attempt, and how long it took
    restored_objects: int | None = None
    collection: StepCollection | None = None  # spec.collect's readings over the step's window
    restore_skipped: set[str] = field(default_factory=set)  # removed by a restore and not recreated: skipped
    saved: StepStatus | None = None  # a step finished before an operator restart: its status as recorded then
    saved_objects: dict[str, Any] | None = None  # ... and its per-object record from the stored report
    on_outcome: Callable[[bool, float], None] | None = None  # (ok, latency seconds), e.g. for metrics
    on_sent: Callable[[str], None] | None = None  # an object's first request left (submission.Submissions.sent)
    extra: dict[str, Any] | None = None  # a measuring step's own results (the data path's rows), kept in its record
    # What the report keeps about each succeeded object besides its times (moveVolume: "node-0 → node-2"), and how
    # the step says it (StepSpec.object_note, called when an object succeeds)
    object_notes: dict[str, str] = field(default_factory=dict)
    note_object: Callable[[str], str | None] | None = None
    zone_of: Callable[[str], str | None] | None = None  # an object's zone, where its volume has one
    zones_known: Callable[[], int] = lambda: 0  # how many volumes' zones are known: more, and zones are counted again
    retried: list[RetriedWarnings] = field(default_factory=list)  # warnings retried past during the step (counted)
    retry_cost: RetryCost | None = None  # what they cost the step
    retries_of: dict[str, int] = field(default_factory=dict)  # per object: its retried Warnings, with repeats
    _all_done: asyncio.Event = field(default_factory=asyncio.Event)
    _waiting: dict[tuple[str, int], asyncio.Event] = field(default_factory=dict)  # (name, boundary) awaited
    _active: list[str] | None = None
    _succeeded: int = 0  # outcomes that are ok, counted as they are set (status is built every 2 s)
    _final: tuple[tuple[Any, ...], StepStatus] | None = None  # a finished step's status, and what it was built from

    @property
    def active(self) -> list[str]:
        """Objects the step submits; fixed once the step starts (``skipped`` is decided before)."""
        if self._active is None:
            return [name for name in self.objects if name not in self.skipped]
        return self._active

    def start(self) -> None:
        self._active = [name for name in self.objects if name not in self.skipped]
        self.anchor = Anchor.now()
        self.started = self.anchor.mono
        self._check_all_done()

    def mark_submitted(self, name: str, at: float | None = None) -> None:
        if name not in self.submitted:
            self.submitted[name] = at if at is not None else time.monotonic()
            if self.on_sent is not None:
                self.on_sent(name)

    def mark_boundary(self, name: str, boundary: int, at: float) -> None:
        """The part of the object's latency before ``boundary`` ended at ``at`` (the first event that said so)."""
        if name in self.submitted and name not in self.outcomes:
            self.boundaries.setdefault(name, {}).setdefault(boundary, max(at, self.submitted[name]))
            waiting = self._waiting.pop((name, boundary), None)
            if waiting is not None:
                waiting.set()

    async def passed(self, name: str, boundary: int) -> bool:
        """Wait until the object passes ``boundary`` (True) or ends without passing it (False): an action that
        acts again mid-way (a move creates the successor once its predecessor is gone) waits here."""
        if boundary not in self.boundaries.get(name, {}) and name not in self.outcomes:
            await self._waiting.setdefault((name, boundary), asyncio.Event()).wait()
        return boundary in self.boundaries.get(name, {})

    def parts_of(self, name: str) -> list[tuple[float, bool]]:
        """A succeeded object's latency split into its parts: (seconds, whether it went through that part). They
        add up to its latency. A boundary never passed (or passed after a later one, on the same events) takes the
        time of the next one it did pass, so the part before it holds that time. A later part of zero length was
        not gone through, as far as the watch can tell (an offline expansion's node half, which waits for a mount:
        the claim is done on the event that begins it)."""
        assert self.phase_names is not None
        outcome, start = self.outcomes[name], self.submitted[name]
        passed = self.boundaries.get(name, {})
        count = len(self.phase_names)
        ends: list[float | None] = [passed.get(b) for b in range(count - 1)] + [outcome.at]
        for index in range(count - 2, -1, -1):  # fill from the end: a boundary not passed takes the next's time
            later = ends[index + 1]
            ends[index] = later if ends[index] is None else min(ends[index], later)  # type: ignore[type-var]
        parts: list[tuple[float, bool]] = []
        for index, end in enumerate(ends):
            assert end is not None
            length = max(0.0, end - start)
            parts.append((length, index == 0 or length > 0))
            start = max(start, end)
        return parts

    def phases(self) -> list[StepPhase]:
        """Per part of the latency, the succeeded objects that went through it and their time in it."""
        if self.phase_names is None:
            return []
        times: list[list[float]] = [[] for _ in self.phase_names]
        for name, outcome in self.outcomes.items():
            if outcome.ok:
                for index, (length, through) in enumerate(self.parts_of(name)):
                    if through:
                        times[index].append(length)
        return [StepPhase(name=part, objects=len(lengths), latency=summarize(lengths))
                for part, lengths in zip(self.phase_names, times, strict=True)]

    def record(self, name: str, verdict: Verdict, at: float) -> None:
        if name in self.outcomes or name not in self.submitted:
            return
        self._set(name, Outcome(verdict.ok, max(at, self.submitted[name]), verdict.reason, verdict.message))
        self._check_all_done()

    def _set(self, name: str, outcome: Outcome) -> None:
        previous = self.outcomes.get(name)
        self._succeeded += int(outcome.ok) - int(previous is not None and previous.ok)
        self.outcomes[name] = outcome
        for key in [key for key in self._waiting if key[0] == name]:
            self._waiting.pop(key).set()
        if self.on_outcome is not None:
            self.on_outcome(outcome.ok, outcome.at - self.submitted[name])

    def _check_all_done(self) -> None:
        # Runs on every terminal event: O(1), never a pass over all objects (10,000 events x 10,000 objects).
        if self._active is not None and len(self.outcomes) >= len(self._active):
            self._all_done.set()

    async def wait(self, timeout: float, last_warnings: Callable[[], dict[str, str]]) -> None:
        """Wait for every object; at the timeout, fail the rest (quoting ``last_warnings()`` as of then).
        ``asyncio.timeout``, not ``wait_for``: on Python 3.11 a cancellation (the run deleted, the operator
        stopping) that lands as the last object ends was swallowed by wait_for, and the run went on."""
        try:
            async with asyncio.timeout(timeout):
                await self._all_done.wait()
            ends = [o.at for o in self.outcomes.values()]
            self.stopped = max(ends) if ends else time.monotonic()
        except TimeoutError:
            self.stopped = time.monotonic()
            last_warning = last_warnings()
            for name in self.active:
                if name not in self.outcomes:
                    self.submitted.setdefault(name, self.stopped)
                    hint = last_warning.get(name)
                    message = f"no terminal state within {timeout:.0f}s" + (f"; last warning: {hint}" if hint else "")
                    self._set(name, Outcome(False, self.stopped, "Timeout", message))

    # -- aggregates ----------------------------------------------------------------------------------------
    def latencies(self) -> list[float]:
        return [o.at - self.submitted[n] for n, o in self.outcomes.items() if o.ok]

    def zones(self) -> list[StepZone]:
        """The ended objects by zone (none when no object has a zone), the zones with most objects first."""
        if self.zone_of is None:
            return []
        by_zone: dict[str, list[tuple[str, Outcome]]] = {}
        for name, outcome in self.outcomes.items():
            zone = self.zone_of(name)
            if zone is not None:
                by_zone.setdefault(zone, []).append((name, outcome))
        rows = [StepZone(zone=zone, objects=len(ended), succeeded=sum(1 for _, o in ended if o.ok),
                         latency=summarize([o.at - self.submitted[n] for n, o in ended
                                            if o.ok and n in self.submitted]))
                for zone, ended in by_zone.items()]
        return sorted(rows, key=lambda row: (-row.objects, row.zone))[:MAX_ZONES]

    def counts(self) -> tuple[int, int]:
        return self._succeeded, len(self.outcomes) - self._succeeded

    def failure_reasons(self) -> list[FailureReason]:
        counter: Counter[str] = Counter()
        example: dict[str, str] = {}
        for outcome in self.outcomes.values():
            if not outcome.ok:
                counter[outcome.reason] += 1
                example.setdefault(outcome.reason, shorten(outcome.message, 300))
        return [FailureReason(reason=r, count=c, message=example[r]) for r, c in counter.most_common(
            MAX_FAILURE_REASONS)]

    def note_retries(self, per_object: dict[str, list[RetriedWarning]], flags: dict[str, str],
                     progress: float | None = None) -> None:
        """The Warnings Kubernetes retried past during the step (per object, as the watch saw them): counted per
        object, aggregated by reason and cause, and what they cost the step (``retries.retry_cost``; ``progress``:
        the last storage completion seen during the step, e.g. a volume attached)."""
        if self.anchor is None:
            return
        anchor = self.anchor
        self.retries_of = {name: sum(w.count for w in warnings) for name, warnings in per_object.items()}
        self.retried = retried_warnings(per_object, lambda mono: rfc3339(anchor.wall_of(mono)))
        end = self.stopped if self.stopped is not None else time.monotonic()
        seen = progress if progress is not None and self.started is not None and progress >= self.started else None
        self.retry_cost = retry_cost(self.name, per_object, end, flags, seen)

    def progress(self) -> str:
        return f"{len(self.outcomes)}/{len(self.active)}"

    @classmethod
    def from_record(cls, saved: StepStatus, record: dict[str, Any], objects: list[str]) -> StepTracker:
        """A step that finished before an operator restart, from its status and stored report: its measurement
        stays as it was, and its per-object outcomes feed the skip rules of the steps after it."""
        tracker = cls(saved.name, objects, saved=saved, attempt=saved.attempts or 1)
        origin = float(record["startWall"])  # the old process's monotonic clock is gone: wall time stands in
        tracker.anchor = Anchor(origin, origin)
        tracker.started = origin
        tracker.stopped = origin + (saved.durationSeconds or 0.0)
        tracker.saved_objects = {key: record[key] for key in ("submitMs", "latencyMs", "result", "phaseMs", "retries",
                                                              "notes")
                                 if key in record}
        tracker.extra = record.get("extra")
        for name, sent_ms, latency_ms, result in zip(objects, record["submitMs"], record["latencyMs"],
                                                     record["result"], strict=True):
            if result == "Skipped":
                tracker.skipped.add(name)
                continue
            if sent_ms is not None:
                tracker.submitted[name] = origin + sent_ms / 1000
            if result != "Pending" and sent_ms is not None:
                at = tracker.submitted[name] + (latency_ms or 0.0) / 1000
                tracker.outcomes[name] = Outcome(result == "ok", at, "" if result == "ok" else result)
        tracker._active = [name for name in objects if name not in tracker.skipped]
        tracker._succeeded = sum(1 for o in tracker.outcomes.values() if o.ok)
        return tracker

    def status(self) -> StepStatus:
        if self.saved is not None:
            return self.saved.model_copy()
        # A finished step's status is built once (its latency summary sorts every object's latency), not at
        # every status write of the steps after it; anything that could change it is part of the key.
        key = (len(self.outcomes), self.stopped, self.interrupted, self.restored, self.restored_objects,
               self.note, self.attempt, len(self.skipped), self.announced, len(self.retried), id(self.retry_cost),
               id(self.collection), self.zones_known())
        if self._final is not None and self._final[0] == key:
            return self._final[1].model_copy()
        status = self._build_status()
        if self.stopped is not None:
            self._final = (key, status.model_copy())
        return status

    def _build_status(self) -> StepStatus:
        succeeded, failed = self.counts()
        duration = (self.stopped if self.stopped is not None else time.monotonic()) - self.started \
            if self.started is not None else None
        if self.started is None:
            state = StepState.RUNNING if self.announced else StepState.PENDING
        elif self.interrupted:
            state = StepState.INTERRUPTED
        elif self.stopped is None:
            state = StepState.RUNNING
        else:
            state = StepState.FAILED if failed else StepState.SUCCEEDED
        finished = self.stopped is not None and not self.interrupted
        assert self.anchor is not None or self.started is None
        return StepStatus(
            name=self.name, state=state, objects=len(self.objects), succeeded=succeeded, failed=failed,
            skipped=len(self.skipped),
            startTime=rfc3339(self.anchor.wall) if self.anchor else None,
            completionTime=rfc3339(self.anchor.wall_of(self.stopped)) if self.anchor and finished and
            self.stopped is not None else None,
            durationSeconds=duration,  # full precision: judged and compared (reports round what they show)
            throughput=succeeded / duration if finished and duration else None,
            latency=summarize(self.latencies()) if finished else None,
            phases=self.phases() if finished else [],
            zones=self.zones() if finished else [],
            failureReasons=self.failure_reasons(),
            retriedWarnings=list(self.retried),
            retries=self.retry_cost,
            note=self.note,
            attempts=self.attempt if self.announced or self.started is not None else None,
            restored=self.restored,
            restoredObjects=self.restored_objects,
            collection=self.collection,
        )

    def per_object(self) -> dict[str, Any]:
        """Compact per-object record for the report: offsets and latencies in ms, in object order."""
        if self.saved_objects is not None:
            return dict(self.saved_objects)
        assert self.started is not None
        submit_ms: list[float | None] = []
        latency_ms: list[float | None] = []
        result: list[str] = []
        for name in self.objects:
            sent = self.submitted.get(name)
            outcome = self.outcomes.get(name)
            submit_ms.append(round((sent - self.started) * 1000, 1) if sent is not None else None)
            latency_ms.append(round((outcome.at - sent) * 1000, 1) if outcome and sent is not None else None)
            if name in self.skipped:
                result.append("Skipped")
            elif outcome is None:
                result.append("Pending")
            else:
                result.append("ok" if outcome.ok else outcome.reason)
        record: dict[str, Any] = {"submitMs": submit_ms, "latencyMs": latency_ms, "result": result}
        if self.retries_of:  # per object, the Warnings Kubernetes retried past for it (counted with repeats)
            record["retries"] = [self.retries_of.get(name, 0) for name in self.objects]
        if self.phase_names is not None:  # each succeeded object's parts, in ms (they add up to its latency)
            record["phaseMs"] = [[round(length * 1000, 1) for length, _ in self.parts_of(name)]
                                 if name in self.outcomes and self.outcomes[name].ok else None
                                 for name in self.objects]
        if self.object_notes:
            record["notes"] = [self.object_notes.get(name) for name in self.objects]
        return record
