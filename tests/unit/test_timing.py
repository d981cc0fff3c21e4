"""Percentiles and durations."""

from __future__ import annotations

import pytest

from csibench.api.text import human_duration
from csibench.engine.timing import nearest_rank, summarize


def test_percentiles_are_nearest_rank_values() -> None:
    values = [float(v) for v in range(1, 101)]
    assert nearest_rank(values, 50) == 50 and nearest_rank(values, 99) == 99 and nearest_rank(values, 100) == 100
    latency = summarize([0.3, 0.1, 0.2])
    assert latency is not None and (latency.p50, latency.max) == (0.2, 0.3) and latency.mean == pytest.approx(0.2)
    assert summarize([]) is None


@pytest.mark.parametrize(("seconds", "text"), [(3.21, "3.2s"), (630, "10m 30s"), (18052, "5h 00m 52s")])
def test_human_durations(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text
