"""Render a run's status as the step table storage engineers already publish, plus what those tables lack.

Pure functions over the BenchmarkRun status (a dict as the API returns it), so they are tested without a
cluster. Durations read "10m 30s", rates "1.59 vol/s", latencies are per-object percentiles in seconds.
"""

from __future__ import annotations

import json
from typing import Any

from csibench.engine.catalog import title_and_unit
from csibench.engine.timing import human_duration
from csibench.report.machinery import finding_lines, machinery_lines


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def step_row(step: dict[str, Any]) -> list[str]:
    title, unit = title_and_unit(step["name"])
    duration = step.get("durationSeconds")
    rate = step.get("throughput")
    timing = "-" if duration is None else human_duration(duration)
    if rate is not None:
        timing += f" · {rate:.2f} {unit}/s"
    latency = step.get("latency") or {}
    failed = step.get("failed", 0)
    return [title, timing, _seconds(latency.get("p50")), _seconds(latency.get("p90")),
            _seconds(latency.get("p99")), _seconds(latency.get("max")),
            f"{step.get('succeeded', 0)}/{step.get('objects', 0)}" + (f" ({failed} failed)" if failed else ""),
            step.get("state", "")]


HEADERS = ["Operation", "Time · throughput", "p50 s", "p90 s", "p99 s", "max s", "Objects", "State"]


def _rows(run: dict[str, Any]) -> list[list[str]]:
    status = run.get("status") or {}
    rows = [step_row(s) for s in status.get("steps", [])]
    total = status.get("totalStepSeconds")
    rows.append(["Sum of step times", "-" if total is None else human_duration(total), "", "", "", "", "", ""])
    return rows


def align(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Plain-text columns, padded to the widest cell."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [headers, *rows]]


def markdown_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]


def render_markdown(run: dict[str, Any]) -> str:
    header, trailer = _context(run)
    lines = [f"### {header[0]}", "", *[f"{line}  " for line in header[1:]], "", *markdown_table(HEADERS, _rows(run))]
    notes = [f"- {line}" for line in trailer if line]
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def render_json(run: dict[str, Any], report: dict[str, Any] | None) -> str:
    """Everything: the run as the API returns it and the stored full report (per-object data included)."""
    return json.dumps({"run": run, "report": report}, indent=2, sort_keys=True) + "\n"


def render_table(run: dict[str, Any]) -> str:
    header, trailer = _context(run)
    return "\n".join([*header, "", *align(HEADERS, _rows(run)), *trailer]) + "\n"


def _context(run: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The lines above the table (run, cluster, client) and below it (notes, failures, cleanup)."""
    status = run.get("status") or {}
    meta = run.get("metadata") or {}
    client = status.get("client") or {}
    environment = status.get("environment") or {}
    header = [
        f"BenchmarkRun {meta.get('namespace', '')}/{meta.get('name', '')}: {status.get('phase', 'Pending')}"
        + (f" — {status['message']}" if status.get("message") else ""),
        f"storage class {run.get('spec', {}).get('storageClassName', '?')} "
        f"(provisioner {environment.get('provisioner', '?')}, {environment.get('volumeBindingMode', '?')}), "
        f"Kubernetes {environment.get('serverVersion', '?')}, {environment.get('nodeCount', '?')} nodes",
        f"client qps {client.get('qps', '?')} burst {client.get('burst', '?')} "
        f"in flight {client.get('maxInFlight', '?')}, throttled {client.get('throttledSeconds', 0)}s, "
        f"{client.get('requests', 0)} requests",
        *machinery_lines(environment),
    ]
    notes = [f"note ({s['name']}): {s['note']}" for s in status.get("steps", []) if s.get("note")]
    failures = [f"failures ({s['name']}): " + "; ".join(f"{r['count']}× {r['reason']}: {r.get('message', '')}"
                                                        for r in s["failureReasons"])
                for s in status.get("steps", []) if s.get("failureReasons")]
    trailer = ["", *notes, *failures] if notes or failures else []
    findings = finding_lines(status.get("preflight") or [])
    if findings:
        trailer += ["", *findings]
    if status.get("cleanup"):
        trailer += ["", f"cleanup: {status['cleanup']}"]
    if status.get("phase") not in ("Succeeded", "Failed"):
        trailer += ["", f"run still in progress (phase {status.get('phase', 'Pending')}, "
                        f"step {status.get('currentStep') or '-'}, progress {status.get('progress') or '-'})"]
    return header, trailer
