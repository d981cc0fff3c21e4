"""A batch's objects start as the client can take them: never more than the limit unsent at once, in order, and
an object that waits after its first request left (a move) holds no slot while it waits."""

from __future__ import annotations

import asyncio

import pytest

from csibench.engine.submission import Submissions


def test_at_most_the_limit_are_unsent_and_every_object_is_sent_in_order() -> None:
    async def scenario() -> tuple[list[str], int]:
        submissions = Submissions(limit=3)
        sent: list[str] = []
        peak = 0

        async def submit(name: str) -> None:
            nonlocal peak
            peak = max(peak, submissions.unsent)
            await asyncio.sleep(0.001)  # waits for its turn in the client
            sent.append(name)
            submissions.sent(name)  # the request left (the tracker's on_sent)
            await asyncio.sleep(0.001)  # the answer

        submissions.start([f"v{i}" for i in range(50)], submit)
        while len(sent) < 50 or submissions.running:
            await asyncio.sleep(0.001)
        return sent, peak

    sent, peak = asyncio.run(scenario())
    assert sent == [f"v{i}" for i in range(50)]
    assert peak == 3


def test_an_object_waiting_after_its_request_holds_no_slot() -> None:
    """Moves: every delete leaves before any successor is created, with a limit far below the batch."""
    async def scenario() -> tuple[int, int]:
        submissions = Submissions(limit=2)
        gone = asyncio.Event()
        deleted = 0

        async def move(name: str) -> None:
            nonlocal deleted
            deleted += 1
            submissions.sent(name)
            await gone.wait()  # the watch says the pod is gone

        submissions.start([f"p{i}" for i in range(20)], move)
        for _ in range(100):
            await asyncio.sleep(0)
        waiting = submissions.running
        gone.set()
        while submissions.running:
            await asyncio.sleep(0)
        return deleted, waiting

    deleted, waiting = asyncio.run(scenario())
    assert (deleted, waiting) == (20, 20)


def test_a_submission_that_ends_without_sending_frees_its_slot_and_cancel_stops_the_rest() -> None:
    async def scenario() -> tuple[int, int]:
        submissions = Submissions(limit=1)
        ended = 0
        forever = asyncio.Event()

        async def submit(name: str) -> None:
            nonlocal ended
            if name == "stuck":
                await forever.wait()
            ended += 1  # refused before its request left: never "sent"

        submissions.start(["a", "b", "c", "stuck", "d"], submit)
        for _ in range(100):
            await asyncio.sleep(0)
        before = ended
        submissions.cancel()
        for _ in range(10):
            await asyncio.sleep(0)
        return before, submissions.running

    before, running = asyncio.run(scenario())
    assert (before, running) == (3, 0)


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Submissions(0)
