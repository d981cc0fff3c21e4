"""Orphaned snapshot contents: the one kind cleanup removes without a label, and how ownership is proven instead.

A snapshot deleted while the
snapshot-controller was binding it (an operator restart's redo, or a cleanup mid-createSnapshot, does that) can
go without its content, and the controller never deletes a content whose snapshot is missing: the content, and
the snapshot on the storage, would stay forever. A content carries no labels of ours (the controller creates
it), so ownership is proven by server-assigned uids instead: it is named ``snapcontent-<uid>`` after, and points
back at, a snapshot uid the run's label-selected watch saw go; a fresh read without the label confirms that
snapshot is gone (not merely unlabelled by someone who keeps it); it was made from a volume (not an imported
handle), with deletionPolicy Delete, and carries the controller's finalizer (so deleting it waits for the
storage). Cleanup then does what the controller does for a deleted snapshot: it sets
``snapshot.storage.kubernetes.io/volumesnapshot-being-deleted`` (a merge patch naming the uid seen: another uid
is refused, 422) and deletes the content (that uid as precondition); csi-snapshotter then deletes the snapshot on
the storage, once any CreateSnapshot call in flight has returned, and removes the finalizer.

Apart from ``cleanup.py`` because it changes with the snapshot-controller's and csi-snapshotter's protocol (their
names, annotations and finalizers), not with how cleanup deletes and waits for the run's labelled objects.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from csibench.engine.observed import Observed
from csibench.engine.observed_leftovers import ContentRef
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError

BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"  # external-snapshotter's own


async def _snapshot_still_there(client: KubeApi, namespace: str, ref: ContentRef) -> bool:
    """A fresh read, without the run's label: a snapshot that only lost the label is someone's now, not gone."""
    listing = await client.get(r.SNAPSHOTS.path(namespace), query={"fieldSelector": f"metadata.name={ref.snapshot}"})
    return any((item.get("metadata") or {}).get("uid") == ref.snapshot_uid for item in (listing or {}).get("items", []))


async def reclaim_orphaned_content(client: KubeApi, name: str, uid: str) -> bool:
    """Mark one orphaned content as its snapshot's deletion would have, and delete it, both only while its uid is
    ``uid`` (a merge patch naming another uid is refused, 422; the delete carries the uid as a precondition,
    409). True if it was there to delete."""
    path = r.SNAPSHOT_CONTENTS.path(name=name)
    patched = await client.merge_patch(path, {"metadata": {"uid": uid, "annotations": {BEING_DELETED: "yes"}}})
    return patched is not None and await client.delete(path, uid=uid)


@dataclass
class Reclaim:
    """Cleanup's reclaim of orphaned contents: each tried once, again after a transient failure."""

    client: KubeApi
    namespace: str
    retry_seconds: float  # after a transient failure (cleanup's REDELETE_SECONDS)
    retry_at: dict[str, float] = field(default_factory=dict)  # content uid -> when to try again (inf: never)
    reclaimed: list[str] = field(default_factory=list)
    error: str | None = None  # the first failure, as text (others are alike)

    async def __call__(self, observed: Observed) -> None:
        for name, ref in observed.orphaned_contents():
            if time.monotonic() < self.retry_at.get(ref.uid, 0.0):
                continue
            self.retry_at[ref.uid] = math.inf
            try:
                if await _snapshot_still_there(self.client, self.namespace, ref):
                    continue  # not gone: it lost the run's label, so it and its content are left alone
                if await reclaim_orphaned_content(self.client, name, ref.uid):
                    self.reclaimed.append(name)
            except ApiError as failure:
                if failure.status == 0 or failure.status == 429 or failure.status >= 500:
                    self.retry_at[ref.uid] = time.monotonic() + self.retry_seconds
                self.error = self.error or f"could not delete orphaned snapshot content {name}: {failure}"
