"""createGroupSnapshot and deleteGroupSnapshot (``spec.groupSnapshot``): the run's volumes in groups of
``volumesPerGroup`` (a label createVolume sets on its claims), one VolumeGroupSnapshot per group, done when it and
every member snapshot are ready to use; then each deleted, done when it, its group content, its member snapshots
and their contents are gone. The latency of both is split at the group content's events. A group is deleted only
once it settled: deleted while its CreateVolumeGroupSnapshot call is in flight, the storage keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

from csibench.api.models import BenchmarkRunSpec, ConditionReason, StepName
from csibench.api.steps import WFFC, facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import CREATE, DELETE
from csibench.engine.checks import PlanCheck, check_class_driver
from csibench.engine.errors import PlanError
from csibench.engine.judges import DONE, Judge, Verdict
from csibench.engine.kinds.group_snapshot import MEMBERS
from csibench.engine.naming import Names, pod_count, volumes_of_pod
from csibench.engine.observed import GROUP_SNAPSHOT, Observed
from csibench.engine.retries import is_transient
from csibench.engine.skips import skip_missing_a_volume, skip_never_seen
from csibench.engine.step import Manifest, Phases, StepContext, StepSpec
from csibench.kube import resources as r
from csibench.kube.ownership import RUN_UID_LABEL

GROUP_SNAPSHOT_API_GROUP = "groupsnapshot.storage.k8s.io"
# The snapshot-controller's, on the group: no group content could be made (csi-snapshotter's own
# GroupSnapshotCreationFailed is on the cluster-scoped content, its Event in "default": the group's status.error
# carries it instead).
GROUP_SNAPSHOT_FAILED = frozenset({"GroupSnapshotContentCreationFailed"})


def build_group_snapshot(name: str, group_class: str, members: int, labels: dict[str, str],
                         selector: dict[str, str]) -> Manifest:
    """A VolumeGroupSnapshot of the claims that carry all of ``selector`` (the run's uid label and the group's), with
    how many there are as an annotation (read once by the judge: a group is ready only with every member)."""
    return {"apiVersion": f"{GROUP_SNAPSHOT_API_GROUP}/v1", "kind": "VolumeGroupSnapshot",
            "metadata": {"name": name, "labels": labels, "annotations": {MEMBERS: str(members)}},
            "spec": {"volumeGroupSnapshotClassName": group_class,
                     "source": {"selector": {"matchLabels": selector}}}}


def _group_snapshot(context: StepContext, index: int) -> Manifest:
    """Group i: the claims labelled with its name and the run's uid (nobody else's claims, whatever their
    labels), with how many there are."""
    spec, group = context.spec, context.spec.groupSnapshot
    assert group is not None, "the group snapshot steps run only with spec.groupSnapshot"
    name = context.names.group_snapshot(index)
    members = len(volumes_of_pod(index, spec.volumes, group.volumesPerGroup))
    selector = {RUN_UID_LABEL: context.labels[RUN_UID_LABEL], manifests.GROUP_LABEL: name}
    return build_group_snapshot(name, group.volumeGroupSnapshotClassName, members, context.labels,
                                          selector)


def _groups(spec: BenchmarkRunSpec) -> int:
    return pod_count(spec.volumes, spec.groupSnapshot.volumesPerGroup) if spec.groupSnapshot is not None else 0


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
    return skip_missing_a_volume(step, context, per_group) | {
        step.object_name(context.names, group) for group in range(step.count(spec))
        if unbound & set(volumes_of_pod(group, spec.volumes, per_group))}


def skip_groups_being_taken(step: StepSpec, context: StepContext) -> set[str]:
    """A group deletion acts only on groups the run saw and that are ready or failed: one whose
    CreateVolumeGroupSnapshot call is still in flight (its create step timed out) would be removed from the API
    and kept by the storage; it is skipped here and deleted by cleanup once it settles."""
    settled = group_snapshot_settled(context.observed, frozenset())
    return skip_never_seen(step, context) | {name for name in step.objects(context.spec, context.names)
                                             if settled(name, 0.0) is None}


def group_snapshot_ready(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the group is ready to use and so is each of its member snapshots, all of them there; failed on the
    group's status error (not a call still in progress), a terminal Warning, or its deletion."""
    def members_ready(name: str) -> bool:
        group = observed.groups[name]
        members = [observed.members[m] for m in observed.group_members.get(name, ())
                   if observed.members[m].exists and observed.member_owner.get(m) == group.uid]
        return len(members) >= max(1, group.members_expected) and all(member.ready for member in members)
    return judges.ready_with(observed, terminal, GROUP_SNAPSHOT, observed.groups.get, lambda group: group.ready,
                       lambda group: Verdict(False, "GroupSnapshotError", group.error)
                       if group.error and not is_transient(group.error) else None, complete=members_ready)


def group_snapshot_settled(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Restore and cleanup: a group snapshot may be deleted once it is ready to use (its members made), failed, or
    gone. Deleted while its CreateVolumeGroupSnapshot call is in flight, external-snapshotter v8.7.0 removes the
    group, its content and its members from the API without ever deleting the group on the storage (seen on the
    local cluster: the array kept it), so nothing could reclaim it afterwards."""
    def judge(name: str, submitted: float) -> Verdict | None:
        return DONE if judges.group_settled(observed.groups.get(name)) else None
    return judge


def group_snapshot_gone(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Done when the group snapshot, any group content pointing at it, each member snapshot owned by a group of its
    name (a namesake's too: the controller would take them for the group's) and each member's content are gone."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.groups.get(name)
        if (state is not None and state.exists) or observed.contents_of_group.get(name):
            return None
        for member in observed.group_members.get(name, ()):
            if observed.members[member].exists or member in observed.member_contents:
                return None
        return DONE
    return judge


def group_create_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    """Where the parts of taking a group snapshot end: the snapshot-controller created its group content; the
    content carries the storage's handle (csi-snapshotter's CreateVolumeGroupSnapshot returned and its answer was
    written); the last part (the controller creating and binding a VolumeSnapshot and content per member, and the
    group and every member ready) ends when the group is done."""
    def content(name: str) -> str | None:  # the group names its content as soon as the controller made it
        state = observed.groups.get(name)
        return state.content if state is not None else None

    def taken(name: str) -> bool:
        made = content(name)
        return made is not None and observed.group_content_taken(made)
    return [lambda name: content(name) is not None, taken]


def group_delete_boundaries(observed: Observed) -> list[Callable[[str], bool]]:
    """Where the parts of deleting a group snapshot end: its group content gone (the controller asked for its
    deletion, csi-snapshotter's DeleteVolumeGroupSnapshot returned and it let the content go); the group gone (the
    controller removed its finalizer); the last part ends when every member snapshot and member content is gone."""
    def content_gone(name: str) -> bool:
        state = observed.groups.get(name)
        bound = state.content if state is not None else None
        return not observed.contents_of_group.get(name) and (bound is None or bound not in observed.group_contents)

    def group_gone(name: str) -> bool:
        state = observed.groups.get(name)
        return state is None or not state.exists
    return [content_gone, group_gone]


async def check_group_snapshots(check: PlanCheck) -> None:
    """The group snapshot API, a class of the class's driver, and volumes that exist when the groups are taken."""
    spec, client, storage_class, binding_mode, steps = (check.spec, check.client, check.storage_class,
                                                        check.binding_mode, check.steps)
    if await client.get(r.GROUP_SNAPSHOT_API) is None:
        raise PlanError(ConditionReason.GROUP_SNAPSHOT_API_NOT_INSTALLED, "the run has group snapshot steps but the "
                        "cluster does not serve groupsnapshot.storage.k8s.io/v1 (install the external-snapshotter "
                        "v8.6+ group snapshot CRDs)")
    assert spec.groupSnapshot is not None
    name = spec.groupSnapshot.volumeGroupSnapshotClassName
    group_class = await client.get(r.GROUP_SNAPSHOT_CLASSES.path(name=name))
    if group_class is None:
        raise PlanError(ConditionReason.VOLUME_GROUP_SNAPSHOT_CLASS_NOT_FOUND,
                        f"VolumeGroupSnapshotClass {name!r} does not exist")
    check_class_driver("VolumeGroupSnapshotClass", name, group_class, spec, storage_class,
                        "its groups would never be taken")
    if binding_mode == WFFC and StepName.PUBLISH not in steps:
        raise PlanError(ConditionReason.INVALID_STEPS, f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes "
                        "are only provisioned when a pod uses them, so group snapshot steps need the publish step")
ENTRIES = (
    StepSpec(facts=facts_of(StepName.CREATE_GROUP_SNAPSHOT), kind=GROUP_SNAPSHOT, resource=r.GROUP_SNAPSHOTS,
             action=CREATE, object_name=Names.group_snapshot, count=_groups, judge=group_snapshot_ready,
             skip=skip_groups_missing_a_volume, terminal_warnings=GROUP_SNAPSHOT_FAILED, manifest=_group_snapshot,
             report_key="volumeGroupSnapshot", gone=group_snapshot_gone, settled=group_snapshot_settled,
             phases=Phases(("content", "taken", "members"), group_create_boundaries), check=check_group_snapshots),
    StepSpec(facts=facts_of(StepName.DELETE_GROUP_SNAPSHOT), kind=GROUP_SNAPSHOT, resource=r.GROUP_SNAPSHOTS,
             action=DELETE, object_name=Names.group_snapshot, count=_groups, judge=group_snapshot_gone,
             skip=skip_groups_being_taken, gone=group_snapshot_gone, settled=group_snapshot_settled,
             recreated_by=StepName.CREATE_GROUP_SNAPSHOT,
             phases=Phases(("content", "group", "members"), group_delete_boundaries)),
)
