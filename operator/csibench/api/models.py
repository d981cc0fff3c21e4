"""The BenchmarkRun API (csibench.io/v1alpha1): pydantic models are the single source of truth.

The CRD schema in ``crds/`` is generated from these models (``csibench crd``), so every field's description
appears in ``kubectl explain`` and every status field the operator writes is declared (the API server silently
drops undeclared ones). Field names are the API's camelCase names, so models and YAML read alike.
Status stays small and bounded at any scale: aggregates only; per-object data goes to the report store.
"""

from __future__ import annotations

import itertools
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import ConfigDict, Field, create_model, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.collect import CollectSpec, StepCollection
from csibench.api.steps import STEP_FACTS
from csibench.api.steps import StepName as StepName
from csibench.api.text import plain_number

GROUP = "csibench.io"
VERSION = "v1alpha1"
KIND = "BenchmarkRun"
PLURAL = "benchmarkruns"
QUANTITY_PATTERN = v.SIZE_PATTERN
MAX_FAILURE_REASONS = 5
MAX_LABELS = 32
MAX_FINDINGS = 12
MAX_RUN_NAME = 40  # object names are "<run>-<uid5>-i50-v00042": 40 + 17 stays a valid DNS label
MAX_REPEAT = 50
MAX_VOLUMES_PER_GROUP = 100  # one CSI call snapshots them all; arrays limit a consistency group far below this
MAX_ITERATION_FAILURES = 5


def cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """CEL validation rules (rule, message) for the generated CRD (``x-kubernetes-validations``): admission."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message} for rule, message in rules]}


def _re(pattern: str) -> str:
    """A Python pattern as a CEL string literal (RE2 accepts the same syntax)."""
    return "'" + pattern.replace("\\", "\\\\") + "'"


LabelValue = Annotated[str, Field(max_length=v.LABEL_VALUE_MAX, pattern=v.LABEL_VALUE_PATTERN)]
LABEL_KEYS_RULE = (f"self.all(k, size(k) <= {v.LABEL_KEY_MAX} && k.matches({_re(v.LABEL_KEY_PATTERN)}))",
                   "label keys must be an optional DNS-subdomain prefix and '/', then 1-63 alphanumerics, '-', "
                   "'_' or '.', starting and ending with an alphanumeric")
ResourceQuantity = Annotated[str, Field(max_length=64, pattern=v.RESOURCE_QUANTITY_PATTERN)]


class CleanupPolicy(StrEnum):
    ALWAYS = "Always"
    ON_SUCCESS = "OnSuccess"
    NEVER = "Never"


class RestartPolicy(StrEnum):
    REDO = "Redo"
    FAIL = "Fail"


class AccessMode(StrEnum):
    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_ONLY_MANY = "ReadOnlyMany"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"


class VolumeMode(StrEnum):
    FILESYSTEM = "Filesystem"
    BLOCK = "Block"


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    CLEANING_UP = "CleaningUp"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ConditionReason(StrEnum):
    """Why the run's Ready condition is what it is: one word each, the same in status, Events and metrics."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    # Found before anything is created (the run ends Failed and leaves nothing).
    INVALID_SPEC = "InvalidSpec"
    INVALID_STEPS = "InvalidSteps"
    MISSING_VOLUME_SNAPSHOT_CLASS = "MissingVolumeSnapshotClass"
    NAME_TOO_LONG = "NameTooLong"
    STORAGE_CLASS_NOT_FOUND = "StorageClassNotFound"
    SNAPSHOT_API_NOT_INSTALLED = "SnapshotAPINotInstalled"
    VOLUME_SNAPSHOT_CLASS_NOT_FOUND = "VolumeSnapshotClassNotFound"
    TARGET_NAMESPACE_NOT_FOUND = "TargetNamespaceNotFound"
    INVALID_TARGET_NAMESPACE = "InvalidTargetNamespace"
    MANIFEST_REJECTED = "ManifestRejected"
    DATA_PATH_DOES_NOT_FIT = "DataPathDoesNotFit"
    EXPANSION_NOT_ALLOWED = "ExpansionNotAllowed"
    GROUP_SNAPSHOT_API_NOT_INSTALLED = "GroupSnapshotAPINotInstalled"
    VOLUME_GROUP_SNAPSHOT_CLASS_NOT_FOUND = "VolumeGroupSnapshotClassNotFound"
    NOT_ENOUGH_NODES = "NotEnoughNodes"
    ABOVE_VOLUME_LIMIT = "AboveVolumeLimit"
    # Found while the run is under way.
    TARGET_NAMESPACE_DELETED = "TargetNamespaceDeleted"
    STORAGE_CLASS_DELETED = "StorageClassDeleted"
    RUN_ABORTED = "RunAborted"
    RESTORE_FAILED = "RestoreFailed"
    RESTART_LIMIT_REACHED = "RestartLimitReached"
    OBJECTS_FAILED = "ObjectsFailed"
    CLEANUP_INCOMPLETE = "CleanupIncomplete"
    OPERATOR_RESTARTED = "OperatorRestarted"
    PREFLIGHT_FAILED = "PreflightFailed"


class PreflightMode(StrEnum):
    WARN = "Warn"
    ENFORCE = "Enforce"
    SKIP = "Skip"


class Severity(StrEnum):
    """How much a preflight finding matters: Warning = the numbers will likely be distorted; Info = worth knowing."""

    WARNING = "Warning"
    INFO = "Info"


class StepState(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    INTERRUPTED = "Interrupted"



class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


_TOLERATION_RULES = (
    ("!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
     "a toleration with operator Exists must not have a value"),
    ("(has(self.key) && self.key != '') || (has(self.operator) && self.operator == 'Exists')",
     "a toleration without a key must use operator Exists (it then tolerates every taint)"),
    ("!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
     "tolerationSeconds is only valid with effect NoExecute"),
)


class Toleration(_Model):
    """A pod toleration (the Kubernetes shape)."""

    model_config = ConfigDict(json_schema_extra=cel(*_TOLERATION_RULES))

    key: str | None = Field(None, max_length=v.LABEL_KEY_MAX, pattern=v.LABEL_KEY_PATTERN,
                            description="Taint key the toleration applies to (a label key).")
    operator: TolerationOperator | None = Field(None, description="Exists or Equal (default Equal).")
    value: LabelValue | None = Field(None, description="Taint value when operator is Equal.")
    effect: TaintEffect | None = Field(None, description="NoSchedule, PreferNoSchedule or NoExecute; empty: all.")
    tolerationSeconds: int | None = Field(None, ge=0, description="How long a NoExecute taint is tolerated.")

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == TolerationOperator.EXISTS and self.value:
            raise ValueError(_TOLERATION_RULES[0][1])
        if not self.key and self.operator != TolerationOperator.EXISTS:
            raise ValueError(_TOLERATION_RULES[1][1])
        if self.tolerationSeconds is not None and self.effect != TaintEffect.NO_EXECUTE:
            raise ValueError(_TOLERATION_RULES[2][1])
        return self


_REQUESTS_WITHIN_LIMITS = (
    "!has(self.limits) || !has(self.requests) || self.requests.all(k, !(k in self.limits) || "
    "quantity(self.requests[k]).compareTo(quantity(self.limits[k])) <= 0)",
    "every resource request must be at most its limit")
_RESOURCE_NAMES = (f"self.all(k, size(k) <= {v.LABEL_KEY_MAX} && k.matches({_re(v.LABEL_KEY_PATTERN)}))",
                   "resource names are like cpu, memory, ephemeral-storage or example.com/device")


class Resources(_Model):
    """Container resources of the benchmark pods."""

    model_config = ConfigDict(json_schema_extra=cel(_REQUESTS_WITHIN_LIMITS))

    requests: dict[str, ResourceQuantity] = Field(
        default_factory=dict, max_length=16, json_schema_extra=cel(_RESOURCE_NAMES),
        description="Resource requests, e.g. {cpu: 10m}.")
    limits: dict[str, ResourceQuantity] = Field(
        default_factory=dict, max_length=16, json_schema_extra=cel(_RESOURCE_NAMES),
        description="Resource limits, e.g. {memory: 16Mi}.")

    @model_validator(mode="after")
    def _requests_within_limits(self) -> Resources:
        for name in (*self.requests, *self.limits):
            if not v.is_label_key(name):
                raise ValueError(f"resource name {name!r}: {_RESOURCE_NAMES[1]}")
        for name, request in self.requests.items():
            limit = self.limits.get(name)
            if limit is not None and v.parse_quantity(request) > v.parse_quantity(limit):
                raise ValueError(f"resources: the {name} request {request} is above its limit {limit}")
        return self


class Placement(StrEnum):
    """Where the publish step's pods go."""

    SPREAD = "Spread"  # where the scheduler puts them
    PACK = "Pack"  # onto as few nodes as the driver's per-node volume limit allows, in order of node name


class PodSpec(_Model):
    """How the publish step's pods look. They meet Pod Security "restricted"."""

    image: str = Field("registry.k8s.io/pause:3.10", min_length=1, max_length=v.IMAGE_MAX, pattern=v.IMAGE_PATTERN,
                       description="Container image of the benchmark pods (a pause image by default).")
    nodeSelector: dict[str, LabelValue] = Field(
        default_factory=dict, max_length=MAX_LABELS, json_schema_extra=cel(LABEL_KEYS_RULE),
        description="Node selector of the benchmark pods (label keys and values).")
    tolerations: list[Toleration] = Field(default_factory=list, description="Tolerations of the benchmark pods.")
    resources: Resources = Field(default_factory=Resources, description="Resources of the benchmark container.")
    placement: Placement = Field(
        Placement.SPREAD, description="Spread: where the scheduler puts the publish pods. Pack: each pinned, in "
                                  "order, to the first node (by name, among those that can run them) with room left "
                                  "under the driver's per-node volume limit (CSINode allocatable.count; without one, "
                                  "all on the first node).")

    @field_validator("nodeSelector")
    @classmethod
    def _node_selector_is_labels(cls, value: dict[str, str]) -> dict[str, str]:
        problems = v.label_problems(value, "nodeSelector")
        if problems:
            raise ValueError("; ".join(problems))
        return value


class FioPattern(StrEnum):
    """fio's ``--rw``: the I/O pattern of a workload."""

    READ = "read"
    WRITE = "write"
    RANDREAD = "randread"
    RANDWRITE = "randwrite"
    RANDRW = "randrw"


MAX_WORKLOADS = 16
MAX_RATE_LEVELS = 10
FIO_SIZE_PATTERN = r"^[1-9][0-9]{0,5}(Ki|Mi|Gi)?$"  # fio and Kubernetes read these the same way (binary units)
IOENGINE_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
WORKLOAD_NAME_PATTERN = r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$"


class DataPathWorkload(_Model):
    """One row of the data-path matrix: one fio job file run on every selected volume at once."""

    name: str = Field(..., min_length=1, max_length=32, pattern=WORKLOAD_NAME_PATTERN,
                      description="Row name: letters, digits and '-', starting with a letter, e.g. seqRead; "
                                  "labels the row's metrics.")
    pattern: FioPattern = Field(..., description="fio --rw: read, write, randread, randwrite or randrw.")
    blockSize: str = Field(..., max_length=16, pattern=FIO_SIZE_PATTERN,
                           description="fio --bs, e.g. 64Ki or 8Ki.")
    readPercent: int = Field(50, ge=0, le=100, description="fio --rwmixread for randrw (percent reads).")
    fileSize: str | None = Field(None, max_length=16, pattern=FIO_SIZE_PATTERN,
                                 description="Overrides dataPath.fileSize for this row.")
    ioengine: str | None = Field(None, max_length=32, pattern=IOENGINE_PATTERN,
                                 description="Overrides dataPath.ioengine for this row.")
    iodepth: int | None = Field(None, ge=1, le=1024, description="Overrides dataPath.iodepth for this row.")

    @property
    def reads(self) -> bool:
        return self.pattern in (FioPattern.READ, FioPattern.RANDREAD) or (
            self.pattern == FioPattern.RANDRW and self.readPercent > 0)

    @property
    def writes(self) -> bool:
        return self.pattern in (FioPattern.WRITE, FioPattern.RANDWRITE) or (
            self.pattern == FioPattern.RANDRW and self.readPercent < 100)


def default_workloads() -> list[DataPathWorkload]:
    """The published SIO-style table: sequential 64 KiB read/write, random 8 KiB read/write, random 50/50."""
    return [DataPathWorkload(name="seqRead", pattern=FioPattern.READ, blockSize="64Ki"),
            DataPathWorkload(name="seqWrite", pattern=FioPattern.WRITE, blockSize="64Ki"),
            DataPathWorkload(name="randRead", pattern=FioPattern.RANDREAD, blockSize="8Ki"),
            DataPathWorkload(name="randWrite", pattern=FioPattern.RANDWRITE, blockSize="8Ki"),
            DataPathWorkload(name="randReadWrite", pattern=FioPattern.RANDRW, blockSize="8Ki", readPercent=50)]


WORKLOAD_TITLES = {"seqRead": "Sequential read", "seqWrite": "Sequential write", "randRead": "Random read",
                   "randWrite": "Random write", "randReadWrite": "Random 50/50"}


class DataPathSpec(_Model):
    """The data path: fio on the run's volumes, one pod per volume at once, one workload after the other."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("!has(self.workloads) || self.workloads.all(a, self.workloads.exists_one(b, b.name == a.name))",
         "workload names must be unique"),
    ))

    workloads: list[DataPathWorkload] = Field(
        default_factory=default_workloads, min_length=1, max_length=MAX_WORKLOADS,
        description="The rows, run in order. Default: sequential 64Ki read and write, random 8Ki read and write, "
                    "random 8Ki 50/50.")
    volumes: int | None = Field(None, ge=1, le=1024,
                                description="How many of the run's volumes each workload uses (the first N); "
                                            "default all (at most 1024).")
    jobsPerVolume: int = Field(2, ge=1, le=64, description="fio --numjobs: processes per volume, one file each.")
    iodepth: int = Field(8, ge=1, le=1024, description="fio --iodepth.")
    fileSize: str = Field("16Mi", max_length=16, pattern=FIO_SIZE_PATTERN,
                          description="fio --size: the file of each job (jobsPerVolume x fileSize must fit the "
                                      "volume).")
    rampSeconds: int = Field(1, ge=0, le=3600, description="fio --ramp_time: seconds not measured.")
    runtimeSeconds: int = Field(5, ge=1, le=86400, description="fio --runtime, time based: seconds measured.")
    direct: bool = Field(True, description="fio --direct: O_DIRECT, bypassing the page cache.")
    startDelaySeconds: int = Field(5, ge=1, le=300,
                                   description="The start barrier: once every pod of a workload has laid out its "
                                               "files and runs, all begin this many seconds later, at one instant "
                                               "(room for each node's kubelet to write the start time into the "
                                               "pods; a pod that reads it late starts at once, and its skew "
                                               "shows).")
    startTimeoutSeconds: int = Field(300, ge=1, le=86400,
                                     description="How long the start barrier waits for every pod of a workload to "
                                                 "run; the start time is then given to all, and a pod not running "
                                                 "by then starts when it is (its row is flagged by its skew).")
    localBaseline: bool = Field(False, description="After each workload, the same workload (unthrottled, started "
                                                   "together) on an emptyDir, the nodes' own disk, in a pod per "
                                                   "volume on the same nodes; reported beside the class. A class "
                                                   "faster than local is a red flag: a cache, not the storage.")
    verify: bool = Field(False, description="Integrity: after the data path, each volume's fio files are "
                                            "checksummed (sha256, one pod per volume); the verifyClone step "
                                            "(after cloneFromSnapshot) checks each clone's files against its "
                                            "source's, and a clone whose data differs fails, the file named. Needs "
                                            "volumeSnapshotClassName.")
    rateLevels: list[Annotated[int, Field(ge=1, le=100)]] = Field(
        default_factory=list, max_length=MAX_RATE_LEVELS, json_schema_extra=cel(
            ("self.all(x, self.exists_one(y, y == x)) && self.isSorted()",
             "dataPath.rateLevels must be strictly increasing")),
        description="Latency under load: after each workload's unthrottled row, the same workload again at each of "
                    "these percents of the IOPS it reached (fio --rate_iops per job, read and write each), e.g. "
                    "[10, 25, 50, 75, 90, 100]: achieved IOPS and merged p99 per level, a table and a curve. Each "
                    "level is one more runtime.")
    arrayCacheBytes: str | None = Field(None, max_length=32, pattern=QUANTITY_PATTERN,
                                        description="The storage's cache, if known (a quantity, e.g. 64Gi): a "
                                                    "working set (volumes x jobsPerVolume x fileSize) smaller than "
                                                    "it is a preflight Warning (DataPathCache).")
    ioengine: str = Field("libaio", max_length=32, pattern=IOENGINE_PATTERN, description="fio --ioengine.")
    image: str | None = Field(None, min_length=1, max_length=v.IMAGE_MAX, pattern=v.IMAGE_PATTERN,
                              description="Workload image (fio inside); default: the operator's "
                                          "--workload-image / CSIBENCH_WORKLOAD_IMAGE.")
    resources: Resources = Field(default_factory=Resources,
                                 description="Resources of each workload container (nodeSelector and tolerations "
                                             "come from spec.pod).")

    @field_validator("rateLevels")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(later <= earlier for earlier, later in itertools.pairwise(value)):
            raise ValueError("dataPath.rateLevels must be strictly increasing")
        return value

    def file_size(self, workload: DataPathWorkload) -> str:
        return workload.fileSize or self.fileSize

    @property
    def slots(self) -> int:
        """Runs of each workload: the unthrottled one, one per rate level, then the local baseline's."""
        return 1 + len(self.rateLevels) + (1 if self.localBaseline else 0)

    def level_of(self, slot: int) -> int | None:
        """The rate level (percent) of a run of a workload; None for the unthrottled run and the baseline's."""
        return self.rateLevels[slot - 1] if 1 <= slot <= len(self.rateLevels) else None

    def is_baseline(self, slot: int) -> bool:
        return self.localBaseline and slot == self.slots - 1


class PgbenchMode(StrEnum):
    """What pgbench runs: its built-in select-only script (readOnly) or its TPC-B-like script (readWrite)."""

    READ_ONLY = "readOnly"
    READ_WRITE = "readWrite"


class SynchronousCommit(StrEnum):
    """PostgreSQL's synchronous_commit: whether a commit waits for its WAL to reach the disk."""

    ON = "on"
    OFF = "off"
    LOCAL = "local"
    REMOTE_WRITE = "remote_write"
    REMOTE_APPLY = "remote_apply"


MAX_SCALES = 6
MAX_CLIENT_COUNTS = 8
MAX_DATABASE_ROWS = MAX_SCALES * (1 + len(PgbenchMode) * MAX_CLIENT_COUNTS)  # init rows + run rows
PG_SIZE_PATTERN = r"^[1-9][0-9]{0,8}(kB|MB|GB|TB)$"  # PostgreSQL's own memory units (1024-based)


class PostgresSettings(_Model):
    """The PostgreSQL settings that change what the storage sees; PostgreSQL's defaults unless set."""

    sharedBuffers: str = Field("128MB", max_length=16, pattern=PG_SIZE_PATTERN,
                               description="shared_buffers: PostgreSQL's cache; smaller than the data set means "
                                           "reads reach the volume (or the page cache in front of it).")
    maxWalSize: str = Field("1GB", max_length=16, pattern=PG_SIZE_PATTERN,
                            description="max_wal_size: WAL between automatic checkpoints; the volume must hold it "
                                        "besides the data.")
    synchronousCommit: SynchronousCommit = Field(SynchronousCommit.ON,
                                                 description="synchronous_commit: on waits for every commit's WAL "
                                                             "flush (fsync latency shows in readWrite TPS); off "
                                                             "does not.")
    checkpointTimeoutSeconds: int = Field(300, ge=30, le=86400,
                                          description="checkpoint_timeout in seconds: the longest time between "
                                                      "checkpoints.")


class ModeDurations(_Model):
    """How long each pgbench run of a mode lasts (pgbench -T), in seconds."""

    readOnly: int = Field(120, ge=1, le=86400, description="Seconds per readOnly run (published tests: 120-600).")
    readWrite: int = Field(60, ge=1, le=86400, description="Seconds per readWrite run (published tests: 60).")

    def of(self, mode: PgbenchMode) -> int:
        return self.readOnly if mode == PgbenchMode.READ_ONLY else self.readWrite


def _unique(values: list[Any], what: str) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must not repeat: {values}")
    return values


class DatabaseSpec(_Model):
    """The database workload: PostgreSQL with its data directory on a volume of its own (a PVC of the class under
    test) and pgbench beside it in one pod; for each scale, initialize (pgbench -i, timed), then every mode x
    clients run, with pauses in between."""

    scales: list[Annotated[int, Field(ge=1, le=100000)]] = Field(
        default_factory=lambda: [10, 100], min_length=1, max_length=MAX_SCALES,
        description="pgbench scale factors (-s), in order: 1 is 100,000 accounts, about 16 MB of tables and "
                    "indexes; 10000 is about 150 GB.")
    modes: list[PgbenchMode] = Field(
        default_factory=lambda: [PgbenchMode.READ_ONLY, PgbenchMode.READ_WRITE], min_length=1,
        max_length=len(PgbenchMode), description="readOnly (pgbench -S, select only) and/or readWrite (TPC-B-like), "
                                                 "in order.")
    clients: list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default_factory=lambda: [8, 32], min_length=1, max_length=MAX_CLIENT_COUNTS,
        description="pgbench client counts (-c), one run per count and mode.")
    threads: int | None = Field(None, ge=1, le=1000,
                                description="pgbench worker threads (-j), at most the run's clients; default "
                                            "min(clients, CPUs the pod sees).")
    durationSeconds: ModeDurations = Field(default_factory=ModeDurations,
                                           description="Length of each run, per mode (pgbench -T).")
    pauseSeconds: int = Field(30, ge=0, le=3600, description="Pause before each run (lets checkpoints and "
                                                             "writeback of the previous one settle).")
    phasePauseSeconds: int = Field(60, ge=0, le=3600,
                                   description="Pause after each scale's initialization and between modes.")
    size: str = Field("16Gi", max_length=64, pattern=QUANTITY_PATTERN, json_schema_extra=cel((
        f"quantity(self).isGreaterThan(quantity('0')) && quantity(self).compareTo(quantity('{v.SIZE_MAX}')) <= 0",
        f"database.size must be greater than 0 and at most {v.SIZE_MAX}")),
        description="Size of the database's PVC: it must hold the largest scale's tables and indexes (about 16 MB "
                    "per scale unit) plus max_wal_size of WAL; one that cannot fails the initialization row with "
                    "PostgreSQL's message.")
    postgres: PostgresSettings = Field(default_factory=PostgresSettings, description="PostgreSQL settings.")
    image: str | None = Field(None, min_length=1, max_length=v.IMAGE_MAX, pattern=v.IMAGE_PATTERN,
                              description="Workload image (PostgreSQL 15 and pgbench inside); default: the "
                                          "operator's --workload-image / CSIBENCH_WORKLOAD_IMAGE.")
    resources: Resources = Field(default_factory=Resources, description="Resources of the database container.")
    nodeSelector: dict[str, LabelValue] = Field(
        default_factory=dict, max_length=MAX_LABELS, json_schema_extra=cel(LABEL_KEYS_RULE),
        description="Node selector of the database pod; default spec.pod's.")
    tolerations: list[Toleration] = Field(default_factory=list,
                                          description="Tolerations of the database pod; default spec.pod's.")

    @field_validator("scales")
    @classmethod
    def _scales_unique(cls, value: list[int]) -> list[int]:
        return _unique(value, "database.scales")

    @field_validator("modes")
    @classmethod
    def _modes_unique(cls, value: list[PgbenchMode]) -> list[PgbenchMode]:
        return _unique(value, "database.modes")

    @field_validator("clients")
    @classmethod
    def _clients_unique(cls, value: list[int]) -> list[int]:
        return _unique(value, "database.clients")

    @field_validator("nodeSelector")
    @classmethod
    def _node_selector_is_labels(cls, value: dict[str, str]) -> dict[str, str]:
        problems = v.label_problems(value, "database.nodeSelector")
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("size")
    @classmethod
    def _size_in_bounds(cls, value: str) -> str:
        if not 0 < v.parse_quantity(value) <= v.parse_quantity(v.SIZE_MAX):
            raise ValueError(f"database.size must be greater than 0 and at most {v.SIZE_MAX}, not {value}")
        return value


class GroupSnapshotSpec(_Model):
    """The group snapshot steps: volumes i*n .. i*n+n-1 form group i (n = volumesPerGroup; the last may be
    smaller), each snapshotted by one VolumeGroupSnapshot selecting its claims by the run's labels."""

    volumesPerGroup: int = Field(5, ge=1, le=MAX_VOLUMES_PER_GROUP,
                                 description="Volumes in each group (one VolumeGroupSnapshot per group).")
    volumeGroupSnapshotClassName: str = Field(
        ..., min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
        description="VolumeGroupSnapshotClass of the groups (must exist, for the class's driver).")


MAX_DENSITY_LEVELS = 16
DensityLevel = Annotated[int, Field(ge=1, le=10000)]


class DensitySpec(_Model):
    """The density step: for each level of volumesPerNode, in order, that many of the run's volumes published at
    once in pods pinned to one node, timed, then unpublished, timed."""

    volumesPerNode: list[DensityLevel] = Field(
        ..., min_length=1, max_length=MAX_DENSITY_LEVELS, json_schema_extra=cel(
            ("self.all(x, self.exists_one(y, y == x)) && self.isSorted()",
             "density.volumesPerNode must be strictly increasing")),
        description="Volumes on the node at each level, e.g. [8, 16, 32, 64] (strictly increasing, each at most "
                    "spec.volumes and the driver's per-node limit).")
    node: str | None = Field(None, min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
                             description="The node to fill (one that can run the publish pods). Default: the first "
                                         "by name.")

    @field_validator("volumesPerNode")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(later <= earlier for earlier, later in itertools.pairwise(value)):
            raise ValueError("density.volumesPerNode must be strictly increasing")
        return value


class MoveSpec(_Model):
    """The moveVolume step: publish pods deleted on their node and made again on another, their volumes following."""

    percent: int = Field(100, ge=1, le=100,
                         description="Share of the publish pods that move (the first ones, by index), in percent; "
                                     "at least one pod moves.")

    def pods(self, total: int) -> int:
        """How many of ``total`` publish pods move (rounded up, so at least one)."""
        return min(total, max(1, -(-total * self.percent // 100)))


class ExpandSpec(_Model):
    """The expandVolume step: each claim's request raised to ``to``, or by ``by``, in one batch."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("has(self.to) != has(self.by)", "expand needs exactly one of to and by")))

    # Whole bytes are checked by the operator, not at admission: CEL's isInteger() says no to whole byte counts
    # written with a fractional binary suffix ("1.5Gi") or many digits ("100Ti", even "1Pi").
    to: str | None = Field(None, max_length=64, pattern=QUANTITY_PATTERN,
                           description="The new size of every volume, e.g. 2Gi (more than spec.size; whole bytes).")
    by: str | None = Field(None, max_length=64, pattern=QUANTITY_PATTERN, json_schema_extra=cel((
        "quantity(self).isGreaterThan(quantity('0'))", "expand.by must be greater than 0")),
        description="How much every volume grows, e.g. 1Gi: the new size is spec.size plus this (whole bytes).")

    @model_validator(mode="after")
    def _one_of(self) -> ExpandSpec:
        if (self.to is None) == (self.by is None):
            raise ValueError("expand needs exactly one of to and by")
        if self.by is not None and v.parse_quantity(self.by) <= 0:
            raise ValueError("expand.by must be greater than 0")
        for name, value in (("to", self.to), ("by", self.by)):
            if value is not None and v.parse_quantity(value) != int(v.parse_quantity(value)):
                raise ValueError(f"expand.{name} must be a whole number of bytes")
        return self

    def new_size(self, size: str) -> str:
        """The size the claims are raised to from ``size`` (``by`` is added in bytes: 1Gi by 512Mi is 1610612736)."""
        if self.to is not None:
            return self.to
        assert self.by is not None
        return str(int(v.parse_quantity(size) + v.parse_quantity(self.by)))


class TimeoutsBase(_Model):
    """Per-step timeouts in seconds. A step still running at its timeout ends; pending objects count as failed."""

    default: int = Field(1800, ge=1, le=604800, description="Timeout of any step without its own, in seconds.")
    if TYPE_CHECKING:  # a field of the generated model, after the steps' (its place in the schema and the CRD)
        cleanup: int = 600

    def own(self, step: str) -> int | None:
        """The step's own timeout, if the spec sets one."""
        value: int | None = getattr(self, step, None) if step in type(self).model_fields else None
        return value

    def for_step(self, step: str) -> int:
        value = self.own(step)
        return value if value is not None else self.default


def _build_timeouts() -> type[TimeoutsBase]:
    """One optional field per step (``api/steps.py``, in order, with its description), then ``cleanup``."""
    steps: dict[str, Any] = {
        name: (int | None, Field(None, ge=1, le=604800,
                                 description=facts.timeout_note or f"Timeout of {name}, in seconds."))
        for name, facts in STEP_FACTS.items()}
    cleanup = (int, Field(600, ge=1, le=86400,
                          description="How long cleanup waits for the run's objects and volumes to be gone, in "
                                      "seconds; what is left then is listed in status.cleanup."))
    return create_model("Timeouts", __base__=TimeoutsBase, __doc__=TimeoutsBase.__doc__, __module__=__name__,
                        **steps, cleanup=cleanup)


if TYPE_CHECKING:
    Timeouts = TimeoutsBase
else:
    Timeouts = _build_timeouts()


class ClientSettings(_Model):
    """The operator's API client for this run. Throttled clients distort results, so they are recorded."""

    qps: float = Field(100.0, ge=1, le=10000, description="Client-side rate limit: requests per second.")
    burst: int = Field(200, ge=1, le=20000, description="Client-side rate limit: burst size.")
    maxInFlight: int = Field(16, ge=1, le=256, description="Requests the run sends concurrently (threads).")


# The volumes' size in bytes after the run's expansion (the data path runs after it).
_EXPANDS = "has(self.expand) && (has(self.expand.to) || has(self.expand.by))"  # (neither: its own rule says so)
_EXPANDED_SIZE = "(has(self.expand.to) ? quantity(self.expand.to) : quantity(self.size).add(quantity(self.expand.by)))"
_VOLUME_BYTES = f"(({_EXPANDS}) ? {_EXPANDED_SIZE} : quantity(self.size)).asInteger()"
_DATA_PATH_STEP = "steps must list dataPath exactly when spec.dataPath is set"
_VERIFY_STEP = "steps must list verifyClone exactly when spec.dataPath.verify is true"
_VERIFY_NEEDS_SNAPSHOTS = "dataPath.verify needs volumeSnapshotClassName: its clones are what it verifies"
_DATA_PATH_RULES = (
    ("!has(self.dataPath) || !has(self.dataPath.volumes) || self.dataPath.volumes <= self.volumes",
     "dataPath.volumes must be at most volumes: the data path uses the run's own volumes"),
    ("!has(self.dataPath) || self.volumeMode == 'Filesystem'",
     "dataPath needs volumeMode Filesystem: fio writes files on the mounted volume"),
    ("!has(self.dataPath) || (has(self.dataPath.workloads) ? self.dataPath.workloads.all(w, quantity(has("
     f"w.fileSize) ? w.fileSize : self.dataPath.fileSize).asInteger() * self.dataPath.jobsPerVolume <= "
     f"{_VOLUME_BYTES}) : quantity(self.dataPath.fileSize).asInteger() * self.dataPath.jobsPerVolume <= "
     f"{_VOLUME_BYTES})",
     "dataPath: jobsPerVolume x fileSize (of every workload) must fit the volume size (after expand, if set)"),
    ("!has(self.steps) || has(self.dataPath) == ('dataPath' in self.steps)", _DATA_PATH_STEP),
    ("!has(self.steps) || (has(self.dataPath) && has(self.dataPath.verify) && self.dataPath.verify) == "
     "('verifyClone' in self.steps)", _VERIFY_STEP),
    ("!has(self.dataPath) || !has(self.dataPath.verify) || !self.dataPath.verify || "
     "has(self.volumeSnapshotClassName)", _VERIFY_NEEDS_SNAPSHOTS),
)
_EXPAND_RULES = (
    ("!has(self.expand) || !has(self.expand.to) || quantity(self.expand.to).isGreaterThan(quantity(self.size))",
     "expand.to must be greater than size: a volume only grows"),
    (f"!({_EXPANDS}) || {_EXPANDED_SIZE}.compareTo(quantity('{v.SIZE_MAX}')) <= 0",
     f"the expanded size must be at most {v.SIZE_MAX}"),
    ("!has(self.steps) || has(self.expand) == ('expandVolume' in self.steps)",
     "steps must list expandVolume exactly when spec.expand is set"),
)
_GROUP_SNAPSHOT_RULES = (
    ("!has(self.steps) || has(self.groupSnapshot) == ('createGroupSnapshot' in self.steps)",
     "steps must list createGroupSnapshot exactly when spec.groupSnapshot is set"),
)
_DENSITY_RULES = (
    ("!has(self.density) || self.density.volumesPerNode.all(level, level <= self.volumes)",
     "density.volumesPerNode: each level must be at most volumes (a level publishes that many of the run's "
     "volumes)"),
    ("!has(self.steps) || has(self.density) == ('density' in self.steps)",
     "steps must list density exactly when spec.density is set"),
    ("!has(self.density) || !has(self.steps) || !('publish' in self.steps) || 'unpublish' in self.steps",
     "density needs unpublish when publish runs: publish's pods would still hold the volumes"),
    ("!has(self.density) || self.repeat == 1",
     "density cannot be combined with repeat > 1 yet: its rows have no significance test; run it in a run of its "
     "own (repeat: 1)"),
)
_MOVE_RULES = (
    ("!has(self.steps) || has(self.move) == ('moveVolume' in self.steps)",
     "steps must list moveVolume exactly when spec.move is set"),
)
_DATABASE_RULES = (
    ("!has(self.database) || self.repeat == 1",
     "database cannot be combined with repeat > 1 yet: run the database workload in a run of its own (repeat: 1)"),
    ("!has(self.steps) || has(self.database) == ('database' in self.steps)",
     "steps must list database exactly when spec.database is set"),
)


class ThresholdMetric(StrEnum):
    """What a threshold bounds. Steps: ``durationSeconds``, ``throughput`` (objects/s), the per-object latency
    ``latencyP50``/``latencyP90``/``latencyP99``/``latencyMax`` (seconds) and ``failed`` (objects). Data-path
    workloads: ``mibps`` and ``iops`` (read + write, summed over volumes) and the merged ``readP99``/``writeP99``
    (seconds). Database rows: ``tps``, ``latencyAverageMs`` and ``failedTransactions``."""

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


M = ThresholdMetric
STEP_METRICS = (M.DURATION_SECONDS, M.THROUGHPUT, M.LATENCY_P50, M.LATENCY_P90, M.LATENCY_P99, M.LATENCY_MAX, M.FAILED)
WORKLOAD_METRICS = (M.MIBPS, M.IOPS, M.READ_P99, M.WRITE_P99)
DATABASE_METRICS = (M.TPS, M.LATENCY_AVERAGE_MS, M.FAILED_TRANSACTIONS)
SECONDS_METRICS = frozenset({M.DURATION_SECONDS, M.LATENCY_P50, M.LATENCY_P90, M.LATENCY_P99, M.LATENCY_MAX,
                             M.READ_P99, M.WRITE_P99})  # shown in µs / ms / s
MAX_THRESHOLDS = 32
MAX_BASELINE_ROWS = 64
MAX_SHAPE_DIFFERENCES = 15  # one per shape field (api/shape.py)
# NAMESPACE/ (a DNS label) then a run's name (a DNS label of at most MAX_RUN_NAME characters)
BASELINE_PATTERN = (f"^([a-z0-9]([-a-z0-9]{{0,{v.DNS_LABEL_MAX - 2}}}[a-z0-9])?/)?"
                    f"[a-z0-9]([-a-z0-9]{{0,{MAX_RUN_NAME - 2}}}[a-z0-9])?$")


def _cel_list(values: Any) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


class DatabaseRowSelector(_Model):
    """Which database runs a threshold bounds: every run row matching all the fields given (none: every run)."""

    scale: int | None = Field(None, ge=1, le=100000, description="pgbench scale factor (one of database.scales).")
    mode: PgbenchMode | None = Field(None, description="readOnly or readWrite (one of database.modes).")
    clients: int | None = Field(None, ge=1, le=1000, description="pgbench clients (one of database.clients).")


_THRESHOLD_SUBJECT = "a threshold names exactly one of step, workload or database"
_THRESHOLD_BOUND = "a threshold needs min, max or both"
_THRESHOLD_RULES = (
    ("(has(self.step) ? 1 : 0) + (has(self.workload) ? 1 : 0) + (has(self.database) ? 1 : 0) == 1",
     _THRESHOLD_SUBJECT),
    ("has(self.min) || has(self.max)", _THRESHOLD_BOUND),
    ("!has(self.min) || !has(self.max) || self.min <= self.max", "a threshold's min must be at most its max"),
    (f"!has(self.step) || self.metric in {_cel_list(STEP_METRICS)}",
     f"a step threshold's metric is one of {', '.join(STEP_METRICS)}"),
    (f"!has(self.workload) || self.metric in {_cel_list(WORKLOAD_METRICS)}",
     f"a workload threshold's metric is one of {', '.join(WORKLOAD_METRICS)}"),
    (f"!has(self.database) || self.metric in {_cel_list(DATABASE_METRICS)}",
     f"a database threshold's metric is one of {', '.join(DATABASE_METRICS)}"),
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
    metric: ThresholdMetric = Field(..., description="What is bounded; its unit is the status field's (seconds, "
                                                     "objects/s, MiB/s, IOPS, TPS, ms, counts).")
    min: float | None = Field(None, ge=0, description="The measured value must be at least this.")
    max: float | None = Field(None, ge=0, description="The measured value must be at most this.")

    @model_validator(mode="after")
    def _consistent(self) -> Threshold:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        if sum(x is not None for x in (self.step, self.workload, self.database)) != 1:
            raise ValueError(_THRESHOLD_SUBJECT)
        if self.min is None and self.max is None:
            raise ValueError(_THRESHOLD_BOUND)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError("a threshold's min must be at most its max")
        allowed = STEP_METRICS if self.step else WORKLOAD_METRICS if self.workload else DATABASE_METRICS
        if self.metric not in allowed:
            kind = "step" if self.step else "workload" if self.workload else "database"
            raise ValueError(f"a {kind} threshold's metric is one of {', '.join(allowed)}")
        return self

    @property
    def subject(self) -> str:
        """'createVolume', 'workload seqRead', 'database scale 10 readOnly 4 clients'."""
        if self.step is not None:
            return str(self.step)
        if self.workload is not None:
            return f"workload {self.workload}"
        selector = self.database or DatabaseRowSelector()
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


# Whether a step runs, for admission: when spec.steps is given, it lists the step; either way a step with a part
# of its own runs only when that part is set (the rules "steps must list X exactly when spec.X is set" hold
# both ways) and the snapshot steps only with a snapshot class (the default plan, engine/plan.py). A unit test
# holds this table against the plan.
STEP_RUNS_WHEN: dict[str, str] = {
    StepName.MOVE_VOLUME: "has(self.move)",
    StepName.EXPAND_VOLUME: "has(self.expand)",
    StepName.DENSITY: "has(self.density)",
    StepName.DATA_PATH: "has(self.dataPath)",
    StepName.DATABASE: "has(self.database)",
    StepName.CREATE_SNAPSHOT: "has(self.volumeSnapshotClassName)",
    StepName.CREATE_GROUP_SNAPSHOT: "has(self.groupSnapshot)",
    StepName.CLONE_FROM_SNAPSHOT: "has(self.volumeSnapshotClassName)",
    StepName.VERIFY_CLONE: ("has(self.volumeSnapshotClassName) && has(self.dataPath) && has(self.dataPath.verify) "
                            "&& self.dataPath.verify"),
    StepName.DELETE_CLONE: "has(self.volumeSnapshotClassName)",
    StepName.DELETE_SNAPSHOT: "has(self.volumeSnapshotClassName)",
    StepName.DELETE_GROUP_SNAPSHOT: "has(self.groupSnapshot)",
}
_STEP_RUNS = " && ".join(f"(t.step != '{step}' || ({condition}))" for step, condition in STEP_RUNS_WHEN.items())
_THRESHOLD_STEP_RUNS = "a threshold names a step this run does not run"
_THRESHOLD_WORKLOAD_RUNS = "a threshold names a data-path workload this run does not run"
_THRESHOLD_DATABASE_RUNS = "a database threshold selects a scale, mode or clients count this run does not run"
_THRESHOLDS_RULES = (
    (f"!has(self.thresholds) || self.thresholds.all(t, !has(t.step) || ((!has(self.steps) || t.step in self.steps) "
     f"&& {_STEP_RUNS}))", _THRESHOLD_STEP_RUNS),
    ("!has(self.thresholds) || self.thresholds.all(t, !has(t.workload) || (has(self.dataPath) && "
     "(has(self.dataPath.workloads) ? self.dataPath.workloads.exists(w, w.name == t.workload) : "
     f"t.workload in {_cel_list(w.name for w in default_workloads())})))", _THRESHOLD_WORKLOAD_RUNS),
    ("!has(self.thresholds) || self.thresholds.all(t, !has(t.database) || (has(self.database) && "
     "(!has(t.database.scale) || (has(self.database.scales) ? t.database.scale in self.database.scales : "
     f"t.database.scale in {list(DatabaseSpec().scales)})) && "
     "(!has(t.database.mode) || !has(self.database.modes) || t.database.mode in self.database.modes) && "
     "(!has(t.database.clients) || (has(self.database.clients) ? t.database.clients in self.database.clients : "
     f"t.database.clients in {list(DatabaseSpec().clients)}))))", _THRESHOLD_DATABASE_RUNS),
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

    model_config = ConfigDict(json_schema_extra=cel(*_DATA_PATH_RULES, *_DATABASE_RULES, *_EXPAND_RULES,
                                                         *_GROUP_SNAPSHOT_RULES, *_MOVE_RULES,
                                                         *_DENSITY_RULES, *_THRESHOLDS_RULES))

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
        if not 0 < v.parse_quantity(value) <= v.parse_quantity(v.SIZE_MAX):
            raise ValueError(f"size must be greater than 0 and at most {v.SIZE_MAX}, not {value}")
        return value

    @field_validator("accessModes")
    @classmethod
    def _read_write_once_pod_alone(cls, value: list[AccessMode]) -> list[AccessMode]:
        if AccessMode.READ_WRITE_ONCE_POD in value and len(value) > 1:
            raise ValueError("ReadWriteOncePod cannot be combined with other access modes")
        return value

    @model_validator(mode="after")
    def _data_path_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        data = self.dataPath
        listed = self.steps is not None and StepName.DATA_PATH in self.steps
        if self.steps is not None and listed != (data is not None):
            raise ValueError(_DATA_PATH_STEP)
        verifying = data is not None and data.verify
        if self.steps is not None and (StepName.VERIFY_CLONE in self.steps) != verifying:
            raise ValueError(_VERIFY_STEP)
        if verifying and not self.volumeSnapshotClassName:
            raise ValueError(_VERIFY_NEEDS_SNAPSHOTS)
        if data is None:
            return self
        if data.volumes is not None and data.volumes > self.volumes:
            raise ValueError(_DATA_PATH_RULES[0][1])
        if self.volumeMode != VolumeMode.FILESYSTEM:
            raise ValueError(_DATA_PATH_RULES[1][1])
        size = v.parse_quantity(self.volume_size)
        if any(v.parse_quantity(data.file_size(w)) * data.jobsPerVolume > size for w in data.workloads):
            raise ValueError(_DATA_PATH_RULES[2][1])
        if len({w.name for w in data.workloads}) != len(data.workloads):
            raise ValueError("workload names must be unique")
        return self

    @model_validator(mode="after")
    def _database_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        listed = self.steps is not None and StepName.DATABASE in self.steps
        if self.steps is not None and listed != (self.database is not None):
            raise ValueError(_DATABASE_RULES[1][1])
        if self.database is not None and self.repeat != 1:
            raise ValueError(_DATABASE_RULES[0][1])
        return self

    @model_validator(mode="after")
    def _expand_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        listed = self.steps is not None and StepName.EXPAND_VOLUME in self.steps
        if self.steps is not None and listed != (self.expand is not None):
            raise ValueError(_EXPAND_RULES[2][1])
        if self.expand is None:
            return self
        new = v.parse_quantity(self.expand.new_size(self.size))
        if new <= v.parse_quantity(self.size):
            raise ValueError(_EXPAND_RULES[0][1])
        if new > v.parse_quantity(v.SIZE_MAX):
            raise ValueError(_EXPAND_RULES[1][1])
        return self

    @model_validator(mode="after")
    def _group_snapshot_consistent(self) -> BenchmarkRunSpec:
        """The same rule as the CRD's CEL (a run stored before it existed is refused here)."""
        listed = self.steps is not None and StepName.CREATE_GROUP_SNAPSHOT in self.steps
        if self.steps is not None and listed != (self.groupSnapshot is not None):
            raise ValueError(_GROUP_SNAPSHOT_RULES[0][1])
        return self

    @model_validator(mode="after")
    def _density_consistent(self) -> BenchmarkRunSpec:
        """The same rules as the CRD's CEL (a run stored before they existed is refused here)."""
        listed = self.steps is not None and StepName.DENSITY in self.steps
        if self.steps is not None and listed != (self.density is not None):
            raise ValueError(_DENSITY_RULES[1][1])
        if self.density is not None and max(self.density.volumesPerNode) > self.volumes:
            raise ValueError(_DENSITY_RULES[0][1])
        if self.density is not None and self.steps is not None and StepName.PUBLISH in self.steps \
                and StepName.UNPUBLISH not in self.steps:
            raise ValueError(_DENSITY_RULES[2][1])
        if self.density is not None and self.repeat != 1:
            raise ValueError(_DENSITY_RULES[3][1])
        return self

    @model_validator(mode="after")
    def _move_consistent(self) -> BenchmarkRunSpec:
        """The same rule as the CRD's CEL (a run stored before it existed is refused here)."""
        listed = self.steps is not None and StepName.MOVE_VOLUME in self.steps
        if self.steps is not None and listed != (self.move is not None):
            raise ValueError(_MOVE_RULES[0][1])
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
            selector = threshold.database
            if selector is not None and (self.database is None or (
                    selector.scale is not None and selector.scale not in self.database.scales) or (
                    selector.mode is not None and selector.mode not in self.database.modes) or (
                    selector.clients is not None and selector.clients not in self.database.clients)):
                raise ValueError(f"{_THRESHOLD_DATABASE_RUNS}: {threshold.subject}")
        return self

    def runs_step(self, step: str) -> bool:
        """Whether the run runs ``step``: admission's reading of the plan (``STEP_RUNS_WHEN``)."""
        if self.steps is not None and step not in self.steps:
            return False
        needs = {
            StepName.MOVE_VOLUME: self.move is not None, StepName.EXPAND_VOLUME: self.expand is not None,
            StepName.DENSITY: self.density is not None, StepName.DATA_PATH: self.dataPath is not None,
            StepName.DATABASE: self.database is not None,
            StepName.CREATE_GROUP_SNAPSHOT: self.groupSnapshot is not None,
            StepName.DELETE_GROUP_SNAPSHOT: self.groupSnapshot is not None,
            StepName.VERIFY_CLONE: bool(self.volumeSnapshotClassName and self.dataPath and self.dataPath.verify),
        }
        if step in (StepName.CREATE_SNAPSHOT, StepName.CLONE_FROM_SNAPSHOT, StepName.DELETE_CLONE,
                    StepName.DELETE_SNAPSHOT):
            return self.volumeSnapshotClassName is not None
        return needs.get(StepName(step), True)

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


class Condition(_Model):
    """A condition in the Kubernetes shape."""

    type: str = Field(..., description="Condition type, e.g. Ready.")
    status: str = Field(..., description="True, False or Unknown.")
    reason: str = Field(..., description="One-word CamelCase reason.")
    message: str = Field("", description="Human-readable detail.")
    lastTransitionTime: str = Field(..., description="When the status last changed (RFC 3339).")
    observedGeneration: int | None = Field(None, description="Generation of the spec this condition is about.")


class Latency(_Model):
    """Per-object latency of a step, in seconds (submit to terminal watch event, on the operator's clock)."""

    p50: float = Field(..., description="Median.")
    p90: float = Field(..., description="90th percentile.")
    p99: float = Field(..., description="99th percentile.")
    max: float = Field(..., description="Slowest object.")
    mean: float = Field(..., description="Arithmetic mean.")


class StepPhase(_Model):
    """One part of a step's per-object latency, where the watch events tell the parts apart (expandVolume: the
    controller's half, to the claim's FileSystemResizePending, then the node's)."""

    name: str = Field(..., description="The part, e.g. controller or node.")
    objects: int = Field(..., description="Succeeded objects that went through this part.")
    latency: Latency | None = Field(None, description="Per-object latency of this part, in seconds.")


class FailureReason(_Model):
    """One failure reason and how many objects it hit."""

    reason: str = Field(..., description="Event reason, status error or Timeout.")
    count: int = Field(..., description="Objects that failed for this reason.")
    message: str = Field("", description="One example message.")


class RetriedWarnings(_Model):
    """Warnings of one reason and cause that Kubernetes retried past during a step (not failures)."""

    reason: str = Field(..., description="Event reason, e.g. ProvisioningFailed or FailedAttachVolume.")
    cause: str = Field("", description="Why a retry may succeed: the gRPC code (DeadlineExceeded, Unavailable, "
                                       "Aborted, Canceled), WaitTimedOut, MultiAttach, Conflict or ClaimNotSaved.")
    count: int = Field(..., description="Events counted with their repeats.")
    objects: int | None = Field(None, description="Objects of the step they were about.")
    firstTime: str | None = Field(None, description="When the first was seen (RFC 3339).")
    lastTime: str | None = Field(None, description="When the last was seen (RFC 3339).")
    message: str = Field("", description="One example message.")


class RetryCost(_Model):
    """What Kubernetes' retries cost a step, from its watch events."""

    warnings: int = Field(..., description="Retried Warnings of the step, counted with their repeats.")
    objects: int = Field(..., description="Objects that had at least one.")
    tailSeconds: float = Field(..., description="Step time after the storage's last sign of work (the last "
                                                "retried Warning, or a volume attached): at most that much was "
                                                "retry backoff after the storage was done.")
    message: str = Field("", description="The finding: counts, the components' per-try bounds, the tail.")


class StepStatus(_Model):
    """Aggregates of one step."""

    name: str = Field(..., description="Step name (one of the lifecycle steps).")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    objects: int = Field(0, description="Objects the step submits.")
    succeeded: int = Field(0, description="Objects that reached their terminal state.")
    failed: int = Field(0, description="Objects that failed (error event, status error or timeout).")
    skipped: int = Field(0, description="Objects not submitted: a creation step's whose prerequisite failed, a "
                                        "deletion step's that never existed or that someone else already removed.")
    startTime: str | None = Field(None, description="When the clock started (RFC 3339).")
    completionTime: str | None = Field(None, description="When the clock stopped (RFC 3339).")
    durationSeconds: float | None = Field(None, description="Clock time of the step, in seconds.")
    throughput: float | None = Field(None, description="Succeeded objects per second of step time.")
    latency: Latency | None = Field(None, description="Per-object latency percentiles, in seconds.")
    phases: list[StepPhase] = Field(default_factory=list, max_length=4,
                                    description="The parts of the per-object latency, where events tell them apart "
                                                "(expandVolume: controller, then node).")
    failureReasons: list[FailureReason] = Field(default_factory=list,
                                                description=f"Top {MAX_FAILURE_REASONS} failure reasons.")
    retriedWarnings: list[RetriedWarnings] = Field(
        default_factory=list, max_length=MAX_FAILURE_REASONS,
        description="Warnings Kubernetes retried past during the step, not failures (a CSI call past its "
                    "sidecar's --timeout, the attach/detach controller's wait running out, moveVolume's "
                    "Multi-Attach errors), by reason and cause: Events counted with their repeats, objects, first "
                    "and last time, one example message each.")
    retries: RetryCost | None = Field(None, description="What those retries cost the step (absent: none seen).")
    note: str | None = Field(None, description="How to read this step's numbers, e.g. WaitForFirstConsumer.")
    attempts: int | None = Field(None, description="How many times the step was started (more than 1 after an "
                                                   "operator restart interrupted it and it was redone).")
    restored: str | None = Field(None, description="What was restored before a redo and how long it took (not "
                                                   "part of the step's time).")
    restoredObjects: int | None = Field(None, description="Objects the restore deleted or recreated.")
    collection: StepCollection | None = Field(None, description="spec.collect's queries over this step's window "
                                                               "(the CSI machinery's CPU-seconds and peak memory).")


class Spread(_Model):
    """One step measure over the measured iterations."""

    median: float = Field(..., description="Median over the measured iterations.")
    min: float = Field(..., description="Smallest value of one iteration.")
    max: float = Field(..., description="Largest value of one iteration.")


class StepAggregate(_Model):
    """One step over every iteration that measured well (failed iterations are excluded and counted)."""

    name: str = Field(..., description="Step name.")
    iterations: int = Field(..., description="Iterations whose measurement this aggregates.")
    durationSeconds: Spread | None = Field(None, description="Step time, in seconds.")
    throughput: Spread | None = Field(None, description="Succeeded objects per second of step time.")
    latency: Latency | None = Field(None, description="Median over the iterations of each per-object percentile.")
    durations: list[float] = Field(default_factory=list, max_length=MAX_REPEAT,
                                   description="Step time of each measured iteration, in order (for compare's "
                                               "significance test).")
    throughputs: list[float] = Field(default_factory=list, max_length=MAX_REPEAT,
                                     description="Throughput of each measured iteration, in order.")


class DataPathAggregate(_Model):
    """One data-path workload over every iteration that measured well (spec.repeat > 1): the unthrottled row's
    bandwidth, IOPS and p99 (the worse direction), median and range, and each iteration's value for compare's
    significance test."""

    name: str = Field(..., description="Workload name.")
    iterations: int = Field(..., description="Iterations whose row measured (Succeeded).")
    mibps: Spread | None = Field(None, description="Read + write MiB/s summed over volumes.")
    iops: Spread | None = Field(None, description="Read + write IOPS summed over volumes.")
    p99: Spread | None = Field(None, description="Completion p99 of the worse direction, seconds (merged).")
    readP99: Spread | None = Field(None, description="Read completion p99, seconds (merged).")
    writeP99: Spread | None = Field(None, description="Write completion p99, seconds (merged).")
    mibpsValues: list[float] = Field(default_factory=list, max_length=MAX_REPEAT,
                                     description="MiB/s of each measured iteration, in order.")
    iopsValues: list[float] = Field(default_factory=list, max_length=MAX_REPEAT,
                                    description="IOPS of each measured iteration, in order.")
    p99Values: list[float] = Field(default_factory=list, max_length=MAX_REPEAT,
                                   description="p99 (seconds) of each measured iteration, in order.")


class IterationFailure(_Model):
    """Why one iteration is not a measurement."""

    iteration: int = Field(..., description="Which iteration (1-based).")
    message: str = Field(..., description="Its failed steps, as the run's verdict names them.")


class Iterations(_Model):
    """Where a run with spec.repeat stands: which iteration runs, how many are done and how many failed."""

    current: int = Field(..., description="The iteration under way (1-based), or the last one once all are done.")
    total: int = Field(..., description="spec.repeat.")
    done: int = Field(0, description="Iterations finished (measured or failed).")
    failed: int = Field(0, description="Iterations with a failed or interrupted step: excluded from aggregates.")
    summary: str = Field("", description='"2/5" while iteration 2 of 5 runs; "5/5 (1 failed)" at the end.')
    failures: list[IterationFailure] = Field(default_factory=list, max_length=MAX_ITERATION_FAILURES,
                                             description=f"The first {MAX_ITERATION_FAILURES} failed iterations.")
    failedObjects: dict[str, int] = Field(
        default_factory=dict, max_length=len(STEP_FACTS),
        description="Per step, failed objects summed over every finished iteration (a bound on `failed` is judged "
                    "on this total, so a failure in any iteration counts).")


class ClientUsed(_Model):
    """The client limits the run used, and how long it waited on them."""

    qps: float = Field(..., description="Requests per second allowed.")
    burst: int = Field(..., description="Burst allowed.")
    maxInFlight: int = Field(..., description="Concurrent requests allowed.")
    throttledSeconds: float = Field(0.0, description="Total time requests waited for the client-side rate limit.")
    requests: int = Field(0, description="API requests the run sent (creates, deletes, status writes, watches).")


class Finding(_Model):
    """One preflight check that found something: what, how much it matters, what to change, and the facts read."""

    check: str = Field(..., description="Name of the check, e.g. ClientThrottling.")
    severity: Severity = Field(..., description="Warning (the numbers will likely be distorted) or Info.")
    component: str | None = Field(None, description="namespace/pod/container the finding is about, if any.")
    message: str = Field(..., description="What was found and what to change where.")
    facts: dict[str, str] = Field(default_factory=dict, description="The values the check read.")


class Component(_Model):
    """A piece of CSI machinery found running in the cluster, with the flags that change results."""

    kind: str = Field(..., description="csi-provisioner, csi-attacher, csi-snapshotter, csi-resizer, "
                                       "snapshot-controller or kube-controller-manager.")
    namespace: str = Field(..., description="Namespace of its pod.")
    pod: str = Field(..., description="Pod running it.")
    container: str = Field(..., description="Container running it.")
    image: str | None = Field(None, description="Container image.")
    version: str | None = Field(None, description="Image tag.")
    flags: dict[str, str] = Field(default_factory=dict,
                                  description="Result-changing flags as set on its command line.")
    defaults: dict[str, str] = Field(default_factory=dict,
                                     description="Result-changing flags not set, at the binary's upstream default.")
    matchedBy: str = Field("", description="Why it is taken to serve the class's driver.")
    replicas: int = Field(1, description="Pods running it with this same image and flags (one is named in pod).")


class Machinery(_Model):
    """The CSI machinery serving the class under test, as discovered before the run."""

    visible: bool = Field(..., description="False when the operator may not read it (discovery RBAC left out).")
    note: str | None = Field(None, description="Why it is not (fully) visible.")
    driver: str | None = Field(None, description="CSI driver name (the class's provisioner).")
    csiDriver: dict[str, str] | None = Field(None, description="The CSIDriver object's spec, if it exists.")
    components: list[Component] = Field(default_factory=list, max_length=32,
                                        description="Sidecars, snapshot-controller and controller-manager found.")


class Environment(_Model):
    """Facts about the cluster the run measured."""

    serverVersion: str | None = Field(None, description="Kubernetes API server version.")
    provisioner: str | None = Field(None, description="Provisioner of the StorageClass.")
    volumeBindingMode: str | None = Field(None, description="Immediate or WaitForFirstConsumer.")
    storageClassParameters: dict[str, str] = Field(default_factory=dict, description="Parameters of the class.")
    nodeCount: int | None = Field(None, description="Nodes in the cluster.")
    schedulableNodes: int | None = Field(None, description="Ready nodes the publish pods may run on.")
    machinery: Machinery | None = Field(None, description="CSI machinery serving the class (preflight).")


class DataPathLatency(_Model):
    """Completion latency (fio's clat) of a data-path row, in seconds, per direction: percentiles of every
    completion of every pod of the row, read from their fio latency histograms merged (exact to fio's bins, as one
    fio would report them for all those completions); the maximum is the largest completion seen."""

    readP50: float | None = Field(None, description="Read clat p50 over all pods' completions, seconds.")
    readP90: float | None = Field(None, description="Read clat p90 over all pods' completions, seconds.")
    readP99: float | None = Field(None, description="Read clat p99 over all pods' completions, seconds.")
    readP999: float | None = Field(None, description="Read clat p99.9 over all pods' completions, seconds.")
    readMax: float | None = Field(None, description="Slowest read completion, seconds.")
    writeP50: float | None = Field(None, description="Write clat p50 over all pods' completions, seconds.")
    writeP90: float | None = Field(None, description="Write clat p90 over all pods' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over all pods' completions, seconds.")
    writeP999: float | None = Field(None, description="Write clat p99.9 over all pods' completions, seconds.")
    writeMax: float | None = Field(None, description="Slowest write completion, seconds.")


class DataPathLevel(_Model):
    """One rate level of a data-path row: the workload run again, throttled to a share of the IOPS its
    unthrottled row reached; what it achieved and its completions' p99 (every pod's histograms merged)."""

    percent: int = Field(..., description="The level: percent of the unthrottled row's IOPS.")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    targetIOPS: float | None = Field(None, description="IOPS asked for in all (fio --rate_iops per job, read and "
                                                       "write, times the jobs).")
    readIOPS: float | None = Field(None, description="Read IOPS achieved, summed over volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS achieved, summed over volumes.")
    readP99: float | None = Field(None, description="Read clat p99 over all pods' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over all pods' completions, seconds.")
    startSkewSeconds: float | None = Field(None, description="The latest pod's measured start minus the earliest's.")
    skewed: bool | None = Field(None, description="True: the pods did not all run together (as for the row).")
    message: str | None = Field(None, description="Why the level failed or was not run.")


class DataPathBaseline(_Model):
    """A workload run on the nodes' own disk (an emptyDir per pod, on the same nodes): what the class is held
    against."""

    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    readMiBps: float | None = Field(None, description="Read bandwidth summed over the pods, MiB/s.")
    writeMiBps: float | None = Field(None, description="Write bandwidth summed over the pods, MiB/s.")
    readIOPS: float | None = Field(None, description="Read IOPS summed over the pods.")
    writeIOPS: float | None = Field(None, description="Write IOPS summed over the pods.")
    readP99: float | None = Field(None, description="Read clat p99 over all pods' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over all pods' completions, seconds.")
    fasterThanLocal: bool | None = Field(None, description="True: the class's row moved more MiB/s than the local "
                                                           "disk did (a cache, not the storage?).")
    message: str | None = Field(None, description="Why the baseline failed.")


class DataPathNodeRow(_Model):
    """One node's share of a data-path row: the volumes whose pods ran there, their I/O summed, their completions'
    p99 (histograms merged), so a slow node shows."""

    node: str = Field(..., description="Node the pods ran on.")
    volumes: int = Field(0, description="Volumes (pods) of the row on this node.")
    readMiBps: float | None = Field(None, description="Read bandwidth summed over this node's volumes, MiB/s.")
    writeMiBps: float | None = Field(None, description="Write bandwidth summed over this node's volumes, MiB/s.")
    readIOPS: float | None = Field(None, description="Read IOPS summed over this node's volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS summed over this node's volumes.")
    readP99: float | None = Field(None, description="Read clat p99 over this node's completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over this node's completions, seconds.")


class DataPathRow(_Model):
    """One workload of the data path: aggregates over the volumes it ran on (per-volume rows are in the report)."""

    name: str = Field(..., description="Workload name, e.g. seqRead.")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    pattern: str = Field("", description="fio --rw.")
    blockSize: str = Field("", description="fio --bs.")
    volumes: int = Field(0, description="Volumes (pods) the workload ran on.")
    jobs: int = Field(0, description="fio jobs in all (volumes x jobs per volume).")
    failed: int = Field(0, description="Pods that failed (non-zero exit, refused, timeout).")
    durationSeconds: float | None = Field(None, description="Wall time of the row: pods created to pods done.")
    readMiBps: float | None = Field(None, description="Read bandwidth summed over volumes, MiB/s.")
    writeMiBps: float | None = Field(None, description="Write bandwidth summed over volumes, MiB/s.")
    readIOPS: float | None = Field(None, description="Read IOPS summed over volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS summed over volumes.")
    minVolumeMiBps: float | None = Field(None, description="Slowest volume's bandwidth (read + write), MiB/s.")
    maxVolumeMiBps: float | None = Field(None, description="Fastest volume's bandwidth (read + write), MiB/s.")
    latency: DataPathLatency | None = Field(None, description="Completion latency percentiles.")
    startSkewSeconds: float | None = Field(None, description="The latest pod's measured start minus the earliest's "
                                                             "(fio's own clock), seconds.")
    togetherSeconds: float | None = Field(None, description="How long every pod measured at once: the earliest "
                                                            "end minus the latest start (0: never all at once).")
    skewed: bool | None = Field(None, description="True: the start skew exceeds 10% of the runtime, so the sums "
                                                  "add up pods that did not all run at once (togetherSeconds says "
                                                  "for how long they did); a Warning DataPathStartSkew says so.")
    startAt: int | None = Field(None, description="The start time the barrier gave the pods (epoch seconds).")
    slowVolumes: list[str] = Field(default_factory=list, max_length=16,
                                   description="Volumes whose bandwidth was under half the row's median per volume "
                                               "(slowest first, at most 16; with 3 volumes or more): a Warning "
                                               "DataPathSlowVolume names them with their nodes.")
    levels: list[DataPathLevel] = Field(default_factory=list, max_length=MAX_RATE_LEVELS,
                                        description="Latency under load (spec.dataPath.rateLevels), in order.")
    baseline: DataPathBaseline | None = Field(None, description="The same workload on the nodes' own disk "
                                                                "(spec.dataPath.localBaseline).")
    nodes: list[DataPathNodeRow] = Field(default_factory=list, max_length=64,
                                         description="Per node: its volumes, their I/O summed and p99; the "
                                                     "volumes add up to the row's measured ones (beyond 64 "
                                                     "nodes, the 64 slowest per volume).")
    message: str | None = Field(None, description="Why the row failed: the tool's own message (first failure).")


class DensityRow(_Model):
    """One level of the density ramp: its volumes published at once on one node, then unpublished."""

    volumesPerNode: int = Field(..., description="Volumes on the node at this level.")
    node: str = Field("", description="The node they were published on.")
    pods: int = Field(0, description="Pods that mounted them (pvcsPerPod each).")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    failed: int = Field(0, description="Pods that did not become Ready (or were not removed).")
    durationSeconds: float | None = Field(None, description="Publish: pods created to the last Ready, seconds.")
    throughput: float | None = Field(None, description="Volumes published per second of that time.")
    latency: Latency | None = Field(None, description="Per pod, created to Ready (attach, mount, start), seconds.")
    attach: Latency | None = Field(None, description="Per pod, created to every volume attached (the "
                                                     "VolumeAttachments say attached, or Ready when that was seen "
                                                     "later), seconds.")
    detachSeconds: float | None = Field(None, description="Unpublish: pods deleted to all gone and detached, "
                                                          "seconds.")
    message: str | None = Field(None, description="Why the level failed (the first failure).")


class DatabaseRowKind(StrEnum):
    INITIALIZE = "initialize"  # pgbench -i -s SCALE: its wall time
    RUN = "run"  # one pgbench run of a mode and a client count


class DatabaseRow(_Model):
    """One row of the database table: a scale's initialization (its wall time) or one pgbench run."""

    kind: DatabaseRowKind = Field(..., description="initialize (pgbench -i) or run.")
    scale: int = Field(..., description="pgbench scale factor.")
    mode: PgbenchMode | None = Field(None, description="readOnly or readWrite (runs only).")
    clients: int | None = Field(None, description="pgbench clients (runs only).")
    threads: int | None = Field(None, description="pgbench threads, as pgbench reported them (runs only).")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    durationSeconds: float | None = Field(None, description="Wall time: of the initialization, or of the run.")
    tps: float | None = Field(None, description="Transactions per second, excluding connection time (pgbench's "
                                                "'without initial connection time').")
    latencyAverageMs: float | None = Field(None, description="pgbench's latency average, ms.")
    latencyStddevMs: float | None = Field(None, description="pgbench's latency stddev, ms.")
    transactions: int | None = Field(None, description="Transactions processed.")
    failedTransactions: int | None = Field(None, description="Failed transactions (pgbench's count).")
    walBytes: int | None = Field(None, description="WAL generated, bytes: pg_current_wal_lsn() after minus before.")
    message: str | None = Field(None, description="Why the row failed: PostgreSQL's or pgbench's own message.")


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

