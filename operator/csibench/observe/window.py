"""A query's reading over a step's window, from Prometheus' answers (pure).

``Increase`` subtracts each series' value at the window's start from its value at the end: exact to the scrapes,
where PromQL's ``increase()`` would extrapolate a short window. A series absent at the start is left out (and the
collector says so): a failed scrape hides a series for a moment, and counting it from zero would report its whole
life. One lower at the end than at the start was reset (a restarted container): its value at the end is what it
counted since (on an aggregated query a member's reset reads the same way: prefer by (pod) sums).
"""

from __future__ import annotations

import math

from csibench.api.collect import MAX_SERIES_LABELS, Aggregation, CollectedValue
from csibench.observe.prometheus import Series


def increase(at_start: list[Series], at_end: list[Series]) -> tuple[list[tuple[dict[str, str], float]], int]:
    """Per series, end minus start; and how many series had no value at the start (left out: counting them from
    zero would report a counter's whole life, e.g. after one failed scrape)."""
    before = {series.key(): series.samples[-1][1] for series in at_start if series.samples}
    found, missing = [], 0
    for series in at_end:
        if not series.samples:
            continue
        end = series.samples[-1][1]
        start = before.get(series.key())
        if start is None:
            missing += 1
            continue
        found.append((series.labels, end - start if end >= start else end))
    return found, missing


def highest(over_window: list[Series]) -> list[tuple[dict[str, str], float]]:
    """Each series' highest sample; answers of several queries (a range and the end) merged by labels."""
    found: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], float]] = {}
    for series in over_window:
        if series.samples:
            numbers = [value for _, value in series.samples if not math.isnan(value)]
            top = max(numbers) if numbers else math.nan  # NaN would make max() depend on the order
            known = found.get(series.key())
            if known is None or top > known[1]:
                found[series.key()] = (series.labels, top)
    return list(found.values())


def latest(at_end: list[Series]) -> list[tuple[dict[str, str], float]]:
    return [(series.labels, series.samples[-1][1]) for series in at_end if series.samples]


def readings(name: str, unit: str | None, aggregation: Aggregation, found: list[tuple[dict[str, str], float]],
             seconds: float, limit: int) -> tuple[list[CollectedValue], int, list[float]]:
    """The largest ``limit`` readings of one query as CollectedValues, largest first (Rate: per second of step
    time); how many finite readings there were; and the values left out for being infinite or NaN (checked after
    the division: a finite increase over a short step can still overflow)."""
    rated: list[tuple[dict[str, str], float]] = []
    left_out: list[float] = []
    for labels, value in found:
        if aggregation == Aggregation.RATE:
            value = value / seconds if seconds > 0 else 0.0
        if math.isfinite(value):
            rated.append((labels, value))
        else:
            left_out.append(value)
    rated.sort(key=lambda item: (-item[1], sorted(item[0].items())))
    values = [CollectedValue(query=name, labels=dict(sorted(labels.items())[:MAX_SERIES_LABELS]),
                             value=round(value, 6), unit=unit) for labels, value in rated[:limit]]
    return values, len(rated), left_out
