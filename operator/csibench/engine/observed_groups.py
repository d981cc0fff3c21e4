"""What relates the run's VolumeGroupSnapshots to the objects the snapshot-controller makes for them: the member
VolumeSnapshots (unlabelled, named snapshot-<hash>, found by their ownerReference), the members' contents (by the
group handle annotation, anywhere in the cluster), and the group contents. A part of ``Observed`` (a mixin: its
state lives on the same object, so judges read ``observed.members`` as they read ``observed.claims``).

Apart from ``observed.py`` because it changes with the VolumeGroupSnapshot API and the controller's way of naming
and owning what it makes for a group, which the run's own kinds and their volumes do not.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from csibench.engine.kinds import snapshot
from csibench.engine.kinds.group_snapshot import GROUP_SNAPSHOT
from csibench.engine.kinds.snapshot import SnapshotState
from csibench.kube.watch import WatchEvent

# On every content the snapshot-controller makes for a member of a group snapshot (and only there).
GROUP_HANDLE = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"
_GROUP_HANDLE = f'"{GROUP_HANDLE}"'.encode()
_GROUP_OWNER = b'"kind":"VolumeGroupSnapshot"'

Key = tuple[str, str]  # (kind, name) of one of the run's objects


class GroupRelations:
    """The members and contents of the run's group snapshots, as their watches report them."""

    namespace: str  # Observed's: the run's namespace
    ours: Callable[[str], bool]  # Observed's: a name of the run's
    _prefix_bytes: bytes  # Observed's: the run's prefix as a watch line quotes it

    def __init__(self) -> None:
        # A group's members: the controller's VolumeSnapshots owned by it (unlabelled, named snapshot-<hash>).
        self.members: dict[str, SnapshotState] = {}  # member snapshot -> its state
        self.member_group: dict[str, str] = {}  # member snapshot -> its group (kept after either is gone)
        # group name -> member snapshots ever seen owned by a group of that name (any uid: a namesake's members
        # linger while the controller deletes them, and a group is not gone while they do)
        self.group_members: dict[str, set[str]] = defaultdict(set)
        self.member_owner: dict[str, str] = {}  # member snapshot -> uid of the group that owns it
        # Existing contents of group members anywhere in the cluster, by the member snapshot they point at: a
        # member's content may be created before the member itself is seen, so they are all kept (small).
        self.member_contents: dict[str, str] = {}  # member snapshot name -> its content
        self._member_content_ref: dict[str, str] = {}  # existing member content -> member snapshot name
        self.group_contents: dict[str, str] = {}  # existing group content -> its group (by name)
        self.contents_of_group: dict[str, set[str]] = defaultdict(set)  # group name -> its existing group contents
        self._group_content_uid: dict[str, str] = {}  # existing group content -> uid of the group it points at
        # Existing group contents that carry the storage's handle: CreateVolumeGroupSnapshot returned and
        # csi-snapshotter wrote its answer (where the group snapshot steps' latency parts divide).
        self._taken_group_contents: set[str] = set()

    def mentions_ours_or_a_member(self, line: bytes) -> bool:
        """A snapshot content's line that can concern the run: one of its snapshots', or a group member's."""
        return self._prefix_bytes in line or _GROUP_HANDLE in line

    def owned_by_a_group(self, line: bytes) -> bool:
        """A VolumeSnapshot's line that can be a member of one of the run's group snapshots."""
        return _GROUP_OWNER in line and self._prefix_bytes in line

    def _on_members(self, event: WatchEvent) -> list[Key]:
        """A member snapshot of one of the run's groups: owned by a VolumeGroupSnapshot named as the run's. Kept
        under that name whatever the owner's uid (a deleted namesake's members linger, and the group is not gone
        while they do); the owner's uid says whose member it is when the group's readiness is judged."""
        meta = event.obj["metadata"]
        name = meta["name"]
        owner = next((ref for ref in meta.get("ownerReferences") or []
                      if ref.get("kind") == "VolumeGroupSnapshot" and self.ours(ref.get("name", ""))), None)
        if owner is None:
            return []
        group = owner["name"]
        self.member_owner[name] = owner.get("uid", "")  # its group's uid: a namesake's members are not its
        state = self.members.setdefault(name, SnapshotState())
        state.uid = meta.get("uid", state.uid)
        state.exists = event.type != "DELETED"
        state.gone_at = None if state.exists else event.at
        snapshot.update(state, event.obj)
        self.member_group[name] = group
        self.group_members[group].add(name)
        return [(GROUP_SNAPSHOT, group)]

    def _on_group_contents(self, event: WatchEvent) -> list[Key]:
        name = event.obj["metadata"]["name"]
        ref = (event.obj.get("spec") or {}).get("volumeGroupSnapshotRef") or {}
        if ref.get("namespace") != self.namespace or not self.ours(ref.get("name", "")):
            return []
        if event.type == "DELETED":
            self._forget_group_content(name)
        else:
            self.group_contents[name] = ref["name"]
            self.contents_of_group[ref["name"]].add(name)
            self._group_content_uid[name] = ref.get("uid", "")
            if (event.obj.get("status") or {}).get("volumeGroupSnapshotHandle"):
                self._taken_group_contents.add(name)
            else:  # csi-snapshotter clears it once DeleteVolumeGroupSnapshot returned
                self._taken_group_contents.discard(name)
        return [(GROUP_SNAPSHOT, ref["name"])]

    def group_content_taken(self, content: str) -> bool:
        """The group content exists and carries the storage's handle."""
        return content in self._taken_group_contents

    def _forget_group_content(self, name: str) -> str | None:
        group = self.group_contents.pop(name, None)
        self._group_content_uid.pop(name, None)
        self._taken_group_contents.discard(name)
        if group is not None:
            self.contents_of_group[group].discard(name)
        return group

    def _on_member_content(self, event: WatchEvent, name: str, member: str) -> list[Key]:
        if event.type == "DELETED":
            self._member_content_ref.pop(name, None)
            if self.member_contents.get(member) == name:
                del self.member_contents[member]
        else:
            self._member_content_ref[name] = member
            self.member_contents[member] = name
        group = self.member_group.get(member)
        return [(GROUP_SNAPSHOT, group)] if group is not None else []

    def _sync_groups(self, source: str, present: set[str], at: float) -> list[Key]:
        """After a relist of members, group contents or contents: what the list no longer has went meanwhile."""
        affected: list[Key] = []
        if source == "members":
            for name, member in self.members.items():
                if member.exists and name not in present:
                    member.exists, member.gone_at = False, at
                    affected.append((GROUP_SNAPSHOT, self.member_group[name]))
        elif source == "group_contents":
            for content in [c for c in self.group_contents if c not in present]:
                affected.append((GROUP_SNAPSHOT, self._forget_group_content(content) or ""))
        elif source == "contents":
            for content in [c for c in self._member_content_ref if c not in present]:
                snapshot_name = self._member_content_ref.pop(content)
                if self.member_contents.get(snapshot_name) == content:
                    del self.member_contents[snapshot_name]
                if snapshot_name in self.member_group:
                    affected.append((GROUP_SNAPSHOT, self.member_group[snapshot_name]))
        return affected
