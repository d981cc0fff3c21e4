"""churn (``spec.churn``): the entry of the churn step, whose parts are this package's other modules. Its objects
are the churn's claims (``-u``); its companion the pods that mount them, one each (``-t``), made and deleted by the
step itself and deleted first by a restore (they hold the claims)."""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import WFFC, facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD
from csibench.engine.skips import skip_nothing
from csibench.engine.step import Companion, Manifest, StepContext, StepSpec
from csibench.engine.steps.churn import waves
from csibench.engine.steps.churn.table import RESULTS
from csibench.kube import resources as r


def _claim(context: StepContext, index: int) -> Manifest:
    return manifests.build_pvc(context.names.churn_volume(index), context.spec, context.labels)


def _pod(context: StepContext, index: int) -> Manifest:
    spec = context.spec
    return manifests.build_pod(context.names.churn_pod(index), [context.names.churn_volume(index)], spec,
                               context.labels, block=spec.volumeMode.value == "Block")


def _volumes(spec: BenchmarkRunSpec) -> int:
    return spec.churn.volumes if spec.churn is not None else 0


def _note(context: StepContext) -> str:
    churn = context.spec.churn
    assert churn is not None
    said = (f"a wave of {churn.waveSize} every {churn.everySeconds} s for {churn.durationSeconds} s "
            f"(target {churn.waveSize / churn.everySeconds:.3g} vol/s), at most {churn.maxWavesInFlight} at once; "
            "the step's latency is each volume's whole cycle, create to deleted")
    if context.wffc:
        said += f"; {WFFC}: a claim's create ends when it is stored, its provisioning is in publish"
    return said


ENTRIES = (
    StepSpec(facts=facts_of(StepName.CHURN), kind=CLAIM, resource=r.PVCS, action=MEASURE,
             object_name=Names.churn_volume, count=_volumes, judge=judges.claim_bound, skip=skip_nothing,
             terminal_warnings=judges.PROVISIONING_FAILED, manifest=_claim, report_key="churnClaim",
             judge_wffc=judges.claim_seen, gone=judges.claim_and_volume_gone, measure=waves.measure,
             results=RESULTS, note=_note,
             companion=Companion(POD, r.PODS, Names.churn_pod, _pod, "churnPod", judges.pod_gone_and_detached,
                                 count=_volumes, holds_objects=True)),
)
