"""sharedVolume (``spec.shared``): the entry of the shared-volume step, whose parts are this package's other
modules (the probe the pods run, its logs read back into rows, the step that runs it): one ReadWriteMany claim
(the step's companion, made and deleted by the step itself) and ``pods`` probe pods mounting it. On ReadOnlyMany
the companions are two claims, a ReadWriteOnce one that a last pod (index ``pods``) fills and its ReadOnlyMany clone
that the ``pods`` readers mount read-only, their common start given through the data path's start barrier.
"""

from __future__ import annotations

from pathlib import Path

from csibench.api.models import BenchmarkRunSpec, StepName
from csibench.api.steps import facts_of
from csibench.api.validation import parse_quantity
from csibench.engine import barrier, judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.naming import Names
from csibench.engine.observed import CLAIM, POD
from csibench.engine.skips import skip_nothing
from csibench.engine.step import Companion, Manifest, StepContext, StepSpec
from csibench.engine.steps.shared import probe
from csibench.engine.steps.shared import step as shared
from csibench.engine.steps.shared.step import READ_ONLY_CLONE, SEED, read_only
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


def build_probe_command(context: StepContext, index: int, mode: str = "readwrite") -> list[str]:
    """python3 -c <the probe> and its options: integers of the validated spec and fixed paths, never free text.
    ``mode``: readwrite (a ReadWriteMany volume), populate (the filling pod) or read (a ReadOnlyMany reader)."""
    data = context.spec.shared
    assert data is not None
    start = [f"--start-file={barrier.MOUNT_PATH}/{barrier.START_FILE}"] if mode == "read" else []
    return ["python3", "-c", PROBE_SOURCE, f"--mode={mode}", *start,
            f"--pod={index}", f"--pods={data.pods}", f"--root={MOUNT_PATH}",
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
    """Probe pod ``index``: on ReadWriteMany each mounts the claim; on ReadOnlyMany pod ``pods`` fills the
    ReadWriteOnce claim and the others mount its clone read-only, with the start barrier's file."""
    spec, data = context.spec, context.spec.shared
    assert data is not None, "the sharedVolume step runs only with spec.shared"
    labels = {**context.labels, PROBE_LABEL: "true"}
    filling = read_only(data) and index == data.pods
    if not read_only(data):
        mounts = [manifests.WorkloadMount("shared", MOUNT_PATH, context.names.shared_volume(0))]
        command = build_probe_command(context, index)
    elif filling:  # the pod that fills the volume the readers' clone is made of
        mounts = [manifests.WorkloadMount("shared", MOUNT_PATH, context.names.shared_volume(SEED))]
        command, labels = build_probe_command(context, 0, "populate"), context.labels
    else:
        mounts = [manifests.WorkloadMount("shared", MOUNT_PATH, context.names.shared_volume(READ_ONLY_CLONE),
                                          read_only=True),
                  manifests.WorkloadMount(barrier.VOLUME, barrier.MOUNT_PATH,
                                          annotation=(barrier.START_FILE, barrier.START_ANNOTATION))]
        command = build_probe_command(context, index, "read")
    pod = manifests.build_workload_pod(
        context.names.shared_pod(index), "probe", workload_image(data.image), command,
        mounts, labels, data.resources, data.nodeSelector or spec.pod.nodeSelector,
        data.tolerations or spec.pod.tolerations)
    if not filling:
        pod["spec"]["affinity"] = spread_apart(labels)
    return pod


def _shared_volume(context: StepContext, index: int) -> Manifest:
    """The shared claim (ReadWriteMany); on ReadOnlyMany the ReadWriteOnce claim to fill (SEED) and its
    ReadOnlyMany clone (READ_ONLY_CLONE)."""
    data = context.spec.shared
    assert data is not None
    name = context.names.shared_volume(index)
    if not read_only(data):
        return manifests.build_pvc(name, context.spec, context.labels, size=data.size, filesystem=True,
                                   access_modes=["ReadWriteMany"])
    if index == SEED:
        return manifests.build_pvc(name, context.spec, context.labels, size=data.size, filesystem=True)
    return manifests.build_pvc(name, context.spec, context.labels, size=data.size, filesystem=True,
                               access_modes=["ReadOnlyMany"], source_claim=context.names.shared_volume(SEED))


def _probe_pods(spec: BenchmarkRunSpec) -> int:
    """The probe pods; on ReadOnlyMany one more, the pod that fills the volume (the last index)."""
    if spec.shared is None:
        return 0
    return spec.shared.pods + (1 if read_only(spec.shared) else 0)


def _shared_claims(spec: BenchmarkRunSpec) -> int:
    return 2 if spec.shared is not None and read_only(spec.shared) else 1


ENTRIES = (
    StepSpec(facts=facts_of(StepName.SHARED_VOLUME), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.shared_pod, count=_probe_pods, judge=judges.pod_finished, skip=skip_nothing,
             terminal_warnings=judges.WORKLOAD_FAILED, manifest=_probe_pod, report_key="sharedPod",
             gone=judges.pod_gone_and_detached, measure=shared.measure, results=shared.RESULTS,
             companion=Companion(CLAIM, r.PVCS, Names.shared_volume, _shared_volume, "sharedVolume",
                                 judges.claim_and_volume_gone, count=_shared_claims)),
)
