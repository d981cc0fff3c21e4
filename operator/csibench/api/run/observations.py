"""Status as a run's steps fill it: conditions, per-step results and aggregates over iterations, the
preflight's findings and the environment it measured in.
"""

from __future__ import annotations

from pydantic import Field

from csibench.api.base import Model as _Model
from csibench.api.collect import StepCollection
from csibench.api.run.common import MAX_FAILURE_REASONS, MAX_ITERATION_FAILURES, MAX_REPEAT, Severity, StepState
from csibench.api.steps import STEP_FACTS


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


MAX_ZONES = 16


class StepZone(_Model):
    """The step's objects of one zone (a claim's is its volume's, from the PV's node affinity; a pod's is its
    volumes'), so a zonal class's rows say where it is slower."""

    zone: str = Field(..., description="The zone (topology.kubernetes.io/zone, or a driver's own */zone key).")
    objects: int = Field(0, description="Objects of the step in the zone that ended (succeeded or failed).")
    succeeded: int = Field(0, description="Of those, succeeded.")
    latency: Latency | None = Field(None, description="Per-object latency of the zone's succeeded objects, seconds.")


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
    zones: list[StepZone] = Field(default_factory=list, max_length=MAX_ZONES,
                                  description=f"Per zone, when the step's volumes have one (a zonal class); at most "
                                              f"{MAX_ZONES}, the zones with most objects.")
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
