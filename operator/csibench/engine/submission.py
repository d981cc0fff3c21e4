"""Submitting a batch without holding every object's request in memory at once.

A step submits every object of its batch "at once": the clock starts, and each object's latency runs from the
moment its request leaves. The client paces them (a token bucket, at most ``maxInFlight`` in flight), so an
object whose request cannot leave yet only waits. Waiting as a task is costly at scale: each one holds its
manifest, its encoded body and a chain of coroutine frames, about 8 KB. 100,000 of them started together held
900 MB in the operator before the client had sent the first thirteen thousand (bench.scale, 2026-12-07).

So objects are started as the client can take them: at most ``limit`` are *unsent* (started, first request not yet
left) at any moment, and a new one starts as soon as one is sent or done. ``limit`` is a few times the client's
``maxInFlight``, so the client never waits for a start, and requests leave in the batch's order as before. An
object whose submission waits on purpose after its first request (a move waits for its pod to be gone before it
creates the successor) holds no slot while it waits: every move's delete leaves at once, as it did.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

# Unsent objects per request the client may have in flight: enough that the next object's manifest is ready
# when a slot frees, small enough that a batch of any size holds a few hundred at most.
UNSENT_PER_IN_FLIGHT = 4


class Submissions:
    """One task per object, started at most ``limit`` unsent at a time; ``sent(name)`` frees the object's slot
    (the tracker calls it when the object's first request leaves), as does the end of its task."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        self._slots = asyncio.Semaphore(limit)
        self._unsent: set[str] = set()
        self._running: set[asyncio.Task[None]] = set()
        self._starter: asyncio.Task[None] | None = None

    def sent(self, name: str) -> None:
        if name in self._unsent:
            self._unsent.discard(name)
            self._slots.release()

    def start(self, names: Iterable[str], submit: Callable[[str], Coroutine[Any, Any, None]]) -> None:
        """Begin submitting ``names`` in order, in the background (``cancel`` stops what is not done)."""
        self._starter = asyncio.create_task(self._start_all(list(names), submit), name="submissions")

    async def _start_all(self, names: list[str], submit: Callable[[str], Coroutine[Any, Any, None]]) -> None:
        for name in names:
            await self._slots.acquire()
            self._unsent.add(name)
            task = asyncio.create_task(submit(name), name=f"submit:{name}")
            self._running.add(task)
            task.add_done_callback(functools.partial(self._finished, name))

    def _finished(self, name: str, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self.sent(name)

    @property
    def unsent(self) -> int:
        return len(self._unsent)

    @property
    def running(self) -> int:
        return len(self._running)

    def cancel(self) -> None:
        if self._starter is not None:
            self._starter.cancel()
        for task in list(self._running):
            task.cancel()
