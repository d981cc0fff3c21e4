"""BenchmarkRunStatus as a whole, with the verdict, the thresholds' results and the baseline comparison.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from csibench.api.base import Model as _Model
from csibench.api.churn import MAX_CHURN_WINDOWS, ChurnDrift, ChurnWindow
from csibench.api.population import PopulationStatus
from csibench.api.run.common import MAX_FINDINGS, Phase
from csibench.api.run.database import MAX_DATABASE_ROWS
from csibench.api.run.datapath import MAX_WORKLOADS
from csibench.api.run.disruptions import MAX_DISRUPTIONS, DisruptionResult, LeakAudit
from csibench.api.run.modify import MAX_MODIFY_ROWS, ModifyRow
from csibench.api.run.observations import (
    ClientUsed,
    Condition,
    DataPathAggregate,
    Environment,
    Finding,
    Iterations,
    StepAggregate,
    StepStatus,
)
from csibench.api.run.rows import DatabaseRow, DataPathRow, DensityRow
from csibench.api.run.shared import MAX_SHARED_ROWS, SharedRow
from csibench.api.run.step_parts import MAX_DENSITY_LEVELS
from csibench.api.run.thresholds import MAX_BASELINE_ROWS, MAX_SHAPE_DIFFERENCES, MAX_THRESHOLDS


class Verdict(StrEnum):
    """What the run's thresholds and baseline comparison say together (status.verdict; the conditions
    ThresholdsMet and NoRegression say each part)."""

    PASS = "Pass"  # every bound held, and no regression against the baseline (equivalent or better)
    FAIL = "Fail"  # a bound broke or a measure regressed (the run may still have Succeeded as a measurement)
    UNKNOWN = "Unknown"  # the run failed to measure, a bound was not measured, or the comparison was inconclusive


class ThresholdResult(_Model):
    """One threshold judged against what the run measured."""

    subject: str = Field(..., description="What is bounded: a step, 'workload NAME' or 'database scale S MODE C "
                                          "clients'.")
    metric: str = Field(..., description="The metric (spec.thresholds[].metric).")
    bound: str = Field(..., description="'<= 2', '>= 5' or '5 .. 9'.")
    measured: float | None = Field(None, description="The value judged (for a database selector, the worst row's); "
                                                     "absent when nothing was measured.")
    met: bool | None = Field(None, description="True: within the bound; False: broken; absent: not measured.")
    message: str = Field("", description="'createVolume latencyP99 3.2 > 2 (max)', or why it was not judged.")


class BaselineRow(_Model):
    """One measure of this run against the same measure of the baseline run (higher is better)."""

    subject: str = Field(..., description="A step or 'workload NAME' (database runs are not compared: they cannot "
                                          "repeat yet).")
    metric: str = Field(..., description="throughput (objects/s), mibps or iops.")
    change: str = Field(..., description="Regression, Slower, Improvement, Equivalent or Inconclusive.")
    ratio: float | None = Field(None, description="This run / the baseline, geometric means over the iterations.")
    low: float | None = Field(None, description="Lower end of the ratio's 90% interval.")
    high: float | None = Field(None, description="Upper end of the ratio's 90% interval.")
    p: float | None = Field(None, description="Welch's two-sided p on the logarithms, Holm-adjusted over the rows.")
    pBeyond: float | None = Field(None, description="The one-sided p of a change beyond the threshold in the "
                                                    "observed direction, Holm-adjusted over the rows: Regression "
                                                    "or Improvement below alpha (0.05).")
    iterations: str = Field("", description="Iterations of the baseline / of this run.")
    iterationsNeeded: int | None = Field(None, description="Slower or Inconclusive: iterations per run the "
                                                           "observed spread would need to decide with 80% power "
                                                           "(an estimate).")
    message: str = Field("", description="The row in words.")


class BaselineComparison(_Model):
    """spec.baseline, judged when the run ends."""

    run: str = Field(..., description="The baseline run, NAMESPACE/NAME.")
    change: str = Field(..., description="Regression (any row), else Slower (any row, with failOnSlower), else "
                                         "Inconclusive (any row, or the baseline could not be read), else Slower "
                                         "(any row), else Improvement (any row), else Equivalent.")
    thresholdPercent: float = Field(..., description="spec.regressionThresholdPercent.")
    failOnSlower: bool = Field(False, description="spec.failOnSlower: whether Slower fails the verdict.")
    rows: list[BaselineRow] = Field(default_factory=list, max_length=MAX_BASELINE_ROWS,
                                    description="One per measure both runs have.")
    message: str = Field("", description="Why, in words (the regressions named first).")
    shapeDifferences: list[str] = Field(default_factory=list, max_length=MAX_SHAPE_DIFFERENCES,
                                        description="What differs between the baseline's shape and this run's, "
                                                    "'volumes 2 vs 12' (the baseline's first): a comparison across "
                                                    "shapes is not one of the storage alone.")


class BenchmarkRunStatus(_Model):
    """Where the run is and what it measured so far (aggregates only)."""

    phase: Phase | None = Field(None, description="Pending, Running, CleaningUp, Succeeded or Failed.")
    conditions: list[Condition] = Field(default_factory=list, description="Ready and Failed conditions.")
    observedGeneration: int | None = Field(None, description="Generation of the spec this status is about.")
    currentStep: str | None = Field(None, description="The step running now.")
    progress: str | None = Field(None, description="Terminal objects / submitted objects of the current step.")
    startTime: str | None = Field(None, description="When the run started.")
    completionTime: str | None = Field(None, description="When the run ended.")
    duration: str | None = Field(None, description="Sum of step times, human readable.")
    totalStepSeconds: float | None = Field(None, description="Sum of step times, in seconds.")
    targetNamespace: str | None = Field(None, description="Namespace holding the run's objects.")
    ownedNamespace: str | None = Field(
        None, description="Namespace the run created for itself; cleanup deletes it only while it carries the "
                          "run's uid label.")
    objectSelector: str | None = Field(None, description="Label selector matching every object the run created.")
    steps: list[StepStatus] = Field(default_factory=list, description="One entry per planned step, of the "
                                                                    "current (at the end: the last) iteration.")
    dataPath: list[DataPathRow] = Field(default_factory=list, max_length=MAX_WORKLOADS,
                                        description="One row per data-path workload (spec.dataPath).")
    density: list[DensityRow] = Field(default_factory=list, max_length=MAX_DENSITY_LEVELS,
                                      description="The density ramp (spec.density): one row per level.")
    database: list[DatabaseRow] = Field(default_factory=list, max_length=MAX_DATABASE_ROWS,
                                        description="The database table (spec.database): per scale, its "
                                                    "initialization row, then one row per mode x clients run.")
    modify: list[ModifyRow] = Field(default_factory=list, max_length=MAX_MODIFY_ROWS,
                                    description="fio on the volumes before and after the class change "
                                                "(spec.modify).")
    shared: list[SharedRow] = Field(default_factory=list, max_length=MAX_SHARED_ROWS,
                                    description="The shared-volume table (spec.shared): one row per probe phase.")
    churn: list[ChurnWindow] = Field(default_factory=list, max_length=MAX_CHURN_WINDOWS + 1,
                                     description="The churn (spec.churn): one row per window, then its tail.")
    churnDrift: ChurnDrift | None = Field(None, description="The churn's last windows against its first, judged "
                                                            "when the run ends (spec.churn).")
    population: PopulationStatus | None = Field(None, description="What the run made of spec.population.")
    disruptions: list[DisruptionResult] = Field(default_factory=list, max_length=MAX_DISRUPTIONS,
                                                description="What each of spec.disruptions did and cost its step.")
    leaks: LeakAudit | None = Field(None, description="What the run left behind after its cleanup (set for a run "
                                                      "with disruptions whose cleanup ran).")
    iterations: Iterations | None = Field(None, description="Iteration counter (spec.repeat).")
    aggregates: list[StepAggregate] = Field(default_factory=list, description="Per step, over the iterations "
                                                                            "that measured well (spec.repeat > 1).")
    dataPathAggregates: list[DataPathAggregate] = Field(
        default_factory=list, max_length=MAX_WORKLOADS,
        description="Per data-path workload, over the iterations that measured well (spec.repeat > 1).")
    verdict: Verdict | None = Field(None, description="Pass, Fail or Unknown: the thresholds and the baseline "
                                                      "comparison together, set when the run ends (only with "
                                                      "spec.thresholds or spec.baseline).")
    thresholds: list[ThresholdResult] = Field(default_factory=list, max_length=MAX_THRESHOLDS,
                                              description="Each threshold of the spec, judged when the run ends.")
    baseline: BaselineComparison | None = Field(None, description="This run against spec.baseline, judged when "
                                                                  "the run ends.")
    client: ClientUsed | None = Field(None, description="Client limits used.")
    preflight: list[Finding] = Field(default_factory=list, max_length=MAX_FINDINGS,
                                     description=f"Preflight findings, Warnings first (at most {MAX_FINDINGS}; the "
                                                 "report keeps all).")
    environment: Environment | None = Field(None, description="Cluster facts.")
    collection: list[Finding] = Field(default_factory=list, max_length=MAX_FINDINGS,
                                      description="What went wrong asking Prometheus (spec.collect): an unreachable "
                                                  "Prometheus, a query it refused, a query with no series. Never a "
                                                  "failed run.")
    reportConfigMap: str | None = Field(None, description="ConfigMap (run namespace) holding the full report.")
    cleanup: str | None = Field(None, description="What cleanup did, or where objects were left.")
    message: str | None = Field(None, description="Why the run ended as it did.")
