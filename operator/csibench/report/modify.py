"""The class-change table: fio on the volumes before and after the VolumeAttributesClass change, and after over
before (pure, over the run's status as the API returns it). The change's own timing is the step table's
(modifyVolume)."""

from __future__ import annotations

from typing import Any

HEADERS = ["When", "Class", "Volumes", "Read IOPS", "Write IOPS", "Read MiB/s", "Write MiB/s", "Slowest volume IOPS",
           "State"]
FIGURES = ("readIOPS", "writeIOPS", "readMiBps", "writeMiBps", "perVolumeIOPS")


def rows_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("modify") or [])


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """Before, after, and after / before where both were measured; None for a run without the change's fio."""
    found = rows_of(run)
    if not found:
        return None
    rows = [[row["when"], row.get("attributesClass") or "-", str(row.get("volumes", 0)),
             *(_number(row.get(figure)) for figure in FIGURES), row.get("state", "")] for row in found]
    measured = {row["when"]: row for row in found if row.get("state") == "Succeeded"}
    if "before" in measured and "after" in measured:
        ratios = []
        for figure in FIGURES:
            before, after = measured["before"].get(figure), measured["after"].get(figure)
            ratios.append("-" if not before or after is None else f"{after / before:.2f}×")
        rows.append(["after / before", "", "", *ratios, ""])
    return HEADERS, rows


def notes(run: dict[str, Any]) -> list[str]:
    return [f"class change, fio {row['when']}: {row['message']}" for row in rows_of(run) if row.get("message")]
