"""BenchmarkRunSpec: the run's spec as a whole, and the rules that tie its parts together (a step runs only
with its part, a threshold names only what the run runs, the data path fits the volumes after expand).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.churn import ChurnSpec
from csibench.api.collect import CollectSpec
from csibench.api.enabling import LISTING_RULES, STEP_RUNS_WHEN, enabled, listing_problem
from csibench.api.population import PopulationSpec
from csibench.api.run.common import (
    LABEL_KEYS_RULE,
    MAX_LABELS,
    MAX_REPEAT,
    MAX_RUN_NAME,
    QUANTITY_PATTERN,
    AccessMode,
    CleanupPolicy,
    LabelValue,
    PodSpec,
    PreflightMode,
    RestartPolicy,
    VolumeMode,
    cel,
)
from csibench.api.run.database import DatabaseSpec
from csibench.api.run.datapath import DataPathSpec, DataPathWorkload, FioPattern, default_workloads
from csibench.api.run.disruptions import MAX_DISRUPTIONS, DisruptionKind, DisruptionSpec
from csibench.api.run.modify import ModifySpec
from csibench.api.run.settings import ClientSettings, Timeouts
from csibench.api.run.shared import SharedSpec
from csibench.api.run.step_parts import DensitySpec, EphemeralSpec, ExpandSpec, GroupSnapshotSpec, MoveSpec
from csibench.api.run.thresholds import BASELINE_PATTERN, MAX_THRESHOLDS, Threshold, ThresholdMetric, cel_list
from csibench.api.steps import StepName, facts_of

# The volumes' size in bytes after the run's expansion (the data path runs after it).
_EXPANDS = "has(self.expand) && (has(self.expand.to) || has(self.expand.by))"  # (neither: its own rule says so)
_EXPANDED_SIZE = "(has(self.expand.to) ? quantity(self.expand.to) : quantity(self.size).add(quantity(self.expand.by)))"
_VOLUME_BYTES = f"(({_EXPANDS}) ? {_EXPANDED_SIZE} : quantity(self.size)).asInteger()"
_MIB = 1 << 20
_VERIFY_NEEDS_SNAPSHOTS = "dataPath.verify needs volumeSnapshotClassName: its clones are what it verifies"
_DATA_PATH_RULES = (
    ("!has(self.dataPath) || !has(self.dataPath.volumes) || self.dataPath.volumes <= self.volumes",
     "dataPath.volumes must be at most volumes: the data path uses the run's own volumes"),
    ("!has(self.dataPath) || (has(self.dataPath.workloads) ? self.dataPath.workloads.all(w, quantity(has("
     f"w.fileSize) ? w.fileSize : self.dataPath.fileSize).asInteger() * self.dataPath.jobsPerVolume <= "
     f"{_VOLUME_BYTES}) : quantity(self.dataPath.fileSize).asInteger() * self.dataPath.jobsPerVolume <= "
     f"{_VOLUME_BYTES})",
     "dataPath: jobsPerVolume x fileSize (of every workload) must fit the volume size (after expand, if set)"),
    ("!has(self.dataPath) || !has(self.dataPath.verify) || !self.dataPath.verify || "
     "has(self.volumeSnapshotClassName)", _VERIFY_NEEDS_SNAPSHOTS),
    # On a raw device each job's region starts at job x fileSize and is written in 1 MiB blocks: whole MiB keep
    # every offset aligned for direct I/O (512 B or 4 KiB sectors) and the layout inside the region.
    ("!has(self.dataPath) || self.volumeMode != 'Block' || (has(self.dataPath.workloads) ? "
     "self.dataPath.workloads.all(w, quantity(has(w.fileSize) ? w.fileSize : self.dataPath.fileSize).asInteger() "
     "% 1048576 == 0) : quantity(self.dataPath.fileSize).asInteger() % 1048576 == 0)",
     "dataPath on volumeMode Block: every fileSize must be a whole number of MiB (each job's region of the device "
     "starts at job x fileSize, aligned for direct I/O)"),
)
_EXPAND_RULES = (
    ("!has(self.expand) || !has(self.expand.to) || quantity(self.expand.to).isGreaterThan(quantity(self.size))",
     "expand.to must be greater than size: a volume only grows"),
    (f"!({_EXPANDS}) || {_EXPANDED_SIZE}.compareTo(quantity('{v.SIZE_MAX}')) <= 0",
     f"the expanded size must be at most {v.SIZE_MAX}"),
)
_DENSITY_RULES = (
    ("!has(self.density) || self.density.volumesPerNode.all(level, level <= self.volumes)",
     "density.volumesPerNode: each level must be at most volumes (a level publishes that many of the run's "
     "volumes)"),
    ("!has(self.density) || !has(self.steps) || !('publish' in self.steps) || 'unpublish' in self.steps",
     "density needs unpublish when publish runs: publish's pods would still hold the volumes"),
    ("!has(self.density) || self.repeat == 1",
     "density cannot be combined with repeat > 1 yet: its rows have no significance test; run it in a run of its "
     "own (repeat: 1)"),
)
_MODIFY_RULES = (
    ("!has(self.modify) || !has(self.modify.fioSize) || (has(self.modify.fioSeconds) && "
     "self.modify.fioSeconds == 0) || quantity(self.modify.fioSize).isLessThan(quantity(self.size))",
     "modify.fioSize must be less than size: fio's file lives on each volume, beside its filesystem's own"),
)
_CHURN_RULES = (
    ("!has(self.churn) || self.repeat == 1",
     "churn cannot be combined with repeat > 1: a churn is judged against itself (its drift); run it in a run of "
     "its own (repeat: 1)"),
    ("!has(self.thresholds) || has(self.collect) || self.thresholds.all(t, t.metric != 'memoryGrowthPercent')",
     "a memoryGrowthPercent threshold needs spec.collect: the memory is read from Prometheus"),
)
_POPULATION_NEEDS_SNAPSHOTS = ("population.snapshots needs volumeSnapshotClassName: the seed snapshot their "
                               "contents name is taken through it")
_POPULATION_RULES = (
    ("!has(self.population) || !has(self.population.snapshots) || self.population.snapshots == 0 || "
     "has(self.volumeSnapshotClassName)", _POPULATION_NEEDS_SNAPSHOTS),
)
_DATABASE_RULES = (
    ("!has(self.database) || self.repeat == 1",
     "database cannot be combined with repeat > 1 yet: run the database workload in a run of its own (repeat: 1)"),
)


# Whether a step runs, for admission (STEP_RUNS_WHEN, from the step facts: api/enabling.py): when spec.steps
# is given, it lists the step; either way a step with a part of its own runs only when that part is set and the
# snapshot steps only with a snapshot class (the default plan, engine/plan.py). A unit test holds it against the plan.
_STEP_RUNS = " && ".join(f"(t.step != '{step}' || ({condition}))" for step, condition in STEP_RUNS_WHEN.items())
_THRESHOLD_STEP_RUNS = "a threshold names a step this run does not run"
_THRESHOLD_WORKLOAD_RUNS = "a threshold names a data-path workload this run does not run"
_THRESHOLD_DATABASE_RUNS = "a database threshold selects a scale, mode or clients count this run does not run"
_THRESHOLD_DISRUPTION_RUNS = "a disruption threshold names a disruption this run does not have (an index of " \
                             "spec.disruptions)"
_THRESHOLDS_RULES = (
    (f"!has(self.thresholds) || self.thresholds.all(t, !has(t.step) || ((!has(self.steps) || t.step in self.steps) "
     f"&& {_STEP_RUNS}))", _THRESHOLD_STEP_RUNS),
    ("!has(self.thresholds) || self.thresholds.all(t, !has(t.workload) || (has(self.dataPath) && "
     "(has(self.dataPath.workloads) ? self.dataPath.workloads.exists(w, w.name == t.workload) : "
     f"t.workload in {cel_list(w.name for w in default_workloads())})))", _THRESHOLD_WORKLOAD_RUNS),
    ("!has(self.thresholds) || self.thresholds.all(t, !has(t.database) || (has(self.database) && "
     "(!has(t.database.scale) || (has(self.database.scales) ? t.database.scale in self.database.scales : "
     f"t.database.scale in {list(DatabaseSpec().scales)})) && "
     "(!has(t.database.mode) || !has(self.database.modes) || t.database.mode in self.database.modes) && "
     "(!has(t.database.clients) || (has(self.database.clients) ? t.database.clients in self.database.clients : "
     f"t.database.clients in {list(DatabaseSpec().clients)}))))", _THRESHOLD_DATABASE_RUNS),
    ("!has(self.thresholds) || self.thresholds.all(t, !has(t.disruption) || (has(self.disruptions) && "
     "t.disruption < size(self.disruptions)))", _THRESHOLD_DISRUPTION_RUNS),
)


_DISRUPTION_STEP_RUNS = "a disruption names a step this run does not run"
_DISRUPTION_TOO_LATE = ("a disruption's afterObjects must be less than its step's objects (volumes; publish and "
                        "unpublish: its pods, volumes / pvcsPerPod rounded up), a DrainNode's at most them (once "
                        "every pod runs)")
_DISRUPTION_REPEATED = ("disruptions cannot be combined with repeat > 1 yet: a disruption changes what each "
                        "iteration measures; run it in a run of its own (repeat: 1)")
_DISRUPTION_OVERLAPS = ("two disruptions would undo each other: one workload scaled down twice in a run, one "
                        "process paused twice in a step, two array faults in one step, or two DrainNodes")
_DISRUPTIONS_RULES = (
    ("!has(self.disruptions) || self.disruptions.all(d, (!has(self.steps) || d.step in self.steps) && "
     f"{_STEP_RUNS.replace('t.step', 'd.step')})", _DISRUPTION_STEP_RUNS),
    ("!has(self.disruptions) || self.disruptions.all(d, !has(d.afterObjects) || d.afterObjects < "
     "(d.step in ['publish', 'unpublish'] ? (self.volumes + self.pvcsPerPod - 1) / self.pvcsPerPod : self.volumes) + "
     "(has(d.kind) && d.kind == 'DrainNode' ? 1 : 0))",
     _DISRUPTION_TOO_LATE),
    ("!has(self.disruptions) || size(self.disruptions) == 0 || self.repeat == 1", _DISRUPTION_REPEATED),
)

_DIRECTION = {ThresholdMetric.READ_P99: "read", ThresholdMetric.WRITE_P99: "write"}


def _moves(workload: DataPathWorkload, metric: ThresholdMetric) -> bool:
    """Whether the workload does the I/O a per-direction metric needs (readP99 needs reads, writeP99 writes)."""
    if metric not in _DIRECTION:
        return True
    reads = workload.pattern in (FioPattern.READ, FioPattern.RANDREAD) or (
        workload.pattern == FioPattern.RANDRW and workload.readPercent > 0)
    writes = workload.pattern in (FioPattern.WRITE, FioPattern.RANDWRITE) or (
        workload.pattern == FioPattern.RANDRW and workload.readPercent < 100)
    return reads if metric == ThresholdMetric.READ_P99 else writes


class BenchmarkRunSpec(_Model):
    """What to benchmark: a storage class, a batch size and the lifecycle steps to time."""

    model_config = ConfigDict(json_schema_extra=cel(*LISTING_RULES, *_DATA_PATH_RULES, *_MODIFY_RULES, *_DATABASE_RULES,
                                                         *_CHURN_RULES, *_POPULATION_RULES, *_EXPAND_RULES,
                                                         *_DENSITY_RULES, *_THRESHOLDS_RULES, *_DISRUPTIONS_RULES))

    storageClassName: str = Field(..., min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
                                  description="StorageClass under test (must exist before the run starts).")
    volumeSnapshotClassName: str | None = Field(
        None, min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
        description="VolumeSnapshotClass for createSnapshot and cloneFromSnapshot; required when they run.")
    volumes: int = Field(10, ge=1, le=100000, description="Number of volumes (PVCs) in the batch.")
    pvcsPerPod: int = Field(1, ge=1, le=128,
                            description="PVCs mounted by each publish pod; pods = ceil(volumes / pvcsPerPod).")
    size: str = Field("1Gi", max_length=64, pattern=QUANTITY_PATTERN, json_schema_extra=cel((
        f"quantity(self).isGreaterThan(quantity('0')) && quantity(self).compareTo(quantity('{v.SIZE_MAX}')) <= 0",
        f"size must be greater than 0 and at most {v.SIZE_MAX}")),
        description=f"Requested size of each volume, e.g. 1Gi (more than 0, at most {v.SIZE_MAX}).")
    accessModes: list[AccessMode] = Field(
        default_factory=lambda: [AccessMode.READ_WRITE_ONCE], min_length=1, max_length=4,
        json_schema_extra=cel(("!('ReadWriteOncePod' in self) || size(self) == 1",
                               "ReadWriteOncePod cannot be combined with other access modes")),
        description="Access modes of each PVC.")
    volumeMode: VolumeMode = Field(VolumeMode.FILESYSTEM, description="Filesystem or Block.")
    steps: list[StepName] | None = Field(
        None, min_length=1, max_length=len(StepName),
        description="Ordered subset of the lifecycle to run. Default: all steps the given classes allow "
                    "(the snapshot steps only with volumeSnapshotClassName).")
    targetNamespace: str | None = Field(
        None, min_length=1, max_length=v.DNS_LABEL_MAX, pattern=v.DNS_LABEL_PATTERN,
        json_schema_extra=cel((f"!self.startsWith('{v.SYSTEM_NAMESPACE_PREFIX}') && "
                               f"self != '{v.DEFAULT_OPERATOR_NAMESPACE}'",
                               "targetNamespace must not be a system namespace (kube-*) or the operator's own")),
        description="Namespace for the benchmark objects (an existing one, never deleted by the run). Default: a "
                    "fresh namespace created and removed by the run. System namespaces are refused.")
    pod: PodSpec = Field(default_factory=PodSpec, description="Shape of the publish step's pods.")
    dataPath: DataPathSpec | None = Field(
        None, description="Measure the data path (fio) on the run's volumes after unpublish: one row per workload "
                          "with aggregate bandwidth, IOPS and completion latency.")
    database: DatabaseSpec | None = Field(
        None, description="Measure a database on the class (after the data path if both are set): PostgreSQL on a "
                          "PVC of its own and pgbench in one pod, one row per scale's initialization and per "
                          "scale x mode x clients run (TPS, latency, WAL generated).")
    expand: ExpandSpec | None = Field(
        None, description="Time volume expansion (the expandVolume step): every claim's request raised at once, "
                          "done when its capacity says the new size and no resize is pending. Online (after "
                          "publish, while its pods mount the volumes) when publish runs, else offline. The class "
                          "must allow volume expansion; clones after it request the new size.")
    modify: ModifySpec | None = Field(
        None, description="Time a change of VolumeAttributesClass (the modifyVolume step, after unpublish): every "
                          "bound claim's volumeAttributesClassName set at once, done when the claim says the new "
                          "class is in effect (the external-resizer's ControllerModifyVolume); fio on every volume "
                          "before and after it shows whether the limits changed.")
    density: DensitySpec | None = Field(
        None, description="Time attach against volumes per node (the density step, after unpublish): for each "
                          "level, that many of the run's volumes published at once in pods pinned to one node, "
                          "then unpublished; one row per level (time to Ready, its attach part, throughput, "
                          "detach time).")
    move: MoveSpec | None = Field(
        None, description="Time how long a volume takes to follow its pod to another node (the moveVolume step, "
                          "after publish): each moving publish pod is deleted and made again pinned to another "
                          "schedulable node (round-robin), and is done when Ready there; its latency is split into "
                          "pod gone, detach, attach and start. Needs two schedulable nodes; nodes are never "
                          "cordoned, drained or tainted.")
    groupSnapshot: GroupSnapshotSpec | None = Field(
        None, description="Time group snapshots (createGroupSnapshot, deleteGroupSnapshot): the run's volumes in "
                          "groups of volumesPerGroup (a label the run sets on its claims), one VolumeGroupSnapshot "
                          "per group, ready when it and every member snapshot are ready to use.")
    ephemeral: EphemeralSpec | None = Field(
        None, description="Time generic ephemeral volumes (createEphemeral, deleteEphemeral, after deleteVolume): "
                          "pods each with volumesPerPod ephemeral volumes of the run's class, made at once and timed "
                          "to Ready (the controller-manager makes each pod's claims, then provisioning, attach and "
                          "start), then deleted and timed until their claims and volumes are gone.")
    shared: SharedSpec | None = Field(
        None, description="Measure a shared (ReadWriteMany) volume (the sharedVolume step, after the database): one "
                          "claim of the run's class mounted by pods on different nodes, which time how soon one "
                          "pod's file is seen by the others, flock on one file (and whether an update was lost), "
                          "small-file create, stat, list and delete, and a listing of listFiles files. The class "
                          "must serve ReadWriteMany.")
    churn: ChurnSpec | None = Field(
        None, description="Churn for a duration (the churn step, last): a wave of waveSize volumes every "
                          "everySeconds through create, publish, unpublish and delete, at most maxWavesInFlight "
                          "waves at once; per window of windowSeconds, each phase's completions, throughput and "
                          "latency, what finished waves left behind, and the CSI components' memory "
                          "(status.churn); its last windows are judged against its first (status.churnDrift).")
    population: PopulationSpec | None = Field(
        None, description="Background objects that exist while the steps run (the scale envelope): claims bound to "
                          "statically provisioned PersistentVolumes and snapshots bound to pre-provisioned contents, "
                          "made before the first step (untimed) and removed first at cleanup; the steps never see "
                          "them (status.population).")
    timeouts: Timeouts = Field(default_factory=Timeouts, description="Per-step timeouts.")
    failAfterWarnings: int | None = Field(
        None, ge=1, le=1000,
        description="Fail an object once this many Warnings that Kubernetes retries past were seen for it (1: fail "
                    "on the first). Unset: such Warnings (a CSI call past its sidecar's --timeout, the attach/detach "
                    "controller's wait for the attacher running out, ...) are counted in status.steps[]."
                    "retriedWarnings and an object fails only at its step's timeout or on a cause no retry fixes "
                    "(InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, Unimplemented, Internal, a "
                    "volume limit the scheduler reports).")
    client: ClientSettings = Field(default_factory=ClientSettings, description="API client rate limits of this run.")
    cleanup: CleanupPolicy = Field(CleanupPolicy.ALWAYS,
                                   description="Remove the run's objects: Always, OnSuccess or Never.")
    restartPolicy: RestartPolicy = Field(
        RestartPolicy.REDO,
        description="After an operator restart: Redo restores the state the interrupted step started from and "
                    "measures it again from scratch (finished steps keep their measurements); Fail ends the run "
                    "Failed with OperatorRestarted.")
    preflight: PreflightMode = Field(
        PreflightMode.WARN,
        description="Checks of the CSI machinery serving the class before the first object (client limits, "
                    "worker pools, timeouts, schedulable nodes): Warn records findings in status, Events and the "
                    "report; Enforce ends the run Failed before creating anything when a Warning finding exists; "
                    "Skip does not look.")
    repeat: int = Field(1, ge=1, le=MAX_REPEAT,
                        description="How many times the selected lifecycle runs, each iteration on fresh objects "
                                    "with untimed cleanup in between. Status keeps per-step aggregates over the "
                                    "iterations (median, min, max); the report keeps every iteration.")
    maxStepAttempts: int = Field(3, ge=1, le=10,
                                 description="With Redo: how many times one step may be started; past that the "
                                             "run ends Failed with RestartLimitReached.")
    baseline: str | None = Field(
        None, max_length=v.DNS_LABEL_MAX + 1 + MAX_RUN_NAME, pattern=BASELINE_PATTERN,
        description="An earlier finished run to compare with at the end: NAME (this namespace) or NAMESPACE/NAME "
                    "(a run in another namespace only when its annotation csibench.io/shared-as-baseline lists this "
                    "namespace or is '*'). Per step, workload and database row the run records Regression, "
                    "Improvement, Equivalent or Inconclusive (status.baseline); a regression fails the verdict.")
    baselineRequireSameShape: bool = Field(
        False, description="With baseline: refuse to compare (Inconclusive, verdict Unknown, the differences named) "
                           "when the baseline's shape differs from this run's (class, volumes, pvcsPerPod, size, "
                           "access and volume mode, steps, pod, client, workload parts). Without it a comparison "
                           "across shapes is made and status.baseline.shapeDifferences names what differs.")
    regressionThresholdPercent: float = Field(
        10.0, ge=1, le=1000, description="With baseline (1-1000): a slowdown counts as a regression only when the "
                                         "data show it larger than this (a one-sided test, Holm-adjusted); "
                                         "equivalence is claimed only within it.")
    failOnSlower: bool = Field(
        False, description="With baseline: also fail the verdict on a measure that is significantly slower but not "
                           "shown beyond regressionThresholdPercent (the outcome Slower); by default Slower is "
                           "reported and passes.")
    thresholds: list[Threshold] = Field(
        default_factory=list, max_length=MAX_THRESHOLDS,
        description="Bounds on what the run measures (the verdict: condition ThresholdsMet, status.verdict). A run "
                    "that measured but broke a bound still Succeeded as a measurement; its verdict is Fail.")
    disruptions: list[DisruptionSpec] = Field(
        default_factory=list, max_length=MAX_DISRUPTIONS,
        description="Faults injected inside a step (a CSI component restarted), each measured: recovery, stall, "
                    "throughput before and after, objects not recovered. Needs the operator's disruption rights.")
    collect: CollectSpec | None = Field(
        None, description="PromQL over each step's window (kube-burner style): by default the CSI machinery's "
                          "CPU-seconds and peak memory per container per step; values go into status.steps[]."
                          "collection and the report. A Prometheus that is down or a bad query is a finding in "
                          "status.collection, never a failed run.")
    labels: dict[str, LabelValue] = Field(
        default_factory=dict, max_length=MAX_LABELS, json_schema_extra=cel(LABEL_KEYS_RULE, (
            "self.all(k, !k.startsWith('csibench.io/') && k != 'app.kubernetes.io/managed-by')",
            "labels under csibench.io/ and app.kubernetes.io/managed-by are set by the operator to mark what a "
            "run owns; choose another key")),
        description="Extra labels put on every object the run creates (not csibench.io/*, which mark ownership).")

    @field_validator("labels")
    @classmethod
    def _labels_are_valid_and_not_reserved(cls, value: dict[str, str]) -> dict[str, str]:
        problems = v.label_problems(value, "label")
        problems += [f"label {key!r} is set by the operator to mark what a run owns; choose another key"
                     for key in value if v.is_reserved_label_key(key)]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("size")
    @classmethod
    def _size_in_bounds(cls, value: str) -> str:
        return v.size_in_bounds(value, "size")

    @field_validator("accessModes")
    @classmethod
    def _read_write_once_pod_alone(cls, value: list[AccessMode]) -> list[AccessMode]:
        if AccessMode.READ_WRITE_ONCE_POD in value and len(value) > 1:
            raise ValueError("ReadWriteOncePod cannot be combined with other access modes")
        return value

    @model_validator(mode="after")
    def _steps_listed_with_their_parts(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL, from the step facts (``LISTING_RULES``): spec.steps, when given, lists
        a step exactly when its part of the spec is set."""
        problem = listing_problem(self, self.steps)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _data_path_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        data = self.dataPath
        verifying = data is not None and data.verify
        if verifying and not self.volumeSnapshotClassName:
            raise ValueError(_VERIFY_NEEDS_SNAPSHOTS)
        if data is None:
            return self
        if data.volumes is not None and data.volumes > self.volumes:
            raise ValueError(_DATA_PATH_RULES[0][1])
        size = v.parse_quantity(self.volume_size)
        if any(v.parse_quantity(data.file_size(w)) * data.jobsPerVolume > size for w in data.workloads):
            raise ValueError(_DATA_PATH_RULES[1][1])
        if self.volumeMode == VolumeMode.BLOCK and any(v.parse_quantity(data.file_size(w)) % _MIB
                                                       for w in data.workloads):
            raise ValueError(_DATA_PATH_RULES[3][1])
        if len({w.name for w in data.workloads}) != len(data.workloads):
            raise ValueError("workload names must be unique")
        return self

    @model_validator(mode="after")
    def _modify_consistent(self) -> BenchmarkRunSpec:
        """The same rule as the CRD's CEL (a run stored before it existed is refused here)."""
        if self.modify is not None and self.modify.fioSeconds > 0 and \
                v.parse_quantity(self.modify.fioSize) >= v.parse_quantity(self.size):
            raise ValueError(_MODIFY_RULES[0][1])
        return self

    @model_validator(mode="after")
    def _database_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        if self.database is not None and self.repeat != 1:
            raise ValueError(_DATABASE_RULES[0][1])
        return self

    @model_validator(mode="after")
    def _expand_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        if self.expand is None:
            return self
        new = v.parse_quantity(self.expand.new_size(self.size))
        if new <= v.parse_quantity(self.size):
            raise ValueError(_EXPAND_RULES[0][1])
        if new > v.parse_quantity(v.SIZE_MAX):
            raise ValueError(_EXPAND_RULES[1][1])
        return self

    @model_validator(mode="after")
    def _density_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        if self.density is not None and max(self.density.volumesPerNode) > self.volumes:
            raise ValueError(_DENSITY_RULES[0][1])
        if self.density is not None and self.steps is not None and StepName.PUBLISH in self.steps \
                and StepName.UNPUBLISH not in self.steps:
            raise ValueError(_DENSITY_RULES[1][1])
        if self.density is not None and self.repeat != 1:
            raise ValueError(_DENSITY_RULES[2][1])
        return self

    @model_validator(mode="after")
    def _churn_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        problem = self.churn.problem() if self.churn is not None else None
        if problem is not None:
            raise ValueError(problem)
        if self.churn is not None and self.repeat != 1:
            raise ValueError(_CHURN_RULES[0][1])
        if self.collect is None and any(t.metric == ThresholdMetric.MEMORY_GROWTH_PERCENT for t in self.thresholds):
            raise ValueError(_CHURN_RULES[1][1])
        return self

    @model_validator(mode="after")
    def _population_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        if self.population is not None and self.population.snapshots and not self.volumeSnapshotClassName:
            raise ValueError(_POPULATION_NEEDS_SNAPSHOTS)
        return self

    @model_validator(mode="after")
    def _thresholds_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        for threshold in self.thresholds:
            if threshold.step is not None and not self.runs_step(threshold.step):
                raise ValueError(f"{_THRESHOLD_STEP_RUNS}: {threshold.step}")
            workloads = {w.name: w for w in self.dataPath.workloads} if self.dataPath is not None else {}
            if threshold.workload is not None and threshold.workload not in workloads:
                raise ValueError(f"{_THRESHOLD_WORKLOAD_RUNS}: {threshold.workload}")
            if threshold.workload is not None and not _moves(workloads[threshold.workload], threshold.metric):
                raise ValueError(f"workload {threshold.workload} does not {_DIRECTION[threshold.metric]}: a "
                                 f"{threshold.metric} threshold on it could never be judged")
            if threshold.disruption is not None and threshold.disruption >= len(self.disruptions):
                raise ValueError(f"{_THRESHOLD_DISRUPTION_RUNS}: {threshold.disruption}")
            selector = threshold.database
            if selector is not None and (self.database is None or (
                    selector.scale is not None and selector.scale not in self.database.scales) or (
                    selector.mode is not None and selector.mode not in self.database.modes) or (
                    selector.clients is not None and selector.clients not in self.database.clients)):
                raise ValueError(f"{_THRESHOLD_DATABASE_RUNS}: {threshold.subject}")
        return self

    @model_validator(mode="after")
    def _disruptions_consistent(self) -> BenchmarkRunSpec:
        if self.disruptions and self.repeat != 1:
            raise ValueError(_DISRUPTION_REPEATED)
        for disruption in self.disruptions:
            if not self.runs_step(disruption.step):
                raise ValueError(f"{_DISRUPTION_STEP_RUNS}: {disruption.step}")
            objects = -(-self.volumes // self.pvcsPerPod) if disruption.step in (
                StepName.PUBLISH, StepName.UNPUBLISH) else self.volumes
            last = objects + (disruption.kind == DisruptionKind.DRAIN_NODE)  # a drain once every pod runs
            if disruption.afterObjects is not None and disruption.afterObjects >= last:
                raise ValueError(f"{_DISRUPTION_TOO_LATE}: {disruption.step} has {objects}")
        # Not a CEL rule: pairs of list items with their strings cost over 100 times the API server's budget. A run
        # that has them fails at its start (InvalidSpec), before anything is created.
        workloads = [(d.workload.namespace, d.workload.name) for d in self.disruptions if d.workload is not None]
        pauses = [(d.kind, d.step) for d in self.disruptions if d.kind.paused_component() is not None
                  or d.kind in (DisruptionKind.ARRAY_FAULT, DisruptionKind.DRAIN_NODE)]
        if len(set(workloads)) < len(workloads) or len(set(pauses)) < len(pauses):
            raise ValueError(_DISRUPTION_OVERLAPS)
        return self

    def runs_step(self, step: str) -> bool:
        """Whether the run runs ``step``: admission's reading of the plan (``STEP_RUNS_WHEN``)."""
        return (self.steps is None or step in self.steps) and enabled(facts_of(step), self)

    @property
    def volume_size(self) -> str:
        """The size of the run's volumes after the steps that change it (expandVolume): what clones request."""
        return self.expand.new_size(self.size) if self.expand is not None else self.size

    @field_validator("targetNamespace")
    @classmethod
    def _target_namespace_allowed(cls, value: str | None) -> str | None:
        if value is not None:
            problem = v.namespace_problem(value, v.DEFAULT_OPERATOR_NAMESPACE)
            if problem:
                raise ValueError(problem)
        return value

    @property
    def audits_leaks(self) -> bool:
        """Whether the run counts what its cleanup left behind (status.leaks): a run with disruptions always (what
        a disruption cost), a churn (what its waves left), any other run with a bound on it (``{metric: leaked,
        max: 0}``)."""
        return bool(self.disruptions) or self.churn is not None or \
            any(t.metric == ThresholdMetric.LEAKED for t in self.thresholds or [])
