"""The shared-volume table: one row per phase of the probe (what another node sees and when, flock, small files,
a listing at scale), and two runs' phases side by side (pure, over the run's status as the API returns it).
"""

from __future__ import annotations

from typing import Any

HEADERS = ["Phase", "Pods/nodes", "Ops", "Time s", "Rate /s", "p50 ms", "p99 ms", "max ms", "Check", "State"]
COMPARE_HEADERS = ["Phase", "A: rate /s · p99 ms", "B: rate /s · p99 ms", "B vs A (rate)", "B vs A (p99)"]
# Visibility has no rate (its rounds wait for each other): its latency is the figure to compare.
RATE_UNITS = {"list": "names", "listing": "names", "fio": "MiB/s"}


def rows_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return list((run.get("status") or {}).get("shared") or [])


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _check(row: dict[str, Any]) -> str:
    if row.get("lostUpdates") is not None:
        return f"{row['lostUpdates']} lost updates"
    if row.get("entries") is not None:
        return f"{row['entries']} names, {row.get('missing') or 0} missing"
    if row.get("missing") is not None:
        return f"{row['missing']} missing"
    return ""


def table(run: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """The phases' headers and rows, or None for a run without a shared volume."""
    found = rows_of(run)
    if not found:
        return None
    rows = []
    for row in found:
        latency = row.get("latency") or {}
        fio_rate = row.get("writeMiBps") if row.get("readMiBps") is None else row.get("readMiBps")
        rate = fio_rate if row["phase"] == "fio" else row.get("opsPerSecond")
        rows.append([_key(row), f"{row.get('pods', 0)}/{row.get('nodes', 0)}",
                     "-" if row.get("operations") is None else str(row["operations"]),
                     _number(row.get("durationSeconds")),
                     "-" if rate is None else f"{rate:.1f}" + (f" {RATE_UNITS[row['phase']]}"
                                                               if row["phase"] in RATE_UNITS else ""),
                     _number(latency.get("p50")), _number(latency.get("p99")), _number(latency.get("max")),
                     _check(row), row.get("state", "")])
    return HEADERS, rows


def _cell(row: dict[str, Any] | None) -> str:
    if row is None or row.get("state") != "Succeeded":
        return "-"
    return f"{_number(row.get('opsPerSecond'), 1)} · {_number((row.get('latency') or {}).get('p99'))}"


def _ratio(numerator: float | None, denominator: float | None) -> str:
    return "-" if not numerator or not denominator else f"{numerator / denominator:.2f}×"


def _key(row: dict[str, Any]) -> str:
    """A row's phase, fio's with its direction: a read-only volume's readers are not held against writers."""
    return f"{row['phase']} (reads)" if row["phase"] == "fio" and row.get("readMiBps") is not None else row["phase"]


def compare_table(run_a: dict[str, Any], run_b: dict[str, Any]) -> tuple[list[str], list[list[str]]] | None:
    """B vs A per phase: the rate ratio (above 1 when B does more per second) and A's p99 over B's (above 1
    when B is faster), for the phases either run has."""
    a = {_key(row): row for row in rows_of(run_a)}
    b = {_key(row): row for row in rows_of(run_b)}
    if not a and not b:
        return None
    rows = []
    for phase in [*a, *(p for p in b if p not in a)]:
        row_a, row_b = a.get(phase) or {}, b.get(phase) or {}
        measured = row_a.get("state") == "Succeeded" and row_b.get("state") == "Succeeded"
        rows.append([phase, _cell(a.get(phase)), _cell(b.get(phase)),
                     _ratio(row_b.get("opsPerSecond"), row_a.get("opsPerSecond")) if measured else "-",
                     _ratio((row_a.get("latency") or {}).get("p99"), (row_b.get("latency") or {}).get("p99"))
                     if measured else "-"])
    return COMPARE_HEADERS, rows


COMPARE_NOTE = ("shared volume: each phase is one measurement per run, so these ratios carry no significance test; "
                "visibility's resolution is spec.shared.pollMilliseconds")


def notes(run: dict[str, Any]) -> list[str]:
    return [f"shared volume {row['phase']}: {row['message']}" for row in rows_of(run) if row.get("message")]
