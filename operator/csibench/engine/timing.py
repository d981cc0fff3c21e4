"""Clocks and statistics: per-object latencies in, step aggregates out (pure).

Durations come from ``time.monotonic`` (never jumps); wall-clock times are only for display and for lining up
with other records (the simulator's ground truth), via an anchor taken at the same instant as a monotonic time.
Percentiles use the nearest-rank method, so every reported value is one object's real latency.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass

from csibench.api.models import Latency


@dataclass(frozen=True)
class Anchor:
    """A wall-clock time and a monotonic time read together: converts one clock into the other."""

    wall: float
    mono: float

    @classmethod
    def now(cls) -> Anchor:
        return cls(time.time(), time.monotonic())

    def wall_of(self, mono: float) -> float:
        return self.wall + (mono - self.mono)


def rfc3339(wall: float) -> str:
    return dt.datetime.fromtimestamp(wall, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def nearest_rank(sorted_values: list[float], percentile: float) -> float:
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(percentile / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(latencies_seconds: list[float]) -> Latency | None:
    if not latencies_seconds:
        return None
    ordered = sorted(latencies_seconds)
    return Latency(  # full precision: what is judged and stored is never rounded (reports round what they show)
        p50=nearest_rank(ordered, 50), p90=nearest_rank(ordered, 90), p99=nearest_rank(ordered, 99),
        max=ordered[-1], mean=sum(ordered) / len(ordered),
    )
