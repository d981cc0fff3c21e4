"""The simulated storage array behind one StorageClass, and the ground-truth record of what it did.

Each operation waits for a slot (the class's concurrency limit; "1" serializes everything, like a driver with a
global lock), then takes its latency +/- jitter, then succeeds, fails (injected, transiently) or never returns
(hang mode). Every operation is appended to a JSON-lines file with the wall-clock times it was queued, started
and finished, so tests and benchmarks can check what the operator measured against what the storage did.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import IO

from localcluster.simulator.config import BackendModel, Operation
from localcluster.simulator.faults import FaultWindows


class InjectedFailure(RuntimeError):
    """The backend model decided this operation fails; the driver answers the CSI call with an error."""


class GroundTruth:
    """Appends one JSON object per finished (or failed) backend operation."""

    def __init__(self, path: Path | None) -> None:
        self._file: IO[str] | None = path.open("a", buffering=1) if path else None

    def record(self, **fields: object) -> None:
        if self._file is not None:
            self._file.write(json.dumps(fields, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Backend:
    def __init__(self, storage_class: str, model: BackendModel, truth: GroundTruth,
                 faults: FaultWindows | None = None) -> None:
        self.storage_class = storage_class
        self.model = model
        self._truth = truth
        self._faults = faults  # fault windows a run opened over the class's steady behaviour
        self._slots = asyncio.Semaphore(model.concurrency) if model.concurrency > 0 else None
        self._random = random.Random(model.seed)
        self._deletes: dict[Operation, int] = {}  # deletes asked of this array, per operation (``leakEvery``)

    def leaks_next(self, operation: Operation) -> bool:
        """Count one delete asked of this array; True when the class leaks it (every ``leakEvery``th of the
        ``leakOperations``): the driver acknowledges it and does nothing."""
        if operation not in self.model.leak_operations or self.model.leak_every <= 0:
            return False
        self._deletes[operation] = self._deletes.get(operation, 0) + 1
        return self._deletes[operation] % self.model.leak_every == 0

    async def run(self, operation: Operation, obj: str, extra_delay: float = 0.0, run_uid: str = "",
                  **facts: object) -> None:
        """Perform one operation on object ``obj`` (a "namespace/name" or handle, for the record) of the run
        ``run_uid`` (its fault windows apply); ``facts`` go into its ground-truth record as they are (a group
        snapshot's members)."""
        queued = time.time()
        if self._slots is None:
            await self._perform(operation, obj, queued, facts, extra_delay, run_uid)
        else:
            async with self._slots:
                await self._perform(operation, obj, queued, facts, extra_delay, run_uid)

    async def _perform(self, operation: Operation, obj: str, queued: float, facts: dict[str, object],
                       extra_delay: float = 0.0, run_uid: str = "") -> None:
        started = time.time()
        if operation in self.model.hang_operations:
            self._truth.record(op=operation.value, object=obj, storageClass=self.storage_class, queued=queued,
                               start=started, finish=None, result="hang", **facts)
            await asyncio.Event().wait()
        fault = self._faults.effect(self.storage_class, operation, run_uid) if self._faults is not None else None
        if fault is not None:
            facts = {**facts, "fault": True}
        delay = self.model.latency(operation) + extra_delay + (fault[0] if fault else 0.0)
        if self.model.jitter:
            delay += self._random.uniform(-self.model.jitter, self.model.jitter)
        if delay > 0:
            await asyncio.sleep(delay)
        failed = (operation in self.model.failure_operations and self.model.failure_rate > 0
                  and self._random.random() < self.model.failure_rate) or (fault is not None and fault[1])
        finished = time.time()
        self._truth.record(op=operation.value, object=obj, storageClass=self.storage_class, queued=queued,
                           start=started, finish=finished, result="error" if failed else "ok", **facts)
        if failed:
            raise InjectedFailure(f"injected failure of {operation.value} on array {self.storage_class}")
