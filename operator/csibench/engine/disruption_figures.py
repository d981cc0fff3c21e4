"""What a disruption cost its step, from the step's terminal events (pure).

The figures are read off the same clock as the step's own (seconds since it started, each object's terminal
event stamped on arrival), so they line up with the step's duration and latencies:

- completed before / after: objects whose terminal event (success or failure) came before / after the injection;
- throughput before: objects that succeeded per second from the step's start to the injection; after: from the
  recovery (the replacements Ready) to the step's end, when the step outlived the recovery (as the step's own
  throughput, failures do not count);
- stall: the longest stretch without a terminal event from the fault on, among those that begin before the
  recovery (a stretch runs from a terminal event, the step's start or the injection, whichever is last, to the
  next terminal event or the step's end): how long the batch stood still because of the fault, which includes
  what the component needed beyond being Ready (a leader lease to expire, a cache to fill);
- unrecovered: objects that failed after the injection or never reached a terminal state, named in order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from csibench.api.models import MAX_UNRECOVERED_NAMED


@dataclass(frozen=True)
class Ending:
    """One object's terminal event on the step's clock."""

    name: str
    seconds: float
    ok: bool


@dataclass(frozen=True)
class DisruptionFigures:
    completed_before: int
    completed_after: int
    throughput_before: float | None
    throughput_after: float | None
    stall_seconds: float
    unrecovered: int
    unrecovered_names: list[str]


def disruption_figures(endings: list[Ending], unfinished: list[str], injected: float, recovered: float | None,
                       step_end: float) -> DisruptionFigures:
    """The figures of a disruption injected at ``injected`` and recovered at ``recovered`` (None: never) in a step
    that ended at ``step_end``, all in seconds on the step's clock."""
    times = sorted(e.seconds for e in endings)
    succeeded = [e.seconds for e in endings if e.ok]
    before = sum(1 for t in times if t < injected)
    after = len(times) - before
    points = [0.0, *times, max(step_end, times[-1] if times else 0.0)]
    until = recovered if recovered is not None else step_end
    stall = max((later - max(earlier, injected) for earlier, later in itertools.pairwise(points)
                 if later > injected and earlier <= until), default=0.0)
    ok_before = sum(1 for t in succeeded if t < injected)
    since_recovery = sum(1 for t in succeeded if recovered is not None and t >= recovered)
    after_window = step_end - recovered if recovered is not None else 0.0
    failed_after = sorted((e for e in endings if not e.ok and e.seconds >= injected), key=lambda e: e.seconds)
    unrecovered = [e.name for e in failed_after] + sorted(unfinished)
    return DisruptionFigures(
        completed_before=before,
        completed_after=after,
        throughput_before=round(ok_before / injected, 3) if injected > 0 else None,
        throughput_after=round(since_recovery / after_window, 3) if after_window > 0 else None,
        stall_seconds=round(stall, 3),
        unrecovered=len(unrecovered),
        unrecovered_names=unrecovered[:MAX_UNRECOVERED_NAMED],
    )
