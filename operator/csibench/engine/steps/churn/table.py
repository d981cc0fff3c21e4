"""Where the churn's rows live (status.churn) and how its latest window becomes metrics."""

from __future__ import annotations

from collections.abc import Sequence

from csibench.api.churn import ChurnWindow
from csibench.engine.results import ResultTable
from csibench.metrics import METRICS


def record_metrics(run_label: str, rows: Sequence[ChurnWindow]) -> None:
    """The latest window into Prometheus: per phase its throughput, p50 and p99; leaks by kind; memory."""
    if not rows:
        return
    latest = rows[-1]
    phases = [(p.phase, p.throughput, p.latency.p50 if p.latency else None, p.latency.p99 if p.latency else None)
              for p in latest.phases]
    leaks = {"volumes": latest.leaks.volumes, "attachments": latest.leaks.attachments,
             "released": latest.leaks.released} if latest.leaks is not None else {}
    METRICS.record_churn_window(run_label, phases, leaks, [(m.component, m.bytes) for m in latest.memory])


RESULTS = ResultTable("churn", ChurnWindow, ("leaked",), record_metrics)
