"""The preflight checks: what in the discovered setup will distort this run's numbers, and what to change (pure).

Each check is named, has a severity (Warning: the numbers will likely be distorted; Info: worth knowing) and
says where to change what. The client-throttling check estimates the least time a component's own client
needs for one step: ``max(0, objects × requests per object - burst) / qps`` (a token bucket). Requests per
object are step facts (``api/steps.py``, with how each was measured or counted). A step whose floor reaches
``WARNING_SECONDS`` is paced by that client rather than by the storage, whatever the storage does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from csibench.api import validation as v
from csibench.api.models import BenchmarkRunSpec, Component, Finding, Machinery, Severity, Toleration
from csibench.api.steps import WFFC, requests_per_object_by_component
from csibench.preflight.components import call_timeout_flag, effective, worker_flag
from csibench.preflight.flags import parse_duration

WARNING_SECONDS = 5.0
INFO_SECONDS = 1.0
SHORT_TIMEOUT_SECONDS = 30.0

REQUESTS_PER_OBJECT: Mapping[str, Mapping[str, int]] = requests_per_object_by_component()  # from api/steps.py
NOUNS = {"createSnapshot": "snapshots", "deleteSnapshot": "snapshots", "cloneFromSnapshot": "clones",
         "deleteClone": "clones"}


@dataclass(frozen=True)
class DataPathShape:
    """What the cache check needs of spec.dataPath: its volumes, the bytes of files on each, and how it reads."""

    volumes: int
    bytes_per_volume: int  # jobsPerVolume x the largest fileSize
    direct: bool
    array_cache_bytes: int | None
    ramp_seconds: int = 0
    runtime_seconds: int = 1

    @classmethod
    def of(cls, spec: BenchmarkRunSpec) -> DataPathShape | None:
        data = spec.dataPath
        if data is None:
            return None
        largest = max(int(v.parse_quantity(data.file_size(w))) for w in data.workloads)
        return cls(min(data.volumes or spec.volumes, spec.volumes), largest * data.jobsPerVolume, data.direct,
                   int(v.parse_quantity(data.arrayCacheBytes)) if data.arrayCacheBytes else None,
                   data.rampSeconds, data.runtimeSeconds)


@dataclass(frozen=True)
class RunShape:
    """What the checks need to know about the run: its steps, batch and class."""

    steps: tuple[str, ...]
    volumes: int
    pods: int
    binding_mode: str
    storage_class: str
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    data_path: DataPathShape | None = None

    @classmethod
    def of(cls, spec: BenchmarkRunSpec, steps: Sequence[str], binding_mode: str) -> RunShape:
        return cls(tuple(steps), spec.volumes, math.ceil(spec.volumes / spec.pvcsPerPod), binding_mode,
                   spec.storageClassName, dict(spec.pod.nodeSelector), tuple(spec.pod.tolerations),
                   DataPathShape.of(spec) if "dataPath" in steps else None)


def _where(component: Component) -> str:
    return f"{component.namespace}/{component.pod}/{component.container}"


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def pacing_floor(objects: int, requests_per_object: int, qps: float, burst: float) -> float:
    """Least seconds a token-bucket client needs for ``objects × requests_per_object`` requests."""
    return max(0.0, objects * requests_per_object - burst) / qps if qps > 0 else math.inf


def _suggested_qps(requests: int) -> int:
    """A rate at which the requests fit in about WARNING_SECONDS, rounded up to 50, at least 100."""
    return max(100, math.ceil(requests / WARNING_SECONDS / 50) * 50)


def _attach_required(machinery: Machinery) -> bool:
    return (machinery.csiDriver or {}).get("attachRequired", "true") != "false"


def _steps_of(component: Component, shape: RunShape, machinery: Machinery) -> list[str]:
    steps = [s for s in REQUESTS_PER_OBJECT.get(component.kind, {}) if s in shape.steps]
    if component.kind == "csi-attacher" and not _attach_required(machinery):
        return []
    return steps


def client_limits(component: Component) -> tuple[float, float] | None:
    """(qps, burst) the component's client runs with, as client-go reads them: 0 means the default 5/10, a
    negative qps means no client-side limit (None); a value not readable from the spec (an unresolved
    ``$(VAR)``) is None too."""
    qps, burst = _number(effective(component, "kube-api-qps")), _number(effective(component, "kube-api-burst"))
    if qps is None or burst is None or qps < 0:
        return None
    return (qps or 5.0), (burst or 10.0)


def client_throttling(component: Component, shape: RunShape, machinery: Machinery) -> Finding | None:
    limits = client_limits(component)
    steps = _steps_of(component, shape, machinery)
    if limits is None or not steps:
        return None
    qps, burst = limits
    per_object = REQUESTS_PER_OBJECT[component.kind]
    step = max(steps, key=lambda s: per_object[s])
    requests = shape.volumes * per_object[step]
    floor = pacing_floor(shape.volumes, per_object[step], qps, burst)
    if floor < INFO_SECONDS:
        return None
    defaulted = (" (its upstream defaults)" if {"kube-api-qps", "kube-api-burst"} <= set(component.defaults)
                 else "")
    running = (f"{component.kind} in {component.namespace} runs with --kube-api-qps={component_value(qps)} "
               f"--kube-api-burst={component_value(burst)}{defaulted}: {shape.volumes} "
               f"{NOUNS.get(step, 'volumes')} in {step} need about {requests} API requests from it, at least "
               f"{floor:.0f} s at that rate")
    if floor >= WARNING_SECONDS:
        suggested = _suggested_qps(requests)  # always above a qps that paces this step for >= WARNING_SECONDS
        severity, message = Severity.WARNING, (
            f"{running}, so the step will be paced by its client, not the storage. Raise them, e.g. "
            f"--kube-api-qps={suggested} --kube-api-burst={2 * suggested}")
    else:
        severity, message = Severity.INFO, f"{running}: a floor under the step's time, not a distortion"
    return Finding(check="ClientThrottling", severity=severity, component=_where(component), message=message,
                   facts={"kube-api-qps": component_value(qps), "kube-api-burst": component_value(burst),
                          "step": step, "requestsPerObject": str(per_object[step]),
                          "minimumSeconds": f"{floor:.1f}"})


def component_value(number: float) -> str:
    return str(int(number)) if number == int(number) else str(number)


def worker_threads(component: Component, shape: RunShape, machinery: Machinery) -> Finding | None:
    flag = worker_flag(component)
    workers = _number(effective(component, flag))
    steps = _steps_of(component, shape, machinery)
    if workers is None or not steps or component.kind == "kube-controller-manager" or shape.volumes <= workers:
        return None
    return Finding(check="WorkerThreads", severity=Severity.INFO, component=_where(component), message=(
        f"{component.kind} in {component.namespace} runs {int(workers)} worker threads for {shape.volumes} "
        f"objects per step ({', '.join(steps)}): at most {int(workers)} operations reach the storage at once, so "
        f"an array that takes more concurrency is measured {int(workers)}-wide. Raise --{flag} to "
        f"compare arrays at the batch's concurrency"),
        facts={flag: str(int(workers)), "objects": str(shape.volumes)})


def operation_timeout(component: Component, shape: RunShape, machinery: Machinery) -> Finding | None:
    flag = call_timeout_flag(component)
    text = effective(component, flag)
    seconds = parse_duration(text) if text else None
    if seconds is None or seconds >= SHORT_TIMEOUT_SECONDS or not _steps_of(component, shape, machinery):
        return None
    start = effective(component, "retry-interval-start") or "?"
    return Finding(check="OperationTimeout", severity=Severity.INFO, component=_where(component), message=(
        f"{component.kind} in {component.namespace} gives each CSI call --{flag}={text}: an operation slower "
        f"than that is cancelled and retried (first after {start}, doubling), so on an array that can take "
        f"longer the step measures retries. Raise --{flag} above the array's slowest operation"),
        facts={flag: text or "", "retry-interval-start": start})


def feature_gates(component: Component) -> Finding | None:
    gates = component.flags.get("feature-gates")
    if not gates:
        return None
    return Finding(check="FeatureGates", severity=Severity.INFO, component=_where(component),
                   message=f"{component.kind} in {component.namespace} runs with --feature-gates={gates}",
                   facts={"feature-gates": gates})


GROUP_SNAPSHOT_GATE = "CSIVolumeGroupSnapshot"
GROUP_SNAPSHOT_STEPS = ("createGroupSnapshot", "deleteGroupSnapshot")
GO_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})  # what Go's strconv.ParseBool reads as true
GATE_DEFAULT_ON_SINCE = (8, 7)  # external-snapshotter v8.7.0 turned the gate on by default (GA); off before


def _gate_default_on(version: str | None) -> bool:
    """The gate's default in the component's release; a version that cannot be read is taken as current."""
    numbers = (version or "").lstrip("v").split(".")
    try:
        return (int(numbers[0]), int(numbers[1])) >= GATE_DEFAULT_ON_SINCE
    except (ValueError, IndexError):
        return True


def group_snapshot_gate(component: Component, shape: RunShape, machinery: Machinery) -> Finding | None:
    """The snapshot-controller and csi-snapshotter act on VolumeGroupSnapshots only with the gate on."""
    if component.kind not in ("csi-snapshotter", "snapshot-controller") or \
            not any(step in shape.steps for step in GROUP_SNAPSHOT_STEPS):
        return None
    gates = {key.strip(): value.strip() for key, _, value in
             (part.partition("=") for part in (component.flags.get("feature-gates") or "").split(",") if "=" in part)}
    said = gates.get(GROUP_SNAPSHOT_GATE)
    if (said in GO_TRUE) if said is not None else _gate_default_on(component.version):
        return None
    why = f"--feature-gates sets {GROUP_SNAPSHOT_GATE}={said}" if said is not None else \
        f"{GROUP_SNAPSHOT_GATE} is off by default before v{GATE_DEFAULT_ON_SINCE[0]}.{GATE_DEFAULT_ON_SINCE[1]}"
    return Finding(check="GroupSnapshotGate", severity=Severity.WARNING, component=_where(component), message=(
        f"{component.kind} {component.version or ''} does not act on VolumeGroupSnapshots ({why}): the group "
        f"snapshot steps would time out. Set --feature-gates={GROUP_SNAPSHOT_GATE}=true on it"),
        facts={"feature-gates": component.flags.get("feature-gates") or "", "version": component.version or ""})


def _needed_kinds(shape: RunShape, machinery: Machinery) -> list[str]:
    needed = []
    if any(s in shape.steps for s in REQUESTS_PER_OBJECT["csi-provisioner"]):
        needed.append("csi-provisioner")
    if "publish" in shape.steps and _attach_required(machinery):
        needed.append("csi-attacher")
    if "createSnapshot" in shape.steps or "createGroupSnapshot" in shape.steps:
        needed += ["csi-snapshotter", "snapshot-controller"]
    if "expandVolume" in shape.steps:
        needed.append("csi-resizer")
    return needed


def visibility(shape: RunShape, machinery: Machinery) -> list[Finding]:
    if not machinery.visible:
        return [Finding(check="MachineryNotVisible", severity=Severity.INFO, message=(
            f"the CSI machinery serving {machinery.driver} was not checked: {machinery.note}"))]
    if machinery.note:  # visible, but the provisioner cannot be a CSI driver: nothing else to say
        return [Finding(check="NotACSIDriver", severity=Severity.INFO, message=machinery.note,
                        facts={"provisioner": machinery.driver or ""})]
    findings = []
    if machinery.csiDriver is None:
        findings.append(Finding(check="CSIDriverNotFound", severity=Severity.INFO, message=(
            f"no CSIDriver object named {machinery.driver} (the provisioner of StorageClass "
            f"{shape.storage_class}): a CSI driver normally registers one; its sidecars were looked for by name"),
            facts={"driver": machinery.driver or ""}))
    present = {c.kind for c in machinery.components}
    for kind in _needed_kinds(shape, machinery):
        if kind not in present:
            findings.append(Finding(check="ComponentNotFound", severity=Severity.INFO, message=(
                f"no {kind} serving {machinery.driver} is visible in the cluster (it may run outside it, e.g. in a "
                "managed control plane): its client limits and workers are not checked"), facts={"kind": kind}))
    return findings


def _tolerates(tolerations: Iterable[Toleration], taint: Mapping[str, Any]) -> bool:
    for toleration in tolerations:
        if toleration.effect is not None and toleration.effect.value != taint.get("effect"):
            continue
        if toleration.operator is not None and toleration.operator.value == "Exists":
            if not toleration.key or toleration.key == taint.get("key"):
                return True
        elif toleration.key == taint.get("key") and (toleration.value or "") == (taint.get("value") or ""):
            return True
    return False


def schedulable_nodes(nodes: Sequence[Mapping[str, Any]], shape: RunShape) -> list[Mapping[str, Any]]:
    """Nodes the publish pods can land on: Ready, not cordoned, matching nodeSelector, taints tolerated."""
    usable = []
    for node in nodes:
        spec, status = node.get("spec") or {}, node.get("status") or {}
        labels = (node.get("metadata") or {}).get("labels") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        blocking = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
        if (ready and not spec.get("unschedulable")
                and all(labels.get(k) == v for k, v in shape.node_selector.items())
                and all(_tolerates(shape.tolerations, t) for t in blocking)):
            usable.append(node)
    return usable


def node_capacity(nodes: Sequence[Mapping[str, Any]], shape: RunShape) -> list[Finding]:
    if "publish" not in shape.steps:
        return []
    usable = schedulable_nodes(nodes, shape)
    if not usable:
        return [Finding(check="SchedulableNodes", severity=Severity.WARNING, message=(
            f"none of the {len(nodes)} nodes can run the publish pods (Ready, not cordoned, matching nodeSelector "
            f"{dict(shape.node_selector)}, taints tolerated): publish would time out. Fix the nodes or the "
            "run's pod.nodeSelector/tolerations"), facts={"nodes": str(len(nodes)), "schedulable": "0"})]
    allocatable = sum(int(_number(str((n.get("status") or {}).get("allocatable", {}).get("pods", "0"))) or 0)
                      for n in usable)
    if allocatable and allocatable < shape.pods:
        return [Finding(check="SchedulableNodes", severity=Severity.WARNING, message=(
            f"publish runs {shape.pods} pods but the {len(usable)} schedulable nodes allow {allocatable} pods in "
            "all: the rest stay Pending and the step times out. Use more pvcsPerPod or more nodes"),
            facts={"schedulable": str(len(usable)), "allocatablePods": str(allocatable), "pods": str(shape.pods)})]
    return []


def _mebibytes(size: float) -> str:
    return f"{size / 2**20:,.0f}Mi"


def _memory(node: Mapping[str, Any]) -> int | None:
    """A node's memory capacity in bytes (None: not reported, or not a quantity this reads)."""
    text = str(((node.get("status") or {}).get("capacity") or {}).get("memory") or "")
    try:
        return int(v.parse_quantity(text)) if text else None
    except ValueError:
        return None


def data_path_cache(nodes: Sequence[Mapping[str, Any]], shape: RunShape) -> list[Finding]:
    """Reads that may come from a cache, not the storage: without direct I/O, a node's share of the working set
    (its volumes as the data path spreads them, times jobsPerVolume x fileSize) smaller than the node's memory
    fits its page cache; and any working set smaller than a stated arrayCacheBytes fits the storage's cache."""
    data = shape.data_path
    if data is None:
        return []
    findings = []
    usable = sorted(schedulable_nodes(nodes, shape), key=lambda n: str((n.get("metadata") or {}).get("name")))
    cached = []
    for index, node in enumerate(usable):  # volume i's pods prefer node i mod N of the usable nodes by name
        share = len(range(index, data.volumes, len(usable)))
        capacity = _memory(node)
        if not data.direct and share and capacity and share * data.bytes_per_volume < capacity:
            cached.append((str((node.get("metadata") or {}).get("name")), share, capacity))
    if cached:
        name, share, memory = cached[0]
        findings.append(Finding(check="DataPathCache", severity=Severity.WARNING, message=(
            f"dataPath has direct: false and on {len(cached)} of {len(usable)} nodes the data path's working set "
            f"is smaller than the node's memory (e.g. {name}: {share} volume(s) x "
            f"{_mebibytes(data.bytes_per_volume)} against {_mebibytes(memory)}): reads may be served from the "
            "page cache, not the storage. Use direct: true, or more jobsPerVolume x fileSize per node than its "
            "memory"), facts={"nodes": ",".join(c[0] for c in cached[:20]), "workingSetPerNode":
                              str(share * data.bytes_per_volume), "nodeMemory": str(memory)}))
    total = data.volumes * data.bytes_per_volume
    if data.array_cache_bytes is not None and total < data.array_cache_bytes:
        findings.append(Finding(check="DataPathCache", severity=Severity.WARNING, message=(
            f"the data path's working set ({data.volumes} volume(s) x {_mebibytes(data.bytes_per_volume)} = "
            f"{_mebibytes(total)}) is smaller than the storage's cache (arrayCacheBytes "
            f"{_mebibytes(data.array_cache_bytes)}): reads and writes may be served by that cache. Use more "
            "volumes, jobsPerVolume or a larger fileSize"),
            facts={"workingSet": str(total), "arrayCacheBytes": str(data.array_cache_bytes)}))
    return findings


def data_path_runtime(shape: RunShape) -> list[Finding]:
    """A runtime shorter than its ramp: fio measures less time than it lets the storage warm up, so a row is a
    short sample of a state the ramp did not show to be steady."""
    data = shape.data_path
    if data is None or data.runtime_seconds >= data.ramp_seconds:
        return []
    return [Finding(check="DataPathShortRuntime", severity=Severity.WARNING, message=(
        f"dataPath.runtimeSeconds ({data.runtime_seconds}) is shorter than its rampSeconds ({data.ramp_seconds}): "
        "each row measures less than the warm-up it skips; raise runtimeSeconds to several times the ramp"),
        facts={"runtimeSeconds": str(data.runtime_seconds), "rampSeconds": str(data.ramp_seconds)})]


def binding_mode(shape: RunShape) -> list[Finding]:
    if shape.binding_mode != WFFC or "createVolume" not in shape.steps:
        return []
    return [Finding(check="WaitForFirstConsumer", severity=Severity.INFO, message=(
        f"StorageClass {shape.storage_class} is {WFFC}: createVolume times API submission only; provisioning "
        "is timed inside publish"), facts={"volumeBindingMode": WFFC})]


def run_checks(shape: RunShape, machinery: Machinery, nodes: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Every finding for this run, Warnings first, then in the order the checks ran."""
    findings = (visibility(shape, machinery) + node_capacity(nodes, shape) + data_path_cache(nodes, shape)
                + data_path_runtime(shape) + binding_mode(shape))
    for component in machinery.components:
        for check in (client_throttling, worker_threads, operation_timeout, group_snapshot_gate):
            finding = check(component, shape, machinery)
            if finding is not None:
                findings.append(finding)
        gates = feature_gates(component)
        if gates is not None:
            findings.append(gates)
    return sorted(findings, key=lambda f: f.severity != Severity.WARNING)
