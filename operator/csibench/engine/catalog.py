"""The step catalog: everything that makes a step what it is, in one table, read by every other part.

Planning reads ``requires`` and ``needs_snapshot_class``; execution reads how objects are named and counted,
how one is submitted (create ``manifest`` or delete), which judge decides its terminal state and which Warning
reasons fail it, and which objects are skipped; the report reads ``title`` and ``unit``. After an operator
restart, the interrupted step's starting state is restored from the entry alone: its objects are deleted until
``gone`` says so, and a deletion step's objects are then created again by the step named in ``recreated_by``.
Adding a step is one entry here (a unit test adds a ninth and runs it). The orchestration has no per-step cases:
an unknown step is an error, never a fall-through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.engine import judges, manifests
from csibench.engine.database import pgbench
from csibench.engine.database import step as database
from csibench.engine.datapath import fio
from csibench.engine.datapath import step as datapath
from csibench.engine.naming import Names, pod_count, volumes_of_pod
from csibench.engine.observed import CLAIM, POD, SNAPSHOT, Observed
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import ResultTable, workload_image
from csibench.kube import resources as r

WFFC = "WaitForFirstConsumer"
Manifest = dict[str, Any]


class Action(StrEnum):
    CREATE = "create"  # the step creates its objects (409 counts only for the run's own object)
    DELETE = "delete"  # the step deletes objects an earlier step created (by the uid the run saw)
    MEASURE = "measure"  # the step runs workloads on existing volumes (its ``measure`` drives batches of pods)


@dataclass(frozen=True)
class StepContext:
    """What a step's rules may read: the run's spec and names, where it works, what it observed so far and the
    trackers of the steps before it."""

    spec: BenchmarkRunSpec
    names: Names
    labels: dict[str, str]
    namespace: str
    binding_mode: str
    observed: Observed
    trackers: Mapping[str, StepTracker]

    @property
    def wffc(self) -> bool:
        return self.binding_mode == WFFC


@dataclass(frozen=True)
class Companion:
    """An object a measuring step creates besides its own (the database's claim): named, dry-run and reported
    like the step's objects, deleted by the step itself, and by a restore before the step runs again."""

    kind: str
    resource: r.Resource
    object_name: Callable[[Names, int], str]
    manifest: Callable[[StepContext, int], dict[str, Any]]
    report_key: str
    gone: Callable[[Observed, frozenset[str]], judges.Judge]


SkipRule = Callable[["StepSpec", StepContext], set[str]]
Measure = Callable[[Any, "StepSpec", StepTracker, StepContext], Awaitable[None]]
JudgeFactory = Callable[[Observed, frozenset[str]], judges.Judge]


@dataclass(frozen=True)
class StepSpec:
    name: str
    title: str  # in reports: "Create Volume"
    unit: str  # in reports: "vol" (throughput reads "1.59 vol/s")
    kind: str  # which of the run's observed kinds its objects are: CLAIM, POD or SNAPSHOT
    resource: r.Resource
    action: Action
    object_name: Callable[[Names, int], str]
    count: Callable[[BenchmarkRunSpec], int]
    judge: JudgeFactory
    skip: SkipRule
    requires: str | None = None
    needs_snapshot_class: bool = False
    terminal_warnings: frozenset[str] = frozenset()
    manifest: Callable[[StepContext, int], Manifest] | None = None  # CREATE steps: object i as submitted
    report_key: str | None = None  # where the report keeps the first object's manifest
    judge_wffc: JudgeFactory | None = None  # judge on a WaitForFirstConsumer class, if it differs
    note_wffc: str | None = None  # how to read the step's numbers on a WaitForFirstConsumer class
    gone: JudgeFactory | None = None  # restore: when one of its objects and what depends on it are gone
    recreated_by: str | None = None  # restore of a deletion step: the step whose manifests bring its objects back
    provisions_on_wffc: bool = False  # on a WaitForFirstConsumer class it provisions volumes: no restore then
    measure: Measure | None = None  # MEASURE steps: runs the step's batches itself (the data path's matrix)
    enabled: Callable[[BenchmarkRunSpec], bool] | None = None  # runs by default only when this says so
    companion: Companion | None = None  # MEASURE steps: an object of another kind the step creates itself
    results: ResultTable[Any] | None = None  # MEASURE steps: the rows status, report and metrics show

    def objects(self, spec: BenchmarkRunSpec, names: Names) -> list[str]:
        return [self.object_name(names, index) for index in range(self.count(spec))]

    def judge_in(self, context: StepContext) -> judges.Judge:
        factory = self.judge_wffc if context.wffc and self.judge_wffc is not None else self.judge
        return factory(context.observed, self.terminal_warnings)

    def note_in(self, context: StepContext) -> str | None:
        return self.note_wffc if context.wffc else None


# -- skip rules: which objects a step does not submit (counted as skipped) ---------------------------------------
def skip_nothing(step: StepSpec, context: StepContext) -> set[str]:
    return set()


def _failed_indexes(context: StepContext, of: str) -> set[int]:
    tracker = context.trackers[of]
    return {index for index, name in enumerate(tracker.objects)
            if name in tracker.skipped or (name in tracker.outcomes and not tracker.outcomes[name].ok)}


def skip_if_prerequisite_failed(step: StepSpec, context: StepContext) -> set[str]:
    """Object i needs object i of the required step (snapshot i of volume i, clone i of snapshot i)."""
    assert step.requires is not None
    objects = step.objects(context.spec, context.names)
    return {objects[index] for index in _failed_indexes(context, step.requires)}


def skip_pods_missing_a_volume(step: StepSpec, context: StepContext) -> set[str]:
    """A pod mounts k volumes: it is skipped if any of them failed (on a WaitForFirstConsumer class, failing
    means the API refused the claim or never stored it: provisioning itself happens in this step)."""
    assert step.requires is not None
    spec = context.spec
    bad = _failed_indexes(context, step.requires)
    return {step.object_name(context.names, pod) for pod in range(step.count(spec))
            if bad & set(volumes_of_pod(pod, spec.volumes, spec.pvcsPerPod))}


def skip_never_seen(step: StepSpec, context: StepContext) -> set[str]:
    """A deletion acts only on objects the run's label-selected watches saw: a refused create made nothing, and
    counting its deletion as a success would be false."""
    seen = context.observed.uids_of(step.kind)
    return {name for name in step.objects(context.spec, context.names) if name not in seen}


# -- manifests of the creation steps ---------------------------------------------------------------------------
def _volume(context: StepContext, index: int) -> Manifest:
    return manifests.build_pvc(context.names.volume(index), context.spec, context.labels)


def _pod(context: StepContext, index: int) -> Manifest:
    spec = context.spec
    claims = [context.names.volume(i) for i in volumes_of_pod(index, spec.volumes, spec.pvcsPerPod)]
    return manifests.build_pod(context.names.pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block")


def _snapshot(context: StepContext, index: int) -> Manifest:
    assert context.spec.volumeSnapshotClassName is not None
    return manifests.build_snapshot(context.names.snapshot(index), context.names.volume(index),
                                    context.spec.volumeSnapshotClassName, context.labels)


def _clone(context: StepContext, index: int) -> Manifest:
    return manifests.build_clone_pvc(context.names.clone(index), context.names.snapshot(index), context.spec,
                                     context.labels)


def _data_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.dataPath
    assert data is not None, "the data-path step runs only with spec.dataPath"
    volumes = datapath.selected_volumes(spec.volumes, data)
    workload = data.workloads[index // volumes]
    claim = context.names.volume(index % volumes)
    return manifests.build_workload_pod(
        context.names.data_pod(index), "fio", workload_image(data.image), fio.build_fio_command(data, workload),
        [manifests.WorkloadMount("data", fio.MOUNT_PATH, claim)],
        {**context.labels, "csibench.io/workload": workload.name}, data.resources, spec.pod.nodeSelector,
        spec.pod.tolerations)


def _data_pods(spec: BenchmarkRunSpec) -> int:
    data = spec.dataPath
    return len(data.workloads) * datapath.selected_volumes(spec.volumes, data) if data is not None else 0


def skip_data_pods_of_failed_volumes(step: StepSpec, context: StepContext) -> set[str]:
    """A data-path pod runs on volume i % volumes: skipped when that volume failed to be created."""
    data = context.spec.dataPath
    assert data is not None
    volumes = datapath.selected_volumes(context.spec.volumes, data)
    bad = _failed_indexes(context, StepName.CREATE_VOLUME)
    return {name for index, name in enumerate(step.objects(context.spec, context.names)) if index % volumes in bad}


def _database_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.database
    assert data is not None, "the database step runs only with spec.database"
    mounts = [manifests.WorkloadMount("data", pgbench.MOUNT_PATH, context.names.database_volume(index)),
              manifests.WorkloadMount("scratch", pgbench.SCRATCH_PATH)]
    return manifests.build_workload_pod(
        context.names.database_pod(index), "postgres", workload_image(data.image), pgbench.build_command(), mounts,
        context.labels, data.resources, data.nodeSelector or spec.pod.nodeSelector,
        data.tolerations or spec.pod.tolerations, env=pgbench.build_env(data),
        grace_seconds=database.GRACE_SECONDS)


def _database_volume(context: StepContext, index: int) -> Manifest:
    data = context.spec.database
    assert data is not None
    return manifests.build_pvc(context.names.database_volume(index), context.spec, context.labels, size=data.size,
                               filesystem=True)


def _database_pods(spec: BenchmarkRunSpec) -> int:
    return 1 if spec.database is not None else 0


def _volumes(spec: BenchmarkRunSpec) -> int:
    return spec.volumes


def _pods(spec: BenchmarkRunSpec) -> int:
    return pod_count(spec.volumes, spec.pvcsPerPod)


PROVISIONING_FAILED = frozenset({"ProvisioningFailed"})

STEPS: dict[str, StepSpec] = {step.name: step for step in (
    StepSpec(StepName.CREATE_VOLUME, "Create Volume", "vol", CLAIM, r.PVCS, Action.CREATE, Names.volume, _volumes,
             judges.claim_bound, skip_nothing, terminal_warnings=PROVISIONING_FAILED, manifest=_volume,
             report_key="pvc", judge_wffc=judges.claim_seen, gone=judges.claim_and_volume_gone,
             note_wffc=f"{WFFC}: claims are provisioned when their pod is scheduled, so this step times API "
                       "submission only; provisioning time is inside publish"),
    StepSpec(StepName.PUBLISH, "Publish (Attach)", "pod", POD, r.PODS, Action.CREATE, Names.pod, _pods,
             judges.pod_ready, skip_pods_missing_a_volume, requires=StepName.CREATE_VOLUME,
             terminal_warnings=frozenset({"FailedMount", "FailedAttachVolume", "FailedMapVolume", "FailedAttach"}),
             manifest=_pod, report_key="pod", note_wffc=f"{WFFC}: includes provisioning of each pod's volumes",
             gone=judges.pod_gone_and_detached, provisions_on_wffc=True),
    StepSpec(StepName.UNPUBLISH, "Unpublish (Detach)", "pod", POD, r.PODS, Action.DELETE, Names.pod, _pods,
             judges.pod_gone_and_detached, skip_never_seen, requires=StepName.PUBLISH,
             gone=judges.pod_gone_and_detached, recreated_by=StepName.PUBLISH),
    StepSpec(StepName.DATA_PATH, "Data Path (fio)", "pod", POD, r.PODS, Action.MEASURE, Names.data_pod, _data_pods,
             judges.pod_finished, skip_data_pods_of_failed_volumes, requires=StepName.CREATE_VOLUME,
             terminal_warnings=frozenset({"FailedMount", "FailedAttachVolume", "Failed"}), manifest=_data_pod,
             report_key="dataPathPod", gone=judges.pod_gone_and_detached, measure=datapath.measure,
             enabled=lambda spec: spec.dataPath is not None, results=datapath.RESULTS),
    StepSpec(StepName.DATABASE, "Database (pgbench)", "pod", POD, r.PODS, Action.MEASURE, Names.database_pod,
             _database_pods, judges.pod_finished, skip_nothing,
             terminal_warnings=frozenset({"FailedMount", "FailedAttachVolume", "Failed"}), manifest=_database_pod,
             report_key="databasePod", gone=judges.pod_gone_and_detached, measure=database.measure,
             enabled=lambda spec: spec.database is not None, results=database.RESULTS,
             companion=Companion(CLAIM, r.PVCS, Names.database_volume, _database_volume, "databaseVolume",
                                 judges.claim_and_volume_gone)),
    StepSpec(StepName.CREATE_SNAPSHOT, "Create Snapshot", "snap", SNAPSHOT, r.SNAPSHOTS, Action.CREATE,
             Names.snapshot, _volumes, judges.snapshot_ready, skip_if_prerequisite_failed,
             requires=StepName.CREATE_VOLUME, needs_snapshot_class=True,
             terminal_warnings=frozenset({"SnapshotCreationFailed", "SnapshotContentCreationFailed"}),
             manifest=_snapshot, report_key="volumeSnapshot", gone=judges.snapshot_and_content_gone),
    StepSpec(StepName.CLONE_FROM_SNAPSHOT, "Clone from Snapshot", "vol", CLAIM, r.PVCS, Action.CREATE, Names.clone,
             _volumes, judges.claim_bound, skip_if_prerequisite_failed, requires=StepName.CREATE_SNAPSHOT,
             needs_snapshot_class=True, terminal_warnings=PROVISIONING_FAILED, manifest=_clone, report_key="clone",
             gone=judges.claim_and_volume_gone),
    StepSpec(StepName.DELETE_CLONE, "Delete Clone", "vol", CLAIM, r.PVCS, Action.DELETE, Names.clone, _volumes,
             judges.claim_and_volume_gone, skip_never_seen, requires=StepName.CLONE_FROM_SNAPSHOT,
             needs_snapshot_class=True, gone=judges.claim_and_volume_gone,
             recreated_by=StepName.CLONE_FROM_SNAPSHOT),
    StepSpec(StepName.DELETE_SNAPSHOT, "Delete Snapshot", "snap", SNAPSHOT, r.SNAPSHOTS, Action.DELETE,
             Names.snapshot, _volumes, judges.snapshot_and_content_gone, skip_never_seen,
             requires=StepName.CREATE_SNAPSHOT, needs_snapshot_class=True, gone=judges.snapshot_and_content_gone,
             recreated_by=StepName.CREATE_SNAPSHOT),
    StepSpec(StepName.DELETE_VOLUME, "Delete Volume", "vol", CLAIM, r.PVCS, Action.DELETE, Names.volume, _volumes,
             judges.claim_and_volume_gone, skip_never_seen, requires=StepName.CREATE_VOLUME,
             gone=judges.claim_and_volume_gone, recreated_by=StepName.CREATE_VOLUME),
)}


def step_named(name: str) -> StepSpec:
    """The catalog entry of a step; an unknown name is an error, never a fall-through."""
    try:
        return STEPS[name]
    except KeyError:
        raise KeyError(f"step {name!r} is not in the step catalog") from None


def measures_rows(name: str) -> bool:
    """For reports: the step's numbers are the rows of a table of its own (the data path's workloads, the
    database's runs); the rate and latency of its pods say nothing, only its wall time does."""
    step = STEPS.get(name)
    return step is not None and step.results is not None


def title_and_unit(name: str) -> tuple[str, str]:
    """For reports: a known step's title and unit; a step a newer operator ran keeps its name."""
    step = STEPS.get(name)
    return (step.title, step.unit) if step is not None else (name, "obj")
