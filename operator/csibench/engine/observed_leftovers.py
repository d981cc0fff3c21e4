"""What of the run's objects still exists, as cleanup counts and names it: PVs and snapshot contents bound to the
run's objects (by uid: a namesake's are not the run's), the group snapshots' members and contents, and the
snapshot contents left orphaned that only the run would ever remove. A part of ``Observed`` (a mixin: it reads the
state the watches keep there).

Apart from ``observed.py`` because it changes with what cleanup must prove gone (``cleanup.remaining`` counts
these, ``left`` names them), not with how a watch event updates the run's view.
"""

from __future__ import annotations

from dataclasses import dataclass

from csibench.engine.kinds.claim import ClaimState
from csibench.engine.kinds.group_snapshot import GroupSnapshotState
from csibench.engine.kinds.pod import PodState
from csibench.engine.kinds.snapshot import SNAPSHOT, SnapshotState

Key = tuple[str, str]  # (kind, name) of one of the run's objects


@dataclass(frozen=True)
class ContentRef:
    """What a snapshot content that points at one of the run's snapshots says of itself."""

    snapshot_uid: str
    uid: str
    # Named snapcontent-<snapshot uid> and made from a volume: the snapshot-controller created it for that snapshot
    # (a pre-provisioned content names a snapshot handle instead, and a name of its own).
    dynamic: bool
    delete_policy: bool  # deletionPolicy Delete: removing it removes the snapshot on the storage too
    # The snapshot-controller's finalizer is on it: deleting it now waits for csi-snapshotter to delete the
    # snapshot on the storage (without it, the object would go at once and the storage's snapshot would stay).
    protected: bool
    creating: bool  # csi-snapshotter's CreateSnapshot call for it is still in flight (BEING_CREATED is on it)
    snapshot: str  # the snapshot's name, for the fresh read that proves it gone


class Leftovers:
    """Counts and names of the run's objects that exist, read from the state ``Observed`` keeps."""

    claims: dict[str, ClaimState]
    pods: dict[str, PodState]
    snapshots: dict[str, SnapshotState]
    groups: dict[str, GroupSnapshotState]
    members: dict[str, SnapshotState]
    member_group: dict[str, str]
    member_contents: dict[str, str]
    _by_uid: dict[str, Key]
    _pv_claim_uid: dict[str, str]
    _content_refs: dict[str, ContentRef]
    _group_content_uid: dict[str, str]
    # A cleanup resumed by a restarted operator watches afresh: the claims and snapshots deleted before the restart
    # are never seen, so a PV or content naming one of the run's (its namespace, its prefix: the run's uid) is
    # taken as the run's even though its uid was not seen. Counting only: nothing is deleted on that ground.
    adopts_unseen: bool = False

    def _owns(self, uid: str) -> bool:
        return uid in self._by_uid or self.adopts_unseen

    def owned_volumes(self) -> int:
        """PVs present that are bound to one of the run's claims (by uid: a namesake's PV is not the run's)."""
        return sum(1 for uid in self._pv_claim_uid.values() if self._owns(uid))

    def owned_contents(self) -> int:
        """Snapshot contents present that belong to one of the run's snapshots (by uid)."""
        return sum(1 for ref in self._content_refs.values() if self._owns(ref.snapshot_uid))

    def orphaned_contents(self) -> list[tuple[str, ContentRef]]:
        """Contents the snapshot-controller created for one of the run's snapshots that the run's watch saw go
        while they stayed, once the controller's finalizer is on them. A snapshot deleted while it was being
        bound can go without its content, and the controller never deletes a content whose snapshot is
        missing (it might be an import), so nothing but the run would ever remove it. The label-selected
        watch also says DELETED when a snapshot loses the run's label: the caller reads it again first. A content
        whose CreateSnapshot call is still in flight waits for the answer: deleting it then is not acted on until
        csi-snapshotter has it, and the array's snapshot must exist before it can be deleted."""
        orphans = []
        for name, ref in self._content_refs.items():
            key = self._by_uid.get(ref.snapshot_uid)
            if (key is None or key[0] != SNAPSHOT or ref.creating
                    or not (ref.dynamic and ref.delete_policy and ref.protected)):
                continue
            state = self.snapshots.get(key[1])
            if state is None or not state.exists or state.uid != ref.snapshot_uid:
                orphans.append((name, ref))
        return orphans

    def owned_group_contents(self) -> int:
        """Group snapshot contents present that belong to one of the run's group snapshots (by uid)."""
        return sum(1 for uid in self._group_content_uid.values() if uid in self._by_uid)

    def storage_names(self) -> set[str]:
        """The names the storage knows the run's PVs and contents still present by (the CSI create names: a PV's
        own name, ``snapshot-<snapshot uid>`` for a content the snapshot-controller made): what an array may still
        hold without having leaked it."""
        return ({pv for pv, uid in self._pv_claim_uid.items() if self._owns(uid)}
                | {f"snapshot-{ref.snapshot_uid}" for ref in self._content_refs.values()
                   if self._owns(ref.snapshot_uid)})

    def members_left(self) -> int:
        """Member snapshots of the run's groups that exist."""
        return sum(1 for member in self.members.values() if member.exists)

    def member_contents_left(self) -> int:
        """Contents of the run's groups' member snapshots that exist."""
        return sum(1 for member in self.member_contents if member in self.member_group)

    def left(self) -> dict[str, list[str]]:
        """Cleanup's leftovers by name, per plural (the member snapshots in the run's namespace; PVs and contents
        cluster-scoped): the same objects ``cleanup.remaining`` counts, so that what is left can be named."""
        groups_content = [name for name, uid in self._group_content_uid.items() if uid in self._by_uid]
        return {
            "pods": sorted(name for name, state in self.pods.items() if state.exists),
            "volumesnapshots": sorted(name for name, state in self.snapshots.items() if state.exists)
            + sorted(name for name, member in self.members.items() if member.exists),
            "persistentvolumeclaims": sorted(name for name, state in self.claims.items() if state.exists),
            "volumegroupsnapshots": sorted(name for name, state in self.groups.items() if state.exists),
            "persistentvolumes": sorted(pv for pv, uid in self._pv_claim_uid.items() if self._owns(uid)),
            "volumesnapshotcontents": sorted(name for name, ref in self._content_refs.items()
                                             if self._owns(ref.snapshot_uid))
            + sorted(content for member, content in self.member_contents.items() if member in self.member_group),
            "volumegroupsnapshotcontents": sorted(groups_content),
        }
