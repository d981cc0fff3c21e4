"""sharedVolume (``spec.shared``): the entry of the shared-volume step, whose parts are this package's other
modules (the probe the pods run, its logs read back into rows, the step that runs it): one ReadWriteMany claim
(the step's companion, made and deleted by the step itself) and ``pods`` probe pods mounting it.
"""

from __future__ import annotations

from pathlib import Path

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.engine import judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD
from csibench.engine.skips import skip_nothing
from csibench.engine.step import Companion, Manifest, NodesNeeded, StepContext, StepSpec
from csibench.engine.steps.shared import probe
from csibench.engine.steps.shared import step as shared
from csibench.engine.workload import workload_image
from csibench.kube import resources as r

MOUNT_PATH = "/shared"
PROBE_SOURCE = Path(probe.__file__).read_text(encoding="utf-8")  # run as python3 -c: the image needs no csibench


def build_probe_command(context: StepContext, index: int) -> list[str]:
    """python3 -c <the probe> and its options: integers of the validated spec and fixed paths, never free text."""
    data = context.spec.shared
    assert data is not None
    probe_seconds = shared.probe_timeout(shared.timeout_of(context))
    return ["python3", "-c", PROBE_SOURCE, f"--pod={index}", f"--pods={data.pods}", f"--root={MOUNT_PATH}",
            f"--files={data.files}", f"--poll-ms={data.pollMilliseconds}", f"--lock-rounds={data.lockRounds}",
            f"--small-files={data.smallFiles}", f"--file-bytes={data.fileBytes}",
            f"--list-files={data.listFiles}", f"--timeout={probe_seconds:.0f}"]


def _probe_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.shared
    assert data is not None, "the sharedVolume step runs only with spec.shared"
    mounts = [manifests.WorkloadMount("shared", MOUNT_PATH, context.names.shared_volume(0))]
    nodes = context.nodes
    return manifests.build_workload_pod(
        context.names.shared_pod(index), "probe", workload_image(data.image), build_probe_command(context, index),
        mounts, context.labels, data.resources, data.nodeSelector or spec.pod.nodeSelector,
        data.tolerations or spec.pod.tolerations, preferred_node=nodes[index % len(nodes)] if nodes else None)


def _shared_volume(context: StepContext, index: int) -> Manifest:
    data = context.spec.shared
    assert data is not None
    return manifests.build_pvc(context.names.shared_volume(index), context.spec, context.labels, size=data.size,
                               filesystem=True, access_modes=["ReadWriteMany"])


def _probe_pods(spec: BenchmarkRunSpec) -> int:
    return spec.shared.pods if spec.shared is not None else 0


ENTRIES = (
    StepSpec(facts=facts_of(StepName.SHARED_VOLUME), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.shared_pod, count=_probe_pods, judge=judges.pod_finished, skip=skip_nothing,
             terminal_warnings=judges.WORKLOAD_FAILED, manifest=_probe_pod, report_key="sharedPod",
             gone=judges.pod_gone_and_detached, measure=shared.measure, results=shared.RESULTS,
             companion=Companion(CLAIM, r.PVCS, Names.shared_volume, _shared_volume, "sharedVolume",
                                 judges.claim_and_volume_gone),
             places_pods=lambda spec: NodesNeeded(1)),
)
