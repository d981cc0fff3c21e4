"""What spec.collect read per step, in reports (pure): the CSI machinery's cost, and the run's own queries.

The machinery reads "createVolume: csi-provisioner 11.8 CPU-s (1.2 CPU-ms/object), peak 48 MiB": CPU-seconds over the
step's window, per object of the step (succeeded or not: the component worked for every one), and the highest
memory over it. The run's own queries are one row per step, query and series.
"""

from __future__ import annotations

from typing import Any

from csibench.api.collect import PROFILE_QUERY_NAMES

CPU, MEMORY = PROFILE_QUERY_NAMES
MIB = 1024 * 1024
Table = tuple[list[str], list[list[str]]]


def component(labels: dict[str, str]) -> str:
    return labels.get("container") or ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "all"


def _where(labels: dict[str, str]) -> str:
    return f"{labels['namespace']}/{labels['pod']}" if "namespace" in labels and "pod" in labels else ""


def machinery_table(run: dict[str, Any]) -> Table | None:
    """Per step and container: CPU-s, ms per object, peak MiB; None when nothing was collected."""
    rows = []
    for step in (run.get("status") or {}).get("steps") or []:
        values = ((step.get("collection") or {}).get("values")) or []
        cost: dict[tuple[str, str], dict[str, float]] = {}
        for value in values:
            if value.get("query") in (CPU, MEMORY):
                key = (component(value.get("labels") or {}), _where(value.get("labels") or {}))
                cost.setdefault(key, {})[value["query"]] = float(value["value"])
        objects = int(step.get("objects") or 0) - int(step.get("skipped") or 0)
        for (name, where), read in sorted(cost.items(), key=lambda item: -item[1].get(CPU, 0.0)):
            cpu = read.get(CPU)
            per_object = f"{cpu * 1000 / objects:.2f}" if cpu is not None and objects > 0 else "-"
            rows.append([step["name"], name, where, f"{cpu:.2f}" if cpu is not None else "-", per_object,
                         f"{read[MEMORY] / MIB:.1f}" if MEMORY in read else "-"])
    if not rows:
        return None
    return ["step", "component", "pod", "CPU-s", "CPU-ms/object", "peak MiB"], rows


def queries_table(run: dict[str, Any]) -> Table | None:
    """The run's own queries: per step, query and series, the reading and its unit."""
    rows = []
    for step in (run.get("status") or {}).get("steps") or []:
        for value in ((step.get("collection") or {}).get("values")) or []:
            if value.get("query") in (CPU, MEMORY):
                continue
            labels = value.get("labels") or {}
            rows.append([step["name"], value["query"], ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
                         f"{float(value['value']):.6g}", value.get("unit") or ""])
    if not rows:
        return None
    return ["step", "query", "series", "value", "unit"], rows


def summary_lines(run: dict[str, Any]) -> list[str]:
    """One line per step: 'createVolume: csi-provisioner 11.8 CPU-s (1.2 CPU-ms/object), peak 48 MiB; ...'."""
    table = machinery_table(run)
    if table is None:
        return []
    by_step: dict[str, list[str]] = {}
    for step, name, _, cpu, per_object, peak in table[1]:
        parts = [f"{name} {cpu} CPU-s" + (f" ({per_object} CPU-ms/object)" if per_object != "-" else "")]
        if peak != "-":
            parts.append(f"peak {peak} MiB")
        by_step.setdefault(step, []).append(", ".join(parts))
    return [f"machinery cost {step}: " + "; ".join(parts) for step, parts in by_step.items()]


def finding_lines(run: dict[str, Any]) -> list[str]:
    return [f"collect {f.get('severity', '?')} {f.get('check', '?')}: {f.get('message', '')}"
            for f in (run.get("status") or {}).get("collection") or []]
