"""A churn's windows (pure): which window a completion falls in, a window's row from the completions in it, and
what finished waves left behind at its end.

A completion is one object's phase ending (its watch event, on the operator's monotonic clock, as seconds after the
step's start); it belongs to the window its end falls in, so a window's throughput is what ended in it and its
latencies are of what ended in it (a slow object counts where it ended, as a user waiting on it would see it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from csibench.api.churn import (
    MAX_COMPONENT_NAME,
    MAX_MEMORY_COMPONENTS,
    PHASES,
    ChurnLeaks,
    ChurnPhaseWindow,
    ChurnWindow,
    ComponentMemory,
)
from csibench.api.collect import StepCollection
from csibench.api.models import StepState
from csibench.api.text import shorten
from csibench.engine.collection import component_of
from csibench.engine.timing import summarize

MESSAGE_MAX = 300
ARRAY, CLUSTER = "Array", "Cluster"
LATE_SECONDS = 1.0  # a wave that starts more than this after its time is late


@dataclass(frozen=True)
class Completion:
    """One object's phase ended: when (seconds after the step's start), how long it took, and how."""

    phase: str
    at: float
    seconds: float
    ok: bool
    reason: str = ""
    message: str = ""


def window_of(at: float, window_seconds: float, windows: int, duration: float) -> int:
    """The window ``at`` (seconds after the step's start) falls in; at or past ``duration``, the tail's index
    (``windows``)."""
    if at >= duration:
        return windows
    return min(max(int(at // window_seconds), 0), windows - 1)


def by_window(completions: Iterable[Completion], window_seconds: float, windows: int,
              duration: float) -> dict[int, list[Completion]]:
    """Completions sorted into their windows in one pass (the tail's index is ``windows``)."""
    found: dict[int, list[Completion]] = {}
    for completion in completions:
        found.setdefault(window_of(completion.at, window_seconds, windows, duration), []).append(completion)
    return found


def window_bounds(index: int, window_seconds: float, windows: int, duration: float, ended: float) -> tuple[float,
                                                                                                           float]:
    """(start, end) of window ``index`` in seconds after the step's start; the last full window ends at
    ``duration``, the tail (index ``windows``) at ``ended`` (when the last wave finished)."""
    start = index * window_seconds
    if index >= windows:
        return duration, max(ended, duration)
    return start, min(start + window_seconds, duration)


def build_phases(completions: Iterable[Completion], length: float) -> list[ChurnPhaseWindow]:
    """Per phase, what ended in a window of ``length`` seconds."""
    rows = []
    ended = list(completions)
    for phase in PHASES:
        mine = [c for c in ended if c.phase == phase]
        good = [c.seconds for c in mine if c.ok]
        rows.append(ChurnPhaseWindow(phase=phase, completed=len(good), failed=len(mine) - len(good),
                                     throughput=round(len(good) / length, 4) if length > 0 else None,
                                     latency=summarize(good)))
    return rows


def build_window(index: int, bounds: tuple[float, float], tail: bool, completions: Sequence[Completion],
                 lateness: Sequence[float]) -> ChurnWindow:
    """A window's row from its completions and its waves' lateness, seconds after their time each (leaks and
    memory are added at its end)."""
    started, late = len(lateness), sum(1 for seconds in lateness if seconds > LATE_SECONDS)
    start, end = bounds
    failures = [c for c in completions if not c.ok]
    message = shorten(f"{failures[0].phase}: {failures[0].reason}: {failures[0].message}", MESSAGE_MAX) \
        if failures else None
    return ChurnWindow(index=index, startSeconds=round(start, 3), endSeconds=round(end, 3), tail=tail,
                       state=StepState.FAILED if failures else StepState.SUCCEEDED, wavesStarted=started,
                       wavesLate=late, lateSeconds=round(max(lateness), 3) if lateness else None,
                       phases=build_phases(completions, end - start), message=message)


def count_leaks(finished_volumes: Mapping[str, str | None], existing_pvs: set[str],
                attachments: Iterable[str], array: tuple[list[str], int] | str, leaked: set[str],
                answered: bool) -> ChurnLeaks:
    """What the waves finished so far left behind (pure but for ``leaked``, the volumes found leaked so far, which
    it adds to): ``finished_volumes`` maps each of their claims to the volume it was (or would be) provisioned as;
    a PV still there is Released and not removed; a VolumeAttachment of one of their PVs is one without a pod
    (their pods are gone); a volume the array holds that was one of theirs and that no PV names any more is leaked,
    and stays leaked (a later answer that does not list it, a list cut at the array's bound, never takes it back).
    When the array does not answer, its last count stands (``stale``); when it never did (``answered`` False),
    only the cluster's counts are known, with the array's words."""
    pvs = {pv for pv in finished_volumes.values() if pv}
    released = len(pvs & existing_pvs)
    attached = sum(1 for pv in attachments if pv in pvs)
    if isinstance(array, str):
        return ChurnLeaks(source=ARRAY if answered else CLUSTER, volumes=len(leaked), attachments=attached,
                          released=released, stale=answered, message=shorten(array, MESSAGE_MAX))
    names, count = array
    leaked |= (set(names) & pvs) - existing_pvs
    message = None if count <= len(names) else (f"the array named {len(names)} of the {count} volumes it holds: "
                                                "a leaked volume it did not name is counted once it does")
    return ChurnLeaks(source=ARRAY, volumes=len(leaked), attachments=attached, released=released, message=message)


def memory_of(collection: StepCollection | None, query: str) -> list[ComponentMemory]:
    """The components' peak memory in a window, replicas of a component summed (a DaemonSet's driver on each
    node), the largest first, at most the row's bound."""
    if collection is None:
        return []
    summed: dict[str, float] = {}
    for value in collection.values:
        if value.query == query:
            name = shorten(component_of(value), MAX_COMPONENT_NAME)
            summed[name] = summed.get(name, 0.0) + value.value
    ordered = sorted(summed.items(), key=lambda item: (-item[1], item[0]))
    return [ComponentMemory(component=name, bytes=value)
            for name, value in ordered[:MAX_MEMORY_COMPONENTS]]
