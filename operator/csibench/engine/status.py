"""The run's status and Events: what ``kubectl get br -w`` and ``kubectl describe br`` show.

Status is written as a merge patch at each step's start and end and every couple of seconds in between, never
once per object. A write sends only the top-level fields that changed since the last write that succeeded (the
first write of a recorder, and the one after a failed write, send everything): a progress write is then
``progress``, ``steps`` (a list: merge patches replace lists whole), the client's counts and the durations, not
the environment, the preflight findings or the conditions again. The operator is the status subresource's only
writer (kopf keeps its own state in annotations) and a recorder sends one write at a time (the database step's
log follower and the progress timer both write), so what it last wrote is what the server has.

Text that comes from outside (Prometheus, a driver, fio, pgbench, Events) is shortened where it is read; the write
bounds every string once more (``MAX_TEXT`` characters) and the status as a whole (``MAX_STATUS_BYTES``), and a
write the API server refuses as too large (413, or etcd's "request is too large") is sent again shortened, down to
the phase, message and conditions alone: a run's status is never lost, and a refused write never becomes a crash
that kopf retries for ever. Whatever was cut is said in the ``StatusShortened`` condition and a Warning Event.

The Ready condition goes through one helper that keeps ``lastTransitionTime`` unless the condition's status
really changes. The client limits written are the ones the run's client really has, so a failure status needs
no spec at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from csibench.api.conditions import READY, set_condition
from csibench.api.models import BenchmarkRunStatus, ClientUsed, ConditionReason, Phase
from csibench.api.text import bound_document, shorten
from csibench.engine.cleanup import CleanupResult
from csibench.engine.judgement import BASELINE_CONDITION, DRIFT_CONDITION, Judgement
from csibench.engine.thresholds import CONDITION as THRESHOLDS_CONDITION
from csibench.engine.timing import rfc3339
from csibench.engine.verdict import RunVerdict
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.events import MAX_EVENT_MESSAGE, post_event
from csibench.kube.resources import RunRef
from csibench.metrics import METRICS

log = logging.getLogger(__name__)
CLEANUP_CONDITION = "CleanedUp"  # set (False) only when cleanup could not finish: what is left, and why
CLEANUP_MESSAGE_LENGTH = 4000  # status.cleanup, the condition and the Event: already bounded, kept so here too

SHORTENED = "StatusShortened"
# Characters per string at each level of shortening; past the last, only the fields in MINIMAL_FIELDS are written.
TEXT_LIMITS = (4096, 256, 64)
MINIMAL_FIELDS = ("phase", "message", "conditions", "currentStep", "progress", "observedGeneration", "startTime",
                  "completionTime")
MAX_STATUS_BYTES = 512 * 1024  # far under etcd's 1.5 MiB per object, which holds the spec and metadata too
OWN_TEXT = 1024  # the run's message and conditions, at every level


def too_large(error: ApiError) -> bool:
    """The API server (413) or etcd ("etcdserver: request is too large") refused a write for its size."""
    return error.status == 413 or "too large" in error.message.lower()


def now() -> str:
    return rfc3339(time.time())


def status_patch(written: dict[str, Any] | None, status: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields of ``status`` that differ from ``written`` (all of them when ``written`` is None),
    each sent whole as the full write sent it."""
    if written is None:
        return dict(status)
    return {name: value for name, value in status.items() if written.get(name, None) != value}


# What moves with the clock alone while a step runs: its elapsed time, the run's sum of step times, and the
# client's request count (which counts the status writes themselves, so it never stops moving).
CLOCK_FIELDS = frozenset({"duration", "totalStepSeconds", "client"})
CLOCK_STEP_FIELDS = frozenset({"durationSeconds"})


def without_clock(status: dict[str, Any]) -> dict[str, Any]:
    """``status`` (as written) without the fields that only the clock moves (pure)."""
    kept = {name: value for name, value in status.items() if name not in CLOCK_FIELDS}
    if isinstance(kept.get("steps"), list):
        kept["steps"] = [{name: value for name, value in step.items() if name not in CLOCK_STEP_FIELDS}
                         if isinstance(step, dict) else step for step in kept["steps"]]
    return kept


class StatusRecorder:
    def __init__(self, ref: RunRef, client: KubeApi, status: BenchmarkRunStatus | None = None) -> None:
        self.ref = ref
        self.client = client
        self.status = status or BenchmarkRunStatus(phase=Phase.PENDING, observedGeneration=ref.generation)
        self._written: dict[str, Any] | None = None  # the status as last written; None: unknown, send it all
        self._writing = asyncio.Lock()  # two patches in flight could be applied in the other order
        self._level = 0  # index into TEXT_LIMITS; len(TEXT_LIMITS): minimal status. Only ever grows.
        self._said: tuple[int, int] = (0, 0)  # (level, fields cut) as last said in the condition
        self._cut: list[str] = []  # where the last write cut
        self._evented = -1  # the level last said in a Warning Event

    def ready(self, ready: bool, reason: ConditionReason, message: str) -> None:
        self.condition(READY, "True" if ready else "False", reason.value, message)

    def condition(self, type_: str, status: str, reason: str, message: str) -> None:
        self.status.conditions = set_condition(self.status.conditions, type_, status, reason, message,
                                               self.ref.generation, now())

    async def write(self, progress: bool = False) -> None:
        """Write what changed. ``progress``: a periodic write during a step, skipped when only the clock moved
        (a data-path row's pods measure for minutes with nothing to report: a write every few seconds would add
        API server, etcd and operator work beside the fio it measures, which shows in a write's p99)."""
        if self.status.phase is not None:
            METRICS.set_phase(self.ref.label, self.status.phase.value)
        limiter = self.client.limiter
        self.status.client = ClientUsed(qps=limiter.qps, burst=limiter.burst, maxInFlight=self.client.max_in_flight,
                                        throttledSeconds=round(limiter.throttled_seconds, 3),
                                        requests=self.client.requests)
        async with self._writing:  # a write that waited sends the status as it is now, not as it was
            while True:
                status = self._bounded()
                patch = status_patch(self._written, status)
                if not patch or (progress and self._written is not None
                                 and without_clock(status) == without_clock(self._written)):
                    return
                self._written = None  # until the server has taken it
                try:
                    await self.client.merge_patch(self.ref.status_path, {"status": patch})
                except ApiError as error:
                    if not too_large(error) or self._level >= len(TEXT_LIMITS):
                        raise
                    self._level += 1
                    log.warning("run %s: status write refused as too large (%s); writing it shortened",
                                self.ref.label, shorten(error.message, 200))
                    continue
                self._written = status
                break
        if self._said != (0, 0) and self._evented != self._level:  # once per level, not once per write
            self._evented = self._level
            await self.event(SHORTENED, self._shortened_message(), warning=True)

    def _bounded(self) -> dict[str, Any]:
        """The status to write at the current level of shortening, at most MAX_STATUS_BYTES as JSON, and the
        StatusShortened condition set when anything was cut (shortening further while it is too large)."""
        while True:
            status = self.status.model_dump(mode="json", exclude_none=True)
            if self._level >= len(TEXT_LIMITS):
                status = {name: value for name, value in status.items() if name in MINIMAL_FIELDS}
            limit = TEXT_LIMITS[min(self._level, len(TEXT_LIMITS) - 1)]
            # The run's own words (its message, its conditions: this one says what was cut) keep OWN_TEXT at
            # every level; everything else is cut to the level's limit.
            own = {name: status.pop(name) for name in ("message", "conditions") if name in status}
            bounded, cut = bound_document(status, limit)
            own_bounded, own_cut = bound_document(own, OWN_TEXT)
            assert isinstance(bounded, dict) and isinstance(own_bounded, dict)
            bounded.update(own_bounded)
            cut += own_cut
            if (self._level, len(cut)) != self._said and (cut or self._level):
                self._said = (self._level, len(cut))
                self._cut = cut
                self.condition(SHORTENED, "True", "StatusTooLarge" if self._level else "LongTextCut",
                               self._shortened_message())
                continue  # the condition is part of the status: dump again
            if not cut and not self._level and self._said != (0, 0):  # what was cut is no longer there
                self._said, self._cut = (0, 0), []
                self.condition(SHORTENED, "False", "NothingCut", "no text in the status is cut now")
                continue
            if len(json.dumps(bounded, separators=(",", ":"))) > MAX_STATUS_BYTES and self._level < len(TEXT_LIMITS):
                self._level += 1
                continue
            # A merge patch keeps fields it does not mention: cleared top-level fields must be sent as null.
            bounded.update({name: None for name in BenchmarkRunStatus.model_fields if name not in bounded})
            return bounded

    def _shortened_message(self) -> str:
        cut = self._cut
        if self._level >= len(TEXT_LIMITS):
            what = "the status was too large even shortened: only phase, message and conditions are written"
        elif self._level:
            what = f"the status was too large: every text is cut to {TEXT_LIMITS[self._level]} characters"
        else:
            what = f"{len(cut)} text(s) longer than {TEXT_LIMITS[0]} characters were cut"
        return shorten(f"{what}; cut: {', '.join(cut[:5])}{' …' if len(cut) > 5 else ''}"
                       + " (the stored report keeps what its own bounds allow)", 1000)

    async def event(self, reason: str, message: str, warning: bool = False) -> None:
        # The log says what the Events say: when a run hangs, the operator's log shows where.
        log.log(logging.WARNING if warning else logging.INFO, "run %s: %s: %s", self.ref.label, reason, message)
        await post_event(self.client, "BenchmarkRun", self.ref, reason, message, warning)

    async def cleanup_incomplete(self, result: CleanupResult, when: str = "", note: str = "",
                                 patch_now: bool = False) -> None:
        """Cleanup could not finish: ``status.cleanup`` and the CleanedUp condition (False) name what is left and
        why, and a Warning Event names as many as its message holds and counts the rest, before anything lets the
        run go (its finalizer, the next iteration). ``when`` and ``note`` go before and after the description.
        ``patch_now``: written at once, those two fields only (a deleted run's status is otherwise left as its run
        wrote it)."""
        message = shorten(when + result.describe(CLEANUP_MESSAGE_LENGTH - len(when) - len(note)) + note,
                          CLEANUP_MESSAGE_LENGTH)
        self.status.cleanup = message
        self.condition(CLEANUP_CONDITION, "False", ConditionReason.CLEANUP_INCOMPLETE.value, message)
        if patch_now:
            conditions = [c.model_dump(mode="json", exclude_none=True) for c in self.status.conditions]
            self._written = None  # the next full write sends everything again
            try:
                await self.client.merge_patch(self.ref.status_path, {"status": {"cleanup": message,
                                                                               "conditions": conditions}})
            except ApiError as error:
                log.warning("run %s: could not record the incomplete cleanup in status: %s", self.ref.label, error)
        said = when + result.describe(MAX_EVENT_MESSAGE - len(when) - len(note)) + note
        await self.event(ConditionReason.CLEANUP_INCOMPLETE.value, said, warning=True)

    async def finish(self, verdict: RunVerdict, judged: Judgement | None = None) -> BenchmarkRunStatus:
        """Write the run's end: phase, message, completion time, Ready condition, and one Event; with thresholds
        or a baseline, the verdict (status.verdict, .thresholds and .baseline, the ThresholdsMet and NoRegression
        conditions, an Event each, the metric)."""
        self.status.phase = verdict.phase
        self.status.message = verdict.message
        self.status.completionTime = now()
        self.status.currentStep = None
        self.status.progress = None
        self.ready(verdict.succeeded, verdict.reason, verdict.message)
        if judged is not None:
            self.status.verdict = judged.verdict
            if judged.thresholds is not None:
                thresholds = judged.thresholds
                self.status.thresholds = thresholds.results
                self.condition(THRESHOLDS_CONDITION, thresholds.condition_status, thresholds.reason,
                               thresholds.message)
            self.status.baseline = judged.baseline
            if (baseline := judged.baseline_condition()) is not None:
                self.condition(BASELINE_CONDITION, *baseline)
            if (drift := judged.drift_condition()) is not None:
                self.condition(DRIFT_CONDITION, *drift)
            METRICS.set_verdict(self.ref.label, judged.verdict.value, judged.broken)
        await self.write()
        await self.event("RunSucceeded" if verdict.succeeded else verdict.reason.value, verdict.message,
                         warning=not verdict.succeeded)
        for reason, message, warning in judged.events() if judged is not None else []:
            await self.event(reason, message, warning=warning)
        return self.status
