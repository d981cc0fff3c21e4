"""Which watch lines can change what ``Observed`` keeps: the rest are passed over undecoded, in the watch thread.

Most events a run's watches carry change nothing a judge reads: a claim is MODIFIED three or four times on its
way to Bound (the provisioner's annotations, the binder's volumeName, then the phase), a PV when its phase moves
Pending -> Bound -> Released, a pod at every condition and container status. Decoding each one and handing it
to the event loop was most of the operator's CPU per object (issue 18). Each kind here has a *signature*: the
few raw bytes of a line that hold every field ``Observed`` takes from that kind (for a claim: its phase, its
volumeName, what an expansion waits for, and the run's own ``csibench.io/`` annotations, which a step may set).
The run's own kinds (claims, pods, snapshots, group snapshots; a group's member snapshots are snapshots) take theirs
from their field lists in ``kinds/``; PVs, snapshot contents and group snapshot contents have theirs here. A
MODIFIED line whose signature equals that of the last line delivered for the same object cannot change the run's
state, so it is skipped. ADDED and DELETED lines are always delivered.

Safety: a signature is compared with the last one *this filter delivered* (kept in the watch thread, in stream
order), never with the loop's state, which may lag; a relist resets it (the list's objects reach ``Observed``
without passing here). On a shared watch the filter sees only the lines some subscriber keeps: a line of an
object nobody kept before is compared with nothing and delivered; a PV's or content's signature holds its
reference's uid, so a namesake never looks like a repeat. A line whose name or signature cannot be read for
sure (an unexpected shape, a snapshot with an error) is always delivered. Deciding costs a few
regular-expression searches over the raw line, much less than decoding it and waking the loop.
"""

from __future__ import annotations

import re

from csibench.engine.kinds import claim, group_snapshot, pod, snapshot
from csibench.engine.kinds.fields import Signature, joined
from csibench.engine.observed import BEING_CREATED, CONTENT_FINALIZER

_MODIFIED = b'{"type":"MODIFIED"'
# Where an object's own name is. Built-in kinds are written in Go struct order: metadata, then its name first.
# Custom resources (snapshots, group snapshots, their contents) are written with every object's keys sorted, so
# metadata.name comes after labels and annotations (a label called "name" is common) and right before "namespace"
# (namespaced) or "resourceVersion" (cluster-scoped; an ownerReferences key in between means no match). A line
# where the pattern does not match exactly once is always delivered.
CORE_NAME = re.compile(rb'"metadata":\{"name":"([^"]+)"')
NAMESPACED_CUSTOM_NAME = re.compile(rb'"name":"([^"]+)","namespace":"')
CLUSTER_CUSTOM_NAME = re.compile(rb'"name":"([^"]+)","resourceVersion":"')
_CONTENT_FINALIZER = f'"{CONTENT_FINALIZER}"'.encode()
_BEING_CREATED = f'"{BEING_CREATED}"'.encode()
_GROUP_HANDLE = b'"volumeGroupSnapshotHandle":"'


def _ref(line: bytes, key: bytes) -> bytes | None:
    """The raw bytes of a flat object field such as ``"claimRef":{...}`` (no nested braces in an ObjectReference
    or a snapshot's reference); b"" when absent, None when it appears more than once."""
    start = line.find(key)
    if start < 0:
        return b""
    if line.find(key, start + 1) >= 0:
        return None
    end = line.find(b"}", start)
    return line[start:end] if end >= 0 else None


claim_signature = claim.SIGNATURE  # each derived from its kind's field list (kinds/)
pod_signature = pod.SIGNATURE
snapshot_signature = snapshot.SIGNATURE
group_snapshot_signature = group_snapshot.SIGNATURE


def pv_signature(line: bytes) -> bytes | None:
    return _ref(line, b'"claimRef":{')


def content_signature(line: bytes) -> bytes | None:
    """Its reference, whether the snapshot-controller's finalizer is on it yet and whether its CreateSnapshot
    call is still in flight (cleanup waits for both)."""
    return joined(_ref(line, b'"volumeSnapshotRef":{'), b"1" if _CONTENT_FINALIZER in line else b"0",
                   b"1" if _BEING_CREATED in line else b"0")


def group_content_signature(line: bytes) -> bytes | None:
    """Its reference (the group and its uid) and whether it carries the storage's handle yet (in its status: the
    run's dynamically provisioned contents name volume handles in their spec, not a group handle)."""
    return joined(_ref(line, b'"volumeGroupSnapshotRef":{'), b"1" if _GROUP_HANDLE in line else b"0")


class ChangeFilter:
    """A watch's ``keep``: False for a MODIFIED line that leaves its object's signature as last delivered."""

    def __init__(self, signature: Signature, name: re.Pattern[bytes] = CORE_NAME) -> None:
        self._signature = signature
        self._name = name
        self._last: dict[bytes, bytes] = {}  # object name -> signature of the last line delivered for it
        self.skipped = 0

    def reset(self) -> None:
        """A relist: the list's objects reach the run without passing here, so nothing is known any more."""
        self._last.clear()

    def __call__(self, line: bytes) -> bool:
        names = self._name.findall(line)
        if len(names) != 1:
            return True
        name = names[0]
        if line.startswith(b'{"type":"DELETED"'):
            self._last.pop(name, None)
            return True
        signature = self._signature(line)
        if signature is None:
            self._last.pop(name, None)
            return True
        if not line.startswith(_MODIFIED):
            self._last[name] = signature
            return True
        if self._last.get(name) == signature:
            self.skipped += 1
            return False
        self._last[name] = signature
        return True
