"""Render a run's status as the step table storage engineers already publish, plus what those tables lack.

Pure functions over the BenchmarkRun status (a dict as the API returns it), so they are tested without a
cluster. Durations read "10m 30s", rates "1.59 vol/s", latencies are per-object percentiles in seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from csibench.api.steps import has_own_table, title_and_unit
from csibench.api.stored_report import SCHEMA_VERSION
from csibench.api.text import human_duration
from csibench.report import cost, database, datapath, density, modify, parts, shared, tables
from csibench.report.machinery import finding_lines, machinery_lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


ROWS_BELOW = "(wall time; its table below)"


def step_row(step: dict[str, Any]) -> list[str]:
    """A lifecycle step: time, throughput and per-object percentiles. A step whose numbers are rows of a table of
    its own (data path, database): its wall time and a pointer to that table, no per-pod rate or percentiles."""
    title, unit = title_and_unit(step["name"])
    duration = step.get("durationSeconds")
    rate = step.get("throughput")
    timing = "-" if duration is None else human_duration(duration)
    failed = step.get("failed", 0)
    objects = f"{step.get('succeeded', 0)}/{step.get('objects', 0)}" + (f" ({failed} failed)" if failed else "")
    if has_own_table(step["name"]):
        return [title, f"{timing} {ROWS_BELOW}", "", "", "", "", objects, step.get("state", "")]
    if rate is not None:
        timing += f" · {rate:.2f} {unit}/s"
    latency = step.get("latency") or {}
    return [title, timing, _seconds(latency.get("p50")), _seconds(latency.get("p90")),
            _seconds(latency.get("p99")), _seconds(latency.get("max")), objects, step.get("state", "")]


def phase_rows(step: dict[str, Any]) -> list[list[str]]:
    """The parts of a step's per-object latency, under its row (expandVolume: '  └ controller', '  └ node'), with
    how many objects went through each; a part no object went through says so."""
    rows = []
    for phase in step.get("phases") or []:
        latency = phase.get("latency") or {}
        rows.append([f"  └ {phase['name']}", "", _seconds(latency.get("p50")), _seconds(latency.get("p90")),
                     _seconds(latency.get("p99")), _seconds(latency.get("max")), str(phase.get("objects", 0)), ""])
    return rows


HEADERS = ["Operation", "Time · throughput", "p50 s", "p90 s", "p99 s", "max s", "Objects", "State"]
REPEATED_HEADERS = ["Operation", "Time median (min-max) · throughput", "p50 s", "p90 s", "p99 s", "max s",
                    "Iterations", "State"]


def aggregate_time(aggregate: dict[str, Any], unit: str) -> str:
    """'12.3s (11.9s-13.0s) · 0.81 vol/s': median step time, its range, median throughput."""
    duration = aggregate.get("durationSeconds")
    if not duration:
        return "-"
    text = (f"{human_duration(duration['median'])} ({human_duration(duration['min'])}-"
            f"{human_duration(duration['max'])})")
    rate = aggregate.get("throughput")
    return text + (f" · {rate['median']:.2f} {unit}/s" if rate else "")


def aggregate_row(aggregate: dict[str, Any], iterations: dict[str, Any], state: str) -> list[str]:
    title, unit = title_and_unit(aggregate["name"])
    latency = aggregate.get("latency") or {}
    return [title, aggregate_time(aggregate, unit), _seconds(latency.get("p50")), _seconds(latency.get("p90")),
            _seconds(latency.get("p99")), _seconds(latency.get("max")),
            f"{aggregate.get('iterations', 0)}/{iterations.get('total', '?')}", state]


def repeated(run: dict[str, Any]) -> bool:
    return int(((run.get("status") or {}).get("iterations") or {}).get("total") or 1) > 1


def step_table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The step table's headers and rows (aggregates over iterations for a repeated run)."""
    return _headers(run), _rows(run)


def _headers(run: dict[str, Any]) -> list[str]:
    return REPEATED_HEADERS if repeated(run) else HEADERS


def _rows(run: dict[str, Any]) -> list[list[str]]:
    status = run.get("status") or {}
    if repeated(run):
        iterations = status.get("iterations") or {}
        states = {s["name"]: s.get("state", "") for s in status.get("steps", [])}
        rows = [aggregate_row(a, iterations, "measured") for a in status.get("aggregates") or []]
        shown = {a["name"] for a in status.get("aggregates") or []}
        rows += [[title_and_unit(name)[0], "-", "", "", "", "", f"0/{iterations.get('total', '?')}", state]
                 for name, state in states.items() if name not in shown]
        medians = sum((a.get("durationSeconds") or {}).get("median", 0.0) for a in status.get("aggregates") or [])
        rows.append(["Sum of step times (medians)", human_duration(medians), "", "", "", "", "", ""])
        return rows
    rows = [row for s in status.get("steps", []) for row in [step_row(s), *phase_rows(s)]]
    total = status.get("totalStepSeconds")
    rows.append(["Sum of step times", "-" if total is None else human_duration(total), "", "", "", "", "", ""])
    return rows


def align(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Plain-text columns, padded to the widest cell."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [headers, *rows]]


def markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header.replace("|", "\\|") for header in headers) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]


Table = tables.Table


def workload_tables(run: dict[str, Any]) -> list[tuple[str, Table]]:
    """The tables of their own below the step table, titled, in order (``tables.py``): each only when the run has
    its rows."""
    return [(title, table) for _, title, table in tables.run_tables(run)]


def render_markdown(run: dict[str, Any]) -> str:
    header, trailer = _context(run)
    lines = [f"### {header[0]}", "", *[f"{line}  " for line in header[1:]], "",
             *markdown_table(_headers(run), _rows(run))]
    legend = parts.legend_lines(run)
    lines += ["", *[f"{line}  " for line in legend]] if legend else []
    for title, table in workload_tables(run):
        lines += ["", f"#### {title}", "", *markdown_table(*table)]
    notes = [f"- {line}" for line in trailer if line]
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def render_json(run: dict[str, Any], report: dict[str, Any] | None) -> str:
    """Everything: the run as the API returns it and the stored full report (per-object data included), with the
    schema version (``api/report_schema.py``)."""
    return json.dumps({"schemaVersion": SCHEMA_VERSION, "run": run, "report": report}, indent=2,
                      sort_keys=True) + "\n"


def render_table(run: dict[str, Any]) -> str:
    header, trailer = _context(run)
    tables = [line for title, table in workload_tables(run) for line in ("", title, *align(*table))]
    return "\n".join([*header, "", *align(_headers(run), _rows(run)), *parts.legend_lines(run), *tables,
                      *trailer]) + "\n"


def iteration_lines(status: dict[str, Any]) -> list[str]:
    """With spec.repeat: how many iterations, how many failed and why (they are not in the table)."""
    iterations = status.get("iterations") or {}
    if int(iterations.get("total") or 1) <= 1:
        return []
    lines = [f"iterations {iterations.get('summary', '?')}: medians over the measured iterations; per-object "
             "percentiles are medians of each iteration's percentile"]
    lines += [f"iteration {f['iteration']} failed (not in the aggregates): {f['message']}"
              for f in iterations.get("failures") or []]
    return lines


@dataclass(frozen=True)
class ReportContext:
    """What the reports say around the step table, in parts: the text reports print them all; the HTML page
    prints the CSI machinery and the preflight findings in sections of their own, so it takes the others."""

    title: str  # "BenchmarkRun ns/name: Succeeded — message"
    facts: list[str]  # the class and cluster, the client
    machinery: list[str]
    iterations: list[str]
    notes: list[str]  # step notes, data-path and database notes, failures
    findings: list[str]
    tail: list[str]  # cleanup, and a run still in progress

    def header(self) -> list[str]:
        return [self.title, *self.facts, *self.machinery, *self.iterations]

    def trailer(self) -> list[str]:
        trailer = ["", *self.notes] if self.notes else []
        if self.findings:
            trailer += ["", *self.findings]
        for line in self.tail:
            trailer += ["", line]
        return trailer


def population_line(population: dict[str, Any]) -> str:
    """spec.population as the report's header says it: the level, and what making and removing it took."""
    made = population.get("seconds")
    removed = population.get("removedSeconds")
    parts = [f"population {population.get('claims', 0)} claims and {population.get('snapshots', 0)} snapshots "
             "beside the batch (statically provisioned; not in the steps)"]
    if population.get("sharedBy"):
        parts.append(f"the suite {population['sharedBy']}'s, found with {population.get('foundClaims') or 0} claims "
                     f"and {population.get('foundSnapshots') or 0} snapshots and kept for the suite")
    if made:
        parts.append(f"{'grown' if population.get('sharedBy') else 'made'} in {made:.1f}s")
    if removed is not None:
        parts.append(f"removed in {removed:.1f}s")
    if population.get("message"):
        parts.append(str(population["message"]))
    return ", ".join(parts)


def context_of(run: dict[str, Any]) -> ReportContext:
    """The lines above the table (run, cluster, client, machinery, iterations) and below it (notes, failures,
    preflight findings, cleanup, progress)."""
    status = run.get("status") or {}
    meta = run.get("metadata") or {}
    client = status.get("client") or {}
    environment = status.get("environment") or {}
    title = (f"BenchmarkRun {meta.get('namespace', '')}/{meta.get('name', '')}: {status.get('phase', 'Pending')}"
             + (f" — {status['message']}" if status.get("message") else ""))
    facts = [
        f"storage class {run.get('spec', {}).get('storageClassName', '?')} "
        f"(provisioner {environment.get('provisioner', '?')}, {environment.get('volumeBindingMode', '?')}), "
        f"Kubernetes {environment.get('serverVersion', '?')}, {environment.get('nodeCount', '?')} nodes",
        f"client qps {client.get('qps', '?')} burst {client.get('burst', '?')} "
        f"in flight {client.get('maxInFlight', '?')}, throttled {client.get('throttledSeconds', 0)}s, "
        f"{client.get('requests', 0)} requests",
    ]
    population = status.get("population")
    if population:
        facts.append(population_line(population))
    notes = [f"note ({s['name']}): {s['note']}" for s in status.get("steps", []) if s.get("note")]
    failures = [f"failures ({s['name']}): " + "; ".join(f"{r['count']}× {r['reason']}: {r.get('message', '')}"
                                                        for r in s["failureReasons"])
                for s in status.get("steps", []) if s.get("failureReasons")]
    retried = [f"retried, not failures ({s['name']}): " + "; ".join(
        f"{r['count']}× {r['reason']}" + (f" ({r['cause']})" if r.get("cause") else "")
        + (f" on {r['objects']} objects" if r.get("objects") is not None else "") + f": {r.get('message', '')}"
        for r in s["retriedWarnings"])
        for s in status.get("steps", []) if s.get("retriedWarnings")]
    notes += retried
    notes += [f"retries ({s['name']}): {s['retries']['message']}" for s in status.get("steps", [])
              if (s.get("retries") or {}).get("message")]
    notes += density.notes(run)
    notes += datapath.notes(run)
    notes += database.notes(run)
    notes += shared.notes(run)
    notes += modify.notes(run)
    tail = [f"cleanup: {status['cleanup']}"] if status.get("cleanup") else []
    if status.get("phase") not in ("Succeeded", "Failed"):
        tail.append(f"run still in progress (phase {status.get('phase', 'Pending')}, "
                    f"step {status.get('currentStep') or '-'}, progress {status.get('progress') or '-'})")
    return ReportContext(title, facts, machinery_lines(environment), iteration_lines(status), notes + failures,
                         finding_lines(status.get("preflight") or []) + cost.finding_lines(run), tail)


def _context(run: dict[str, Any]) -> tuple[list[str], list[str]]:
    context = context_of(run)
    return context.header(), context.trailer()
