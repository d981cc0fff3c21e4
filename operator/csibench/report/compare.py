"""Two finished runs side by side, with the per-step throughput ratio ("B vs A", as published comparisons read).

The ratio is B's throughput over A's (>1: B is faster), computed from the same aggregates the status holds.
Runs with different step lists are compared on the steps they share, and the output says which were left out;
runs whose CSI machinery differs (versions, client limits, workers) say so under the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from csibench.engine.catalog import title_and_unit
from csibench.engine.timing import human_duration
from csibench.report.machinery import differences
from csibench.report.render import align, markdown_table

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


def compare_runs(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[StepComparison], list[str]]:
    """Per-step comparisons of the shared steps, and the steps only one run has."""
    for run in (run_a, run_b):
        phase = (run.get("status") or {}).get("phase")
        if phase not in TERMINAL:
            raise CompareError(f"BenchmarkRun {_name(run)} is still {phase or 'Pending'}; "
                               "compare needs two finished runs")
    steps_a = {s["name"]: s for s in run_a["status"].get("steps", [])}
    steps_b = {s["name"]: s for s in run_b["status"].get("steps", [])}
    shared = [name for name in steps_a if name in steps_b]
    if not shared:
        raise CompareError(f"{_name(run_a)} and {_name(run_b)} have no step in common")
    only = [f"{name} (only in {_name(run_a)})" for name in steps_a if name not in steps_b]
    only += [f"{name} (only in {_name(run_b)})" for name in steps_b if name not in steps_a]
    return [StepComparison(name, steps_a[name], steps_b[name]) for name in shared], only


def _cell(step: dict[str, Any], unit: str) -> str:
    duration, rate = step.get("durationSeconds"), step.get("throughput")
    text = "-" if duration is None else human_duration(duration)
    if rate is not None:
        text += f" · {rate:.2f} {unit}/s"
    if step.get("failed"):
        text += f" ({step['failed']} failed)"
    return text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}×"


def comparison_rows(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[str], list[list[str]], list[str]]:
    comparisons, only = compare_runs(run_a, run_b)
    headers = ["Operation", f"A: {_name(run_a)}", f"B: {_name(run_b)}", "B vs A (throughput)"]
    rows = []
    for item in comparisons:
        title, unit = title_and_unit(item.step)
        rows.append([title, _cell(item.a, unit), _cell(item.b, unit), _ratio(item.ratio)])
    total_a = sum(c.a.get("durationSeconds") or 0 for c in comparisons)
    total_b = sum(c.b.get("durationSeconds") or 0 for c in comparisons)
    overall = f"~{total_a / total_b:.1f}× overall" if total_a and total_b else "-"
    rows.append(["Sum of step times", human_duration(total_a), human_duration(total_b), overall])
    notes = [f"not compared: {', '.join(only)}"] if only else []
    changed = differences((run_a["status"].get("environment") or {}), (run_b["status"].get("environment") or {}))
    if changed:
        notes += ["the CSI machinery differs between A and B (the ratios include its effect):",
                  *[f"  {line}" for line in changed]]
    return headers, rows, notes


def render_compare(run_a: dict[str, Any], run_b: dict[str, Any], markdown: bool = False) -> str:
    headers, rows, notes = comparison_rows(run_a, run_b)
    lines = markdown_table(headers, rows) if markdown else align(headers, rows)
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"
