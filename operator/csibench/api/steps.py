"""What each step is, as facts every layer may read: its name and order (``StepName``, which the CRD's step enum
is), title and unit, what it requires, which part of the spec enables it, whether it needs a snapshot class,
whether its numbers are rows of a table of its own, which CSI components serve it with how many API requests per
object, and its timeout's description (``models.Timeouts`` has one field per step, generated from these facts) —
pure data, no behaviour.

The engine's step modules (``engine/steps/``, collected by ``engine/catalog.py``) add how a step acts (manifests,
judges, skip and restore rules) to these facts; the preflight's client-throttling estimate and the reports
(titles, units, which steps have a table of their own) read them here, so neither imports the engine. A step a
newer operator ran, unknown here, keeps its name in reports (``title_and_unit``).

Requests per object are the writes each component makes per object at least (external-provisioner: the PV and
two events; external-attacher: finalizers and the VolumeAttachment status; the controller-manager's PV binder:
claim and PV, each object and status); the snapshot-controller's and csi-resizer's were measured on the local
cluster (snapshot-controller v8.7.0: 200 snapshots took 358 s at qps 5, about 9 requests each; deletions about 4;
external-resizer v2.3.0: 200 expansions took 119 s at qps 5 burst 10, so at most 3 requests each: the claim's
status when it starts, the PV's capacity, the claim's status when it ends; its events do not wait on that limit).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class StepName(StrEnum):
    """The steps, in the order they run: the CSI volume lifecycle, and the data path where volumes exist and no
    publish pod holds them (so snapshots and clones then copy volumes that hold data)."""

    CREATE_VOLUME = "createVolume"
    PUBLISH = "publish"
    MOVE_VOLUME = "moveVolume"  # spec.move: publish pods made again on another node, their volumes following
    EXPAND_VOLUME = "expandVolume"  # spec.expand: online while publish's pods mount the volumes, else offline
    UNPUBLISH = "unpublish"
    MODIFY_VOLUME = "modifyVolume"  # spec.modify: every volume moved to another VolumeAttributesClass
    DENSITY = "density"  # not a lifecycle step: spec.density's ramp of volumes per node (publish/unpublish per level)
    DATA_PATH = "dataPath"  # not a lifecycle step: fio on the run's volumes (spec.dataPath), after unpublish
    DATABASE = "database"  # not a lifecycle step: PostgreSQL + pgbench on a volume of its own (spec.database)
    SHARED_VOLUME = "sharedVolume"  # not a lifecycle step: one ReadWriteMany volume, pods on several nodes
    CREATE_SNAPSHOT = "createSnapshot"
    CREATE_GROUP_SNAPSHOT = "createGroupSnapshot"  # spec.groupSnapshot: one VolumeGroupSnapshot per group of volumes
    CLONE_FROM_SNAPSHOT = "cloneFromSnapshot"
    VERIFY_CLONE = "verifyClone"  # spec.dataPath.verify: each clone's data against its source's checksums
    DELETE_CLONE = "deleteClone"
    DELETE_SNAPSHOT = "deleteSnapshot"
    DELETE_GROUP_SNAPSHOT = "deleteGroupSnapshot"
    DELETE_VOLUME = "deleteVolume"
    CREATE_EPHEMERAL = "createEphemeral"  # spec.ephemeral: pods with generic ephemeral volumes, to Ready
    DELETE_EPHEMERAL = "deleteEphemeral"  # those pods deleted, until their claims and volumes are gone
    CHURN = "churn"  # spec.churn: waves of volumes through the lifecycle for a duration, one row per window


WFFC = "WaitForFirstConsumer"
PROVISIONER = "csi-provisioner"
ATTACHER = "csi-attacher"
SNAPSHOTTER = "csi-snapshotter"
RESIZER = "csi-resizer"
SNAPSHOT_CONTROLLER = "snapshot-controller"
CONTROLLER_MANAGER = "kube-controller-manager"


@dataclass(frozen=True)
class StepFacts:
    name: str  # a StepName (a step registered only in a test may have another)
    title: str  # in reports: "Create Volume"
    unit: str  # in reports: "vol" (throughput reads "1.59 vol/s")
    requires: str | None = None  # the step it depends on (object i of it, or all of it)
    # The part of the spec that enables it: "move" (an object, set or not) or "dataPath.verify" (a switch inside a
    # part). The plan, admission's reading of it (runs_step, the CEL) and the rule that spec.steps lists the step
    # exactly when its part is set are all derived from this (api/enabling.py).
    spec_part: str | None = None
    needs_snapshot_class: bool = False
    needs_group_snapshots: bool = False  # works on VolumeGroupSnapshots (spec.groupSnapshot names their class)
    own_table: bool = False  # its numbers are the rows of a table of its own; its pods' rate and latency say nothing
    requests_per_object: Mapping[str, int] = field(default_factory=dict)  # CSI component -> API requests per object
    note_wffc: str | None = None  # how to read its numbers on a WaitForFirstConsumer class
    timeout_note: str | None = None  # spec.timeouts.<step>'s description, when not "Timeout of <step>, in seconds."


_FACTS = (
    StepFacts(StepName.CREATE_VOLUME, "Create Volume", "vol",
              requests_per_object={PROVISIONER: 3, CONTROLLER_MANAGER: 4},
              note_wffc=f"{WFFC}: claims are provisioned when their pod is scheduled, so this step times API "
                        "submission only; provisioning time is inside publish"),
    StepFacts(StepName.PUBLISH, "Publish (Attach)", "pod", requires=StepName.CREATE_VOLUME,
              requests_per_object={ATTACHER: 3, CONTROLLER_MANAGER: 1},
              note_wffc=f"{WFFC}: includes provisioning of each pod's volumes"),
    StepFacts(StepName.MOVE_VOLUME, "Move Volume", "pod", requires=StepName.PUBLISH,
              spec_part="move",
              requests_per_object={ATTACHER: 5, CONTROLLER_MANAGER: 2},
              timeout_note="Timeout of moveVolume (every moved pod Ready on its new node), in seconds."),
    StepFacts(StepName.EXPAND_VOLUME, "Expand Volume", "vol", requires=StepName.CREATE_VOLUME,
              spec_part="expand",
              requests_per_object={RESIZER: 3},
              timeout_note="Timeout of expandVolume (every claim at its new capacity, the node's half included), "
                           "in seconds."),
    StepFacts(StepName.UNPUBLISH, "Unpublish (Detach)", "pod", requires=StepName.PUBLISH,
              requests_per_object={ATTACHER: 2, CONTROLLER_MANAGER: 1}),
    StepFacts(StepName.MODIFY_VOLUME, "Modify Volume (attributes class)", "vol", requires=StepName.CREATE_VOLUME,
              spec_part="modify", requests_per_object={RESIZER: 3},
              timeout_note="Timeout of modifyVolume (every volume's new VolumeAttributesClass in effect), in seconds; "
                           "each fio round before and after it has this long too, plus fioSeconds."),
    StepFacts(StepName.DENSITY, "Density (volumes per node)", "pod", requires=StepName.CREATE_VOLUME,
              spec_part="density",
              own_table=True, requests_per_object={ATTACHER: 5, CONTROLLER_MANAGER: 2},
              timeout_note="Timeout of one density level (its pods Ready, or gone and detached), in seconds."),
    StepFacts(StepName.DATA_PATH, "Data Path (fio)", "pod", requires=StepName.CREATE_VOLUME, own_table=True,
              spec_part="dataPath",
              timeout_note="Timeout of one data-path workload (its pods' run), in seconds; default: ramp + runtime "
                           "+ 300."),
    StepFacts(StepName.DATABASE, "Database (pgbench)", "pod", own_table=True,
              spec_part="database",
              timeout_note="Timeout of the whole database step, in seconds; default: the runs' durations and "
                           "pauses, plus 300 + 1 per scale unit for each initialization, plus 300."),
    StepFacts(StepName.SHARED_VOLUME, "Shared Volume", "pod", own_table=True, spec_part="shared",
              timeout_note="Timeout of the whole sharedVolume step (claim bound, every probe pod done, pods and "
                           "claim gone), in seconds; default: 600, plus 1 per 1,000 listFiles."),
    StepFacts(StepName.CREATE_SNAPSHOT, "Create Snapshot", "snap", requires=StepName.CREATE_VOLUME,
              needs_snapshot_class=True, requests_per_object={SNAPSHOTTER: 2, SNAPSHOT_CONTROLLER: 9}),
    StepFacts(StepName.CREATE_GROUP_SNAPSHOT, "Create Group Snapshot", "group", requires=StepName.CREATE_VOLUME,
              spec_part="groupSnapshot",
              needs_group_snapshots=True,
              timeout_note="Timeout of createGroupSnapshot (every group ready to use, each member snapshot too), in "
                           "seconds."),
    StepFacts(StepName.CLONE_FROM_SNAPSHOT, "Clone from Snapshot", "vol", requires=StepName.CREATE_SNAPSHOT,
              needs_snapshot_class=True, requests_per_object={PROVISIONER: 3, CONTROLLER_MANAGER: 4}),
    StepFacts(StepName.VERIFY_CLONE, "Verify Clone", "clone", requires=StepName.CLONE_FROM_SNAPSHOT,
              spec_part="dataPath.verify",
              needs_snapshot_class=True,
              timeout_note="Timeout of verifyClone (every clone's files read and checksummed by its pod), in "
                           "seconds."),
    StepFacts(StepName.DELETE_CLONE, "Delete Clone", "vol", requires=StepName.CLONE_FROM_SNAPSHOT,
              needs_snapshot_class=True, requests_per_object={PROVISIONER: 2}),
    StepFacts(StepName.DELETE_SNAPSHOT, "Delete Snapshot", "snap", requires=StepName.CREATE_SNAPSHOT,
              needs_snapshot_class=True, requests_per_object={SNAPSHOTTER: 2, SNAPSHOT_CONTROLLER: 4}),
    StepFacts(StepName.DELETE_GROUP_SNAPSHOT, "Delete Group Snapshot", "group",
              spec_part="groupSnapshot",
              requires=StepName.CREATE_GROUP_SNAPSHOT, needs_group_snapshots=True,
              timeout_note="Timeout of deleteGroupSnapshot (every group, its content, member snapshots and their "
                           "contents gone), in seconds."),
    StepFacts(StepName.DELETE_VOLUME, "Delete Volume", "vol", requires=StepName.CREATE_VOLUME,
              requests_per_object={PROVISIONER: 2}),
    StepFacts(StepName.CREATE_EPHEMERAL, "Create Ephemeral (pod with volumes)", "pod", spec_part="ephemeral",
              requests_per_object={PROVISIONER: 3, ATTACHER: 3, CONTROLLER_MANAGER: 6},
              note_wffc=f"{WFFC}: includes provisioning of each pod's volumes, which waits for the scheduler",
              timeout_note="Timeout of createEphemeral (every pod Ready with its ephemeral volumes), in seconds."),
    StepFacts(StepName.DELETE_EPHEMERAL, "Delete Ephemeral (pod with volumes)", "pod",
              requires=StepName.CREATE_EPHEMERAL, spec_part="ephemeral",
              requests_per_object={PROVISIONER: 2, ATTACHER: 2, CONTROLLER_MANAGER: 3},
              timeout_note="Timeout of deleteEphemeral (every pod gone, its claims and their volumes too), in "
                           "seconds."),
    StepFacts(StepName.CHURN, "Churn (waves over time)", "vol", own_table=True, spec_part="churn",
              requests_per_object={PROVISIONER: 5, ATTACHER: 5, CONTROLLER_MANAGER: 8},
              timeout_note="Timeout of one phase of one churn wave (its claims Bound, its pods Ready, its pods gone "
                           "and detached, or its claims and volumes gone), in seconds."),
)
STEP_FACTS: dict[str, StepFacts] = {str(facts.name): facts for facts in _FACTS}  # in lifecycle order


def facts_of(name: str) -> StepFacts:
    """A known step's facts; an unknown name is an error, never a fall-through."""
    try:
        return STEP_FACTS[name]
    except KeyError:
        raise KeyError(f"step {name!r} is not in the step catalog") from None


def title_and_unit(name: str) -> tuple[str, str]:
    """For reports: a known step's title and unit; a step a newer operator ran keeps its name."""
    facts = STEP_FACTS.get(name)
    return (facts.title, facts.unit) if facts is not None else (name, "obj")


def has_own_table(name: str) -> bool:
    """For reports: the step's numbers are the rows of a table of its own (the data path's workloads, the
    database's runs): only its wall time belongs in the step table."""
    facts = STEP_FACTS.get(name)
    return facts is not None and facts.own_table


def requests_per_object_by_component() -> dict[str, dict[str, int]]:
    """component -> {step: API requests per object}, steps in lifecycle order (the preflight's table)."""
    table: dict[str, dict[str, int]] = {}
    for facts in STEP_FACTS.values():
        for component, requests in facts.requests_per_object.items():
            table.setdefault(component, {})[facts.name] = requests
    return table
