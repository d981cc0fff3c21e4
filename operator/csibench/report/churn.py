"""The churn's tables: one row per window (status.churn), its drift verdict (status.churnDrift), two runs' churns
side by side, and the points the HTML page draws over time (pure, over the run's status as the API returns it).

A churn is judged over time, not by one number: a window's row says what completed in it per phase (how many,
how fast, how long each took), whether waves had to start late (the storage not keeping up), what the finished
waves left behind and how much memory the CSI components held. Read down the table, a leak that builds up, a
sidecar that grows and a phase that slows show as trends; the drift table says which of them the run's own
judgement (the last windows against the first, ``api/churn.py``) found beyond its threshold.
"""

from __future__ import annotations

import statistics
from typing import Any

from csibench.api.churn import PHASES
from csibench.api.text import seconds_text, shorten

Table = tuple[list[str], list[list[str]]]
Points = list[tuple[float, float]]

MIB = 1024.0 * 1024.0
TITLE_MESSAGE_MAX = 200  # the drift's message in a heading; the measures' rows say the rest
DRIFT_TITLE = "Churn drift (last windows against the first)"
HEADERS = ["Window", "Span s", "Waves (late)",
           *[f"{phase.capitalize()}: n · /s · p50 / p99" for phase in PHASES],
           "Leaked (new)", "Leaks total (vol/VA/PV)", "Peak memory MiB"]
DRIFT_HEADERS = ["Measure", "First", "Last", "Ratio [90% interval]", "p", "Change"]
COMPARE_HEADERS = ["Phase", "A: p50 · /s", "B: p50 · /s", "B vs A (p50)"]
COMPARE_NOTE = ("churn: per phase the median over each run's windows (the tail left out) of the window's p50 and "
                "throughput; these ratios carry no significance test (each run's own drift verdict has one): a "
                "churn's windows follow each other, so they are not independent samples of the two runs")


def rows_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("churn") or [])


def drift_of(run: dict[str, Any]) -> dict[str, Any] | None:
    found = (run.get("status") or {}).get("churnDrift")
    return dict(found) if found else None


def _phase(row: dict[str, Any], phase: str) -> dict[str, Any] | None:
    return next((p for p in row.get("phases") or [] if p.get("phase") == phase), None)


def _seconds(value: float | None) -> str:
    return "-" if value is None else seconds_text(float(value))


def _span(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _phase_cell(found: dict[str, Any] | None) -> str:
    """'12 (1 failed) · 0.20/s · 850 ms / 1.2 s': completed (failed), throughput, p50 / p99."""
    if found is None:
        return "-"
    counts = str(found.get("completed", 0)) + (f" ({found['failed']} failed)" if found.get("failed") else "")
    throughput = found.get("throughput")
    latency = found.get("latency") or {}
    shown = f" · {_seconds(latency.get('p50'))} / {_seconds(latency.get('p99'))}" if latency else ""
    return f"{counts} · {'-' if throughput is None else f'{throughput:.2f}/s'}{shown}"


def _leaks_cell(leaks: dict[str, Any] | None) -> str:
    if not leaks:
        return "-"
    parts = [int(leaks.get(key) or 0) for key in ("volumes", "attachments", "released")]
    return f"{sum(parts)} ({'/'.join(str(part) for part in parts)}, {str(leaks.get('source', '?')).lower()})"


def _memory_cell(memory: list[dict[str, Any]]) -> str:
    if not memory:
        return "-"
    largest = max(memory, key=lambda reading: float(reading["bytes"]))
    return f"{float(largest['bytes']) / MIB:.1f} ({largest['component']})"


def _window_cell(row: dict[str, Any]) -> str:
    state = row.get("state")
    return (f"{row['index']}" + (" tail" if row.get("tail") else "")
            + (f" ({state})" if state not in (None, "Succeeded") else ""))


def table(run: dict[str, Any]) -> Table | None:
    """The windows' headers and rows, or None for a run without a churn."""
    found = rows_of(run)
    if not found:
        return None
    rows = []
    for row in found:
        late = int(row.get("wavesLate") or 0)
        rows.append([_window_cell(row), f"{_span(row['startSeconds'])}-{_span(row['endSeconds'])}",
                     str(row.get("wavesStarted", 0)) + (f" ({late} late)" if late else ""),
                     *[_phase_cell(_phase(row, phase)) for phase in PHASES],
                     "-" if row.get("leaked") is None else str(row["leaked"]), _leaks_cell(row.get("leaks")),
                     _memory_cell(list(row.get("memory") or []))])
    return HEADERS, rows


def drift_title(run: dict[str, Any]) -> str:
    """The drift table's heading: its verdict and what it says ('...: Drift — windows 1-3 against 6-8: ...')."""
    drift = drift_of(run)
    if drift is None:
        return DRIFT_TITLE
    message = shorten(str(drift.get("message") or ""), TITLE_MESSAGE_MAX)
    return f"{DRIFT_TITLE}: {drift.get('change', '?')}" + (f" — {message}" if message else "")


def _ratio(measure: dict[str, Any]) -> str:
    ratio = measure.get("ratio")
    if ratio is None:
        return "-"
    low, high = measure.get("low"), measure.get("high")
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    return f"{ratio:.2f}×{interval}"


def drift_table(run: dict[str, Any]) -> Table | None:
    """One row per measure judged (its first and last windows' median p50, how much faster the last were with the
    90% interval, Holm-adjusted p, the change), then the churn's leaks and its largest memory growth."""
    drift = drift_of(run)
    if drift is None:
        return None
    rows = [[str(m.get("measure", "")), _seconds(m.get("first")), _seconds(m.get("last")), _ratio(m),
             "-" if m.get("p") is None else f"{m['p']:.3g}", str(m.get("change", ""))]
            for m in drift.get("measures") or []]
    if drift.get("leaked") is not None:
        rows.append(["leaked over the churn", "-", str(drift["leaked"]), "-", "-", "-"])
    if drift.get("memoryGrowthPercent") is not None:
        component = drift.get("memoryComponent")
        rows.append([f"peak memory growth{f' ({component})' if component else ''}", "-",
                     f"{drift['memoryGrowthPercent']:+.1f}%", "-", "-", "-"])
    return DRIFT_HEADERS, rows


# -- two runs ------------------------------------------------------------------------------------------------
def _medians(run: dict[str, Any], phase: str) -> tuple[float | None, float | None]:
    """(p50, throughput): their medians over the run's windows that measured the phase (the tail left out)."""
    found = [p for row in rows_of(run) if not row.get("tail") if (p := _phase(row, phase)) is not None]
    p50s = [float(p["latency"]["p50"]) for p in found if p.get("latency")]
    rates = [float(p["throughput"]) for p in found if p.get("throughput") is not None]
    return (statistics.median(p50s) if p50s else None, statistics.median(rates) if rates else None)


def _compare_cell(p50: float | None, rate: float | None) -> str:
    if p50 is None and rate is None:
        return "-"
    return f"{_seconds(p50)} · {'-' if rate is None else f'{rate:.2f}'}"


def compare_table(run_a: dict[str, Any], run_b: dict[str, Any]) -> Table | None:
    """B vs A per phase: the median window p50 and throughput of each, and A's p50 over B's (above 1 when B is
    faster); None when neither run has a churn."""
    if not rows_of(run_a) and not rows_of(run_b):
        return None
    rows = []
    for phase in PHASES:
        (p50_a, rate_a), (p50_b, rate_b) = _medians(run_a, phase), _medians(run_b, phase)
        ratio = "-" if not p50_a or not p50_b else f"{p50_a / p50_b:.2f}×"
        rows.append([phase, _compare_cell(p50_a, rate_a), _compare_cell(p50_b, rate_b), ratio])
    return COMPARE_HEADERS, rows


# -- what the HTML page draws --------------------------------------------------------------------------------
def tail_span(run: dict[str, Any]) -> tuple[float, float] | None:
    """The tail window's start (durationSeconds on the step's clock) and end, or None without one."""
    return next(((float(row["startSeconds"]), float(row["endSeconds"])) for row in rows_of(run) if row.get("tail")),
                None)


def phase_points(run: dict[str, Any], measure: str) -> list[tuple[str, Points]]:
    """Per phase, (window end seconds, value) of ``measure``: 'throughput' or a latency percentile ('p99')."""
    curves = []
    for phase in PHASES:
        points = []
        for row in rows_of(run):
            found = _phase(row, phase) or {}
            value = found.get("throughput") if measure == "throughput" else (found.get("latency") or {}).get(measure)
            if value is not None:
                points.append((float(row["endSeconds"]), float(value)))
        curves.append((phase, points))
    return curves


def leak_points(run: dict[str, Any]) -> Points:
    """(window end seconds, leaks total): what finished waves left behind, counted at each window's end."""
    return [(float(row["endSeconds"]), float(sum(int(leaks.get(key) or 0)
                                                 for key in ("volumes", "attachments", "released"))))
            for row in rows_of(run) if (leaks := row.get("leaks"))]


def memory_points(run: dict[str, Any]) -> list[tuple[str, Points]]:
    """Per component, in the order first read, (window end seconds, peak memory MiB)."""
    found: dict[str, Points] = {}
    for row in rows_of(run):
        for reading in row.get("memory") or []:
            found.setdefault(str(reading["component"]), []).append(
                (float(row["endSeconds"]), float(reading["bytes"]) / MIB))
    return list(found.items())


def notes(run: dict[str, Any]) -> list[str]:
    """Each window's message (its first failure, or why it was not measured) and why a leak count is the
    cluster's only."""
    found = [f"churn window {row['index']}: {row['message']}" for row in rows_of(run) if row.get("message")]
    return found + [f"churn window {row['index']} leaks: {row['leaks']['message']}" for row in rows_of(run)
                    if (row.get("leaks") or {}).get("message")]
