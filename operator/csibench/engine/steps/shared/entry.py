"""sharedVolume (``spec.shared``): the entry of the shared-volume step, whose parts are this package's other
modules (the probe the pods run, its logs read back into rows, the step that runs it): one ReadWriteMany claim
(the step's companion, made and deleted by the step itself) and ``pods`` probe pods mounting it.
"""

from __future__ import annotations

from pathlib import Path

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.api.validation import parse_quantity
from csibench.engine import judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD
from csibench.engine.skips import skip_nothing
from csibench.engine.step import Companion, Manifest, StepContext, StepSpec
from csibench.engine.steps.shared import probe
from csibench.engine.steps.shared import step as shared
from csibench.engine.workload import workload_image
from csibench.kube import resources as r

MOUNT_PATH = "/shared"
PROBE_LABEL = "csibench.io/shared-probe"  # on the step's pods, which its anti-affinity spreads apart
PROBE_SOURCE = Path(probe.__file__).read_text(encoding="utf-8")  # run as python3 -c: the image needs no csibench


def attempt_of(context: StepContext) -> str:
    """The attempt's name, the same for all its pods and new for each attempt (its start, in ms since the epoch):
    the probes work in a folder of that name, so an earlier attempt's files on a volume a backend kept (a
    subdirectory per claim name, a retained volume) never meet this one's. Before the step starts (a dry run):
    "0"."""
    tracker = context.trackers.get(StepName.SHARED_VOLUME)
    anchor = tracker.anchor if tracker is not None else None
    return str(int(anchor.wall * 1000)) if anchor is not None else "0"


def build_probe_command(context: StepContext, index: int) -> list[str]:
    """python3 -c <the probe> and its options: integers of the validated spec and fixed paths, never free text."""
    data = context.spec.shared
    assert data is not None
    return ["python3", "-c", PROBE_SOURCE, f"--pod={index}", f"--pods={data.pods}", f"--root={MOUNT_PATH}",
            f"--attempt={attempt_of(context)}", f"--files={data.files}", f"--poll-ms={data.pollMilliseconds}",
            f"--lock-rounds={data.lockRounds}", f"--small-files={data.smallFiles}",
            f"--file-bytes={data.fileBytes}", f"--list-files={data.listFiles}", f"--fio-seconds={data.fioSeconds}",
            f"--fio-bytes={int(parse_quantity(data.fioSize))}",
            f"--timeout={shared.probe_timeout(shared.timeout_of(context))}"]


def spread_apart(labels: dict[str, str]) -> Manifest:
    """A preferred pod anti-affinity among the step's probe pods on the node's hostname: the scheduler puts each
    on a node of its own while there are enough that the pods' own selector and tolerations allow."""
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": labels}}}]}}


def _probe_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.shared
    assert data is not None, "the sharedVolume step runs only with spec.shared"
    mounts = [manifests.WorkloadMount("shared", MOUNT_PATH, context.names.shared_volume(0))]
    labels = {**context.labels, PROBE_LABEL: "true"}
    pod = manifests.build_workload_pod(
        context.names.shared_pod(index), "probe", workload_image(data.image), build_probe_command(context, index),
        mounts, labels, data.resources, data.nodeSelector or spec.pod.nodeSelector,
        data.tolerations or spec.pod.tolerations)
    pod["spec"]["affinity"] = spread_apart(labels)
    return pod


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
                                 judges.claim_and_volume_gone)),
)
