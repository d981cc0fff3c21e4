"""The density table: one row per level of volumes per node (time to Ready per pod and its attach part,
throughput, detach time), the curve of how attach scales as a node fills; and two runs' ramps side by side (pure,
over the run's status as the API returns it).
"""

from __future__ import annotations

from typing import Any

from csibench.api.text import human_duration

HEADERS = ["Volumes/node", "Node", "Pods", "Ready p50/p99 s", "Attach p50/p99 s", "Throughput vol/s", "Publish",
           "Unpublish", "State"]
COMPARE_HEADERS = ["Volumes/node", "A: ready p50 s · vol/s", "B: ready p50 s · vol/s", "B vs A (p50)"]


def rows_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("density") or [])


def _pair(latency: dict[str, Any] | None) -> str:
    return "-" if not latency else f"{latency['p50']:.3f}/{latency['p99']:.3f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else human_duration(value)


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The ramp's headers and rows, or None for a run without one."""
    found = rows_of(run)
    if not found:
        return None
    rows = [[str(row["volumesPerNode"]), row.get("node", ""), str(row.get("pods", 0)), _pair(row.get("latency")),
             _pair(row.get("attach")), "-" if row.get("throughput") is None else f"{row['throughput']:.2f}",
             _seconds(row.get("durationSeconds")), _seconds(row.get("detachSeconds")),
             row.get("state", "") + (f" ({row['failed']} failed)" if row.get("failed") else "")]
            for row in found]
    return HEADERS, rows


def _cell(row: dict[str, Any] | None) -> str:
    if row is None or not row.get("latency"):
        return "-"
    throughput = row.get("throughput")
    return f"{row['latency']['p50']:.3f} · {'-' if throughput is None else f'{throughput:.2f}'}"


def compare_table(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """B vs A per level (the ratio of A's p50 to B's: above 1 when B is faster), for the levels either has."""
    a = {row["volumesPerNode"]: row for row in rows_of(run_a)}
    b = {row["volumesPerNode"]: row for row in rows_of(run_b)}
    if not a and not b:
        return None
    rows = []
    for level in sorted(set(a) | set(b)):
        p50_a = ((a.get(level) or {}).get("latency") or {}).get("p50")
        p50_b = ((b.get(level) or {}).get("latency") or {}).get("p50")
        ratio = "-" if not p50_a or not p50_b else f"{p50_a / p50_b:.2f}×"
        rows.append([str(level), _cell(a.get(level)), _cell(b.get(level)), ratio])
    return COMPARE_HEADERS, rows


COMPARE_NOTE = ("density: each level is one measurement per run (spec.repeat is refused with density), so these "
                "ratios carry no significance test: repeat the two runs and compare them again before trusting a "
                "difference smaller than the levels' spread")


def notes(run: dict[str, Any]) -> list[str]:
    failed = [row for row in rows_of(run) if row.get("message")]
    return [f"density {row['volumesPerNode']} volumes/node: {row['message']}" for row in failed]
