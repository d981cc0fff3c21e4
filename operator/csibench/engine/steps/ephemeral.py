"""createEphemeral and deleteEphemeral (``spec.ephemeral``): pods with generic ephemeral volumes, made at once and
timed to Ready, then deleted and timed until their claims and volumes are gone.

A generic ephemeral volume's claim is made by the controller-manager's ephemeral-volume controller from the pod's
``volumeClaimTemplate``, named ``<pod>-<volume>`` and owned by the pod; the template carries the run's labels, so
the run watches, counts and cleans up those claims like its own (the controller, not the operator, creates them).
So createEphemeral's latency holds what a user's pod waits for: the claims made, provisioned (at once, or once the
scheduler picked a node on a WaitForFirstConsumer class), attached, staged, published, the container started.
deleteEphemeral's holds the rest of the volume's life: the pod gone, the garbage collector's delete of its claims,
the provisioner's DeleteVolume of their volumes.
"""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, StepName, VolumeMode
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import CREATE, DELETE
from csibench.engine.judges import Verdict
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD, Observed
from csibench.engine.skips import skip_never_seen, skip_nothing
from csibench.engine.step import Manifest, StepContext, StepSpec
from csibench.kube import resources as r


def build_ephemeral_volume(spec: BenchmarkRunSpec, labels: dict[str, str]) -> Manifest:
    """A generic ephemeral volume of the run's claim shape; its claim will carry the run's labels (pure)."""
    return {"ephemeral": {"volumeClaimTemplate": {"metadata": {"labels": dict(labels)},
                                                  "spec": manifests.claim_spec(spec)}}}


def _pod(context: StepContext, index: int) -> Manifest:
    spec, part = context.spec, context.spec.ephemeral
    assert part is not None, "createEphemeral runs only with spec.ephemeral"
    return manifests.build_bench_pod(context.names.ephemeral_pod(index),
                                     [build_ephemeral_volume(spec, context.labels)] * part.volumesPerPod, spec,
                                     context.labels, block=spec.volumeMode == VolumeMode.BLOCK)


def pod_and_claims_ready(observed: Observed, terminal: frozenset[str]) -> judges.Judge:
    """``pod_ready``; and a terminal Warning about one of the pod's claims after its submission (the
    controller-made claim's ProvisioningFailed) fails the pod, quoted with the claim's name: the Warning is the
    claim's, and without this the pod would wait out the step's timeout."""
    ready = judges.pod_ready(observed, terminal)

    def judge(name: str, submitted: float) -> Verdict | None:
        verdict = ready(name, submitted)
        state = observed.pods.get(name)
        if verdict is not None or state is None:
            return verdict
        for claim in state.claims:
            failed = judges.warning_verdict(observed, terminal, (CLAIM, claim), submitted)
            if failed is not None:
                return Verdict(False, failed.reason, f"claim {claim}: {failed.message}")
        return None
    return judge


def pod_claims_and_volumes_gone(observed: Observed, terminal: frozenset[str]) -> judges.Judge:
    """A pod with generic ephemeral volumes is deleted when it is gone and so are its claims (the garbage
    collector deletes them once their owner is gone) and their volumes (the provisioner's DeleteVolume): the
    ephemeral volume's life ends with its pod's."""
    def lingers(claim: str) -> bool:
        state = observed.claims.get(claim)
        return state is not None and (state.exists or (state.volume is not None and state.volume in observed.pv_claim))

    def unseen_pods_claims_linger(name: str) -> bool:
        """A pod the watches never saw (gone before an operator restart) may have left claims the garbage collector
        has yet to delete: those named after it (``<pod>-<volume>``)."""
        return any(lingers(claim) for claim in observed.claims if claim.startswith(f"{name}-"))
    return judges.pod_gone_and_released(observed, lambda state: any(lingers(claim) for claim in state.claims),
                                        unseen_pods_claims_linger)


def _pods(spec: BenchmarkRunSpec) -> int:
    return spec.ephemeral.pods if spec.ephemeral is not None else 0


ENTRIES = (
    StepSpec(facts=facts_of(StepName.CREATE_EPHEMERAL), kind=POD, resource=r.PODS, action=CREATE,
             object_name=Names.ephemeral_pod, count=_pods, judge=pod_and_claims_ready, skip=skip_nothing,
             terminal_warnings=judges.PUBLISH_FAILED | judges.PROVISIONING_FAILED, manifest=_pod,
             report_key="ephemeralPod",
             gone=pod_claims_and_volumes_gone),
    StepSpec(facts=facts_of(StepName.DELETE_EPHEMERAL), kind=POD, resource=r.PODS, action=DELETE,
             object_name=Names.ephemeral_pod, count=_pods, judge=pod_claims_and_volumes_gone,
             skip=skip_never_seen, gone=pod_claims_and_volumes_gone, recreated_by=StepName.CREATE_EPHEMERAL),
)
