"""Latency histograms as fio keeps them, merged exactly across pods (pure).

fio counts every completion in one of its fixed bins (FIO_IO_U_PLAT_BITS 6: a bin is within 1/128 of its value)
and, with ``--output-format=json+``, prints the non-empty ones as ``{"value in ns": count}``, the value being the
bin's midpoint (``plat_idx_to_val`` in fio's stat.c). Every fio has the same bins, so adding the counts of equal
values merges the histograms of many pods with no loss: the merged histogram is the one a single fio would have
kept for all those completions. A percentile is read from it as fio reads its own (``calc_clat_percentiles``):
the value of the first bin at which the running count reaches p/100 of all completions, p taken as the double it
parses from ``--percentile_list``; so one pod's histogram gives back exactly the percentiles fio printed.

Where the engine (rows, status) and the reports (the CDF in the HTML report) both need them, they live here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

_BIN = re.compile(r"[0-9]+")  # [0-9], not \d: \d matches every Unicode decimal digit
Histogram = dict[int, int]  # bin value in ns -> completions

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9)  # what status and the report show, and fio is asked for


def from_json(bins: object) -> Histogram:
    """fio's ``clat_ns.bins`` (string keys, as JSON has them); anything else, or non-positive counts, left out.
    A key is ASCII digits only: ``str.isdigit`` also takes "²" (which ``int`` refuses) and Arabic-Indic digits
    (which ``int`` reads as numbers fio never writes)."""
    if not isinstance(bins, Mapping):
        return {}
    histogram: Histogram = {}
    for value, count in bins.items():
        if _BIN.fullmatch(str(value)) and isinstance(count, int) and not isinstance(count, bool) and count > 0:
            histogram[int(value)] = histogram.get(int(value), 0) + count
    return histogram


def to_json(histogram: Mapping[int, int]) -> dict[str, int]:
    """For the stored report: string keys in increasing value order."""
    return {str(value): histogram[value] for value in sorted(histogram)}


def merge(histograms: Iterable[Mapping[int, int]]) -> Histogram:
    """One histogram of every completion in ``histograms`` (counts of equal bin values added)."""
    merged: Histogram = {}
    for histogram in histograms:
        for value, count in histogram.items():
            merged[value] = merged.get(value, 0) + count
    return merged


def percentiles(histogram: Mapping[int, int], wanted: Sequence[float] = PERCENTILES) -> dict[float, int | None]:
    """p -> the value (ns) fio would report for percentile p of these completions; None for an empty histogram."""
    total = sum(histogram.values())
    if total == 0:
        return {p: None for p in wanted}
    thresholds = sorted((Fraction(p) * total / 100, p) for p in wanted)
    found: dict[float, int | None] = {}
    running, next_threshold = 0, 0
    for value in sorted(histogram):
        running += histogram[value]
        while next_threshold < len(thresholds) and running >= thresholds[next_threshold][0]:
            found[thresholds[next_threshold][1]] = value
            next_threshold += 1
    for _, p in thresholds[next_threshold:]:  # p > 100: fio refuses those; here, the largest bin
        found[p] = max(histogram)
    return found


def cumulative(histogram: Mapping[int, int]) -> list[tuple[int, float]]:
    """(bin value in ns, share of completions at or below it) for each non-empty bin: the CDF the HTML draws."""
    total = sum(histogram.values())
    points: list[tuple[int, float]] = []
    running = 0
    for value in sorted(histogram):
        running += histogram[value]
        points.append((value, running / total))
    return points
