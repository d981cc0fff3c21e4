"""modifyVolume (``spec.modify``): the entry of the class-change step, whose parts are this package's other
modules (fio's command and log, the step that measures): every bound claim of the run patched to the new
VolumeAttributesClass, and fio pods on those claims before and after (the step's companions, made and deleted by
the step itself, two per volume: ``i`` before, ``volumes + i`` after).
"""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, ConditionReason, StepName
from csibench.api.steps import facts_of
from csibench.api.validation import parse_quantity
from csibench.engine import judges, manifests
from csibench.engine.actions import Patch
from csibench.engine.checks import PlanCheck, check_class_driver
from csibench.engine.errors import PlanError
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD
from csibench.engine.skips import skip_claims_not_bound
from csibench.engine.step import Companion, Manifest, StepContext, StepSpec
from csibench.engine.steps.modify import fio
from csibench.engine.steps.modify import step as modify
from csibench.engine.workload import workload_image
from csibench.kube import resources as r


def _new_class(context: StepContext, index: int) -> Manifest:
    """The PATCH of claim ``index``: its spec.volumeAttributesClassName, and the class asked for as an annotation
    (the judge reads it from the claim, so an event that carries it is one after the PATCH, and a restart's judge
    needs nothing else)."""
    target = modify.target_of(context)
    return {"metadata": {"annotations": {modify.MODIFY_TO: target}}, "spec": {"volumeAttributesClassName": target}}


def build_fio_pod(context: StepContext, index: int) -> Manifest:
    """fio pod ``index`` (before: ``i``, after: ``volumes + i``) on the run's volume ``index mod volumes``."""
    spec, data = context.spec, context.spec.modify
    assert data is not None, "the modifyVolume step runs only with spec.modify"
    claim = context.names.volume(index % spec.volumes)
    mounts = [manifests.WorkloadMount("data", fio.MOUNT_PATH, claim)]
    return manifests.build_workload_pod(
        context.names.modify_pod(index), "fio", workload_image(None),
        fio.build_command(data.fioSeconds, int(parse_quantity(data.fioSize))), mounts, context.labels,
        spec.pod.resources, spec.pod.nodeSelector, spec.pod.tolerations)


async def check_attributes_class(check: PlanCheck) -> None:
    """The class the volumes move to exists and is the StorageClass's driver's: otherwise the resizer would
    leave every claim Pending, which only the step's timeout would end."""
    spec = check.spec
    assert spec.modify is not None
    name = spec.modify.volumeAttributesClassName
    found = await check.client.get(r.VOLUME_ATTRIBUTES_CLASSES.path(name=name))
    if found is None:
        raise PlanError(ConditionReason.VOLUME_ATTRIBUTES_CLASS_NOT_FOUND, f"VolumeAttributesClass {name!r} does not "
                        "exist")
    check_class_driver("VolumeAttributesClass", name, {"driver": found.get("driverName")}, spec,
                       check.storage_class, "the resizer of the class's driver would never apply it")


def _fio_pods(spec: BenchmarkRunSpec) -> int:
    return 2 * spec.volumes if spec.modify is not None and spec.modify.fioSeconds > 0 else 0


ENTRIES = (
    StepSpec(facts=facts_of(StepName.MODIFY_VOLUME), kind=CLAIM, resource=r.PVCS, action=Patch(_new_class),
             object_name=Names.volume, count=lambda spec: spec.volumes, judge=modify.modified,
             skip=skip_claims_not_bound, gone=judges.claim_and_volume_gone,
             recreated_by="createVolume", measure=modify.measure, results=modify.RESULTS,
             companion=Companion(POD, r.PODS, Names.modify_pod, build_fio_pod, "modifyFioPod",
                                 judges.pod_gone_and_detached, count=_fio_pods, holds_objects=True),
             check=check_attributes_class),
)
