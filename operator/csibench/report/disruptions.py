"""The disruptions table of a run's report: what each of spec.disruptions did and cost its step (pure).

One row per disruption, from the run's status (the stored report keeps the same): where and what, its state, and
on its step's clock when it was injected, undone and recovered, then what it cost (stall, throughput before and
after, objects not recovered, container restarts, leader changes). ``leaks_table``: what the run left behind after
its cleanup (status.leaks), by the array's count or the cluster's. ``marks`` gives the HTML timeline of a step its
disruptions, drawn as spans over the objects' lines.
"""

from __future__ import annotations

from typing import Any

Table = tuple[list[str], list[list[str]]]
HEADERS = ["step", "disruption", "target", "state", "injected s", "undone s", "recovery s", "stall s",
           "obj/s before", "obj/s after", "unrecovered", "restarts", "lease changes", "leader gone s"]


def _number(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(run: dict[str, Any]) -> Table | None:
    results = (run.get("status") or {}).get("disruptions") or []
    if not results:
        return None
    rows = [[d.get("step", ""), d.get("kind", ""), d.get("target", ""), d.get("state", ""),
             _number(d.get("injectedAtSeconds")), _number(d.get("restoredAtSeconds")),
             _number(d.get("recoverySeconds")), _number(d.get("stallSeconds")),
             _number(d.get("throughputBefore")), _number(d.get("throughputAfter")),
             _number(d.get("unrecovered")), _number(d.get("containerRestarts")), _number(d.get("leaseTransitions")),
             _number(d.get("leaderSeconds"))]
            for d in results]
    return HEADERS, rows


LEAK_HEADERS = ["counted by", "volumes", "snapshots", "leaked", "operations done twice", "first named", "note"]


def leaks_table(run: dict[str, Any]) -> Table | None:
    leaks = (run.get("status") or {}).get("leaks")
    if not leaks:
        return None
    names = leaks.get("names") or []
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return LEAK_HEADERS, [[str(leaks.get("source", "")), _number(leaks.get("volumes")),
                           _number(leaks.get("snapshots")), _number(leaks.get("leaked")),
                           _number(leaks.get("repeatedOperations")), shown or "-", leaks.get("message") or "-"]]


def marks(run: dict[str, Any], step: str) -> list[tuple[str, float, float | None]]:
    """The step's disruptions as (label, injected, recovered or None) on its clock, for its timeline."""
    return [(str(d.get("kind", "")), float(d["injectedAtSeconds"]),
             float(d["recoveredAtSeconds"]) if d.get("recoveredAtSeconds") is not None else None)
            for d in (run.get("status") or {}).get("disruptions") or []
            if d.get("step") == step and d.get("injectedAtSeconds") is not None]
