"""cloneFromSnapshot and deleteClone: a claim restored from each snapshot, timed to Bound, then deleted and timed
to it and its volume gone. A clone requests the volumes' size after the run's expansion (a snapshot of an expanded
volume cannot be restored into a smaller claim).
"""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import CREATE, DELETE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM
from csibench.engine.skips import skip_if_prerequisite_failed, skip_never_seen
from csibench.engine.step import Manifest, StepContext, StepSpec
from csibench.kube import resources as r


def build_clone_pvc(name: str, snapshot: str, spec: BenchmarkRunSpec, labels: dict[str, str]) -> Manifest:
    """A claim restored from ``snapshot``, of the volumes' size after the run's expansion (a snapshot of an expanded
    volume cannot be restored into a smaller claim)."""
    claim = manifests.claim_spec(spec)
    claim["resources"] = {"requests": {"storage": spec.volume_size}}
    claim["dataSource"] = {"apiGroup": manifests.SNAPSHOT_API_GROUP, "kind": "VolumeSnapshot", "name": snapshot}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "labels": labels},
            "spec": claim}


def _clone(context: StepContext, index: int) -> Manifest:
    return build_clone_pvc(context.names.clone(index), context.names.snapshot(index), context.spec,
                                     context.labels)  # of spec.volume_size: the snapshot's size after expansion


ENTRIES = (
    StepSpec(facts=facts_of(StepName.CLONE_FROM_SNAPSHOT), kind=CLAIM, resource=r.PVCS, action=CREATE,
             object_name=Names.clone, count=lambda spec: spec.volumes, judge=judges.claim_bound,
             skip=skip_if_prerequisite_failed, terminal_warnings=judges.PROVISIONING_FAILED, manifest=_clone,
             report_key="clone", gone=judges.claim_and_volume_gone),
    StepSpec(facts=facts_of(StepName.DELETE_CLONE), kind=CLAIM, resource=r.PVCS, action=DELETE,
             object_name=Names.clone, count=lambda spec: spec.volumes, judge=judges.claim_and_volume_gone,
             skip=skip_never_seen, gone=judges.claim_and_volume_gone, recreated_by=StepName.CLONE_FROM_SNAPSHOT),
)
