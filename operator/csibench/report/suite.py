"""A BenchmarkSuite's report: its runs, per step a scaling table over its cells, and the cells compared along each
axis with the rounds as samples (pure; reads the suite and its runs as the API returns them).

A suite is read by cells, not by runs, so its report is a module of its own beside a run's (``render``) and two
runs' (``compare``). A cell's figure for a step is its median over the rounds (``api/suite_results``, which the
operator's per-cell metrics and ``csibench compare --suite`` read too, so every reader agrees on the numbers). The
scaling table is a step's row per cell: how its throughput moves as an axis grows (10 -> 100 -> 1000 volumes). A
comparison takes one axis, the cells that agree on every other axis, and judges each value's cell against the
first value's cell per step with ``api/regression`` (Welch's t on the logarithms, Holm over the steps of a pair,
TOST for Equivalent: the judgement of ``compare --max-regression`` and of a run's baseline). Its samples are the
rounds: one round per cell can never be tested, and the report says so rather than print a bare ratio as a
finding. The text, Markdown and JSON renderings and the HTML page (``html.build_suite_html``) all read the rows
built here.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from csibench.api.regression import Change, Judged, Samples, judge_changes, why_undecided
from csibench.api.stats import ALPHA
from csibench.api.steps import STEP_FACTS, has_own_table, title_and_unit
from csibench.api.suite import AXES, CELL_LABEL, MAX_ROUNDS, ROUND_LABEL, SUITE_KIND
from csibench.api.suite_results import CellResult, StepSamples, cell_results, pooled_run
from csibench.report.compare import TERMINAL, CompareError
from csibench.report.render import Table, align, markdown_table
from csibench.report.suite_queries import TITLE as OWN_QUERIES_TITLE
from csibench.report.suite_queries import own_queries_table, own_query_peaks

NUMERIC_AXES = {"volumes": "volumes (batch size)", "pvcsPerPod": "PVCs per pod",  # axis -> the curve's x label
                "population": "population (claims, and as many snapshots)"}
DEFAULT_MAX_REGRESSION_PERCENT = 10.0


class UnknownCell(ValueError):
    """A cell id the suite does not have; the message lists the cells it has."""


@dataclass(frozen=True)
class SuiteView:
    """A suite read once: its cells with their rounds, its axes (each with its values in matrix order), and every
    step measured (lifecycle order)."""

    suite: dict[str, Any]
    runs: list[dict[str, Any]]
    cells: list[CellResult]
    axes: list[tuple[str, list[str]]]
    steps: list[str]

    @property
    def name(self) -> str:
        meta = self.suite.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    @property
    def status(self) -> dict[str, Any]:
        return self.suite.get("status") or {}

    @property
    def repeat(self) -> int:
        return int((self.suite.get("spec") or {}).get("repeat") or 1)

    def planned(self, cell: str) -> int:
        """The rounds the cell is to run: its entries in status.runs (spec.repeat before the suite wrote any)."""
        entries = [entry for entry in self.status.get("runs") or [] if entry.get("cell") == cell]
        return len(entries) or self.repeat


def _axes(cells: list[CellResult]) -> list[tuple[str, list[str]]]:
    """The axes the cells name, in AXES order (an axis a newer operator added after them), each value once, in
    the order the cells show them (the matrix's: the cells are numbered over it)."""
    values: dict[str, list[str]] = {}
    for result in cells:
        for axis, value in result.values.items():
            seen = values.setdefault(axis, [])
            if value not in seen:
                seen.append(value)
    order = [axis for axis in AXES if axis in values] + [axis for axis in values if axis not in AXES]
    return [(axis, values[axis]) for axis in order]


def _steps(cells: list[CellResult]) -> list[str]:
    names: list[str] = []
    for result in cells:
        names += [name for name in result.steps if name not in names]
    lifecycle = list(STEP_FACTS)
    return sorted(names, key=lambda name: (lifecycle.index(name) if name in lifecycle else len(lifecycle)))


def view_of(suite: dict[str, Any], runs: list[dict[str, Any]]) -> SuiteView:
    cells = cell_results(suite, runs)
    return SuiteView(suite, runs, cells, _axes(cells), _steps(cells))


def scaling_steps(view: SuiteView) -> list[str]:
    """The steps a throughput table and curve say something of (not those whose numbers are tables of their own)."""
    return [step for step in view.steps if not has_own_table(step)]


def _own_table_note(view: SuiteView) -> list[str]:
    own = [title_and_unit(step)[0] for step in view.steps if has_own_table(step)]
    if not own:
        return []
    return [f"{', '.join(own)}: their numbers are tables of their own, per run (csibench report RUN); the suite's "
            "tables and comparisons read the lifecycle steps' throughput"]


# -- the header and the runs ------------------------------------------------------------------------------------
def header_lines(view: SuiteView) -> list[str]:
    status, spec = view.status, view.suite.get("spec") or {}
    lines = [f"{SUITE_KIND} {view.name}: {status.get('phase') or 'Pending'}"
             + (f" — {status['message']}" if status.get("message") else "")]
    facts = (f"progress {status.get('progress') or '-'}, order {spec.get('order') or 'Interleaved'}, "
             f"rounds {view.repeat} (spec.repeat), parallelism {spec.get('parallelism') or 1}, "
             f"{len(view.cells)} cell{'s' if len(view.cells) != 1 else ''}")
    lines.append(facts + (f", verdict {status['verdict']}" if status.get("verdict") else ""))
    if view.axes:
        lines.append("matrix: " + "; ".join(f"{axis} = {', '.join(values)}" for axis, values in view.axes))
    if status.get("current"):
        lines.append(f"running now: {status['current']}")
    return lines


def _round_of(run: dict[str, Any]) -> int:
    return int(((run.get("metadata") or {}).get("labels") or {}).get(ROUND_LABEL, "0") or 0)


def runs_table(view: SuiteView) -> Table:
    """Every run of the suite (status.runs, in the order they start; the runs found when the suite listed none),
    its phase and verdict as the run itself says them when it exists."""
    by_name = {(run.get("metadata") or {}).get("name", ""): run for run in view.runs}
    values = {result.cell: result.values for result in view.cells}
    entries = view.status.get("runs") or [
        {"name": name, "cell": ((run.get("metadata") or {}).get("labels") or {}).get(CELL_LABEL, "?"),
         "round": _round_of(run)} for name, run in by_name.items()]
    axes = [axis for axis, _ in view.axes]
    rows = []
    for entry in entries:
        own = (by_name.get(entry.get("name", "")) or {}).get("status") or {}
        phase = own.get("phase") or entry.get("phase") or "not started"
        rows.append([entry.get("name", ""), entry.get("cell", ""),
                     *[values.get(entry.get("cell", ""), {}).get(axis, "-") for axis in axes],
                     str(entry.get("round", "")), phase, own.get("verdict") or entry.get("verdict") or "-"])
    return ["Run", "Cell", *axes, "Round", "Phase", "Verdict"], rows


def run_notes(view: SuiteView) -> list[str]:
    """Why runs ended as they did, when they say (the run's message, else the suite's for a run it lost)."""
    by_name = {(run.get("metadata") or {}).get("name", ""): run for run in view.runs}
    notes = []
    for entry in view.status.get("runs") or []:
        own = (by_name.get(entry.get("name", "")) or {}).get("status") or {}
        message = own.get("message") if own.get("phase") == "Failed" else None
        message = message or entry.get("message")
        if message:
            notes.append(f"run {entry.get('name', '')}: {message}")
    return notes


# -- per step: the scaling table and its curve ------------------------------------------------------------------
def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def scaling_table(view: SuiteView, step: str) -> Table:
    """One row per cell: its axis values, the step's median throughput over the rounds (and their range), its
    median step time, the median of the rounds' p99, and how many rounds measured the step of those the cell
    runs."""
    _, unit = title_and_unit(step)
    axes = [axis for axis, _ in view.axes]
    rows = []
    for result in view.cells:
        samples = result.steps.get(step) or StepSamples()
        spread = (f"{min(samples.throughputs):.2f}-{max(samples.throughputs):.2f}"
                  if len(samples.throughputs) >= 2 else "-")
        seconds = statistics.median(samples.durations) if samples.durations else None
        rows.append([result.cell, *[result.values.get(axis, "-") for axis in axes], _number(samples.throughput),
                     spread, _number(seconds), _number(samples.p99, 3),
                     f"{len(samples.throughputs)}/{view.planned(result.cell)}"])
    return ["Cell", *axes, f"{unit}/s median", "min-max", "step s median", "p99 s median", "Rounds"], rows


def machinery_peaks(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Per CSI component (container), the median over ``runs`` of its peak memory over each run's steps, in MiB
    (spec.collect: status.steps[].collection, peakMemoryBytes); a run that collected nothing is left out."""
    per_run: list[dict[str, float]] = []
    for run in runs:
        peaks: dict[str, float] = {}
        for step in (run.get("status") or {}).get("steps") or []:
            for value in (step.get("collection") or {}).get("values") or []:
                labels = value.get("labels") or {}
                name = labels.get("container") or labels.get("job")
                if value.get("query") == "peakMemoryBytes" and name and isinstance(value.get("value"), int | float):
                    peaks[name] = max(peaks.get(name, 0.0), float(value["value"]) / 2**20)
        if peaks:
            per_run.append(peaks)
    names = sorted({name for peaks in per_run for name in peaks})
    return {name: statistics.median(peaks[name] for peaks in per_run if name in peaks) for name in names}


def machinery_table(view: SuiteView) -> Table | None:
    """One row per cell: each CSI component's peak memory over the run's steps (MiB, the median over the rounds),
    when the runs collected it (spec.collect); None when none did."""
    peaks = {result.cell: machinery_peaks(result.runs) for result in view.cells}
    components = sorted({name for found in peaks.values() for name in found})
    if not components:
        return None
    axes = [axis for axis, _ in view.axes]
    rows = [[result.cell, *[result.values.get(axis, "-") for axis in axes],
             *[_number(peaks[result.cell].get(name), 0) for name in components]] for result in view.cells]
    return ["Cell", *axes, *[f"{name} MiB" for name in components]], rows


def machinery_lines(view: SuiteView) -> tuple[str, list[Line]] | None:
    """Each CSI component's peak memory (MiB, median over the rounds) against the first numeric axis (a population
    level, a batch size): one line per component; None without a numeric axis or collected memory."""
    axis = numeric_axis(view)
    if axis is None:
        return None
    lines: dict[str, list[tuple[float, float]]] = {}
    for result in view.cells:
        for name, mib in machinery_peaks(result.runs).items():
            lines.setdefault(name, []).append((float(result.values[axis]), mib))
    if not lines:
        return None
    return NUMERIC_AXES[axis], [(name, sorted(points)) for name, points in sorted(lines.items())]


def numeric_axis(view: SuiteView) -> str | None:
    """The scaling curve's x axis: the first numeric axis (volumes, pvcsPerPod) with two or more values."""
    for axis, values in view.axes:
        if axis in NUMERIC_AXES and len(values) >= 2 and all(value.isdigit() for value in values):
            return axis
    return None


Line = tuple[str, list[tuple[float, float]]]  # a curve's label and its (x, y) points, in x order


def scaling_lines(view: SuiteView, step: str) -> tuple[str, list[Line]]:
    """The curve of a step's median throughput: the x label, and against the first numeric axis one line per
    combination of the other axes that vary (a class, a client); with no numeric axis, one line over the cells."""
    axis = numeric_axis(view)
    if axis is None:
        points = [(float(index), samples.throughput) for index, result in enumerate(view.cells)
                  if (samples := result.steps.get(step)) is not None and samples.throughput is not None]
        shown = ", ".join(f"{result.cell} {' '.join(result.values.values())}".strip() for result in view.cells)
        label = f"cell: {shown}" if len(shown) <= 80 else "cell (in the table's order)"
        return label, [("median throughput", points)]
    others = [other for other, values in view.axes if other != axis and len(values) >= 2]
    lines: dict[str, list[tuple[float, float]]] = {}
    for result in view.cells:
        label = ", ".join(f"{other}={result.values.get(other, '-')}" for other in others) or "median throughput"
        points = lines.setdefault(label, [])
        samples = result.steps.get(step)
        if samples is not None and samples.throughput is not None:
            points.append((float(result.values[axis]), samples.throughput))
    return NUMERIC_AXES[axis], [(label, sorted(points)) for label, points in lines.items()]


# -- the comparisons --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CellComparison:
    """One step of cell B against cell A: they differ on ``axis`` only (A holds the axis's first value), the
    rounds of each are the samples."""

    axis: str
    fixed: dict[str, str]  # the other axes' values, which A and B share
    step: str
    cell_a: str
    value_a: str
    cell_b: str
    value_b: str
    judged: Judged


def _pairs(view: SuiteView) -> list[tuple[str, CellResult, CellResult]]:
    """(axis, A, B) for each axis with two or more values and each group of cells that agree on every other
    axis: A the cell of the axis's first value, B each other value's."""
    pairs = []
    for axis, values in view.axes:
        if len(values) < 2:
            continue
        groups: dict[tuple[str, ...], dict[str, CellResult]] = {}
        for result in view.cells:
            key = tuple(result.values.get(other, "") for other, _ in view.axes if other != axis)
            groups.setdefault(key, {})[result.values.get(axis, "")] = result
        for group in groups.values():
            first = group.get(values[0])
            if first is not None:
                pairs += [(axis, first, group[value]) for value in values[1:] if value in group]
    return pairs


def comparisons_of(view: SuiteView, max_regression_percent: float = DEFAULT_MAX_REGRESSION_PERCENT,
                   alpha: float = ALPHA) -> list[CellComparison]:
    """Per pair of cells (``_pairs``) and step measured on either side, B judged against A over the rounds; the
    p values Holm-adjusted over the steps of the pair (as a run against its baseline)."""
    steps = scaling_steps(view)
    found = []
    for axis, a, b in _pairs(view):
        shared = [step for step in steps if step in a.steps or step in b.steps]
        samples = [((a.steps.get(step) or StepSamples()).throughputs, (b.steps.get(step) or StepSamples()).throughputs)
                   for step in shared]
        judged = judge_changes(samples, max_regression_percent / 100.0, alpha)
        fixed = {other: a.values.get(other, "") for other, _ in view.axes if other != axis}
        found += [CellComparison(axis, fixed, step, a.cell, a.values.get(axis, ""), b.cell, b.values.get(axis, ""), j)
                  for step, j in zip(shared, judged, strict=True)]
    return found


def suite_comparisons(suite: dict[str, Any], runs: list[dict[str, Any]],
                      max_regression_percent: float = DEFAULT_MAX_REGRESSION_PERCENT,
                      alpha: float = ALPHA) -> list[CellComparison]:
    """Every comparison of the suite's cells, as data (the tables and the HTML page print these)."""
    return comparisons_of(view_of(suite, runs), max_regression_percent, alpha)


ROUNDS = Samples("one round on a side: needs spec.repeat >= 2", "the rounds do not vary: nothing to test against",
                 "more than {most} rounds per cell would be needed", "about {n} rounds per cell would decide",
                 MAX_ROUNDS)


def change_text(judged: Judged) -> str:
    """The change, and for Inconclusive why (or what would decide it)."""
    if judged.change not in (Change.INCONCLUSIVE, Change.SLOWER):
        return str(judged.change)
    return f"{judged.change} ({why_undecided(judged, ROUNDS)})"


def comparison_table(comparisons: list[CellComparison]) -> Table:
    rows = []
    for item in comparisons:
        j = item.judged
        fixed = ", ".join(f"{axis}={value}" for axis, value in item.fixed.items()) or "-"
        interval = f"[{j.low:.2f}, {j.high:.2f}]" if j.low is not None and j.high is not None else "-"
        rows.append([item.axis, f"{item.value_b} ({item.cell_b}) vs {item.value_a} ({item.cell_a})", fixed,
                     title_and_unit(item.step)[0], "-" if j.ratio is None else f"{j.ratio:.2f}×", interval,
                     "-" if j.p is None else f"{j.p:.2g}", f"{j.n_a}/{j.n_b}", change_text(j)])
    return ["Axis", "B vs A", "Other axes", "Step", "B/A throughput", "90% interval", "p (Holm)", "Rounds A/B",
            "Change"], rows


def comparison_notes(view: SuiteView, comparisons: list[CellComparison], max_regression_percent: float,
                     alpha: float) -> list[str]:
    if not any(len(values) >= 2 for _, values in view.axes):
        return ["no comparison: no axis of the matrix has two or more values"]
    threshold = max_regression_percent / 100.0
    notes = [f"samples: the rounds of each cell, one throughput per round (n = {view.repeat} per side when every "
             "round measured the step: spec.repeat); B/A is the ratio of the rounds' geometric means, its 90% "
             f"interval from Welch's t on log throughput, p Holm-adjusted over the steps of each pair; Regression "
             f"or Improvement: significant at alpha {alpha:g} and beyond {threshold:.0%}, Equivalent: the interval "
             f"within {threshold:.0%} either way (TOST)"]
    if view.repeat < 2:
        notes.append("significance needs spec.repeat >= 2 on the suite: each cell ran one round, so every "
                     "comparison is Inconclusive and its ratio is one run's against another's")
    if not comparisons:
        notes.append("nothing compared yet: no cell has measured a step")
    return notes


# -- the renderings ---------------------------------------------------------------------------------------------
def render_suite(suite: dict[str, Any], runs: list[dict[str, Any]], markdown: bool = False, alpha: float = ALPHA,
                 max_regression_percent: float = DEFAULT_MAX_REGRESSION_PERCENT) -> str:
    view = view_of(suite, runs)
    comparisons = comparisons_of(view, max_regression_percent, alpha)

    def table(title: str, shown: Table) -> list[str]:
        if markdown:
            return ["", f"#### {title}", "", *markdown_table(*shown)]
        return ["", title, *align(*shown)]

    header = header_lines(view)
    lines = [f"### {header[0]}", "", *[f"{line}  " for line in header[1:]]] if markdown else header
    lines += table("Runs", runs_table(view))
    for step in scaling_steps(view):
        lines += table(f"{title_and_unit(step)[0]}: median over the rounds, per cell", scaling_table(view, step))
    machinery = machinery_table(view)
    if machinery is not None:
        lines += table("CSI components: peak memory over the run's steps (spec.collect), median over the rounds, "
                       "per cell", machinery)
    own = own_queries_table(view.cells, [axis for axis, _ in view.axes])
    if own is not None:
        lines += table(OWN_QUERIES_TITLE, own)
    if comparisons:
        lines += table("Comparisons: each axis's values against its first, the other axes equal",
                       comparison_table(comparisons))
    notes = [*comparison_notes(view, comparisons, max_regression_percent, alpha), *_own_table_note(view),
             *run_notes(view)]
    if view.status.get("phase") not in ("Succeeded", "Failed"):
        notes.append(f"suite still in progress ({view.status.get('progress') or '-'} runs finished)")
    lines += ["", *[f"- {note}" if markdown else note for note in notes]]
    return "\n".join(lines) + "\n"


def _samples_json(samples: StepSamples) -> dict[str, Any]:
    return {"throughput": samples.throughput, "p99": samples.p99,
            "durationSeconds": statistics.median(samples.durations) if samples.durations else None,
            "rounds": len(samples.throughputs), "throughputs": samples.throughputs,
            "durations": samples.durations, "p99s": samples.p99s}


def comparison_json(item: CellComparison) -> dict[str, Any]:
    j = item.judged
    return {"axis": item.axis, "fixed": item.fixed, "step": item.step, "a": {"cell": item.cell_a,
            "value": item.value_a}, "b": {"cell": item.cell_b, "value": item.value_b}, "change": str(j.change),
            "ratio": j.ratio, "low": j.low, "high": j.high, "p": j.p, "rounds": [j.n_a, j.n_b],
            "roundsNeeded": j.iterations_needed}


def suite_json(suite: dict[str, Any], runs: list[dict[str, Any]], alpha: float = ALPHA,
               max_regression_percent: float = DEFAULT_MAX_REGRESSION_PERCENT) -> dict[str, Any]:
    """The suite as the API returns it, per cell its runs and per step its medians and the rounds' samples,
    and the comparisons."""
    view = view_of(suite, runs)
    cells = [{"id": result.cell, "values": result.values,
              "runs": [(run.get("metadata") or {}).get("name", "") for run in result.runs],
              "steps": {step: _samples_json(samples) for step, samples in result.steps.items()},
              "machineryPeakMiB": machinery_peaks(result.runs), "ownQueryPeaks": own_query_peaks(result.runs)[0]}
             for result in view.cells]
    return {"suite": suite, "cells": cells,
            "comparisons": [comparison_json(item) for item in comparisons_of(view, max_regression_percent, alpha)]}


# -- two cells as two runs (csibench compare --suite) -----------------------------------------------------------
def cell_runs(suite: dict[str, Any], runs: list[dict[str, Any]], cell_a: str,
              cell_b: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two cells of the suite as two runs (``pooled_run``: the medians over the rounds, the rounds as the
    iterations) for ``compare``. An id the suite does not have: ``UnknownCell``; a cell with rounds still to
    run while the suite runs: ``CompareError``."""
    view = view_of(suite, runs)
    by_id = {result.cell: result for result in view.cells}
    unknown = [cell for cell in (cell_a, cell_b) if cell not in by_id]
    if unknown:
        listed = "; ".join(f"{result.cell} ({', '.join(f'{k}={v}' for k, v in result.values.items()) or 'no axis'})"
                           for result in view.cells) or "none yet"
        raise UnknownCell(f"{SUITE_KIND} {view.name} has no cell {', '.join(unknown)}; its cells: {listed}")
    ended = view.status.get("phase") in TERMINAL
    for cell in (cell_a, cell_b):
        result = by_id[cell]
        finished = sum(1 for run in result.runs if (run.get("status") or {}).get("phase") in TERMINAL)
        if finished < len(result.runs) or (not ended and finished < view.planned(cell)):
            raise CompareError(f"cell {cell} of {SUITE_KIND} {view.name} is still running ({finished} of "
                               f"{view.planned(cell)} rounds finished); compare needs finished cells")
    return pooled_run(suite, by_id[cell_a]), pooled_run(suite, by_id[cell_b])
