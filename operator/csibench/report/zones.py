"""The per-zone table: each step's objects by the zone of their volumes (a zonal class's), with their latency, so
a zone that is slower shows (pure, over the run's status as the API returns it)."""

from __future__ import annotations

from typing import Any

from csibench.api.steps import title_and_unit

HEADERS = ["Step", "Zone", "Objects", "Succeeded", "p50 s", "p99 s", "max s"]


def _seconds(latency: dict[str, Any] | None, key: str) -> str:
    return "-" if not latency or latency.get(key) is None else f"{latency[key]:.3f}"


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """One row per step and zone, in the steps' order and the zones' names; None when no step's objects had a
    zone."""
    rows = []
    for step in (run.get("status") or {}).get("steps") or []:
        for zone in sorted(step.get("zones") or [], key=lambda row: str(row.get("zone"))):
            latency = zone.get("latency")
            rows.append([title_and_unit(step["name"])[0], zone["zone"], str(zone.get("objects", 0)),
                         str(zone.get("succeeded", 0)), _seconds(latency, "p50"), _seconds(latency, "p99"),
                         _seconds(latency, "max")])
    return (HEADERS, rows) if rows else None
