"""A query's reading over a step's window, from Prometheus' answers (pure).

``Increase`` subtracts each series' value at the window's start from its value at the end: exact to the scrapes,
where PromQL's ``increase()`` would extrapolate a short window. A series absent at the start began inside the
window (its whole value counts); one lower at the end than at the start was reset (a restarted container): its
value at the end is what it counted since.
"""

from __future__ import annotations

from csibench.api.collect import MAX_SERIES_LABELS, Aggregation, CollectedValue
from csibench.observe.prometheus import Series


def increase(at_start: list[Series], at_end: list[Series]) -> list[tuple[dict[str, str], float]]:
    before = {series.key(): series.samples[-1][1] for series in at_start if series.samples}
    found = []
    for series in at_end:
        if not series.samples:
            continue
        end = series.samples[-1][1]
        start = before.get(series.key(), 0.0)
        found.append((series.labels, end - start if end >= start else end))
    return found


def highest(over_window: list[Series]) -> list[tuple[dict[str, str], float]]:
    return [(series.labels, max(value for _, value in series.samples)) for series in over_window if series.samples]


def latest(at_end: list[Series]) -> list[tuple[dict[str, str], float]]:
    return [(series.labels, series.samples[-1][1]) for series in at_end if series.samples]


def readings(name: str, unit: str | None, aggregation: Aggregation, found: list[tuple[dict[str, str], float]],
             seconds: float) -> list[CollectedValue]:
    """CollectedValues for one query, largest first (Rate: per second of step time)."""
    values = []
    for labels, value in found:
        if aggregation == Aggregation.RATE:
            value = value / seconds if seconds > 0 else 0.0
        kept = dict(sorted(labels.items())[:MAX_SERIES_LABELS])
        values.append(CollectedValue(query=name, labels=kept, value=round(value, 6), unit=unit))
    return sorted(values, key=lambda item: (-item.value, sorted(item.labels.items())))
