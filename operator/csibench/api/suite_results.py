"""What a suite measured, per cell: its rounds as samples (pure; reads runs as the API returns them).

A cell's rounds are its samples: each round is one run, and its figure for a step is the run's throughput (with
``spec.repeat`` inside the run, the run's median over its iterations, so one round is still one sample: the
iterations of one run share its moment, the rounds do not). The report's scaling tables, the comparisons of
cells, the operator's per-cell metrics and ``csibench compare --suite`` all read the cells through here, so they
agree on the numbers.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from csibench.api.suite import CELL_LABEL, ROUND_LABEL


def _step_figures(run: dict[str, Any]) -> dict[str, tuple[float | None, float | None, float | None]]:
    """Per step of a Succeeded run: (throughput, duration, p99), the median over the run's iterations when it
    repeated (p99: the last iteration's when it did not aggregate one)."""
    status = run.get("status") or {}
    aggregates = {a["name"]: a for a in status.get("aggregates") or []}
    figures = {}
    for step in status.get("steps") or []:
        if step.get("state") != "Succeeded":
            continue
        aggregate = aggregates.get(step["name"]) or {}
        throughput = (aggregate.get("throughput") or {}).get("median", step.get("throughput"))
        duration = (aggregate.get("durationSeconds") or {}).get("median", step.get("durationSeconds"))
        p99 = (aggregate.get("latency") or step.get("latency") or {}).get("p99")
        figures[step["name"]] = (throughput, duration, p99)
    return figures


@dataclass
class StepSamples:
    """One step of one cell over its rounds (round order; a round that did not measure the step is left out)."""

    throughputs: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)

    @property
    def throughput(self) -> float | None:
        return statistics.median(self.throughputs) if self.throughputs else None

    @property
    def p99(self) -> float | None:
        return statistics.median(self.p99s) if self.p99s else None


@dataclass
class CellResult:
    """A cell's runs (round order) and, per step, its samples."""

    cell: str
    values: dict[str, str]
    runs: list[dict[str, Any]]
    steps: dict[str, StepSamples]

    @property
    def succeeded(self) -> int:
        return sum(1 for run in self.runs if (run.get("status") or {}).get("phase") == "Succeeded")


def _round(run: dict[str, Any]) -> int:
    labels = (run.get("metadata") or {}).get("labels") or {}
    return int(labels.get(ROUND_LABEL, "0") or 0)


def cell_results(suite: dict[str, Any], runs: list[dict[str, Any]]) -> list[CellResult]:
    """Every cell of the suite (status.cells order) with the runs that carry its label."""
    by_cell: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        cell = ((run.get("metadata") or {}).get("labels") or {}).get(CELL_LABEL)
        if cell:
            by_cell.setdefault(cell, []).append(run)
    results = []
    for cell in (suite.get("status") or {}).get("cells") or []:
        cell_runs = sorted(by_cell.get(cell["id"], []), key=_round)
        steps: dict[str, StepSamples] = {}
        for run in cell_runs:
            if (run.get("status") or {}).get("phase") != "Succeeded":
                continue
            for name, (throughput, duration, p99) in _step_figures(run).items():
                samples = steps.setdefault(name, StepSamples())
                if throughput is not None:
                    samples.throughputs.append(float(throughput))
                if duration is not None:
                    samples.durations.append(float(duration))
                if p99 is not None:
                    samples.p99s.append(float(p99))
        results.append(CellResult(cell["id"], dict(cell.get("values") or {}), cell_runs, steps))
    return results


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def pooled_run(suite: dict[str, Any], result: CellResult) -> dict[str, Any]:
    """A cell as one run for ``compare`` and the baseline judgement: its steps' medians over the rounds, and
    with two or more rounds the rounds as the iterations (``status.aggregates``), so the same significance test
    reads rounds where a repeated run gives iterations. Succeeded when a round did: the rounds that failed are
    left out of the samples, as the suite's report leaves them out, so both read the same numbers."""
    meta = suite.get("metadata") or {}
    finished = [run for run in result.runs if (run.get("status") or {}).get("phase") == "Succeeded"]
    phase = "Succeeded" if finished else "Failed"
    template = (finished[-1] if finished else (result.runs[-1] if result.runs else {})).get("status") or {}
    steps, aggregates = [], []
    for step in template.get("steps") or []:
        samples = result.steps.get(step["name"])
        if samples is None or not samples.throughputs:
            steps.append(step)
            continue
        duration = statistics.median(samples.durations) if samples.durations else step.get("durationSeconds")
        steps.append({**step, "throughput": samples.throughput, "durationSeconds": duration})
        if len(samples.throughputs) >= 2:
            aggregates.append({"name": step["name"], "iterations": len(samples.throughputs),
                               "throughput": _spread(samples.throughputs),
                               "durationSeconds": _spread(samples.durations) if samples.durations else None,
                               "throughputs": samples.throughputs, "durations": samples.durations})
    return {"metadata": {"namespace": meta.get("namespace", ""), "name": f"{meta.get('name', '')}/{result.cell}"},
            "spec": (result.runs[-1].get("spec") if result.runs else {}) or {},
            "status": {"phase": phase, "steps": steps, "aggregates": aggregates}}
