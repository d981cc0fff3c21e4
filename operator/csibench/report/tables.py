"""The tables of their own below a run's step table, and a comparison's below its step comparison: one registry.

The text and Markdown reports (``render.py``, ``compare.py``) and the HTML page (``html.py``) each print them in
this order, under these titles, when the run has their rows; a report module with a new table of its own is added
here once, not in each renderer. What the HTML page draws beside a table (a curve) is the page's, keyed by ``css``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from csibench.report import churn, cost, database, datapath, density, disruptions, modify, shared, verdicts, zones

Table = tuple[list[str], list[list[str]]]
Run = dict[str, Any]


@dataclass(frozen=True)
class OwnTable:
    """A table of one run's rows: its title (a run's thresholds table is titled by what it holds), how it is built
    (None: the run has none of its rows) and the HTML table's class."""

    css: str
    title: Callable[[Run], str]
    table: Callable[[Run], Table | None]


def _titled(text: str) -> Callable[[Run], str]:
    return lambda _run: text


RUN_TABLES: tuple[OwnTable, ...] = (
    OwnTable("zones", _titled("Per zone (the volumes' zones)"), zones.table),
    OwnTable("modify", _titled("Class change: fio before and after (VolumeAttributesClass)"), modify.table),
    OwnTable("density", _titled("Density (volumes per node)"), density.table),
    OwnTable("churn", _titled("Churn (per window)"), churn.table),
    OwnTable("churn-drift", churn.drift_title, churn.drift_table),
    OwnTable("datapath", _titled("Data path (fio)"), datapath.table),
    OwnTable("datapath-nodes", _titled("Data path per node"), datapath.node_table),
    OwnTable("datapath-zones", _titled("Data path per zone (the pods' nodes' zones)"), datapath.zone_table),
    OwnTable("datapath-levels", _titled("Data path under load (rate levels)"), datapath.level_table),
    OwnTable("datapath-local", _titled("Data path against the nodes' own disk"), datapath.baseline_table),
    OwnTable("datapath-iterations", _titled("Data path over the iterations"), datapath.aggregate_table),
    OwnTable("database", _titled("Database (pgbench)"), database.table),
    OwnTable("shared", _titled("Shared volume"), shared.table),
    OwnTable("machinery-cost", _titled("CSI machinery cost per step (Prometheus)"), cost.machinery_table),
    OwnTable("collected", _titled("Collected per step (spec.collect)"), cost.queries_table),
    OwnTable("disruptions", _titled("Disruptions (spec.disruptions; seconds on the step's clock)"),
             disruptions.table),
    OwnTable("leaks", _titled("Left after cleanup (status.leaks)"), disruptions.leaks_table),
    OwnTable("thresholds", verdicts.title, verdicts.table),
)


def run_tables(run: Run) -> list[tuple[OwnTable, str, Table]]:
    """The run's tables of their own, in order, with their titles: each only when the run has its rows."""
    return [(entry, entry.title(run), found) for entry in RUN_TABLES if (found := entry.table(run)) is not None]


@dataclass(frozen=True)
class OwnComparison:
    """Two runs' rows of one table side by side: its heading (Markdown and HTML), the line that leads it in the
    text report, how it is built (None: neither run has its rows) and the note under it (None: none)."""

    css: str
    title: str
    lead: str
    table: Callable[[Run, Run], Table | None]
    note: Callable[[Run, Run], str | None]


def _no_note(_a: Run, _b: Run) -> str | None:
    return None


COMPARISONS: tuple[OwnComparison, ...] = (
    OwnComparison("density", "Density (volumes per node)", "Density, B vs A per level of volumes per node:",
                  density.compare_table, lambda _a, _b: density.COMPARE_NOTE),
    OwnComparison("churn", "Churn (medians over the windows)", "Churn, B vs A per phase (medians over the windows):",
                  churn.compare_table, lambda _a, _b: churn.COMPARE_NOTE),
    OwnComparison("datapath", "Data path (fio)", "Data path (fio), B vs A per workload:", datapath.compare_table,
                  datapath.compare_note),
    OwnComparison("database", "Database (pgbench)", "Database (pgbench), B vs A TPS per row:",
                  database.compare_table, _no_note),
    OwnComparison("shared", "Shared volume", "Shared volume, B vs A per phase:",
                  shared.compare_table, lambda _a, _b: shared.COMPARE_NOTE),
)


def comparison_tables(run_a: Run, run_b: Run) -> list[tuple[OwnComparison, Table, str | None]]:
    """The tables both runs' rows fill side by side, in order, with the note under each."""
    return [(entry, found, entry.note(run_a, run_b)) for entry in COMPARISONS
            if (found := entry.table(run_a, run_b)) is not None]
