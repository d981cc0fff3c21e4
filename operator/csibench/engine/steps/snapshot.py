"""createSnapshot and deleteSnapshot: a VolumeSnapshot of each volume (of ``volumeSnapshotClassName``), timed to
readyToUse, then deleted and timed to it and its content gone. A restore deletes a snapshot only once it settled
(ready, failed for good or gone), so no content is left that nothing would delete.
"""

from __future__ import annotations

from csibench.api.models import StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import CREATE, DELETE
from csibench.engine.judges import DONE, Judge, Verdict
from csibench.engine.naming import Names
from csibench.engine.observed import SNAPSHOT, Observed
from csibench.engine.retries import is_transient
from csibench.engine.skips import skip_if_prerequisite_failed, skip_never_seen
from csibench.engine.step import Manifest, StepContext, StepSpec
from csibench.kube import resources as r


def build_snapshot(name: str, claim: str, snapshot_class: str, labels: dict[str, str]) -> Manifest:
    return {"apiVersion": f"{manifests.SNAPSHOT_API_GROUP}/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": labels},
            "spec": {"volumeSnapshotClassName": snapshot_class, "source": {"persistentVolumeClaimName": claim}}}


def _snapshot(context: StepContext, index: int) -> Manifest:
    assert context.spec.volumeSnapshotClassName is not None
    return build_snapshot(context.names.snapshot(index), context.names.volume(index),
                                    context.spec.volumeSnapshotClassName, context.labels)


def snapshot_ready(observed: Observed, terminal: frozenset[str]) -> Judge:
    return judges.ready_with(observed, terminal, SNAPSHOT, observed.snapshots.get, lambda snapshot: snapshot.ready,
                       lambda snapshot: Verdict(False, "SnapshotError", snapshot.error)
                       if snapshot.error and not is_transient(snapshot.error) else None)


def snapshot_settled(observed: Observed, terminal: frozenset[str]) -> Judge:
    """Restore: a snapshot is deleted only once its creation is over: ready, failed for good (not an error
    csi-snapshotter retries) or gone. Deleted while the driver is still taking it, the snapshot-controller may
    create a content nothing would delete; and deleted while csi-snapshotter still marks its content as being
    created (the bound finalizer already on it), its deletion waited for the sidecar's next resync, minutes (seen
    on the local cluster: two snapshots of twenty stuck for four minutes). A snapshot that is never ready (a
    driver that uploads for longer than the step's timeout) is deleted at that timeout all the same."""
    def judge(name: str, submitted: float) -> Verdict | None:
        state = observed.snapshots.get(name)
        settled = (state is None or not state.exists or state.ready
                   or (state.error is not None and not is_transient(state.error)))
        return DONE if settled else None
    return judge


def snapshot_and_content_gone(observed: Observed, terminal: frozenset[str]) -> Judge:
    return judges.gone_with(observed.snapshots.get,
                      lambda snapshot: bool(snapshot.content and snapshot.content in observed.contents))


ENTRIES = (
    StepSpec(facts=facts_of(StepName.CREATE_SNAPSHOT), kind=SNAPSHOT, resource=r.SNAPSHOTS, action=CREATE,
             object_name=Names.snapshot, count=lambda spec: spec.volumes, judge=snapshot_ready,
             skip=skip_if_prerequisite_failed,
             terminal_warnings=frozenset({"SnapshotCreationFailed", "SnapshotContentCreationFailed"}),
             manifest=_snapshot, report_key="volumeSnapshot", gone=snapshot_and_content_gone,
             settled=snapshot_settled),
    StepSpec(facts=facts_of(StepName.DELETE_SNAPSHOT), kind=SNAPSHOT, resource=r.SNAPSHOTS, action=DELETE,
             object_name=Names.snapshot, count=lambda spec: spec.volumes, judge=snapshot_and_content_gone,
             skip=skip_never_seen, gone=snapshot_and_content_gone, recreated_by=StepName.CREATE_SNAPSHOT),
)
