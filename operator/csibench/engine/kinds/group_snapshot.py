"""A VolumeGroupSnapshot the run created: whether it is ready to use, the group content bound to it, its error,
whether the snapshot-controller's bound finalizer is on it, and how many members its group has (the run's
annotation, read once: the judge waits for that many member snapshots).

Its member VolumeSnapshots are the snapshot-controller's (named ``snapshot-<hash>``, unlabelled, owned by the group
through an ownerReference): ``Observed`` follows them as ``SnapshotState`` under the group, not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from csibench.engine.kinds.fields import Field, one, signature_of

GROUP_SNAPSHOT = "groupSnapshot"
MEMBERS = "csibench.io/members"  # the run's annotation: how many claims the group selects
BOUND_PROTECTION = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection"  # the controller's
_READY_TO_USE = re.compile(rb'"readyToUse":(true|false)')
_BOUND_CONTENT = re.compile(rb'"boundVolumeGroupSnapshotContentName":"([^"]*)"')
_BOUND_PROTECTION = re.compile(rb'"' + re.escape(BOUND_PROTECTION.encode()) + rb'"')


def _error(line: bytes) -> bytes | None:
    return None if b'"error":' in line else b""  # its message is part of the state: always decode


FIELDS = (Field("ready", one(_READY_TO_USE)), Field("content", one(_BOUND_CONTENT)), Field("error", _error),
          Field("protected", one(_BOUND_PROTECTION)), Field("members_expected", None))
SIGNATURE = signature_of(FIELDS)


@dataclass
class GroupSnapshotState:
    uid: str = ""
    ready: bool = False
    content: str | None = None  # its VolumeGroupSnapshotContent
    error: str | None = None
    protected: bool = False  # the bound finalizer is on: deleting it deletes its content and members too
    members_expected: int = 0  # 0: not said (a group the run did not annotate): any member count will do
    exists: bool = True
    gone_at: float | None = None


def update(state: GroupSnapshotState, obj: dict[str, Any]) -> None:
    status = obj.get("status") or {}
    metadata = obj.get("metadata") or {}
    state.ready = bool(status.get("readyToUse"))
    state.content = status.get("boundVolumeGroupSnapshotContentName") or state.content
    error = status.get("error") or {}
    state.error = error.get("message") if error else None
    state.protected = BOUND_PROTECTION in (metadata.get("finalizers") or [])
    if not state.members_expected:
        try:
            state.members_expected = max(0, int((metadata.get("annotations") or {}).get(MEMBERS, "0")))
        except ValueError:
            state.members_expected = 0
