"""Render a run's status as the step table storage engineers already publish, plus what those tables lack.

Pure functions over the BenchmarkRun status (a dict as the API returns it), so they are tested without a
cluster. Durations read "10m 30s", rates "1.59 vol/s", latencies are per-object percentiles in seconds.
"""

from __future__ import annotations

from typing import Any

from csibench.engine.timing import human_duration

OPERATION_TITLES = {
    "createVolume": ("Create Volume", "vol"),
    "publish": ("Publish (Attach)", "pod"),
    "unpublish": ("Unpublish (Detach)", "pod"),
    "createSnapshot": ("Create Snapshot", "snap"),
    "cloneFromSnapshot": ("Clone from Snapshot", "vol"),
    "deleteClone": ("Delete Clone", "vol"),
    "deleteSnapshot": ("Delete Snapshot", "snap"),
    "deleteVolume": ("Delete Volume", "vol"),
}


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def step_row(step: dict[str, Any]) -> list[str]:
    title, unit = OPERATION_TITLES.get(step["name"], (step["name"], "obj"))
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


def render_table(run: dict[str, Any]) -> str:
    status = run.get("status") or {}
    headers = ["Operation", "Time · throughput", "p50 s", "p90 s", "p99 s", "max s", "Objects", "State"]
    rows = [step_row(s) for s in status.get("steps", [])]
    total = status.get("totalStepSeconds")
    rows.append(["Sum of step times", "-" if total is None else human_duration(total), "", "", "", "", "", ""])
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in [headers, *rows]]
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
        "",
    ]
    notes = [f"note ({s['name']}): {s['note']}" for s in status.get("steps", []) if s.get("note")]
    failures = [f"failures ({s['name']}): " + "; ".join(f"{r['count']} x {r['reason']}: {r.get('message', '')}"
                                                        for r in s["failureReasons"])
                for s in status.get("steps", []) if s.get("failureReasons")]
    trailer = ["", *notes, *failures] if notes or failures else []
    if status.get("cleanup"):
        trailer += ["", f"cleanup: {status['cleanup']}"]
    return "\n".join(header + lines + trailer) + "\n"
