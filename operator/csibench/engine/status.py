"""The run's status and Events: what ``kubectl get br -w`` and ``kubectl describe br`` show.

Status is written as a merge patch at each step's start and end and every couple of seconds in between, never
once per object. A write sends only the top-level fields that changed since the last write that succeeded (the
first write of a recorder, and the one after a failed write, send everything): a progress write is then
``progress``, ``steps`` (a list: merge patches replace lists whole), the client's counts and the durations, not
the environment, the preflight findings or the conditions again. The operator is the status subresource's only
writer (kopf keeps its own state in annotations) and a recorder sends one write at a time (the database step's
log follower and the progress timer both write), so what it last wrote is what the server has.

The Ready condition goes through one helper that keeps ``lastTransitionTime`` unless the condition's status
really changes. The client limits written are the ones the run's client really has, so a failure status needs
no spec at all.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from csibench.api.conditions import READY, set_condition
from csibench.api.models import BenchmarkRunStatus, ClientUsed, ConditionReason, Phase
from csibench.engine.context import RunRef
from csibench.engine.judgement import BASELINE_CONDITION, Judgement
from csibench.engine.thresholds import CONDITION as THRESHOLDS_CONDITION
from csibench.engine.timing import rfc3339
from csibench.engine.verdict import RunVerdict
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.metrics import METRICS

log = logging.getLogger(__name__)


def now() -> str:
    return rfc3339(time.time())


def status_patch(written: dict[str, Any] | None, status: dict[str, Any]) -> dict[str, Any]:
    """The top-level fields of ``status`` that differ from ``written`` (all of them when ``written`` is None),
    each sent whole as the full write sent it."""
    if written is None:
        return dict(status)
    return {name: value for name, value in status.items() if written.get(name, None) != value}


class StatusRecorder:
    def __init__(self, ref: RunRef, client: KubeApi, status: BenchmarkRunStatus | None = None) -> None:
        self.ref = ref
        self.client = client
        self.status = status or BenchmarkRunStatus(phase=Phase.PENDING, observedGeneration=ref.generation)
        self._written: dict[str, Any] | None = None  # the status as last written; None: unknown, send it all
        self._writing = asyncio.Lock()  # two patches in flight could be applied in the other order

    def ready(self, ready: bool, reason: ConditionReason, message: str) -> None:
        self.condition(READY, "True" if ready else "False", reason.value, message)

    def condition(self, type_: str, status: str, reason: str, message: str) -> None:
        self.status.conditions = set_condition(self.status.conditions, type_, status, reason, message,
                                               self.ref.generation, now())

    async def write(self) -> None:
        if self.status.phase is not None:
            METRICS.set_phase(self.ref.label, self.status.phase.value)
        limiter = self.client.limiter
        self.status.client = ClientUsed(qps=limiter.qps, burst=limiter.burst, maxInFlight=self.client.max_in_flight,
                                        throttledSeconds=round(limiter.throttled_seconds, 3),
                                        requests=self.client.requests)
        async with self._writing:  # a write that waited sends the status as it is now, not as it was
            status = self.status.model_dump(mode="json", exclude_none=True)
            # A merge patch keeps fields it does not mention: cleared top-level fields must be sent as null.
            status.update({name: None for name in BenchmarkRunStatus.model_fields if name not in status})
            patch = status_patch(self._written, status)
            if not patch:
                return
            self._written = None  # until the server has taken it
            await self.client.merge_patch(self.ref.status_path, {"status": patch})
            self._written = status

    async def event(self, reason: str, message: str, warning: bool = False) -> None:
        # The log says what the Events say: when a run hangs, the operator's log shows where.
        log.log(logging.WARNING if warning else logging.INFO, "run %s: %s: %s", self.ref.label, reason, message)
        stamp = now()
        body = {
            "metadata": {"generateName": f"{self.ref.name}.", "namespace": self.ref.namespace},
            "involvedObject": {"apiVersion": "csibench.io/v1alpha1", "kind": "BenchmarkRun",
                               "name": self.ref.name, "namespace": self.ref.namespace, "uid": self.ref.uid},
            "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
            "source": {"component": "csibench"}, "reportingComponent": "csibench.io/operator",
            "reportingInstance": "csibench", "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self.client.create(r.EVENTS.path(self.ref.namespace), body)
        except ApiError as error:
            log.warning("could not record event %s: %s", reason, error)

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
            METRICS.set_verdict(self.ref.label, judged.verdict.value, judged.broken)
        await self.write()
        await self.event("RunSucceeded" if verdict.succeeded else verdict.reason.value, verdict.message,
                         warning=not verdict.succeeded)
        for reason, message, warning in judged.events() if judged is not None else []:
            await self.event(reason, message, warning=warning)
        return self.status
