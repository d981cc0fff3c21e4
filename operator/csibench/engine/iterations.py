"""Iterations of a run with ``spec.repeat``: what one finished iteration is, and what status keeps of them (pure).

A finished iteration is a record in the report's shape, ``{"iteration": n, "state": "Succeeded" | "Failed",
"message": ..., "steps": [step records]}`` (each step record as ``report_builder`` writes it: its status and its
per-object arrays). Status keeps only aggregates over them, so it stays bounded at any repeat count: per step
the median, min and max step time and throughput, the median of each per-object percentile, and the per-iteration
step times and throughputs (at most ``MAX_REPEAT`` numbers each) that ``compare`` tests for significance. An
iteration with any failed or interrupted step is a failed iteration: counted, named, and left out of every
aggregate, because its step times measure a failure, not the storage.
"""

from __future__ import annotations

import statistics
from typing import Any

from csibench.api.models import (
    MAX_ITERATION_FAILURES,
    DataPathAggregate,
    IterationFailure,
    Iterations,
    Latency,
    Spread,
    StepAggregate,
    StepState,
    StepStatus,
)
from csibench.api.steps import StepName
from csibench.engine.verdict import failure_summary

SUCCEEDED, FAILED = "Succeeded", "Failed"
Record = dict[str, Any]


def build_iteration_record(iteration: int, steps: list[StepStatus], records: list[Record]) -> Record:
    """One finished iteration: failed when a step failed, had failed objects or was interrupted."""
    bad = [s for s in steps if s.state != StepState.SUCCEEDED or s.failed]
    return {"iteration": iteration, "state": FAILED if bad else SUCCEEDED,
            "message": "; ".join(failure_summary(s) if s.state != StepState.PENDING else f"{s.name}: not run"
                                 for s in bad),
            "steps": records}


def _spread(values: list[float]) -> Spread | None:
    """Median, min and max at full precision: a data-path p99 of 125 µs is judged as 125 µs (reports round)."""
    if not values:
        return None
    return Spread(median=statistics.median(values), min=min(values), max=max(values))


def _median_latency(latencies: list[dict[str, Any]]) -> Latency | None:
    if not latencies:
        return None
    return Latency(**{key: statistics.median(float(item[key]) for item in latencies)
                      for key in ("p50", "p90", "p99", "max", "mean")})


def build_aggregates(records: list[Record]) -> list[StepAggregate]:
    """Per step, in plan order, over the iterations that succeeded."""
    measured = [record for record in records if record.get("state") == SUCCEEDED]
    order: list[str] = []
    statuses: dict[str, list[dict[str, Any]]] = {}
    for record in measured:
        for step in record["steps"]:
            status = step["status"]
            if status["name"] not in statuses:
                order.append(status["name"])
            statuses.setdefault(status["name"], []).append(status)
    aggregates = []
    for name in order:
        found = statuses[name]
        durations = [float(s["durationSeconds"]) for s in found if s.get("durationSeconds") is not None]
        throughputs = [float(s["throughput"]) for s in found if s.get("throughput") is not None]
        aggregates.append(StepAggregate(
            name=name, iterations=len(found), durationSeconds=_spread(durations), throughput=_spread(throughputs),
            latency=_median_latency([s["latency"] for s in found if s.get("latency")]),
            durations=durations, throughputs=throughputs))
    return aggregates


def build_data_path_aggregates(records: list[Record]) -> list[DataPathAggregate]:
    """Per data-path workload, in row order, over the iterations that succeeded: each iteration's unthrottled row
    (read + write MiB/s and IOPS, the worse direction's p99), their median and range, and the values themselves."""
    measured = [record for record in records if record.get("state") == SUCCEEDED]
    order: list[str] = []
    rows: dict[str, list[dict[str, Any]]] = {}
    for record in measured:
        for step in record["steps"]:
            if step["status"]["name"] != StepName.DATA_PATH:
                continue
            for row in (step.get("extra") or {}).get("rows") or []:
                if row.get("state") != StepState.SUCCEEDED:
                    continue
                if row["name"] not in rows:
                    order.append(row["name"])
                rows.setdefault(row["name"], []).append(row)
    aggregates = []
    for name in order:
        found = rows[name]
        mibps = [float(r.get("readMiBps") or 0) + float(r.get("writeMiBps") or 0) for r in found]
        iops = [float(r.get("readIOPS") or 0) + float(r.get("writeIOPS") or 0) for r in found]
        p99 = [worst for r in found if (worst := _worst_p99(r.get("latency") or {})) is not None]
        directions = {direction: [float(value) for r in found
                                  if (value := (r.get("latency") or {}).get(direction))]
                      for direction in ("readP99", "writeP99")}
        aggregates.append(DataPathAggregate(name=name, iterations=len(found), mibps=_spread(mibps),
                                            iops=_spread(iops), p99=_spread(p99),
                                            readP99=_spread(directions["readP99"]),
                                            writeP99=_spread(directions["writeP99"]), mibpsValues=mibps,
                                            iopsValues=iops, p99Values=p99))
    return aggregates


def _worst_p99(latency: dict[str, Any]) -> float | None:
    found = [float(value) for value in (latency.get("readP99"), latency.get("writeP99")) if value]
    return max(found) if found else None


def count_iterations(records: list[Record], current: int, total: int) -> Iterations:
    """The counter status shows: "2/5" while iteration 2 runs, "5/5 (1 failed)" once every iteration is done;
    and per step the failed objects of every finished iteration, failed ones included (what a ``failed`` bound
    judges)."""
    failed = [record for record in records if record.get("state") != SUCCEEDED]
    done = len(records)
    shown = done if done >= total else current
    summary = f"{shown}/{total}" + (f" ({len(failed)} failed)" if failed else "")
    failed_objects: dict[str, int] = {}
    for record in records:
        for step in record.get("steps") or []:
            status = step.get("status") or {}
            if status.get("name"):
                failed_objects[status["name"]] = failed_objects.get(status["name"], 0) + int(status.get("failed") or 0)
    return Iterations(current=current, total=total, done=done, failed=len(failed), summary=summary,
                      failures=[IterationFailure(iteration=int(record["iteration"]), message=str(record["message"]))
                                for record in failed[:MAX_ITERATION_FAILURES]],
                      failedObjects=failed_objects)
