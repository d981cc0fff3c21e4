"""A run against its baseline (spec.baseline, ``csibench compare --max-regression``, ``csibench gate --baseline``):
the measures two runs have in common, each judged by ``regression`` (pure; reads runs as the API returns them).

The measures, higher is better each: per lifecycle step its throughput (objects/s; steps whose numbers are a table
of their own are compared by their rows instead) and per data-path workload its MiB/s and IOPS. With spec.repeat > 1
a measure's values are the iterations' (``status.aggregates``, ``status.dataPathAggregates``); a single run has one
value, which can never be more than Inconclusive. The database's runs are not compared: the database cannot repeat
yet, so its rows could only ever be Inconclusive, and a verdict that can never pass is no gate (``compare`` shows
their TPS side by side).

A baseline in another namespace than the run's is read with the operator's rights, not the user's: it is compared
only when someone who can write BenchmarkRuns there shared it on purpose, with the annotation
``csibench.io/shared-as-baseline`` on the baseline run listing the namespaces allowed to compare against it
(comma-separated) or ``*`` for every namespace. Otherwise, whether the run exists or not, the run says the same
"not found or not shared" (``not_shared``), so the answer tells nothing about the other namespace. Shapes: a
comparison names the parts of the two runs' shapes that differ (``api/shape.py``) and, when the run requires an equal
shape, refuses to judge across shapes.
"""

from __future__ import annotations

from typing import Any

from csibench.api.models import MAX_BASELINE_ROWS, BaselineComparison, BaselineRow
from csibench.api.regression import Change, judge_changes
from csibench.api.shape import shape_differences
from csibench.api.stats import ALPHA
from csibench.api.steps import has_own_table
from csibench.api.text import shorten

Measure = tuple[str, str]  # (subject, metric)
MESSAGE_MAX = 2000  # the NoRegression condition's and its Event's message; every row is in status.baseline.rows
SHARED_ANNOTATION = "csibench.io/shared-as-baseline"  # on a baseline run: namespaces that may compare against it


def shared_with(baseline: dict[str, Any], baseline_namespace: str, reader_namespace: str) -> bool:
    """Whether a run in ``reader_namespace`` may compare against ``baseline`` (read from ``baseline_namespace``):
    always in its own namespace; from another only when the baseline's annotation lists the reader's namespace or
    is ``*``."""
    if baseline_namespace == reader_namespace:
        return True
    annotations = (baseline.get("metadata") or {}).get("annotations") or {}
    allowed = {part.strip() for part in str(annotations.get(SHARED_ANNOTATION, "")).split(",")}
    return "*" in allowed or reader_namespace in allowed


def not_shared(shown: str, reader_namespace: str) -> str:
    """The one answer for a baseline in another namespace that is missing, unreadable or not shared."""
    return (f"baseline {shown} not found or not shared with namespace {reader_namespace} (its owner shares it with "
            f"the annotation {SHARED_ANNOTATION})")


def run_name(run: dict[str, Any]) -> str:
    meta = run.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def measures_of(run: dict[str, Any]) -> dict[Measure, list[float]]:
    """Every measure of a finished run with its per-iteration values, in report order."""
    status = run.get("status") or {}
    measures: dict[Measure, list[float]] = {}
    aggregates = {a["name"]: a for a in status.get("aggregates") or []}
    for step in status.get("steps") or []:
        name = step["name"]
        if has_own_table(name):
            continue
        if name in aggregates:
            values = [float(x) for x in aggregates[name].get("throughputs") or []]
        else:
            values = [float(step["throughput"])] if step.get("state") == "Succeeded" and step.get("throughput") \
                else []
        if values:
            measures[(name, "throughput")] = values
    repeated = {a["name"]: a for a in status.get("dataPathAggregates") or []}
    for row in status.get("dataPath") or []:
        name = row["name"]
        for metric, directions, key in (("mibps", ("readMiBps", "writeMiBps"), "mibpsValues"),
                                        ("iops", ("readIOPS", "writeIOPS"), "iopsValues")):
            if name in repeated:
                values = [float(x) for x in repeated[name].get(key) or []]
            else:
                total = sum(float(row.get(d) or 0.0) for d in directions)
                values = [total] if row.get("state") == "Succeeded" and total > 0 else []
            if values:
                measures[(f"workload {name}", metric)] = values
    return measures


def order_of(fail_on_slower: bool) -> list[Change]:
    """The changes from the one that decides a comparison to the least: Regression first, Slower before
    Inconclusive when it fails the verdict and after it when not, then Improvement and Equivalent."""
    if fail_on_slower:
        return [Change.REGRESSION, Change.SLOWER, Change.INCONCLUSIVE, Change.IMPROVEMENT, Change.EQUIVALENT]
    return [Change.REGRESSION, Change.INCONCLUSIVE, Change.SLOWER, Change.IMPROVEMENT, Change.EQUIVALENT]


def fails(change: str | None, fail_on_slower: bool) -> bool | None:
    """The one decision every reader of a comparison makes (verdict, NoRegression, gate, JUnit, metrics,
    ``compare --max-regression``): True fails, None is unknown, False passes."""
    if change == Change.REGRESSION or (change == Change.SLOWER and fail_on_slower):
        return True
    if change == Change.INCONCLUSIVE:
        return None
    return False


def compare_with_baseline(baseline: dict[str, Any], current: dict[str, Any], threshold_percent: float,
                          alpha: float = ALPHA, fail_on_slower: bool = False,
                          require_same_shape: bool = False) -> BaselineComparison:
    """``current`` against ``baseline``, both finished and Succeeded (else Inconclusive, saying why), with what
    differs in their shapes named; ``require_same_shape``: Inconclusive, nothing judged, when they differ."""
    differences = shape_differences(baseline, current)
    comparison = _compare(baseline, current, threshold_percent, alpha, fail_on_slower, differences,
                          require_same_shape)
    if not differences:
        return comparison
    said = f"shapes differ ({', '.join(differences)})"
    return comparison.model_copy(update={"shapeDifferences": differences,
                                         "message": shorten(f"{said}: {comparison.message}", MESSAGE_MAX)})


def _compare(baseline: dict[str, Any], current: dict[str, Any], threshold_percent: float, alpha: float,
             fail_on_slower: bool, differences: list[str], require_same_shape: bool) -> BaselineComparison:
    name = run_name(baseline)
    policy = {"thresholdPercent": threshold_percent, "failOnSlower": fail_on_slower}
    if differences and require_same_shape:
        return BaselineComparison(run=name, change=Change.INCONCLUSIVE, **policy,
                                  message="not compared: spec.baselineRequireSameShape asks for an equal shape")
    for which, run in (("baseline", baseline), ("run", current)):
        phase = (run.get("status") or {}).get("phase")
        if phase != "Succeeded":
            return BaselineComparison(run=name, change=Change.INCONCLUSIVE, **policy,
                                      message=f"{which} {run_name(run)} is {phase or 'Pending'}, not a finished "
                                              "measurement")
    ours, theirs = measures_of(current), measures_of(baseline)
    shared = [measure for measure in ours if measure in theirs]
    if not shared:
        return BaselineComparison(run=name, change=Change.INCONCLUSIVE, **policy,
                                  message=f"baseline {name} measured nothing this run measured")
    threshold = threshold_percent / 100.0
    judged = judge_changes([(theirs[m], ours[m]) for m in shared], threshold, alpha)
    rows = [BaselineRow(subject=subject, metric=metric, change=j.change,
                        ratio=j.ratio, low=j.low, high=j.high, p=j.p, pBeyond=j.p_beyond,
                        iterations=f"{j.n_a}/{j.n_b}", iterationsNeeded=j.iterations_needed,
                        message=f"{subject} {metric}: {j.describe(threshold)}")
            for (subject, metric), j in zip(shared, judged, strict=True)]
    changes = [row.change for row in rows]
    order = order_of(fail_on_slower)
    change = next(c for c in order if c in changes or c == Change.EQUIVALENT)
    ordered = sorted(rows, key=lambda row: order.index(Change(row.change)))
    counts = ", ".join(f"{changes.count(c)} {c.value.lower()}" for c in Change if c in changes)
    message = f"against {name} ({threshold_percent:g}% threshold): {counts}; " + \
        "; ".join(row.message for row in ordered if row.change != Change.EQUIVALENT)
    # Status keeps the rows that decide first when there are more than it holds; the message is bounded too.
    kept = rows if len(rows) <= MAX_BASELINE_ROWS else ordered[:MAX_BASELINE_ROWS]
    return BaselineComparison(run=name, change=change, **policy, rows=kept,
                              message=shorten(message.rstrip("; "), MESSAGE_MAX))
