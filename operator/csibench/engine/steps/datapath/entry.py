"""dataPath (``spec.dataPath``) and verifyClone (``spec.dataPath.verify``): the entries of the data path's steps,
whose parts are this package's other modules (fio's command line and log, the rows, the start barrier, the
checksums, the matrix it runs, and verify's pods held against the data path's checksums).

A data-path pod runs one workload (or rate level) on one volume, or on an emptyDir for the local baseline; after the
matrix, with verify, one checksum pod per volume records its files' digests, which verifyClone's pod on each clone is
held against. Before the run: the workload's files must fit a volume the class formats.
"""

from __future__ import annotations

from csibench.api.models import BenchmarkRunSpec, ConditionReason, StepName, VolumeMode
from csibench.api.steps import facts_of
from csibench.engine import barrier, judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.checks import PlanCheck
from csibench.engine.errors import PlanError
from csibench.engine.naming import Names
from csibench.engine.observed import POD
from csibench.engine.skips import failed_indexes, skip_if_prerequisite_failed
from csibench.engine.step import Manifest, NodesNeeded, StepContext, StepSpec
from csibench.engine.steps.datapath import checksum, fio, verify
from csibench.engine.steps.datapath import step as datapath
from csibench.engine.workload import workload_image
from csibench.kube import resources as r


def _data_pod(context: StepContext, index: int) -> Manifest:
    spec, data = context.spec, context.spec.dataPath
    assert data is not None, "the data-path step runs only with spec.dataPath"
    volumes = datapath.selected_volumes(spec.volumes, data)
    if index >= len(data.workloads) * data.slots * volumes:  # after the matrix: verify's checksum pods
        return _checksum_pod(context, context.names.data_pod(index), context.names.volume(index % volumes),
                             "checksum")
    w, slot = divmod(index // volumes, data.slots)  # workload, then its unthrottled run, rate levels, baseline
    workload = data.workloads[w]
    claim = None if data.is_baseline(slot) else context.names.volume(index % volumes)  # None: an emptyDir
    block = claim is not None and spec.volumeMode == VolumeMode.BLOCK  # the baseline's emptyDir holds files
    command = fio.build_fio_command(data, workload, context.rates.get((w, slot)) if slot else None, block)
    # A raw device's regions are written once, before the first workload; a file is laid out by each workload's
    # own line, which finds it there after the first.
    layout = fio.build_block_layout_command(data) if block and (w, slot) == (0, 0) else \
        fio.build_layout_command(command)
    return manifests.build_workload_pod(
        context.names.data_pod(index), "fio", workload_image(data.image), barrier.build_waiting_command(command),
        [data_mount(claim, block),
         manifests.WorkloadMount(barrier.VOLUME, barrier.MOUNT_PATH,
                                 annotation=(barrier.START_FILE, barrier.START_ANNOTATION))],
        {**context.labels, "csibench.io/workload": workload.name}, data.resources, spec.pod.nodeSelector,
        spec.pod.tolerations,
        preferred_node=datapath.spread_node(index % volumes, datapath.nodes_in(context, workload.zones)),
        init=(barrier.LAYOUT_CONTAINER, layout), zones=workload.zones)


def data_mount(claim: str | None, block: bool) -> manifests.WorkloadMount:
    """The volume fio works on: mounted at ``fio.MOUNT_PATH``, or a raw block device at ``fio.DEVICE_PATH``."""
    return manifests.WorkloadMount("data", fio.DEVICE_PATH if block else fio.MOUNT_PATH, claim, device=block)


def _checksum_pod(context: StepContext, name: str, claim: str, workload: str) -> Manifest:
    """A pod that checksums fio's files on ``claim`` (a volume after the data path, or a clone); on a raw block
    volume, the regions fio's jobs wrote."""
    spec, data = context.spec, context.spec.dataPath
    assert data is not None
    block = spec.volumeMode == VolumeMode.BLOCK
    return manifests.build_workload_pod(
        name, checksum.CONTAINER, workload_image(data.image),
        checksum.build_block_checksum_command(data) if block else checksum.build_checksum_command(),
        [data_mount(claim, block)],
        {**context.labels, "csibench.io/workload": workload}, data.resources, spec.pod.nodeSelector,
        spec.pod.tolerations)


def _data_pods(spec: BenchmarkRunSpec) -> int:
    """Per workload its unthrottled run and each rate level, a pod per volume each; then, with verify, a checksum
    pod per volume."""
    data = spec.dataPath
    if data is None:
        return 0
    volumes = datapath.selected_volumes(spec.volumes, data)
    return (len(data.workloads) * data.slots + (1 if data.verify else 0)) * volumes


def skip_data_pods_of_failed_volumes(step: StepSpec, context: StepContext) -> set[str]:
    """A data-path pod runs on volume i % volumes: skipped when that volume failed to be created."""
    data = context.spec.dataPath
    assert data is not None
    volumes = datapath.selected_volumes(context.spec.volumes, data)
    bad = failed_indexes(context, StepName.CREATE_VOLUME)
    return {name for index, name in enumerate(step.objects(context.spec, context.names)) if index % volumes in bad}


def _verify_pod(context: StepContext, index: int) -> Manifest:
    return _checksum_pod(context, context.names.verify_pod(index), context.names.clone(index), "verify")




def skip_clones_without_source_checksums(step: StepSpec, context: StepContext) -> set[str]:
    """Verify pod i needs clone i, and the data path's checksums of volume i (a volume it did not use, or whose
    checksum pod failed, has none: its clone has nothing to be held against)."""
    objects = step.objects(context.spec, context.names)
    data_path = context.trackers.get(StepName.DATA_PATH)
    sums = ((data_path.extra if data_path is not None else None) or {}).get(checksum.CHECKSUMS) or {}
    unsummed = {name for index, name in enumerate(objects) if context.names.volume(index) not in sums}
    return skip_if_prerequisite_failed(step, context) | unsummed


async def check_data_path(check: PlanCheck) -> None:
    """The workloads' files fit a volume the class formats (its filesystem's reserve taken off), and a workload
    that names zones has a usable node in one of them."""
    unfit = fio.files_that_do_not_fit(check.spec, check.storage_class.get("parameters") or {})
    if unfit is not None:
        raise PlanError(ConditionReason.DATA_PATH_DOES_NOT_FIT, unfit)
    data = check.spec.dataPath
    assert data is not None
    known = sorted(set(check.zones.values()))
    for workload in data.workloads:
        if workload.zones and not any(check.zones.get(node) in workload.zones for node in check.nodes):
            raise PlanError(ConditionReason.NOT_ENOUGH_NODES, (
                f"dataPath workload {workload.name} runs in zones {', '.join(workload.zones)}, and no node that "
                f"can run the pods is in them (their zones, label topology.kubernetes.io/zone: "
                f"{', '.join(known) or 'none'})"))


ENTRIES = (
    StepSpec(facts=facts_of(StepName.DATA_PATH), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.data_pod, count=_data_pods, judge=judges.pod_finished,
             skip=skip_data_pods_of_failed_volumes, terminal_warnings=judges.WORKLOAD_FAILED, manifest=_data_pod,
             report_key="dataPathPod", gone=judges.pod_gone_and_detached, measure=datapath.measure,
             results=datapath.RESULTS,
             places_pods=lambda spec: NodesNeeded(1), check=check_data_path),
    StepSpec(facts=facts_of(StepName.VERIFY_CLONE), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.verify_pod, count=lambda spec: spec.volumes, judge=judges.pod_finished,
             skip=skip_clones_without_source_checksums, terminal_warnings=judges.WORKLOAD_FAILED,
             manifest=_verify_pod, report_key="verifyPod", gone=judges.pod_gone_and_detached, measure=verify.measure),
)
