"""Two finished runs side by side, with the per-step throughput ratio ("B vs A", as published comparisons read).

The ratio is B's throughput over A's (>1: B is faster), computed from the same aggregates the status holds.
When both runs repeated their lifecycle (``spec.repeat`` > 1) the cells are medians over the measured iterations
and each ratio is the ratio of median throughputs, marked significant or not by ``stats`` (the method is named
under the table); with single runs the table says that significance is unknown.
Runs with different step lists are compared on the steps they share, and the output says which were left out;
runs whose CSI machinery differs (versions, client limits, workers) say so under the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from csibench.api.stats import ALPHA, METHOD, Difference, compare_samples, significance_cell
from csibench.api.steps import has_own_table, title_and_unit
from csibench.api.text import human_duration
from csibench.report.machinery import differences
from csibench.report.render import aggregate_time, align, markdown_table
from csibench.report.tables import comparison_tables

TERMINAL = ("Succeeded", "Failed")


class CompareError(ValueError):
    """The two runs cannot be compared (yet); the message says why."""


@dataclass(frozen=True)
class StepComparison:
    step: str
    a: dict[str, Any]
    b: dict[str, Any]

    @property
    def ratio(self) -> float | None:
        rate_a, rate_b = self.a.get("throughput"), self.b.get("throughput")
        if not rate_a or rate_b is None:
            return None
        return float(rate_b) / float(rate_a)


def _name(run: dict[str, Any]) -> str:
    meta = run.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _medians(run: dict[str, Any], steps: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A repeated run's steps as their medians over the measured iterations (its status.steps hold only the
    last iteration), so a single run compared with a repeated one meets its typical figure, not its last."""
    medians = {}
    for name, step in steps.items():
        aggregate = aggregates_of(run).get(name)
        if aggregate:
            medians[name] = {**step, "durationSeconds": (aggregate.get("durationSeconds") or {}).get("median"),
                             "throughput": (aggregate.get("throughput") or {}).get("median"), "failed": 0}
        else:
            medians[name] = step
    return medians


def compare_runs(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[StepComparison], list[str]]:
    """Per-step comparisons of the shared steps, and the steps only one run has."""
    for run in (run_a, run_b):
        phase = (run.get("status") or {}).get("phase")
        if phase not in TERMINAL:
            raise CompareError(f"BenchmarkRun {_name(run)} is still {phase or 'Pending'}; "
                               "compare needs two finished runs")
    steps_a = _medians(run_a, {s["name"]: s for s in run_a["status"].get("steps", [])})
    steps_b = _medians(run_b, {s["name"]: s for s in run_b["status"].get("steps", [])})
    shared = [name for name in steps_a if name in steps_b]
    if not shared:
        raise CompareError(f"{_name(run_a)} and {_name(run_b)} have no step in common")
    only = [f"{name} (only in {_name(run_a)})" for name in steps_a if name not in steps_b]
    only += [f"{name} (only in {_name(run_b)})" for name in steps_b if name not in steps_a]
    return [StepComparison(name, steps_a[name], steps_b[name]) for name in shared], only


def _cell(step: dict[str, Any], unit: str, rate_shown: bool = True) -> str:
    duration, rate = step.get("durationSeconds"), step.get("throughput")
    text = "-" if duration is None else human_duration(duration)
    if rate is not None and rate_shown:
        text += f" · {rate:.2f} {unit}/s"
    if step.get("failed"):
        text += f" ({step['failed']} failed)"
    return text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}×"


def aggregates_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A repeated run's per-step aggregates by step name ({} for a single run)."""
    return {a["name"]: a for a in (run.get("status") or {}).get("aggregates") or []}


def differences_of(comparisons: list[StepComparison], run_a: dict[str, Any],
                   run_b: dict[str, Any]) -> list[Difference] | None:
    """Per shared step, B against A over the iterations (None unless both runs repeated)."""
    agg_a, agg_b = aggregates_of(run_a), aggregates_of(run_b)
    if not agg_a or not agg_b:
        return None
    return compare_samples([(list((agg_a.get(c.step) or {}).get("throughputs") or []),
                             list((agg_b.get(c.step) or {}).get("throughputs") or [])) for c in comparisons])


def _single_note(run_a: dict[str, Any], run_b: dict[str, Any]) -> str:
    single = [label for label, run in (("A", run_a), ("B", run_b)) if not aggregates_of(run)]
    return (f"significance unknown: {' and '.join(single)} ran a single iteration; set spec.repeat (e.g. 5) on both "
            "runs to tell a real difference from noise")


def comparison_rows(run_a: dict[str, Any], run_b: dict[str, Any],
                    alpha: float = ALPHA) -> tuple[list[str], list[list[str]], list[str]]:
    comparisons, only = compare_runs(run_a, run_b)
    repeated = differences_of(comparisons, run_a, run_b)
    agg_a, agg_b = aggregates_of(run_a), aggregates_of(run_b)
    rows = []
    if repeated is None:
        headers = ["Operation", f"A: {_name(run_a)}", f"B: {_name(run_b)}", "B vs A (throughput)"]
        for item in comparisons:
            title, unit = title_and_unit(item.step)
            if has_own_table(item.step):  # wall time only; its rows are compared in their own table below
                rows.append([title, _cell(item.a, unit, False), _cell(item.b, unit, False), "(its table below)"])
            else:
                rows.append([title, _cell(item.a, unit), _cell(item.b, unit), _ratio(item.ratio)])
        total_a = sum(c.a.get("durationSeconds") or 0 for c in comparisons)
        total_b = sum(c.b.get("durationSeconds") or 0 for c in comparisons)
    else:
        headers = ["Operation", f"A: {_name(run_a)} (median, min-max)", f"B: {_name(run_b)} (median, min-max)",
                   "B vs A (median throughput)"]
        for item, difference in zip(comparisons, repeated, strict=True):
            title, unit = title_and_unit(item.step)
            rows.append([title, aggregate_time(agg_a.get(item.step) or {}, unit),
                         aggregate_time(agg_b.get(item.step) or {}, unit), significance_cell(difference, alpha)])
        total_a = sum(((agg_a.get(c.step) or {}).get("durationSeconds") or {}).get("median", 0) for c in comparisons)
        total_b = sum(((agg_b.get(c.step) or {}).get("durationSeconds") or {}).get("median", 0) for c in comparisons)
    overall = f"~{total_a / total_b:.1f}× overall" if total_a and total_b else "-"
    rows.append(["Sum of step times" + (" (medians)" if repeated is not None else ""), human_duration(total_a),
                 human_duration(total_b), overall])
    notes = [f"significance: {METHOD.format(alpha=alpha)}" if repeated is not None else _single_note(run_a, run_b)]
    notes += [f"not compared: {', '.join(only)}"] if only else []
    changed = differences((run_a["status"].get("environment") or {}), (run_b["status"].get("environment") or {}))
    if changed:
        notes += ["the CSI machinery differs between A and B (the ratios include its effect):",
                  *[f"  {line}" for line in changed]]
    return headers, rows, notes


def render_compare(run_a: dict[str, Any], run_b: dict[str, Any], markdown: bool = False,
                   alpha: float = ALPHA) -> str:
    headers, rows, notes = comparison_rows(run_a, run_b, alpha)
    lines = markdown_table(headers, rows) if markdown else align(headers, rows)
    for entry, table, note in comparison_tables(run_a, run_b):
        lines += ["", f"#### {entry.title}" if markdown else entry.lead, "",
                  *(markdown_table(*table) if markdown else align(*table))]
        lines += ["", note] if note else []
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"
