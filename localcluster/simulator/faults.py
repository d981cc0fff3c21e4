"""Fault windows: the array made slow or failing for a while, asked through the API (a run's ArrayFault).

A StorageClass's parameters set an array's steady behaviour (``latency``, ``failureRate``); a window changes it for
some seconds, as a controller failover or a rebuild on a real array would, while a batch runs. The request is a
ConfigMap labelled ``csibench.io/array-faults`` (the run's uid) with ``data.request``: ``{"id", "runUid",
"storageClass", "seconds", "latencySeconds", "failureRate", "operations"}`` (the operator's
``engine/array_faults.py`` writes it). This simulator opens the window on that class by its own clock, answers
``data.answer``: ``{"id", "startedAt"}``, and when the window closes ``{"id", "startedAt", "endedAt",
"operations"}`` (how many operations it touched) — so a window always ends, whatever happens to the operator — or
``{"id", "error"}`` when it will not open one (a request not owned by the run it names, an unknown class, values
out of range, another request's window open on the class). The request's ConfigMap deleted closes its window.

A window is the run's own: an operation is in it when the array starts it inside the window for one of the run's
objects (the array knows each volume's run, ``Driver.owners``); another run on the same class is not touched. It
then takes ``latencySeconds`` longer and fails with probability ``failureRate`` (the driver answers INTERNAL, the
sidecar retries), and its ground-truth record says ``"fault": true``.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from localcluster.simulator import api
from localcluster.simulator.config import ARRAY_FAULTS, DRIVER_NAME, Operation
from localcluster.simulator.requests import RequestWatcher

log = logging.getLogger(__name__)

FAULTS_LABEL = ARRAY_FAULTS  # the requests' label
MAX_SECONDS = 600
MAX_LATENCY_SECONDS = 600.0


class FaultRequestError(ValueError):
    """A request the array will not open a window for; the message is its answer."""


@dataclass(frozen=True)
class Window:
    """A fault on one class's operations until ``until`` (monotonic)."""

    requester: str  # the request ConfigMap's namespace/name: its own new request replaces it
    run_uid: str  # the run whose objects it applies to
    until: float
    latency: float
    failure_rate: float
    operations: frozenset[Operation]  # empty: every operation

    def covers(self, operation: Operation, run_uid: str, now: float) -> bool:
        return (now < self.until and run_uid == self.run_uid
                and (not self.operations or operation in self.operations))


def foreign_request(configmap: api.Obj, request: dict[str, Any]) -> str | None:
    """Why a request may not open a window (pure): the run it names must own the ConfigMap (a BenchmarkRun) and
    be its label's value, so no ConfigMap can slow another run's objects. None: it may."""
    meta = configmap.get("metadata") or {}
    run_uid = str(request.get("runUid") or "")
    owners = {str(owner.get("uid")) for owner in meta.get("ownerReferences") or []
              if owner.get("kind") == "BenchmarkRun"}
    if not run_uid or (meta.get("labels") or {}).get(FAULTS_LABEL) != run_uid or run_uid not in owners:
        return "the request's runUid must be its ConfigMap's owner (a BenchmarkRun) and its label's value"
    return None


def parse_request(request: dict[str, Any]) -> tuple[str, float, float, float, frozenset[Operation]]:
    """(class, seconds, latency, failure rate, operations) of a request (pure); FaultRequestError if invalid."""
    try:
        storage_class = str(request["storageClass"])
        seconds = float(request["seconds"])
        latency = float(request.get("latencySeconds") or 0.0)
        rate = float(request.get("failureRate") or 0.0)
        operations = frozenset(Operation(str(name)) for name in request.get("operations") or [])
    except (KeyError, TypeError, ValueError) as error:
        raise FaultRequestError(f"malformed request: {error}") from None
    if not 0 < seconds <= MAX_SECONDS:
        raise FaultRequestError(f"seconds must be in (0, {MAX_SECONDS}], got {seconds:g}")
    if not 0 <= latency <= MAX_LATENCY_SECONDS or not 0 <= rate <= 1 or (latency == 0 and rate == 0):
        raise FaultRequestError(f"latencySeconds {latency:g} and failureRate {rate:g}: a window needs a latency "
                                f"up to {MAX_LATENCY_SECONDS:g} s or a rate in (0, 1]")
    return storage_class, seconds, latency, rate, operations


class FaultWindows:
    """The open windows, one per class at most; the backends ask it for each operation they start."""

    def __init__(self, seed: int | None = None) -> None:
        self._windows: dict[str, Window] = {}
        self._touched: dict[str, int] = {}  # requester -> operations its window touched
        self._random = random.Random(seed)

    def open(self, storage_class: str, window: Window) -> None:
        current = self._windows.get(storage_class)
        if current is not None and current.until > time.monotonic() and current.requester != window.requester:
            raise FaultRequestError(f"a window asked by {current.requester} is open on {storage_class} for "
                                    f"{current.until - time.monotonic():.1f} s more")
        if current is None or current.requester != window.requester:
            self._touched[window.requester] = 0
        self._windows[storage_class] = window

    def close(self, storage_class: str, window: Window) -> int:
        """Close the window (if it is still the class's); how many operations its requester's windows touched."""
        if self._windows.get(storage_class) is window:
            del self._windows[storage_class]
        return self._touched.get(window.requester, 0)

    def close_requester(self, requester: str) -> None:
        """The request is gone (its run deleted): its window closes now."""
        for storage_class, window in list(self._windows.items()):
            if window.requester == requester:
                del self._windows[storage_class]

    def effect(self, storage_class: str, operation: Operation, run_uid: str) -> tuple[float, bool] | None:
        """(extra latency, fails) for an operation of ``run_uid`` starting now on the class; None outside its
        window."""
        window = self._windows.get(storage_class)
        if window is None or not window.covers(operation, run_uid, time.monotonic()):
            return None
        self._touched[window.requester] = self._touched.get(window.requester, 0) + 1
        return window.latency, window.failure_rate > 0 and self._random.random() < window.failure_rate


class FaultAnswerer(RequestWatcher):
    """Opens a window per request (once per request id) and answers on the request."""

    def __init__(self, client: api.Client, windows: FaultWindows, storage_classes: api.Informer) -> None:
        super().__init__(client, FAULTS_LABEL)
        self.windows = windows
        self.storage_classes = storage_classes

    def _window_for(self, configmap: api.Obj, request: dict[str, Any]) -> tuple[str, Window]:
        refused = foreign_request(configmap, request)
        if refused is not None:
            raise FaultRequestError(refused)
        storage_class, seconds, latency, rate, operations = parse_request(request)
        found = self.storage_classes.get(storage_class)
        if found is None or found.get("provisioner") != DRIVER_NAME:
            raise FaultRequestError(f"StorageClass {storage_class!r} is not one of this array's")
        return storage_class, Window(api.key_of(configmap), str(request["runUid"]), time.monotonic() + seconds,
                                     latency, rate, operations)

    def on_deleted(self, configmap: api.Obj) -> None:
        self.windows.close_requester(api.key_of(configmap))

    async def serve(self, configmap: api.Obj, request: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"id": request["id"]}
        try:
            storage_class, window = self._window_for(configmap, request)
            self.windows.open(storage_class, window)
        except FaultRequestError as refused:
            await self.write_answer(configmap, {**answer, "error": str(refused)})
            return
        answer["startedAt"] = api.now_rfc3339(micro=True)
        log.info("fault window on %s for %s: %s", storage_class, api.key_of(configmap), request)
        try:
            await self.write_answer(configmap, answer)
            await asyncio.sleep(max(0.0, window.until - time.monotonic()))
        finally:
            answer["operations"] = self.windows.close(storage_class, window)
            answer["endedAt"] = api.now_rfc3339(micro=True)
        await self.write_answer(configmap, answer)
