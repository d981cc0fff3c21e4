"""A suite's own Prometheus queries per cell: each query's highest reading over a run's steps, median over rounds.

The envelope's questions reach past what the CSIMachinery profile costs: how deep the PV controller's claim queue
grew, how many operations the snapshot-controller had in flight, how long the API server took to list claims. A
suite asks them as spec.collect queries of its own; each step records its reading (status.steps[].collection),
and this table shows, per cell, the highest over the run's steps: the batch's worst moment at that level.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from csibench.api.collect import PROFILE_QUERY_NAMES
from csibench.api.suite_results import CellResult
from csibench.report.render import Table


def series_name(value: dict[str, Any]) -> str:
    """``query`` or ``query{label=value,...}`` (labels sorted): one column per series a query returned."""
    labels = value.get("labels") or {}
    shown = ",".join(f"{key}={labels[key]}" for key in sorted(labels))
    return f"{value['query']}{{{shown}}}" if shown else str(value["query"])


def own_query_peaks(runs: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, str]]:
    """Per series of the runs' own queries (not the profile's), the median over ``runs`` of its highest reading
    over each run's steps; and each series' unit where the query gave one. A run that did not read a series is left
    out of its median (a LIST latency exists only where something listed). For an Increase or Rate query the
    highest is that of the step that counted most."""
    per_run: list[dict[str, float]] = []
    units: dict[str, str] = {}
    for run in runs:
        peaks: dict[str, float] = {}
        for step in (run.get("status") or {}).get("steps") or []:
            for value in (step.get("collection") or {}).get("values") or []:
                if value.get("query") in PROFILE_QUERY_NAMES or not isinstance(value.get("value"), int | float):
                    continue
                name = series_name(value)
                peaks[name] = max(peaks.get(name, float("-inf")), float(value["value"]))
                if value.get("unit"):
                    units[name] = str(value["unit"])
        if peaks:
            per_run.append(peaks)
    names = sorted({name for peaks in per_run for name in peaks})
    return {name: statistics.median(peaks[name] for peaks in per_run if name in peaks) for name in names}, units


def _reading(value: float | None) -> str:
    """99997 as 99997 (a queue, bytes), 0.01234 as 0.01234: four significant digits, never an exponent above 1."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def own_queries_table(cells: Sequence[CellResult], axes: list[str]) -> Table | None:
    """One row per cell (its values of ``axes``), one column per series of the suite's own queries: its highest
    reading over the run's steps, the median over the rounds; None when the runs read none."""
    found = {result.cell: own_query_peaks(result.runs) for result in cells}
    series = sorted({name for peaks, _ in found.values() for name in peaks})
    if not series:
        return None
    units = {name: unit for _, named in found.values() for name, unit in named.items()}
    rows = [[result.cell, *[result.values.get(axis, "-") for axis in axes],
             *[_reading(found[result.cell][0].get(name)) for name in series]] for result in cells]
    return ["Cell", *axes, *[f"{name} {units[name]}" if name in units else name for name in series]], rows


Line = tuple[str, list[tuple[float, float]]]  # a curve's label and its (x, y) points, in x order


def own_query_lines(cells: Sequence[CellResult], axis: str) -> list[tuple[str, str | None, list[Line]]]:
    """Per own query, a curve against the numeric ``axis`` (a population level): its unit, and one line per
    series (labelled by the series' labels, or by the query when it has none), each point a cell's median peak.
    Cells whose value of ``axis`` is not a number are left out."""
    per_query: dict[str, dict[str, list[tuple[float, float]]]] = {}
    units: dict[str, str] = {}
    for result in cells:
        value = result.values.get(axis, "")
        if not value.isdigit():
            continue
        peaks, named_units = own_query_peaks(result.runs)
        for name, peak in peaks.items():
            query, _, labels = name.partition("{")
            per_query.setdefault(query, {}).setdefault(labels.rstrip("}") or query, []).append((float(value), peak))
            if name in named_units:
                units[query] = named_units[name]
    return [(query, units.get(query), [(label, sorted(points)) for label, points in sorted(lines.items())])
            for query, lines in sorted(per_query.items())]


TITLE = ("Own queries (spec.collect): the highest reading over the run's steps, median over the rounds that read "
         "it, per cell")
