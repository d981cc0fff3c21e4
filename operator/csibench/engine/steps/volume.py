"""createVolume and deleteVolume: the run's claims, made at once and timed to Bound (on a WaitForFirstConsumer
class, to stored: provisioning waits for publish), then removed and timed to their volumes gone.

With ``spec.groupSnapshot`` each claim carries its group's label, which the group snapshot selects claims by.
"""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import CREATE, DELETE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM
from csibench.engine.skips import skip_never_seen, skip_nothing
from csibench.engine.step import Manifest, StepContext, StepSpec
from csibench.kube import resources as r


# -- manifests of the creation steps ---------------------------------------------------------------------------
def _volume(context: StepContext, index: int) -> Manifest:
    """Claim i; with spec.groupSnapshot, labelled with its group (the group snapshot selects claims by it)."""
    labels = context.labels
    if context.spec.groupSnapshot is not None:
        group = index // context.spec.groupSnapshot.volumesPerGroup
        labels = {**labels, manifests.GROUP_LABEL: context.names.group_snapshot(group)}
    return manifests.build_pvc(context.names.volume(index), context.spec, labels)


def _volumes(spec: BenchmarkRunSpec) -> int:
    return spec.volumes


ENTRIES = (
    StepSpec(facts=facts_of(StepName.CREATE_VOLUME), kind=CLAIM, resource=r.PVCS, action=CREATE,
             object_name=Names.volume, count=_volumes, judge=judges.claim_bound, skip=skip_nothing,
             terminal_warnings=judges.PROVISIONING_FAILED, manifest=_volume, report_key="pvc",
             judge_wffc=judges.claim_seen, gone=judges.claim_and_volume_gone),
    StepSpec(facts=facts_of(StepName.DELETE_VOLUME), kind=CLAIM, resource=r.PVCS, action=DELETE,
             object_name=Names.volume, count=_volumes, judge=judges.claim_and_volume_gone, skip=skip_never_seen,
             gone=judges.claim_and_volume_gone, recreated_by=StepName.CREATE_VOLUME),
)
