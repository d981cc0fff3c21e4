"""spec.disruptions: faults injected inside a step, and what each cost the batch (status.disruptions).

A disruption names the step it happens in, when (after that many of the step's objects reached their terminal
state, or after that many seconds of the step's clock), and what:

- ``RestartComponent`` deletes the pods of a CSI component (selected by labels in a namespace, optionally on one
  node) and waits for their replacements to be Ready;
- ``ScaleDown`` takes a controller workload (a Deployment or StatefulSet) to zero replicas for ``seconds``, then
  back to what it had, and waits for that many new pods Ready;
- ``PauseApiServer`` / ``PauseEtcd`` freeze the local cluster's API server or etcd for ``seconds`` (SIGSTOP, then
  SIGCONT): only csibench's local cluster offers that, through a pod it marks pausable.
- ``DrainNode`` cordons a node and deletes the run's pods on it, makes each again (the scheduler places it on
  another node, its volumes following: detach, attach) and uncordons the node once they all run: the failover of
  attached volumes (in publish, where the run's pods hold their volumes);
- ``ArrayFault`` makes the storage itself slow or failing for ``seconds``: extra latency on each array operation,
  or a share of them failing, as the array sees them. Only an array that takes faults through the API does it
  (csibench's local array: its CSIDriver says so).

It is the one place where a run acts on objects it did not create, so it is opt-in twice: the spec names the
target, and the operator needs rights it does not have by default (checked before anything is created).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import LABEL_KEYS_RULE, MAX_FAILURE_REASONS, LabelValue, cel
from csibench.api.run.observations import RetriedWarnings
from csibench.api.steps import StepName

MAX_DISRUPTIONS = 4
_MAX_SELECTOR_LABELS = 8
MAX_UNRECOVERED_NAMED = 10
MAX_LEASES_NAMED = 16
MAX_PODS_NAMED = 16
_MAX_DISRUPTION_SECONDS = 600
_ONE_MOMENT = "a disruption needs exactly one of afterObjects and afterSeconds"
_KIND_FIELDS = ("RestartComponent names a component (no workload, no seconds); ScaleDown a workload and seconds; "
                "ArrayFault arrayFault and seconds; PauseApiServer and PauseEtcd seconds only; DrainNode at most a "
                "node (no seconds)")
_DRAIN_NODE = "a DrainNode happens in publish (the run's pods hold their volumes then), and only it names a node"
# The steps a disruption may happen in: those that submit one batch and wait for each object's terminal state.
DISRUPTABLE_STEPS: tuple[StepName, ...] = (
    StepName.CREATE_VOLUME, StepName.PUBLISH, StepName.UNPUBLISH, StepName.CREATE_SNAPSHOT,
    StepName.CLONE_FROM_SNAPSHOT, StepName.DELETE_CLONE, StepName.DELETE_SNAPSHOT, StepName.DELETE_VOLUME,
)


class DisruptionKind(StrEnum):
    """What a disruption does."""

    RESTART_COMPONENT = "RestartComponent"  # delete the component's pods; their controller (or kubelet) replaces them
    SCALE_DOWN = "ScaleDown"  # a workload to zero replicas for a while, then back to what it had
    PAUSE_API_SERVER = "PauseApiServer"  # the local cluster's kube-apiserver frozen for a while
    PAUSE_ETCD = "PauseEtcd"  # the local cluster's etcd frozen for a while
    ARRAY_FAULT = "ArrayFault"  # the array slow or failing for a while (an array that takes faults: the local one)
    DRAIN_NODE = "DrainNode"  # a node cordoned, the run's pods on it made again elsewhere, then uncordoned

    def paused_component(self) -> str | None:
        """The process a pause freezes, as its pod's component label names it (kubeadm's); None: not a pause."""
        return {"PauseApiServer": "kube-apiserver", "PauseEtcd": "etcd"}.get(self.value)


_CONTROL_PLANE_NAMESPACE = "kube-system"  # where a pause's pods are (the local cluster's control plane)


class WorkloadKind(StrEnum):
    """A controller workload with a scale subresource."""

    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"


class ComponentTarget(_Model):
    """The pods of one CSI component: those in namespace whose labels include selector (and on node, if set)."""

    namespace: str = Field(..., min_length=1, max_length=v.DNS_LABEL_MAX, pattern=v.DNS_LABEL_PATTERN,
                           description="Namespace of the component's pods, e.g. kube-system.")
    selector: dict[str, LabelValue] = Field(
        ..., min_length=1, max_length=_MAX_SELECTOR_LABELS, json_schema_extra=cel(LABEL_KEYS_RULE),
        description="Labels the component's pods carry, e.g. {app.kubernetes.io/name: csi-provisioner} (all must "
                    "match).")
    node: str | None = Field(None, min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
                             description="Only the pods on this node (a node plugin's pod on one node).")

    @field_validator("selector")
    @classmethod
    def _label_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if len(key) > v.LABEL_KEY_MAX or re.fullmatch(v.LABEL_KEY_PATTERN, key) is None:
                raise ValueError(f"selector key {key!r}: {LABEL_KEYS_RULE[1]}")
        return value

    def label_selector(self) -> str:
        """The selector as a labelSelector query value (keys and values validated above)."""
        return ",".join(f"{key}={value}" for key, value in sorted(self.selector.items()))

    def describe(self) -> str:
        where = f" on {self.node}" if self.node else ""
        return f"pods {self.label_selector()} in {self.namespace}{where}"


class WorkloadTarget(_Model):
    """A controller workload (the CSI driver's controller Deployment or StatefulSet) a ScaleDown acts on."""

    kind: WorkloadKind = Field(WorkloadKind.DEPLOYMENT, description="Deployment or StatefulSet.")
    namespace: str = Field(..., min_length=1, max_length=v.DNS_LABEL_MAX, pattern=v.DNS_LABEL_PATTERN,
                           description="Its namespace, e.g. kube-system.")
    name: str = Field(..., min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
                      description="Its name, e.g. csi-hostpath-controller.")

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class ArrayOperation(StrEnum):
    """An operation of the array, named after the CSI call it stands for (as the local array names them)."""

    CREATE_VOLUME = "createVolume"
    CLONE_VOLUME = "cloneVolume"
    DELETE_VOLUME = "deleteVolume"
    ATTACH = "attach"
    DETACH = "detach"
    MOUNT = "mount"
    UNMOUNT = "unmount"
    CREATE_SNAPSHOT = "createSnapshot"
    DELETE_SNAPSHOT = "deleteSnapshot"
    EXPAND_VOLUME = "expandVolume"
    MODIFY_VOLUME = "modifyVolume"
    CREATE_GROUP_SNAPSHOT = "createGroupSnapshot"
    DELETE_GROUP_SNAPSHOT = "deleteGroupSnapshot"


_MAX_FAULT_LATENCY_MS = 600_000


class ArrayFaultSpec(_Model):
    """What the array does wrong for the disruption's seconds: each operation that starts then takes latencyMs
    longer, and fails with probability failureRate (the driver answers INTERNAL; the sidecar retries)."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("has(self.latencyMs) || has(self.failureRate)", "an arrayFault needs latencyMs, failureRate or both")))

    latencyMs: int | None = Field(None, ge=1, le=_MAX_FAULT_LATENCY_MS,
                                  description="Milliseconds added to each operation that starts in the window.")
    failureRate: float | None = Field(None, ge=0.001, le=1, description="The share of the operations that start "
                                                                         "in the window that fail (0.001 to 1).")
    operations: list[ArrayOperation] = Field(default_factory=list, max_length=len(ArrayOperation),
                                             description="The operations it applies to (none: every one).")

    @model_validator(mode="after")
    def _something(self) -> ArrayFaultSpec:
        if self.latencyMs is None and self.failureRate is None:
            raise ValueError("an arrayFault needs latencyMs, failureRate or both")
        return self

    def describe(self) -> str:
        parts = [f"+{self.latencyMs} ms" if self.latencyMs else "",
                 f"{self.failureRate:.1%} failing".replace(".0%", "%") if self.failureRate else ""]
        which = ", ".join(self.operations) if self.operations else "every operation"
        return f"{' and '.join(p for p in parts if p)} on {which}"


def _kind_fields_fit(kind: DisruptionKind, component: bool, workload: bool, seconds: bool, fault: bool) -> bool:
    """Whether a disruption names exactly what its kind needs (pure; the CEL rule says the same)."""
    if kind == DisruptionKind.DRAIN_NODE:
        return not (component or workload or seconds or fault)
    if kind == DisruptionKind.RESTART_COMPONENT:
        return component and not workload and not seconds and not fault
    if kind == DisruptionKind.SCALE_DOWN:
        return workload and seconds and not component and not fault
    if kind == DisruptionKind.ARRAY_FAULT:
        return fault and seconds and not component and not workload
    return seconds and not component and not workload and not fault


class DisruptionSpec(_Model):
    """One fault injected inside a step: when, and what."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("has(self.afterObjects) != has(self.afterSeconds)", _ONE_MOMENT),
        (f"self.step in {[s.value for s in DISRUPTABLE_STEPS]}",
         f"a disruption's step must be one of {', '.join(DISRUPTABLE_STEPS)}"),
        ("has(self.kind) && self.kind == 'ScaleDown' ? has(self.workload) && has(self.seconds) && "
         "!has(self.component) && !has(self.arrayFault) : (!has(self.kind) || self.kind == 'RestartComponent') ? "
         "has(self.component) && !has(self.workload) && !has(self.seconds) && !has(self.arrayFault) : "
         "self.kind == 'ArrayFault' ? has(self.arrayFault) && has(self.seconds) && !has(self.component) && "
         "!has(self.workload) : self.kind == 'DrainNode' ? !has(self.seconds) && !has(self.component) && "
         "!has(self.workload) && !has(self.arrayFault) : has(self.seconds) && !has(self.component) && "
         "!has(self.workload) && !has(self.arrayFault)", _KIND_FIELDS),
        ("has(self.kind) && self.kind == 'DrainNode' ? self.step == 'publish' : !has(self.node)", _DRAIN_NODE)))

    step: StepName = Field(..., description="The step it happens in (a batch step: "
                                            f"{', '.join(DISRUPTABLE_STEPS)}).")
    afterObjects: int | None = Field(None, ge=0, le=100000,
                                     description="Inject once this many of the step's objects reached their terminal "
                                                 "state (0: as the step starts).")
    afterSeconds: float | None = Field(None, ge=0, le=3600,
                                       description="Inject this many seconds into the step's clock.")
    kind: DisruptionKind = Field(DisruptionKind.RESTART_COMPONENT, description=(
        "What happens: RestartComponent deletes the component's pods and waits for their replacements to be Ready; "
        "ScaleDown takes the workload to zero replicas for seconds, then back to what it had (restored on every "
        "exit path: run failed or deleted, operator restarted); PauseApiServer and PauseEtcd freeze the local "
        "cluster's API server or etcd for seconds (csibench's local cluster only); ArrayFault makes the array slow "
        "or failing for seconds (an array that takes faults through the API: csibench's local one); DrainNode "
        "(in publish) cordons a node, deletes the run's pods on it and makes each again elsewhere, then uncordons "
        "it once they run (uncordoned on every exit path)."))
    component: ComponentTarget | None = Field(None, description="RestartComponent: the CSI component whose pods "
                                                                "are restarted.")
    workload: WorkloadTarget | None = Field(None, description="ScaleDown: the workload taken to zero replicas.")
    arrayFault: ArrayFaultSpec | None = Field(None, description="ArrayFault: what the array does wrong.")
    node: str | None = Field(None, min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
                             description="DrainNode: the node to drain (none: the one running the most of the "
                                         "run's pods at the moment).")
    seconds: int | None = Field(None, ge=1, le=_MAX_DISRUPTION_SECONDS,
                                description="ScaleDown, Pause* and ArrayFault: how long the fault lasts before "
                                            "it is undone.")
    recoveryTimeoutSeconds: int = Field(300, ge=1, le=3600,
                                        description="How long to wait, once the fault is undone (RestartComponent: "
                                                    "from the deletes), for the component to be Ready again before "
                                                    "the disruption counts as not recovered.")

    @model_validator(mode="after")
    def _one_moment(self) -> DisruptionSpec:
        if (self.afterObjects is None) == (self.afterSeconds is None):
            raise ValueError(_ONE_MOMENT)
        if not _kind_fields_fit(self.kind, self.component is not None, self.workload is not None,
                               self.seconds is not None, self.arrayFault is not None):
            raise ValueError(_KIND_FIELDS)
        if (self.kind == DisruptionKind.DRAIN_NODE and self.step != StepName.PUBLISH) or \
                (self.kind != DisruptionKind.DRAIN_NODE and self.node is not None):
            raise ValueError(_DRAIN_NODE)
        return self

    def target_namespace(self) -> str | None:
        """The namespace it acts in (a pause: the local cluster's kube-system; an array fault: none, it is asked
        in the run's own namespace; a drain: none, a node is cluster-wide and the pods are the run's)."""
        if self.component is not None:
            return self.component.namespace
        if self.workload is not None:
            return self.workload.namespace
        return None if self.kind in (DisruptionKind.ARRAY_FAULT, DisruptionKind.DRAIN_NODE) \
            else _CONTROL_PLANE_NAMESPACE

    def describe_target(self) -> str:
        if self.component is not None:
            return self.component.describe()
        if self.workload is not None:
            return self.workload.describe()
        if self.arrayFault is not None:
            return f"the array: {self.arrayFault.describe()}"
        if self.kind == DisruptionKind.DRAIN_NODE:
            return f"node {self.node}" if self.node else "the node running the most of the run's pods"
        return f"{self.kind.paused_component()} of the local cluster"

    @field_validator("step")
    @classmethod
    def _batch_step(cls, value: StepName) -> StepName:
        if value not in DISRUPTABLE_STEPS:
            raise ValueError(f"a disruption's step must be one of {', '.join(DISRUPTABLE_STEPS)}")
        return value


class DisruptionState(StrEnum):
    PENDING = "Pending"  # its step has not reached the moment yet
    INJECTED = "Injected"  # the fault is in effect, or undone and the component not Ready yet
    RECOVERED = "Recovered"  # every deleted pod has a Ready replacement (a pause: the API server answers again)
    NOT_RECOVERED = "NotRecovered"  # not Ready within recoveryTimeoutSeconds of the fault undone
    NOT_REACHED = "NotReached"  # the step ended before the moment came: nothing was injected
    FAILED = "Failed"  # it could not be injected (no pod matched, the delete was refused): message says why


class DisruptionResult(_Model):
    """What one disruption did and what it cost its step; times are on the step's clock (seconds since it started)."""

    step: StepName = Field(..., description="The step it happens in.")
    kind: DisruptionKind = Field(..., description="What it does.")
    target: str = Field(..., description="The pods it acts on, as selected.")
    state: DisruptionState = Field(DisruptionState.PENDING, description=(
        "Pending, Injected, Recovered, NotRecovered (no Ready replacement within recoveryTimeoutSeconds), "
        "NotReached (the step ended first: nothing injected) or Failed (message says why)."))
    pods: list[str] = Field(default_factory=list, max_length=MAX_PODS_NAMED,
                            description=f"The pods it deleted (the first {MAX_PODS_NAMED}); DrainNode: the run's "
                                        "pods it moved off the node.")
    podsDeleted: int | None = Field(None, description="How many pods it deleted (a DaemonSet's can be many).")
    momentAtSeconds: float | None = Field(None, description="When the moment came (afterObjects reached, or "
                                                            "afterSeconds passed).")
    injectedAtSeconds: float | None = Field(None, description="When the fault was sent: the first delete, the scale "
                                                              "to zero, the pause request.")
    replicasBefore: int | None = Field(None, description="ScaleDown: the replicas the workload had, and got back.")
    restoredAtSeconds: float | None = Field(
        None, description="ScaleDown: when the scale back was sent; Pause*: when the process was resumed (the "
                          "local cluster's stamp); DrainNode: when the node was uncordoned (once its pods ran "
                          "elsewhere). None for RestartComponent (nothing to undo).")
    recoveredAtSeconds: float | None = Field(
        None, description="When the last replacement pod was Ready (its watch event); a pause: when the local "
                          "cluster's answer arrived (written after the resume: objects the API server had queued "
                          "may finish before it, and the step may end first).")
    recoverySeconds: float | None = Field(None, description="recoveredAtSeconds - restoredAtSeconds (from the fault "
                                                            "undone), or - injectedAtSeconds for RestartComponent "
                                                            "and DrainNode (the failover: from the cordon to the "
                                                            "last pod made again Ready on another node).")
    stallSeconds: float | None = Field(
        None, description="The longest time from the injection on without any of the step's objects reaching its "
                          "terminal state, among the stretches that begin before the recovery (from the injection "
                          "or a terminal event, to the next terminal event or the step's end).")
    completedBefore: int | None = Field(None, description="Objects terminal before the injection.")
    completedAfter: int | None = Field(None, description="Objects terminal after it.")
    throughputBefore: float | None = Field(None, description="Objects that succeeded per second before the "
                                                             "injection.")
    throughputAfter: float | None = Field(
        None, description="Objects that succeeded per second from recovery to the step's end (none when the step "
                          "ended first).")
    leases: list[str] = Field(default_factory=list, max_length=MAX_LEASES_NAMED, description=(
        "The leader Leases the deleted pods held (holder identity: the pod's name, or starting with it), in the "
        "component's namespace; empty when none, or when the operator may not read Leases there."))
    leaseTransitions: int | None = Field(None, description="How often those Leases changed holder by the step's end.")
    leaderAcquiredAtSeconds: float | None = Field(
        None, description="When the last of those Leases was taken by a new holder (its acquireTime, on the step's "
                          "clock; read when the step ends, and again after the run's last step when no new holder "
                          "had it yet, so it may lie past the step's end); none while one is still held by a "
                          "deleted pod's identity.")
    leaderSeconds: float | None = Field(None, description="leaderAcquiredAtSeconds - injectedAtSeconds: how long the "
                                                          "component had no working leader.")
    warnings: list[RetriedWarnings] = Field(
        default_factory=list, max_length=MAX_FAILURE_REASONS,
        description="Warnings about the step's objects that Kubernetes retried past, by reason and cause, whose latest "
                    "line came from the injection on (an Event repeated across it counts all its repeats).")
    containerRestarts: int | None = Field(
        None, description="Container restarts (restartCount) of the watched pods from the injection to the end of "
                          "the run's last step (a container the fault made exit restarts after its back-off, often "
                          "after its own step ended): the component's pods and their replacements; for a pause "
                          "every pod in kube-system (a sidecar that lost its leader lease exits and is restarted).")
    repeatedOperations: int | None = Field(None, ge=0, description=(
        "When the array answers audits (status.leaks source Array): the run's creates and deletes it did again "
        "(each time beyond the first) that began between the injection and its step's end or its recovery, "
        "whichever came later: the work this disruption made the array do twice."))
    arrayOperations: int | None = Field(None, ge=0, description="ArrayFault: how many of the run's operations the "
                                                                "array started in the window (slowed or failed); 0: "
                                                                "the window touched nothing.")
    unrecovered: int | None = Field(None, description="Objects of the step that failed or never finished after the "
                                                      "injection.")
    unrecoveredNames: list[str] = Field(default_factory=list,
                                        description=f"The first {MAX_UNRECOVERED_NAMED} of them.")
    message: str | None = Field(None, description="Why it failed or did not recover.")


_MAX_LEAKS_NAMED = 20


class LeakAudit(_Model):
    """What the run left behind after its cleanup (status.leaks), counted where it can be counted exactly: by the
    array itself when its driver answers audits (csibench's local array does: what it still holds of the run's
    volumes and snapshots that no PV or content names, and what it did twice), otherwise by the cluster (the run's
    PVs and snapshot contents cleanup could not remove). The ``leaked`` threshold of a disruption bounds it."""

    source: Literal["Array", "Cluster"] = Field(
        ..., description="Array (the array's own answer) or Cluster (the API server's).")
    volumes: int = Field(..., ge=0, description="Volumes left: held by the array and named by no PV of the run "
                                                "(Array), or the run's PVs left (Cluster).")
    snapshots: int = Field(..., ge=0, description="Snapshots left: held by the array and named by no content of "
                                                  "the run (Array), or the run's contents left (Cluster).")
    clusterLeft: int = Field(0, ge=0, description="The run's PVs and snapshot contents cleanup could not remove "
                                                   "(what Kubernetes still holds of the run).")
    leaked: int = Field(..., ge=0, description="Everything left: volumes + snapshots, plus clusterLeft when the "
                                               "array counted (the cluster's leftovers are its volumes and "
                                               "snapshots otherwise).")
    names: list[str] = Field(default_factory=list, max_length=_MAX_LEAKS_NAMED, description=(
        "The first of them, as the array names them (pvc-<claim uid>, snapshot-<VolumeSnapshot uid>)."))
    repeatedOperations: int | None = Field(None, ge=0, description=(
        "Array only: creates and deletes of the run's volumes and snapshots the array did more than once "
        "(each extra time counts): work a retry or a restarted component made it do twice."))
    repeated: list[str] = Field(default_factory=list, max_length=_MAX_LEAKS_NAMED, description=(
        "The first of them: 'createVolume pvc-... x2'."))
    message: str | None = Field(None, description="Why the array's count is missing or approximate.")
