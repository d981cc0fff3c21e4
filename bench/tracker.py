"""Micro-benchmark: the engine's per-event cost when a step's objects turn terminal (CPU on the event loop).

Every terminal watch event calls ``StepTracker.record``. Before the fix, each call rebuilt the step's active
object list to check "all done" (O(N) per event, O(N^2) per step); now the list is fixed at step start. This
times N records with the current tracker and with that former check, same process, alternating (ABBA).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench.harness import command_line, machine_facts
from csibench.api.models import StepName
from csibench.engine.judges import DONE
from csibench.engine.tracker import StepTracker


class FormerTracker(StepTracker):
    """The pre-fix "all done" check, verbatim: a full pass over the objects on every event."""

    def _check_all_done(self) -> None:
        if self.started is not None and len(self.outcomes) >= len(
                [name for name in self.objects if name not in self.skipped]):
            self._all_done.set()


def time_records(kind: type[StepTracker], volumes: int) -> float:
    async def scenario() -> float:
        tracker = kind(StepName.CREATE_VOLUME, [f"run-abcde-v{i:05d}" for i in range(volumes)])
        tracker.start()
        assert tracker.started is not None
        for name in tracker.objects:
            tracker.mark_submitted(name, tracker.started)
        began = time.perf_counter()
        for index, name in enumerate(tracker.objects):
            tracker.record(name, DONE, tracker.started + index * 0.001)
        return time.perf_counter() - began

    return asyncio.run(scenario())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--volumes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[float]] = {"former": [], "current": []}
    for _ in range(args.rounds):
        for name, kind in (("former", FormerTracker), ("current", StepTracker), ("current", StepTracker),
                           ("former", FormerTracker)):
            results[name].append(time_records(kind, args.volumes))
    former, current = statistics.median(results["former"]), statistics.median(results["current"])
    print(f"\n### Tracker: {args.volumes} terminal events in one step\n")
    print(f"Machine: {machine_facts()}  \nCommand: `{command_line('bench.tracker')}`\n")
    print("| tracker | CPU seconds for all records (median of ABBA rounds) |")
    print("|---|---|")
    print(f"| former (active list rebuilt per event) | {former:.3f} |")
    print(f"| current (active list fixed at step start) | {current:.4f} |")
    print(f"| former / current | {former / current:.0f}× |")


if __name__ == "__main__":
    main()
