"""The stored report as its readers see it (pure): which format it is, its iterations, its objects' names.

The engine writes the report (``engine/report_store.py``: gzip JSON in ConfigMaps); the reports, the CLI and the
benchmarks read it. What the readers need of its shape lives here, at the bottom layer, so reading a report never
loads the engine.
"""

from __future__ import annotations

from typing import Any

REPORT_FORMAT = "csibench.io/report-v1"


def iteration_records(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Every iteration of a stored report, in order, each ``{"iteration": n, "steps": [...], ...}``: the earlier
    ones from ``iterations``, the current (at the end: the last) from ``steps``. A report without repeats is one
    iteration."""
    current = {"iteration": int(report.get("iteration") or 1), "steps": report.get("steps") or [],
               **({"state": report["iterationState"], "message": report.get("iterationMessage", "")}
                  if report.get("iterationState") else {})}
    return [*(report.get("iterations") or []), current]


def object_names(step: dict[str, Any]) -> list[str]:
    """The names of a report step's objects, in index order (stored as a prefix and a count)."""
    return [f"{step['objectPrefix']}{index:05d}" for index in range(step["objectCount"])]
