"""The density step: attach against volumes per node. For each level of ``spec.density.volumesPerNode``, in order,
that many of the run's volumes (the first ones) are published at once in pods pinned to one node, timed to every
pod Ready, then unpublished, timed to every pod gone and its volumes detached; the next level starts on an empty
node. One row per level: time to Ready per pod and its attach part (created to every volume attached), the
level's throughput, the detach time. Against the levels these are the curve of how attach scales as a node fills.

Which node, and how many volumes it takes (the driver's CSINode limit), is decided before the run
(``check_density``: a level above the limit is refused, with the limit named). A pod that fails fails its
level's row with its reason; the ramp goes on. After an operator restart the step is restored (its pods deleted,
untimed) and measured again from the first level, like any step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from csibench.api.models import BenchmarkRunSpec, ConditionReason, DensityRow, StepName, StepState
from csibench.api.steps import WFFC, facts_of
from csibench.api.text import shorten
from csibench.engine import judges, manifests
from csibench.engine.actions import MEASURE
from csibench.engine.checks import PlanCheck
from csibench.engine.errors import PlanError
from csibench.engine.judges import Verdict
from csibench.engine.naming import Names, pod_count, volumes_of_pod
from csibench.engine.observed import POD, Observed
from csibench.engine.results import ResultTable, keep_rows
from csibench.engine.skips import failed_indexes
from csibench.engine.step import Manifest, NodesNeeded, StepContext, StepSpec
from csibench.engine.timing import summarize
from csibench.engine.tracker import StepTracker
from csibench.engine.workload import Batches
from csibench.kube import resources as r
from csibench.metrics import METRICS

PARTS = ("attach", "start")  # created -> every volume attached -> Ready


def levels_of(volumes_per_node: Sequence[int], per_pod: int) -> list[tuple[int, int, int]]:
    """(volumes, first pod index, pods) per level: level k's pods follow level k-1's in the step's objects (pure)."""
    found, first = [], 0
    for volumes in volumes_per_node:
        pods = pod_count(volumes, per_pod)
        found.append((volumes, first, pods))
        first += pods
    return found


def level_of(volumes_per_node: Sequence[int], per_pod: int, index: int) -> tuple[int, int]:
    """Object ``index`` of the step -> (its level's volumes, its pod index within the level) (pure)."""
    for volumes, first, pods in levels_of(volumes_per_node, per_pod):
        if index < first + pods:
            return volumes, index - first
    raise IndexError(f"density object {index} is beyond the last level")


def target_node(context: StepContext) -> str:
    """The node the ramp fills: the spec's, else the first (by name) that can run the publish pods."""
    density = context.spec.density
    assert density is not None and context.nodes, "density runs only with a usable node (checked before the run)"
    return density.node or context.nodes[0]


async def measure(runner: Batches, step: StepSpec, tracker: StepTracker, context: StepContext) -> None:
    """Run the ramp (the caller wrote status and started nothing yet); the tracker's clock covers it all."""
    density = context.spec.density
    assert density is not None
    node, per_pod = target_node(context), context.spec.pvcsPerPod
    levels = levels_of(density.volumesPerNode, per_pod)
    rows = [DensityRow(volumesPerNode=volumes, node=node, pods=pods) for volumes, _, pods in levels]
    keep_rows(tracker, rows)
    judge = step.judge_in(context)
    attached = pod_attached(context.observed)
    gone = judges.pod_gone_and_detached(context.observed, frozenset())
    timeout = float(context.spec.timeouts.for_step(step.name))
    with RESULTS.measuring(tracker, rows):
        for k, (volumes, first, pods) in enumerate(levels):
            names = [step.object_name(context.names, first + i) for i in range(pods)]
            active = [name for name in names if name not in tracker.skipped]
            rows[k].state = StepState.RUNNING
            keep_rows(tracker, rows)
            await runner.show(f"{volumes} volumes on {node} ({k + 1}/{len(levels)})")
            publish = StepTracker(f"{step.name}-{volumes}", active, phase_names=PARTS)
            await runner.batch(POD, publish, judge, runner.creator(step, context, publish), timeout, (attached,))
            for name in active:
                outcome = publish.outcomes[name]
                tracker.mark_submitted(name, publish.submitted.get(name, outcome.at))
                tracker.record(name, Verdict(outcome.ok, outcome.reason, outcome.message), outcome.at)
            seen = context.observed.uids_of(POD)
            removal = StepTracker(f"{step.name}-{volumes}-delete", [n for n in active if n in seen])
            await runner.batch(POD, removal, gone, runner.remover(step, removal), timeout)
            rows[k] = build_row(rows[k], publish, removal, len(names) - len(active))
            keep_rows(tracker, rows)
            if removal.counts()[1]:  # the next level would start on a node still holding this one's volumes
                for later in rows[k + 1:]:
                    later.state, later.message = StepState.FAILED, (
                        f"not run: the {volumes}-volume level's pods were not all gone and detached")
                keep_rows(tracker, rows)
                break


def build_row(row: DensityRow, publish: StepTracker, removal: StepTracker, skipped: int) -> DensityRow:
    """A level's row from its two batches: a level with any failed or skipped pod is Failed, with the first
    reason, and keeps what its succeeded pods measured."""
    succeeded, failed = publish.counts()
    _, not_removed = removal.counts()
    duration = (publish.stopped or time.monotonic()) - (publish.started or time.monotonic())
    # Every Ready pod's attach part. A pod is Ready only once its volumes are attached, so where the watch of the
    # VolumeAttachments lagged the pod's (a busy machine), its attach part ends at Ready (``parts_of``): counting
    # only the pods seen attached first kept a biased subset, whose attach p50 could exceed the level's Ready p50.
    attach = [publish.parts_of(name)[0][0] for name, outcome in publish.outcomes.items() if outcome.ok]
    failures = [o for o in publish.outcomes.values() if not o.ok] + [o for o in removal.outcomes.values() if not o.ok]
    ok = not failures and not skipped
    volumes_per_pod = row.volumesPerNode / row.pods if row.pods else 0.0
    return row.model_copy(update={
        "state": StepState.SUCCEEDED if ok else StepState.FAILED,
        "failed": failed + not_removed + skipped,
        "durationSeconds": round(duration, 3),
        "throughput": round(succeeded * volumes_per_pod / duration, 3) if duration > 0 and succeeded else None,
        "latency": summarize(publish.latencies()) if succeeded else None,
        "attach": summarize(attach) if attach else None,
        "detachSeconds": round((removal.stopped or 0.0) - (removal.started or 0.0), 3) if removal.started else None,
        "message": None if ok else (shorten(f"{failures[0].reason}: {failures[0].message}", 300) if failures
                                    else f"{skipped} pods skipped: a volume of theirs failed"),
    })


def record_metrics(run_label: str, rows: Sequence[DensityRow]) -> None:
    """Measured levels into Prometheus, in seconds (a failed or interrupted level has no measurement)."""
    for row in rows:
        if row.state == StepState.SUCCEEDED and row.latency is not None:
            METRICS.record_density(run_label, row.volumesPerNode, row.latency.p50, row.latency.p99,
                                   row.attach.p50 if row.attach else None, row.throughput, row.detachSeconds)


RESULTS = ResultTable("density", DensityRow, ("durationSeconds", "throughput", "latency", "attach",
                                              "detachSeconds"), record_metrics)


def pod_attached(observed: Observed) -> Callable[[str], bool]:
    """The pod is on a node and every volume it mounts has a VolumeAttachment to that node that says attached."""
    def attached(name: str) -> bool:
        state = observed.pods.get(name)
        if state is None or not state.exists or not state.node:
            return False
        return all(observed.volume_attach_done(observed.volume_of(claim), state.node) for claim in state.claims)
    return attached


def _density_pod(context: StepContext, index: int) -> Manifest:
    """Object ``index`` of the ramp: pod j of its level, mounting that level's volumes j*k .. j*k+k-1, pinned to
    the node the ramp fills."""
    spec, density = context.spec, context.spec.density
    assert density is not None, "the density step runs only with spec.density"
    volumes, pod = level_of(density.volumesPerNode, spec.pvcsPerPod, index)
    claims = [context.names.volume(i) for i in volumes_of_pod(pod, volumes, spec.pvcsPerPod)]
    return manifests.build_pod(context.names.density_pod(index), claims, spec, context.labels,
                               block=spec.volumeMode.value == "Block", node=target_node(context))


def _density_note(context: StepContext) -> str:
    node = target_node(context)
    limit = context.node_limits.get(node)
    if limit is None:
        said = (f"on node {node}: the class's driver reports no per-node volume limit there (CSINode "
                "allocatable.count unset), so the levels were not checked against one")
    else:
        said = (f"on node {node}, which had room for {limit} volumes of the class's driver when the run started "
                "(CSINode allocatable.count less those attached there)")
    if context.wffc:
        said += f"; {WFFC}: the first level also provisions the volumes it publishes"
    return said


def _density_pods(spec: BenchmarkRunSpec) -> int:
    if spec.density is None:
        return 0
    return sum(pods for _, _, pods in levels_of(spec.density.volumesPerNode, spec.pvcsPerPod))


def skip_density_pods_missing_a_volume(step: StepSpec, context: StepContext) -> set[str]:
    """A ramp pod mounts volumes of its level: skipped if any of them failed to be created."""
    spec, density = context.spec, context.spec.density
    assert density is not None
    bad = failed_indexes(context, StepName.CREATE_VOLUME)
    skipped = set()
    for index, name in enumerate(step.objects(spec, context.names)):
        volumes, pod = level_of(density.volumesPerNode, spec.pvcsPerPod, index)
        if bad & set(volumes_of_pod(pod, volumes, spec.pvcsPerPod)):
            skipped.add(name)
    return skipped


async def check_density(check: PlanCheck) -> None:
    """The ramp's node can run the pods, and takes its highest level (a level above the driver's limit would only
    measure the scheduler refusing it)."""
    spec, driver, names, limits, used = check.spec, check.driver, check.nodes, check.limits, check.attached
    density = spec.density
    assert density is not None
    node = density.node or names[0]
    if node not in limits:
        raise PlanError(ConditionReason.NOT_ENOUGH_NODES, f"density.node {node!r} cannot run the publish pods (not "
                        f"Ready, cordoned, not matching pod.nodeSelector or a taint not tolerated); usable: "
                        f"{', '.join(names)}")
    limit, highest, attached = limits[node], max(density.volumesPerNode), used.get(node, 0)
    if limit is not None and highest > limit - attached:
        others = f", {attached} of them attached there already" if attached else ""
        raise PlanError(ConditionReason.ABOVE_VOLUME_LIMIT, (
            f"density.volumesPerNode goes to {highest}, above node {node}'s limit of {limit} volumes of driver "
            f"{driver} (CSINode allocatable.count){others}: the scheduler would refuse the pods beyond it"))
ENTRIES = (
    StepSpec(facts=facts_of(StepName.DENSITY), kind=POD, resource=r.PODS, action=MEASURE,
             object_name=Names.density_pod, count=_density_pods, judge=judges.pod_ready,
             skip=skip_density_pods_missing_a_volume, terminal_warnings=judges.PUBLISH_FAILED, manifest=_density_pod,
             report_key="densityPod", gone=judges.pod_gone_and_detached, measure=measure,
             results=RESULTS, note=_density_note,
             places_pods=lambda spec: NodesNeeded(1), check=check_density),
)
