"""spec.thresholds: what a threshold bounds (a step's, a workload's or a database row's measure) and the
bounds themselves; the baseline's reference.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import MAX_RUN_NAME, cel
from csibench.api.run.database import PgbenchMode
from csibench.api.run.datapath import WORKLOAD_NAME_PATTERN
from csibench.api.run.disruptions import MAX_DISRUPTIONS
from csibench.api.steps import StepName
from csibench.api.text import plain_number


class ThresholdMetric(StrEnum):
    """What a threshold bounds. Steps: ``durationSeconds``, ``throughput`` (objects/s), the per-object latency
    ``latencyP50``/``latencyP90``/``latencyP99``/``latencyMax`` (seconds) and ``failed`` (objects). Data-path
    workloads: ``mibps`` and ``iops`` (read + write, summed over volumes) and the merged ``readP99``/``writeP99``
    (seconds). Database rows: ``tps``, ``latencyAverageMs`` and ``failedTransactions``. Disruptions:
    ``recoverySeconds``, ``leaderSeconds``, ``stallSeconds`` and ``unrecovered`` (objects). The churn step also takes
    ``leaked`` (what its finished waves left behind) and ``memoryGrowthPercent`` (a CSI component's peak memory, its
    last windows against its first)."""

    DURATION_SECONDS = "durationSeconds"
    THROUGHPUT = "throughput"
    LATENCY_P50 = "latencyP50"
    LATENCY_P90 = "latencyP90"
    LATENCY_P99 = "latencyP99"
    LATENCY_MAX = "latencyMax"
    FAILED = "failed"
    MIBPS = "mibps"
    IOPS = "iops"
    READ_P99 = "readP99"
    WRITE_P99 = "writeP99"
    TPS = "tps"
    LATENCY_AVERAGE_MS = "latencyAverageMs"
    FAILED_TRANSACTIONS = "failedTransactions"
    RECOVERY_SECONDS = "recoverySeconds"
    LEADER_SECONDS = "leaderSeconds"
    STALL_SECONDS = "stallSeconds"
    UNRECOVERED = "unrecovered"
    CONTAINER_RESTARTS = "containerRestarts"
    LEAKED = "leaked"
    MEMORY_GROWTH_PERCENT = "memoryGrowthPercent"


M = ThresholdMetric
STEP_METRICS = (M.DURATION_SECONDS, M.THROUGHPUT, M.LATENCY_P50, M.LATENCY_P90, M.LATENCY_P99, M.LATENCY_MAX, M.FAILED)
WORKLOAD_METRICS = (M.MIBPS, M.IOPS, M.READ_P99, M.WRITE_P99)
DATABASE_METRICS = (M.TPS, M.LATENCY_AVERAGE_MS, M.FAILED_TRANSACTIONS)
DISRUPTION_METRICS = (M.RECOVERY_SECONDS, M.LEADER_SECONDS, M.STALL_SECONDS, M.UNRECOVERED, M.CONTAINER_RESTARTS,
                      M.LEAKED)
_CHURN_METRICS = (M.LEAKED, M.MEMORY_GROWTH_PERCENT)  # step churn's, besides STEP_METRICS
SECONDS_METRICS = frozenset({M.DURATION_SECONDS, M.LATENCY_P50, M.LATENCY_P90, M.LATENCY_P99, M.LATENCY_MAX,
                             M.READ_P99, M.WRITE_P99, M.RECOVERY_SECONDS, M.LEADER_SECONDS,
                             M.STALL_SECONDS})  # shown in µs / ms / s
MAX_THRESHOLDS = 32
MAX_BASELINE_ROWS = 64
MAX_SHAPE_DIFFERENCES = 16  # one per shape field (api/shape.py)
# NAMESPACE/ (a DNS label) then a run's name (a DNS label of at most MAX_RUN_NAME characters)
BASELINE_PATTERN = (f"^([a-z0-9]([-a-z0-9]{{0,{v.DNS_LABEL_MAX - 2}}}[a-z0-9])?/)?"
                    f"[a-z0-9]([-a-z0-9]{{0,{MAX_RUN_NAME - 2}}}[a-z0-9])?$")


def cel_list(values: Any) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


class DatabaseRowSelector(_Model):
    """Which database runs a threshold bounds: every run row matching all the fields given (none: every run)."""

    scale: int | None = Field(None, ge=1, le=100000, description="pgbench scale factor (one of database.scales).")
    mode: PgbenchMode | None = Field(None, description="readOnly or readWrite (one of database.modes).")
    clients: int | None = Field(None, ge=1, le=1000, description="pgbench clients (one of database.clients).")


_THRESHOLD_SUBJECT = ("a threshold names exactly one of step, workload, database or disruption, or none for a bound "
                      "on the whole run (metric leaked only)")
_THRESHOLD_BOUND = "a threshold needs min, max or both"
_RUN_METRICS = (M.LEAKED,)  # a bound with no subject: what the run left behind after its cleanup (status.leaks)
_SUBJECTS = ("(has(self.step) ? 1 : 0) + (has(self.workload) ? 1 : 0) + (has(self.database) ? 1 : 0) + "
             "(has(self.disruption) ? 1 : 0)")
_THRESHOLD_RULES = (
    (f"{_SUBJECTS} == 1 || ({_SUBJECTS} == 0 && self.metric in {cel_list(_RUN_METRICS)})", _THRESHOLD_SUBJECT),
    ("has(self.min) || has(self.max)", _THRESHOLD_BOUND),
    ("!has(self.min) || !has(self.max) || self.min <= self.max", "a threshold's min must be at most its max"),
    (f"!has(self.step) || self.metric in {cel_list(STEP_METRICS)} || (self.step == '{StepName.CHURN}' && "
     f"self.metric in {cel_list(_CHURN_METRICS)})",
     f"a step threshold's metric is one of {', '.join(STEP_METRICS)} (step churn: also "
     f"{', '.join(_CHURN_METRICS)})"),
    (f"!has(self.workload) || self.metric in {cel_list(WORKLOAD_METRICS)}",
     f"a workload threshold's metric is one of {', '.join(WORKLOAD_METRICS)}"),
    (f"!has(self.database) || self.metric in {cel_list(DATABASE_METRICS)}",
     f"a database threshold's metric is one of {', '.join(DATABASE_METRICS)}"),
    (f"!has(self.disruption) || self.metric in {cel_list(DISRUPTION_METRICS)}",
     f"a disruption threshold's metric is one of {', '.join(DISRUPTION_METRICS)}"),
)


class Threshold(_Model):
    """A bound on one thing the run measures. With spec.repeat > 1 the median over the iterations that measured
    well is judged (as status.aggregates and status.dataPathAggregates report it); a single run's value
    otherwise. A database threshold bounds every run row its selector matches."""

    model_config = ConfigDict(json_schema_extra=cel(*_THRESHOLD_RULES))

    step: StepName | None = Field(None, description="The step bounded (one the run runs).")
    workload: str | None = Field(None, min_length=1, max_length=32, pattern=WORKLOAD_NAME_PATTERN,
                                 description="The data-path workload bounded (one of dataPath.workloads).")
    database: DatabaseRowSelector | None = Field(None, description="The database runs bounded.")
    # None of step, workload, database and disruption: a bound on the whole run (metric leaked: what its cleanup
    # left behind, counted by the array where it can say; the audit then runs for a run without disruptions too).
    disruption: int | None = Field(None, ge=0, le=MAX_DISRUPTIONS - 1,
                                   description="The disruption bounded: its index in spec.disruptions (0 first).")
    metric: ThresholdMetric = Field(..., description="What is bounded; its unit is the status field's (seconds, "
                                                     "objects/s, MiB/s, IOPS, TPS, ms, counts).")
    min: float | None = Field(None, ge=0, description="The measured value must be at least this.")
    max: float | None = Field(None, ge=0, description="The measured value must be at most this.")

    @model_validator(mode="after")
    def _consistent(self) -> Threshold:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        subjects = sum(x is not None for x in (self.step, self.workload, self.database, self.disruption))
        if subjects != 1 and not (subjects == 0 and self.metric in _RUN_METRICS):
            raise ValueError(_THRESHOLD_SUBJECT)
        if self.min is None and self.max is None:
            raise ValueError(_THRESHOLD_BOUND)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("a threshold's min must be at most its max")
        kind = ("step" if self.step else "workload" if self.workload else "disruption"
                if self.disruption is not None else "database" if self.database is not None else "run")
        allowed = {"step": STEP_METRICS, "workload": WORKLOAD_METRICS, "database": DATABASE_METRICS,
                   "disruption": DISRUPTION_METRICS, "run": _RUN_METRICS}[kind]
        if kind == "step" and self.step == StepName.CHURN:
            allowed = (*STEP_METRICS, *_CHURN_METRICS)
        if self.metric not in allowed:
            raise ValueError(f"a {kind} threshold's metric is one of {', '.join(allowed)}")
        return self

    @property
    def subject(self) -> str:
        """'createVolume', 'workload seqRead', 'database scale 10 readOnly 4 clients'."""
        if self.step is not None:
            return str(self.step)
        if self.workload is not None:
            return f"workload {self.workload}"
        if self.disruption is not None:
            return f"disruption {self.disruption}"
        if self.database is None:
            return "run"
        selector = self.database
        parts = [f"scale {selector.scale}" if selector.scale else "",
                 str(selector.mode) if selector.mode else "",
                 f"{selector.clients} clients" if selector.clients else ""]
        return " ".join(["database", *[part for part in parts if part]])

    @property
    def bound(self) -> str:
        """'<= 2', '>= 5', '5 .. 9': each number as written, never rounded into its neighbour."""
        if self.min is not None and self.max is not None:
            return f"{plain_number(self.min)} .. {plain_number(self.max)}"
        return f">= {plain_number(self.min)}" if self.min is not None else f"<= {plain_number(self.max or 0.0)}"
