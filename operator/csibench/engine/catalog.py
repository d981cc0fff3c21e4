"""The step catalog: how each step acts, in one table, read by every part of the engine.

What a step *is* (its order, title and unit, what it requires, whether it needs a snapshot class, its
WaitForFirstConsumer note) is ``api/steps.py``, which reports and preflight read without the engine; each entry
here adds to those facts how the step acts: planning reads ``requires``, ``needs_snapshot_class`` and
``enabled``; execution reads how objects are named and counted, how one is submitted (create ``manifest``,
delete, or ``measure``), which judge decides its terminal state and which Warning reasons fail it, and which
objects are skipped. After an operator restart, the interrupted step's starting state is restored from the entry
alone: its objects are deleted until ``gone`` says so, and a deletion step's objects are then created again by
the step named in ``recreated_by``. Adding a step is its facts and one entry here (a unit test adds an eleventh and
runs it). The orchestration has no per-step cases: an unknown step is an error, never a fall-through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from csibench.api.models import BenchmarkRunSpec, Placement, StepName
from csibench.api.steps import WFFC, facts_of
from csibench.engine import density as density_step
from csibench.engine import judges, manifests, verify_clone
from csibench.engine.actions import CREATE, DELETE, MEASURE, Move, Patch
from csibench.engine.database import script
from csibench.engine.database import step as database
from csibench.engine.datapath import barrier, checksum, fio
from csibench.engine.datapath import step as datapath
from csibench.engine.naming import Names, pod_count, volumes_of_pod
from csibench.engine.observed import CLAIM, GROUP_SNAPSHOT, POD, SNAPSHOT, Observed
from csibench.engine.step import Companion, Manifest, Phases, StepContext, StepSpec
from csibench.engine.workload import workload_image
from csibench.kube import resources as r
from csibench.kube.ownership import RUN_UID_LABEL


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


def skip_clones_without_source_checksums(step: StepSpec, context: StepContext) -> set[str]:
    """Verify pod i needs clone i, and the data path's checksums of volume i (a volume it did not use, or whose
    checksum pod failed, has none: its clone has nothing to be held against)."""
    objects = step.objects(context.spec, context.names)
    data_path = context.trackers.get(StepName.DATA_PATH)
    sums = ((data_path.extra if data_path is not None else None) or {}).get(checksum.CHECKSUMS) or {}
    unsummed = {name for index, name in enumerate(objects) if context.names.volume(index) not in sums}
    return skip_if_prerequisite_failed(step, context) | unsummed


def skip_claims_not_bound(step: StepSpec, context: StepContext) -> set[str]:
    """A change of claim i needs claim i made and Bound (the API server refuses to resize an unbound claim: on a
    WaitForFirstConsumer class, one whose publish pod never ran), and, when publish ran, held by its ready pod (an
    online expansion's node half needs the mount)."""
    spec, objects = context.spec, step.objects(context.spec, context.names)
    unbound = {name for name in objects
               if (claim := context.observed.claims.get(name)) is None or claim.phase != "Bound"}
    unheld: set[str] = set()
    if step.holders is not None and step.holders in context.trackers:  # each holder as it is now (a move's too)
        holders = context.trackers[step.holders].objects
        for pod, name in enumerate(holders):
            state = context.observed.pods.get(name)
            if state is None or not state.exists or not state.ready:
                unheld |= {objects[i] for i in volumes_of_pod(pod, spec.volumes, spec.pvcsPerPod)}
    return skip_if_prerequisite_failed(step, context) | unbound | unheld


def _skip_missing_a_volume(step: StepSpec, context: StepContext, per_object: int) -> set[str]:
    assert step.requires is not None
    spec = context.spec
    bad = _failed_indexes(context, step.requires)
    return {step.object_name(context.names, index) for index in range(step.count(spec))
            if bad & set(volumes_of_pod(index, spec.volumes, per_object))}


def skip_pods_missing_a_volume(step: StepSpec, context: StepContext) -> set[str]:
    """A pod mounts k volumes: it is skipped if any of them failed (on a WaitForFirstConsumer class, failing
    means the API refused the claim or never stored it: provisioning itself happens in this step)."""
    return _skip_missing_a_volume(step, context, context.spec.pvcsPerPod)


def skip_groups_missing_a_volume(step: StepSpec, context: StepContext) -> set[str]:
    """A group snapshot covers n volumes: it is skipped if any of them failed or is not Bound (on a
    WaitForFirstConsumer class, one whose publish pod never ran: the snapshot-controller refuses an unbound
    member), so a smaller group is never timed as if it were whole and no provisioning failure is blamed on it."""
    spec = context.spec
    assert spec.groupSnapshot is not None
    per_group = spec.groupSnapshot.volumesPerGroup
    unbound = {index for index in range(spec.volumes)
               if (claim := context.observed.claims.get(context.names.volume(index))) is None
               or claim.phase != "Bound"}
    return _skip_missing_a_volume(step, context, per_group) | {
        step.object_name(context.names, group) for group in range(step.count(spec))
        if unbound & set(volumes_of_pod(group, spec.volumes, per_group))}


def skip_groups_being_taken(step: StepSpec, context: StepContext) -> set[str]:
    """A group deletion acts only on groups the run saw and that are ready or failed: one whose
    CreateVolumeGroupSnapshot call is still in flight (its create step timed out) would be removed from the API
    and kept by the storage; it is skipped here and deleted by cleanup once it settles."""
    settled = judges.group_snapshot_settled(context.observed, frozenset())
    return skip_never_seen(step, context) | {name for name in step.objects(context.spec, context.names)
                                             if settled(name, 0.0) is None}


def skip_never_seen(step: StepSpec, context: StepContext) -> set[str]:
    """A deletion acts only on objects the run's label-selected watches saw and that still exist: a refused create
    made nothing, and an object already gone (deleted by someone else, a moved pod whose successor was never
    made) was not deleted by this step; counting either as a successful deletion would be false."""
    present = context.observed.existing(step.kind)
    return {name for name in step.objects(context.spec, context.names) if name not in present}


# -- manifests of the creation steps ---------------------------------------------------------------------------
def _volume(context: StepContext, index: int) -> Manifest:
    """Claim i; with spec.groupSnapshot, labelled with its group (the group snapshot selects claims by it)."""
    labels = context.labels
    if context.spec.groupSnapshot is not None:
        group = index // context.spec.groupSnapshot.volumesPerGroup
        labels = {**labels, manifests.GROUP_LABEL: context.names.group_snapshot(group)}
    return manifests.build_pvc(context.names.volume(index), context.spec, labels)


def packed_node(index: int, per_pod: int, nodes: Sequence[str], limits: Mapping[str, int | None]) -> str:
    """Pod ``index``'s node under Pack: nodes in order, each taking as many whole pods as its per-node volume limit
    allows (all of them without a limit); pods beyond every node's room go to the last node, where the scheduler
    refuses them with its reason (pure)."""
    first = 0
    for node in nodes:
        limit = limits.get(node)
        if limit is None:
            return node
        first += limit // per_pod
        if index < first:
            return node
    return nodes[-1]


def _pod(context: StepContext, index: int) -> Manifest:
    spec = context.spec
    claims = [context.names.volume(i) for i in volumes_of_pod(index, spec.volumes, spec.pvcsPerPod)]
    node = packed_node(index, spec.pvcsPerPod, context.nodes, context.node_limits) \
        if spec.pod.placement == Placement.PACK else None
    return manifests.build_pod(context.names.pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block", node=node)


def _density_pod(context: StepContext, index: int) -> Manifest:
    """Object ``index`` of the ramp: pod j of its level, mounting that level's volumes j*k .. j*k+k-1, pinned to
    the node the ramp fills."""
    spec, density = context.spec, context.spec.density
    assert density is not None, "the density step runs only with spec.density"
    volumes, pod = density_step.level_of(density.volumesPerNode, spec.pvcsPerPod, index)
    claims = [context.names.volume(i) for i in volumes_of_pod(pod, volumes, spec.pvcsPerPod)]
    return manifests.build_pod(context.names.density_pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block", node=density_step.target_node(context))


def _density_note(context: StepContext) -> str:
    node = density_step.target_node(context)
    limit = context.node_limits.get(node)
    if limit is None:
        said = (f"on node {node}: the class's driver reports no per-node volume limit there (CSINode "
                "allocatable.count unset), so the levels were not checked against one")
    else:
        said = (f"on node {node}, which had room for {limit} volumes of the class's driver when the run started "
                "(CSINode allocatable.count less those attached there)")
    if context.wffc:
        said += f"; {WFFC}: the first level also provisions the volumes it publishes"
    return said


def _publish_note(context: StepContext) -> str | None:
    if context.spec.pod.placement != Placement.PACK:
        return None
    limits = [f"{node} {'no limit' if context.node_limits.get(node) is None else context.node_limits[node]}"
              for node in context.nodes]
    return (f"Pack: pods pinned to the first node with room under its volume limit (room when the run started: "
            f"{', '.join(limits)})")


def _density_pods(spec: BenchmarkRunSpec) -> int:
    if spec.density is None:
        return 0
    return sum(pods for _, _, pods in density_step.levels_of(spec.density.volumesPerNode, spec.pvcsPerPod))


def skip_density_pods_missing_a_volume(step: StepSpec, context: StepContext) -> set[str]:
    """A ramp pod mounts volumes of its level: skipped if any of them failed to be created."""
    spec, density = context.spec, context.spec.density
    assert density is not None
    bad = _failed_indexes(context, StepName.CREATE_VOLUME)
    skipped = set()
    for index, name in enumerate(step.objects(spec, context.names)):
        volumes, pod = density_step.level_of(density.volumesPerNode, spec.pvcsPerPod, index)
        if bad & set(volumes_of_pod(pod, volumes, spec.pvcsPerPod)):
            skipped.add(name)
    return skipped


def _moved_pod(context: StepContext, index: int, origin: str | None) -> Manifest:
    """Pod i made again on another node: round-robin over the schedulable nodes other than the one it was on
    (never that one), pinned there."""
    others = [node for node in context.nodes if node != origin]
    assert others, "moveVolume runs only with two schedulable nodes (checked before the run)"
    spec = context.spec
    claims = [context.names.volume(i) for i in volumes_of_pod(index, spec.volumes, spec.pvcsPerPod)]
    return manifests.build_pod(context.names.pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block", node=others[index % len(others)])


def _moving_pods(spec: BenchmarkRunSpec) -> int:
    return spec.move.pods(_pods(spec)) if spec.move is not None else 0


def skip_pods_not_running(step: StepSpec, context: StepContext) -> set[str]:
    """A move acts on publish pods that are Ready where the run saw them: one whose publish failed (or that the
    run never saw) has nothing to move."""
    return skip_if_prerequisite_failed(step, context) | skip_never_seen(step, context) | {
        name for name in step.objects(context.spec, context.names)
        if (pod := context.observed.pods.get(name)) is None or not pod.exists or not pod.ready or not pod.node}


def _expansion_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    return [judges.claim_node_resize_pending(observed)]


def _snapshot(context: StepContext, index: int) -> Manifest:
    assert context.spec.volumeSnapshotClassName is not None
    return manifests.build_snapshot(context.names.snapshot(index), context.names.volume(index),
                                    context.spec.volumeSnapshotClassName, context.labels)


def _group_snapshot(context: StepContext, index: int) -> Manifest:
    """Group i: the claims labelled with its name and the run's uid (nobody else's claims, whatever their
    labels), with how many there are."""
    spec, group = context.spec, context.spec.groupSnapshot
    assert group is not None, "the group snapshot steps run only with spec.groupSnapshot"
    name = context.names.group_snapshot(index)
    members = len(volumes_of_pod(index, spec.volumes, group.volumesPerGroup))
    selector = {RUN_UID_LABEL: context.labels[RUN_UID_LABEL], manifests.GROUP_LABEL: name}
    return manifests.build_group_snapshot(name, group.volumeGroupSnapshotClassName, members, context.labels,
                                          selector)


def _groups(spec: BenchmarkRunSpec) -> int:
    return pod_count(spec.volumes, spec.groupSnapshot.volumesPerGroup) if spec.groupSnapshot is not None else 0


def _clone(context: StepContext, index: int) -> Manifest:
    return manifests.build_clone_pvc(context.names.clone(index), context.names.snapshot(index), context.spec,
                                     context.labels)  # of spec.volume_size: the snapshot's size after expansion


def _expansion(context: StepContext, index: int) -> Manifest:
    """Claim i's request raised to the new size, with the size asked for as an annotation (an event that carries
    it is one after this PATCH: the judge reads nothing older)."""
    return manifests.build_expansion(context.spec.volume_size)


def _expansion_note(context: StepContext) -> str:
    if StepName.PUBLISH in context.trackers:
        return "online: the publish step's pods mount the volumes while they grow"
    return ("offline: no pod mounts the volumes while they grow; a claim is done when the resizer is (the node's "
            "half of a filesystem volume waits for its next mount and is not timed here)")


def _data_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.dataPath
    assert data is not None, "the data-path step runs only with spec.dataPath"
    volumes = datapath.selected_volumes(spec.volumes, data)
    if index >= len(data.workloads) * data.slots * volumes:  # after the matrix: verify's checksum pods
        return _checksum_pod(context, context.names.data_pod(index), context.names.volume(index % volumes),
                             "checksum")
    w, slot = divmod(index // volumes, data.slots)  # workload, then its unthrottled run, rate levels, baseline
    workload = data.workloads[w]
    claim = None if data.is_baseline(slot) else context.names.volume(index % volumes)  # None: an emptyDir
    command = fio.build_fio_command(data, workload, context.rates.get((w, slot)) if slot else None)
    return manifests.build_workload_pod(
        context.names.data_pod(index), "fio", workload_image(data.image), barrier.build_waiting_command(command),
        [manifests.WorkloadMount("data", fio.MOUNT_PATH, claim),
         manifests.WorkloadMount(barrier.VOLUME, barrier.MOUNT_PATH,
                                 annotation=(barrier.START_FILE, barrier.START_ANNOTATION))],
        {**context.labels, "csibench.io/workload": workload.name}, data.resources, spec.pod.nodeSelector,
        spec.pod.tolerations, preferred_node=datapath.spread_node(index % volumes, context.nodes),
        init=(barrier.LAYOUT_CONTAINER, fio.build_layout_command(command)))


def _checksum_pod(context: StepContext, name: str, claim: str, workload: str) -> Manifest:
    """A pod that checksums fio's files on ``claim`` (a volume after the data path, or a clone)."""
    spec, data = context.spec, context.spec.dataPath
    assert data is not None
    return manifests.build_workload_pod(
        name, checksum.CONTAINER, workload_image(data.image), checksum.build_checksum_command(),
        [manifests.WorkloadMount("data", fio.MOUNT_PATH, claim)],
        {**context.labels, "csibench.io/workload": workload}, data.resources, spec.pod.nodeSelector,
        spec.pod.tolerations)


def _data_pods(spec: BenchmarkRunSpec) -> int:
    """Per workload its unthrottled run and each rate level, a pod per volume each; then, with verify, a checksum
    pod per volume."""
    data = spec.dataPath
    if data is None:
        return 0
    volumes = datapath.selected_volumes(spec.volumes, data)
    return (len(data.workloads) * data.slots + (1 if data.verify else 0)) * volumes


def _verify_pod(context: StepContext, index: int) -> Manifest:
    return _checksum_pod(context, context.names.verify_pod(index), context.names.clone(index), "verify")


def _verifying(spec: BenchmarkRunSpec) -> bool:
    return spec.dataPath is not None and spec.dataPath.verify


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
    mounts = [manifests.WorkloadMount("data", script.MOUNT_PATH, context.names.database_volume(index)),
              manifests.WorkloadMount("scratch", script.SCRATCH_PATH)]
    return manifests.build_workload_pod(
        context.names.database_pod(index), "postgres", workload_image(data.image), script.build_command(), mounts,
        context.labels, data.resources, data.nodeSelector or spec.pod.nodeSelector,
        data.tolerations or spec.pod.tolerations, env=script.build_env(data),
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
# A move's successor may meet the volume limit only for a moment (the target's own pods are leaving): not terminal.
MOVE_FAILED = frozenset({"FailedMount", "FailedAttachVolume", "FailedMapVolume", "FailedAttach"})
PUBLISH_FAILED = MOVE_FAILED | {judges.AT_VOLUME_LIMIT}
# The snapshot-controller's, on the group: no group content could be made (csi-snapshotter's own
# GroupSnapshotCreationFailed is on the cluster-scoped content, its Event in "default": the group's status.error
# carries it instead).
GROUP_SNAPSHOT_FAILED = frozenset({"GroupSnapshotContentCreationFailed"})

STEPS: dict[str, StepSpec] = {step.name: step for step in (
    StepSpec(facts=facts_of(StepName.CREATE_VOLUME), kind=CLAIM, resource=r.PVCS, action=CREATE,
             object_name=Names.volume, count=_volumes, judge=judges.claim_bound, skip=skip_nothing,
             terminal_warnings=PROVISIONING_FAILED, manifest=_volume, report_key="pvc",
             judge_wffc=judges.claim_seen, gone=judges.claim_and_volume_gone),
    StepSpec(facts=facts_of(StepName.PUBLISH), kind=POD, resource=r.PODS, action=CREATE,
             object_name=Names.pod, count=_pods, judge=judges.pod_ready, skip=skip_pods_missing_a_volume,
             terminal_warnings=PUBLISH_FAILED, manifest=_pod, report_key="pod", gone=judges.pod_gone_and_detached,
             provisions_on_wffc=True, note=_publish_note),
    StepSpec(facts=facts_of(StepName.MOVE_VOLUME), kind=POD, resource=r.PODS, action=Move(_moved_pod),
             object_name=Names.pod, count=_moving_pods, judge=judges.pod_moved, skip=skip_pods_not_running,
             terminal_warnings=MOVE_FAILED, gone=judges.pod_gone_and_detached, recreated_by=StepName.PUBLISH,
             enabled=lambda spec: spec.move is not None, spec_part="move",
             phases=Phases(("gone", "detach", "attach", "ready"), judges.move_boundaries),
             object_note=judges.move_nodes),
    StepSpec(facts=facts_of(StepName.EXPAND_VOLUME), kind=CLAIM, resource=r.PVCS, action=Patch(_expansion),
             object_name=Names.volume, count=_volumes, judge=judges.claim_expanded,
             judge_unheld=judges.claim_expanded_offline, skip=skip_claims_not_bound,
             terminal_warnings=frozenset({"VolumeResizeFailed", "FileSystemResizeFailed"}),
             gone=judges.claim_and_volume_gone, recreated_by=StepName.CREATE_VOLUME, holders=StepName.PUBLISH,
             enabled=lambda spec: spec.expand is not None, note=_expansion_note,
             phases=Phases(("controller", "node"), _expansion_boundaries)),
    StepSpec(facts=facts_of(StepName.UNPUBLISH), kind=POD, resource=r.PODS, action=DELETE,
             object_name=Names.pod, count=_pods, judge=judges.pod_gone_and_detached, skip=skip_never_seen,
             gone=judges.pod_gone_and_detached, recreated_by=StepName.PUBLISH),
    StepSpec(facts=facts_of(StepName.DENSITY), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.density_pod, count=_density_pods, judge=judges.pod_ready,
             skip=skip_density_pods_missing_a_volume, terminal_warnings=PUBLISH_FAILED, manifest=_density_pod,
             report_key="densityPod", gone=judges.pod_gone_and_detached, measure=density_step.measure,
             enabled=lambda spec: spec.density is not None, results=density_step.RESULTS, note=_density_note),
    StepSpec(facts=facts_of(StepName.DATA_PATH), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.data_pod, count=_data_pods, judge=judges.pod_finished,
             skip=skip_data_pods_of_failed_volumes,
             terminal_warnings=frozenset({"FailedMount", "FailedAttachVolume", "Failed"}), manifest=_data_pod,
             report_key="dataPathPod", gone=judges.pod_gone_and_detached, measure=datapath.measure,
             enabled=lambda spec: spec.dataPath is not None, results=datapath.RESULTS),
    StepSpec(facts=facts_of(StepName.DATABASE), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.database_pod, count=_database_pods, judge=judges.pod_finished, skip=skip_nothing,
             terminal_warnings=frozenset({"FailedMount", "FailedAttachVolume", "Failed"}), manifest=_database_pod,
             report_key="databasePod", gone=judges.pod_gone_and_detached, measure=database.measure,
             enabled=lambda spec: spec.database is not None, results=database.RESULTS,
             companion=Companion(CLAIM, r.PVCS, Names.database_volume, _database_volume, "databaseVolume",
                                 judges.claim_and_volume_gone)),
    StepSpec(facts=facts_of(StepName.CREATE_SNAPSHOT), kind=SNAPSHOT, resource=r.SNAPSHOTS, action=CREATE,
             object_name=Names.snapshot, count=_volumes, judge=judges.snapshot_ready,
             skip=skip_if_prerequisite_failed,
             terminal_warnings=frozenset({"SnapshotCreationFailed", "SnapshotContentCreationFailed"}),
             manifest=_snapshot, report_key="volumeSnapshot", gone=judges.snapshot_and_content_gone,
             settled=judges.snapshot_settled),
    StepSpec(facts=facts_of(StepName.CREATE_GROUP_SNAPSHOT), kind=GROUP_SNAPSHOT, resource=r.GROUP_SNAPSHOTS,
             action=CREATE, object_name=Names.group_snapshot, count=_groups, judge=judges.group_snapshot_ready,
             skip=skip_groups_missing_a_volume, terminal_warnings=GROUP_SNAPSHOT_FAILED, manifest=_group_snapshot,
             report_key="volumeGroupSnapshot", gone=judges.group_snapshot_gone, settled=judges.group_snapshot_settled,
             enabled=lambda spec: spec.groupSnapshot is not None, spec_part="groupSnapshot",
             phases=Phases(("content", "taken", "members"), judges.group_create_boundaries)),
    StepSpec(facts=facts_of(StepName.CLONE_FROM_SNAPSHOT), kind=CLAIM, resource=r.PVCS, action=CREATE,
             object_name=Names.clone, count=_volumes, judge=judges.claim_bound, skip=skip_if_prerequisite_failed,
             terminal_warnings=PROVISIONING_FAILED, manifest=_clone, report_key="clone",
             gone=judges.claim_and_volume_gone),
    StepSpec(facts=facts_of(StepName.VERIFY_CLONE), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.verify_pod, count=_volumes, judge=judges.pod_finished,
             skip=skip_clones_without_source_checksums,
             terminal_warnings=frozenset({"FailedMount", "FailedAttachVolume", "Failed"}), manifest=_verify_pod,
             report_key="verifyPod", gone=judges.pod_gone_and_detached, measure=verify_clone.measure,
             enabled=_verifying, spec_part="dataPath.verify"),
    StepSpec(facts=facts_of(StepName.DELETE_CLONE), kind=CLAIM, resource=r.PVCS, action=DELETE,
             object_name=Names.clone, count=_volumes, judge=judges.claim_and_volume_gone, skip=skip_never_seen,
             gone=judges.claim_and_volume_gone, recreated_by=StepName.CLONE_FROM_SNAPSHOT),
    StepSpec(facts=facts_of(StepName.DELETE_SNAPSHOT), kind=SNAPSHOT, resource=r.SNAPSHOTS, action=DELETE,
             object_name=Names.snapshot, count=_volumes, judge=judges.snapshot_and_content_gone,
             skip=skip_never_seen, gone=judges.snapshot_and_content_gone, recreated_by=StepName.CREATE_SNAPSHOT),
    StepSpec(facts=facts_of(StepName.DELETE_GROUP_SNAPSHOT), kind=GROUP_SNAPSHOT, resource=r.GROUP_SNAPSHOTS,
             action=DELETE, object_name=Names.group_snapshot, count=_groups, judge=judges.group_snapshot_gone,
             skip=skip_groups_being_taken, gone=judges.group_snapshot_gone, settled=judges.group_snapshot_settled,
             recreated_by=StepName.CREATE_GROUP_SNAPSHOT, enabled=lambda spec: spec.groupSnapshot is not None,
             spec_part="groupSnapshot", phases=Phases(("content", "group", "members"), judges.group_delete_boundaries)),
    StepSpec(facts=facts_of(StepName.DELETE_VOLUME), kind=CLAIM, resource=r.PVCS, action=DELETE,
             object_name=Names.volume, count=_volumes, judge=judges.claim_and_volume_gone, skip=skip_never_seen,
             gone=judges.claim_and_volume_gone, recreated_by=StepName.CREATE_VOLUME),
)}


def step_named(name: str) -> StepSpec:
    """The catalog entry of a step; an unknown name is an error, never a fall-through."""
    try:
        return STEPS[name]
    except KeyError:
        raise KeyError(f"step {name!r} is not in the step catalog") from None
