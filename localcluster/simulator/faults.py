"""Fault windows: the array made slow or failing for a while, asked through the API (a run's ArrayFault).

A StorageClass's parameters set an array's steady behaviour (``latency``, ``failureRate``); a window changes it for
some seconds, as a controller failover or a rebuild on a real array would, while a batch runs. The request is a
ConfigMap labelled ``csibench.io/array-faults`` with ``data.request``: ``{"id", "storageClass", "seconds",
"latencySeconds", "failureRate", "operations"}`` (the operator's ``engine/array_faults.py`` writes it). This
simulator opens the window on that class by its own clock, answers ``data.answer``: ``{"id", "startedAt"}``, and
when the window closes ``{"id", "startedAt", "endedAt"}`` — so a window always ends, whatever happens to the
operator — or ``{"id", "error"}`` when it will not open one (an unknown class, a window of another request open on
it, values out of range).

An operation is in a window when it starts its array work inside it: it then takes ``latencySeconds`` longer and
fails with probability ``failureRate`` (the driver answers INTERNAL, the sidecar retries), and its ground-truth
record says ``"fault": true``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from localcluster.simulator import api
from localcluster.simulator.config import ARRAY_FAULTS, DRIVER_NAME, Operation
from localcluster.simulator.requests import ANSWER_KEY, pending_request

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
    until: float
    latency: float
    failure_rate: float
    operations: frozenset[Operation]  # empty: every operation

    def covers(self, operation: Operation, now: float) -> bool:
        return now < self.until and (not self.operations or operation in self.operations)


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
        self._random = random.Random(seed)

    def open(self, storage_class: str, window: Window) -> None:
        current = self._windows.get(storage_class)
        if current is not None and current.until > time.monotonic() and current.requester != window.requester:
            raise FaultRequestError(f"a window asked by {current.requester} is open on {storage_class} for "
                                    f"{current.until - time.monotonic():.1f} s more")
        self._windows[storage_class] = window

    def close(self, storage_class: str, window: Window) -> None:
        if self._windows.get(storage_class) is window:
            del self._windows[storage_class]

    def effect(self, storage_class: str, operation: Operation) -> tuple[float, bool] | None:
        """(extra latency, fails) for an operation starting now on the class; None outside any window."""
        window = self._windows.get(storage_class)
        if window is None or not window.covers(operation, time.monotonic()):
            return None
        return window.latency, window.failure_rate > 0 and self._random.random() < window.failure_rate


class FaultAnswerer:
    """Opens a window per request (once per request id) and answers on the request."""

    def __init__(self, client: api.Client, windows: FaultWindows, storage_classes: api.Informer) -> None:
        self.client = client
        self.windows = windows
        self.storage_classes = storage_classes
        self.informer = api.Informer(client, api.CONFIG_MAP, label_selector=FAULTS_LABEL)
        self.informer.handlers.append(self._on_configmap)
        self._handled: set[tuple[str, str]] = set()  # (ConfigMap key, request id)
        self._tasks: set[asyncio.Task[None]] = set()

    def _on_configmap(self, event: str, configmap: api.Obj) -> None:
        request = pending_request(configmap) if event != "DELETED" else None
        if request is None:
            return
        key = (api.key_of(configmap), str(request["id"]))
        if key in self._handled:
            return
        self._handled.add(key)
        task = asyncio.create_task(self._serve(configmap, request))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _window_for(self, requester: str, request: dict[str, Any]) -> tuple[str, Window]:
        storage_class, seconds, latency, rate, operations = parse_request(request)
        found = self.storage_classes.get(storage_class)
        if found is None or found.get("provisioner") != DRIVER_NAME:
            raise FaultRequestError(f"StorageClass {storage_class!r} is not one of this array's")
        return storage_class, Window(requester, time.monotonic() + seconds, latency, rate, operations)

    async def _serve(self, configmap: api.Obj, request: dict[str, Any]) -> None:
        meta = configmap["metadata"]
        path = api.CONFIG_MAP.path(meta["namespace"], meta["name"])
        answer: dict[str, Any] = {"id": request["id"]}
        try:
            storage_class, window = self._window_for(api.key_of(configmap), request)
            self.windows.open(storage_class, window)
        except FaultRequestError as refused:
            await self._answer(path, {**answer, "error": str(refused)})
            return
        answer["startedAt"] = api.now_rfc3339(micro=True)
        log.info("fault window on %s for %s: %s", storage_class, api.key_of(configmap), request)
        try:
            await self._answer(path, answer)
            await asyncio.sleep(max(0.0, window.until - time.monotonic()))
        finally:
            self.windows.close(storage_class, window)
            answer["endedAt"] = api.now_rfc3339(micro=True)
        await self._answer(path, answer)

    async def _answer(self, path: str, answer: dict[str, Any]) -> None:
        try:
            await self.client.patch(path, {"data": {ANSWER_KEY: json.dumps(answer, sort_keys=True)}})
        except api.ApiError as error:  # the request is gone (its run deleted): nobody to answer
            log.info("fault answer to %s not written: %s", path, error)
