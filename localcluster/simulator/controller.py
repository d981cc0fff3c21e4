"""One worker per object key, the way CSI sidecars and kubelet process objects: never two at once for a key.

Events only ``kick`` a key. Its worker reconciles the latest cached object until nothing changed meanwhile;
a reconcile that asks for a retry is run again after an exponential backoff (1 s doubling to 60 s, as the
external-provisioner's defaults), which is how injected failures are retried. Deleting an object cancels its
worker, so an operation hung in the backend does not outlive the object it was for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("simulator.controller")

RETRY_INITIAL_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0

# A reconcile returns True when it must be retried after a backoff, False when it is done for now.
Reconcile = Callable[[str], Awaitable[bool]]


class Controller:
    def __init__(self, name: str, reconcile: Reconcile) -> None:
        self.name = name
        self._reconcile = reconcile
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()

    def kick(self, key: str) -> None:
        if key in self._workers:
            self._dirty.add(key)
            return
        self._workers[key] = asyncio.get_running_loop().create_task(self._work(key), name=f"{self.name}:{key}")

    def cancel(self, key: str) -> None:
        worker = self._workers.pop(key, None)
        self._dirty.discard(key)
        if worker is not None and worker is not asyncio.current_task():
            worker.cancel()

    @property
    def busy(self) -> int:
        return len(self._workers)

    async def _work(self, key: str) -> None:
        attempt = 0
        try:
            while True:
                self._dirty.discard(key)
                try:
                    retry = await self._reconcile(key)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s: reconcile of %s failed", self.name, key)
                    retry = True
                if retry:
                    await asyncio.sleep(min(RETRY_INITIAL_SECONDS * 2**attempt, RETRY_MAX_SECONDS))
                    attempt += 1
                    continue
                if key not in self._dirty:
                    return
        finally:
            if self._workers.get(key) is asyncio.current_task():
                del self._workers[key]
