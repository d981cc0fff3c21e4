"""What every part of a BenchmarkRun's spec and status shares: the API's names and bounds, the CEL helper,
the enums status and spec both speak (phase, condition reasons, severity, step state), and the pod's
own settings (tolerations, resources, placement).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model

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
    VOLUME_ATTRIBUTES_CLASS_NOT_FOUND = "VolumeAttributesClassNotFound"
    NOT_ENOUGH_NODES = "NotEnoughNodes"
    ABOVE_VOLUME_LIMIT = "AboveVolumeLimit"
    MISSING_RIGHTS = "MissingRights"
    # Found while the run is under way.
    TARGET_NAMESPACE_DELETED = "TargetNamespaceDeleted"
    STORAGE_CLASS_DELETED = "StorageClassDeleted"
    RUN_ABORTED = "RunAborted"
    RESTORE_FAILED = "RestoreFailed"
    POPULATION_FAILED = "PopulationFailed"
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


class WorkloadPods(_Model):
    """What a workload step's own pods run and where (the database's, the shared volume's probes): the workload
    image, their resources, and a node selector and tolerations that default to spec.pod's."""

    image: str | None = Field(None, min_length=1, max_length=v.IMAGE_MAX, pattern=v.IMAGE_PATTERN,
                              description="Workload image (fio, PostgreSQL 15, pgbench and python3 inside); default: "
                                          "the operator's --workload-image / CSIBENCH_WORKLOAD_IMAGE.")
    resources: Resources = Field(default_factory=Resources, description="Resources of the step's containers.")
    nodeSelector: dict[str, LabelValue] = Field(
        default_factory=dict, max_length=MAX_LABELS, json_schema_extra=cel(LABEL_KEYS_RULE),
        description="Node selector of the step's pods; default spec.pod's.")
    tolerations: list[Toleration] = Field(default_factory=list,
                                          description="Tolerations of the step's pods; default spec.pod's.")

    @field_validator("nodeSelector")
    @classmethod
    def _node_selector_is_labels(cls, value: dict[str, str]) -> dict[str, str]:
        return v.labels_only(value, "nodeSelector")


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
