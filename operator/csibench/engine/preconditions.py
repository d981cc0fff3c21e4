"""Everything that can be checked before the first object is created, and re-checked between steps.

Before: the plan (steps, order, classes), the StorageClass (and whether the data path's files fit a volume the
class formats), the snapshot API and class, the target namespace (exists, is not a system or the operator's own
namespace), cluster facts and the preflight of the CSI machinery serving the class (``csibench.preflight``; what
to do with its findings is the run's decision), and a server-side dry run of one of each object the run will
create, so that whatever the API server would refuse (a LimitRange, an admission policy) fails the run now with
the API's own message. A run that fails here leaves nothing behind. Between steps: a deleted target namespace or
StorageClass stops the run with the reason.
"""

from __future__ import annotations

import logging
from typing import Any

from csibench.api.models import (
    BenchmarkRunSpec,
    ConditionReason,
    Environment,
    Machinery,
    Placement,
    PreflightMode,
)
from csibench.api.steps import WFFC, StepName
from csibench.api.validation import namespace_problem
from csibench.engine import manifests
from csibench.engine.context import RunContext, scope_of
from csibench.engine.datapath.fio import files_that_do_not_fit
from csibench.engine.errors import PlanError, RunAborted
from csibench.engine.naming import Names
from csibench.engine.observed import Observed
from csibench.engine.plan import resolve_steps
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError
from csibench.kube.identity import operator_namespace
from csibench.kube.ownership import run_labels
from csibench.kube.resources import RunRef
from csibench.preflight.checks import RunShape, schedulable_nodes
from csibench.preflight.discovery import Preflight, run_preflight

log = logging.getLogger(__name__)


async def prepare(ref: RunRef, spec: BenchmarkRunSpec, client: KubeApi) -> RunContext:
    """The run's context, or PlanError with the reason it cannot run."""
    names = Names.for_run(ref.name, ref.uid)
    plan = resolve_steps(spec)
    if spec.targetNamespace is not None:
        problem = namespace_problem(spec.targetNamespace, operator_namespace())
        if problem:
            raise PlanError(ConditionReason.INVALID_TARGET_NAMESPACE, problem)
    storage_class = await client.get(r.STORAGE_CLASSES.path(name=spec.storageClassName))
    if storage_class is None:
        raise PlanError(ConditionReason.STORAGE_CLASS_NOT_FOUND,
                        f"StorageClass {spec.storageClassName!r} does not exist")
    binding_mode = storage_class.get("volumeBindingMode") or "Immediate"
    unfit = files_that_do_not_fit(spec, storage_class.get("parameters") or {})
    if unfit is not None:
        raise PlanError(ConditionReason.DATA_PATH_DOES_NOT_FIT, unfit)
    if any(step.name == StepName.EXPAND_VOLUME for step in plan):
        _check_expansion(spec, storage_class, binding_mode, [step.name for step in plan])
    if any(step.needs_snapshot_class for step in plan):
        await _check_snapshots(spec, client, storage_class, binding_mode, [step.name for step in plan])
    if any(step.needs_group_snapshots for step in plan):
        await _check_group_snapshots(spec, client, storage_class, binding_mode, [step.name for step in plan])
    nodes, node_limits = await _placement_nodes(spec, client, storage_class, binding_mode,
                                                [step.name for step in plan])
    if spec.targetNamespace and await client.get(r.NAMESPACES.path(name=spec.targetNamespace)) is None:
        raise PlanError(ConditionReason.TARGET_NAMESPACE_NOT_FOUND, f"target namespace {spec.targetNamespace!r} "
                        "does not exist (omit targetNamespace to let the run create its own)")
    context = RunContext(
        spec=spec, names=names, plan=plan, scope=scope_of(ref, spec.targetNamespace),
        own_namespace=spec.targetNamespace is None, binding_mode=binding_mode,
        labels=run_labels(ref.name, ref.uid, spec.labels),
        environment=await _environment(client, storage_class, binding_mode), nodes=nodes, node_limits=node_limits)
    if spec.preflight != PreflightMode.SKIP:
        found = await _preflight(client, spec, [step.name for step in plan], storage_class)
        context.findings = found.findings
        context.environment.machinery = found.machinery
        context.environment.schedulableNodes = found.schedulable_nodes
    await _dry_run(ref, context, client)
    return context


async def _preflight(client: KubeApi, spec: BenchmarkRunSpec, steps: list[str],
                     storage_class: dict[str, Any]) -> Preflight:
    """The preflight; discovery that fails for any other reason than RBAC is recorded, never fatal to the run."""
    try:
        return await run_preflight(client, spec, steps, storage_class)
    except (ApiError, OSError, TimeoutError, ValueError) as error:  # ValueError: a name that cannot be a path
        log.warning("preflight discovery failed: %s", error)
        return Preflight(Machinery(visible=False, driver=storage_class.get("provisioner"),
                                   note=f"discovery failed: {error}"))


async def _placement_nodes(spec: BenchmarkRunSpec, client: KubeApi, storage_class: dict[str, Any],
                           binding_mode: str, steps: list[str]) -> tuple[tuple[str, ...], dict[str, int | None]]:
    """The nodes a step pins pods to (those that can run the publish pods, by name) and the room the class's
    driver has on each: its volume limit there (CSINode allocatable.count; None where it reports none) less the
    volumes of that driver already attached there (other workloads', other runs'). Only when a step places pods
    itself: a move needs two nodes, the density ramp, Pack and the data path's spread one, and no density level
    may exceed its node's room."""
    packs = spec.pod.placement == Placement.PACK and StepName.PUBLISH in steps
    if not ({StepName.MOVE_VOLUME, StepName.DENSITY, StepName.DATA_PATH} & set(steps) or packs):
        return (), {}
    listed = await client.get(r.NODES.path(), query={"limit": "5000"}) or {}
    usable = schedulable_nodes(listed.get("items") or [], RunShape.of(spec, steps, binding_mode))
    names = tuple(sorted(str(node["metadata"]["name"]) for node in usable))
    needed = 2 if StepName.MOVE_VOLUME in steps else 1
    if len(names) < needed:
        why = "moveVolume moves each pod to another node" if needed == 2 else "the run places pods on nodes itself"
        raise PlanError(ConditionReason.NOT_ENOUGH_NODES, (
            f"{why}, and {len(names)} node(s) can run the publish pods (Ready, not cordoned, matching "
            f"pod.nodeSelector {dict(spec.pod.nodeSelector)}, taints tolerated): it needs at least {needed}"))
    driver = str(storage_class.get("provisioner") or "")
    csi_nodes = await client.get(r.CSI_NODES.path(), query={"limit": "5000"}) or {}
    limits: dict[str, int | None] = {name: None for name in names}
    for csi_node in csi_nodes.get("items") or []:
        name = str(csi_node["metadata"]["name"])
        for entry in (csi_node.get("spec") or {}).get("drivers") or []:
            count = (entry.get("allocatable") or {}).get("count")
            if name in limits and entry.get("name") == driver and isinstance(count, int):
                limits[name] = count
    attachments = await client.get(r.VOLUME_ATTACHMENTS.path(), query={"limit": "5000"}) or {}
    used: dict[str, int] = {}
    for attachment in attachments.get("items") or []:
        attached_to = str((attachment.get("spec") or {}).get("nodeName") or "")
        if (attachment.get("spec") or {}).get("attacher") == driver and attached_to in limits:
            used[attached_to] = used.get(attached_to, 0) + 1
    if StepName.DENSITY in steps and spec.density is not None:
        _check_density(spec, driver, names, limits, used)
    return names, {node: None if limit is None else max(0, limit - used.get(node, 0))
                   for node, limit in limits.items()}


def _check_density(spec: BenchmarkRunSpec, driver: str, names: tuple[str, ...], limits: dict[str, int | None],
                   used: dict[str, int]) -> None:
    """The ramp's node can run the pods, and takes its highest level (a level above the driver's limit would only
    measure the scheduler refusing it)."""
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


def _check_expansion(spec: BenchmarkRunSpec, storage_class: dict[str, Any], binding_mode: str,
                     steps: list[str]) -> None:
    """An expansion the class refuses fails here, not as a batch of claims the API server refuses one by one."""
    if storage_class.get("allowVolumeExpansion") is not True:
        raise PlanError(ConditionReason.EXPANSION_NOT_ALLOWED, f"StorageClass {spec.storageClassName!r} does not set "
                        "allowVolumeExpansion: true, so the API server refuses to raise a claim's request; expand "
                        "needs a class that allows it")
    if binding_mode == WFFC and StepName.PUBLISH not in steps:
        raise PlanError(ConditionReason.INVALID_STEPS, f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes "
                        "are only provisioned when a pod uses them, so expandVolume needs the publish step")


async def _check_snapshots(spec: BenchmarkRunSpec, client: KubeApi, storage_class: dict[str, Any],
                           binding_mode: str, steps: list[str]) -> None:
    """The snapshot API, a class of the class's driver, and volumes that exist when the snapshots are taken."""
    if await client.get(r.SNAPSHOT_API) is None:
        raise PlanError(ConditionReason.SNAPSHOT_API_NOT_INSTALLED, "the run has snapshot steps but the cluster "
                        "does not serve snapshot.storage.k8s.io/v1 (install the external-snapshotter CRDs)")
    assert spec.volumeSnapshotClassName is not None
    snapshot_class = await client.get(r.SNAPSHOT_CLASSES.path(name=spec.volumeSnapshotClassName))
    if snapshot_class is None:
        raise PlanError(ConditionReason.VOLUME_SNAPSHOT_CLASS_NOT_FOUND,
                        f"VolumeSnapshotClass {spec.volumeSnapshotClassName!r} does not exist")
    _check_class_driver("VolumeSnapshotClass", spec.volumeSnapshotClassName, snapshot_class, spec, storage_class,
                        "its snapshots would never be taken, and nothing would ever delete them")
    if binding_mode == WFFC and "publish" not in steps:
        raise PlanError(ConditionReason.INVALID_STEPS, f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes "
                        "are only provisioned when a pod uses them, so snapshot steps need the publish step")


async def _check_group_snapshots(spec: BenchmarkRunSpec, client: KubeApi, storage_class: dict[str, Any],
                                 binding_mode: str, steps: list[str]) -> None:
    """The group snapshot API, a class of the class's driver, and volumes that exist when the groups are taken."""
    if await client.get(r.GROUP_SNAPSHOT_API) is None:
        raise PlanError(ConditionReason.GROUP_SNAPSHOT_API_NOT_INSTALLED, "the run has group snapshot steps but the "
                        "cluster does not serve groupsnapshot.storage.k8s.io/v1 (install the external-snapshotter "
                        "v8.6+ group snapshot CRDs)")
    assert spec.groupSnapshot is not None
    name = spec.groupSnapshot.volumeGroupSnapshotClassName
    group_class = await client.get(r.GROUP_SNAPSHOT_CLASSES.path(name=name))
    if group_class is None:
        raise PlanError(ConditionReason.VOLUME_GROUP_SNAPSHOT_CLASS_NOT_FOUND,
                        f"VolumeGroupSnapshotClass {name!r} does not exist")
    _check_class_driver("VolumeGroupSnapshotClass", name, group_class, spec, storage_class,
                        "its groups would never be taken")
    if binding_mode == WFFC and StepName.PUBLISH not in steps:
        raise PlanError(ConditionReason.INVALID_STEPS, f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes "
                        "are only provisioned when a pod uses them, so group snapshot steps need the publish step")


def _check_class_driver(kind: str, name: str, found: dict[str, Any], spec: BenchmarkRunSpec,
                        storage_class: dict[str, Any], consequence: str) -> None:
    """A snapshot or group snapshot class serves the StorageClass's driver: a class of another driver hands the
    run's objects to a driver (or no driver at all) that never answers, and to a cleanup that cannot finish."""
    driver, provisioner = found.get("driver"), storage_class.get("provisioner")
    if driver != provisioner:
        raise PlanError(ConditionReason.INVALID_SPEC, f"{kind} {name!r} is for driver {driver!r}, not {provisioner!r} "
                        f"(the provisioner of StorageClass {spec.storageClassName!r}): {consequence}")


async def _environment(client: KubeApi, storage_class: dict[str, Any], binding_mode: str) -> Environment:
    version = await client.get("/version") or {}
    nodes = await client.get(r.NODES.path(), query={"limit": "500"}) or {}
    node_count = len(nodes.get("items", [])) + int((nodes.get("metadata") or {}).get("remainingItemCount", 0))
    return Environment(serverVersion=version.get("gitVersion"), provisioner=storage_class.get("provisioner"),
                       volumeBindingMode=binding_mode,
                       storageClassParameters=dict(storage_class.get("parameters") or {}), nodeCount=node_count)


def representative_manifests(context: RunContext) -> dict[str, Any]:
    """The first object of each kind the run creates, as submitted (the rest differ only in their index)."""
    step_context = context.step_context(Observed(context.target_namespace, context.names.prefix))
    used: dict[str, Any] = {}
    for step in context.plan:
        if step.action.creates and step.manifest is not None and step.report_key:
            used[step.report_key] = step.manifest(step_context, 0)
        if step.companion is not None:
            used[step.companion.report_key] = step.companion.manifest(step_context, 0)
    if context.own_namespace:
        used["namespace"] = manifests.build_namespace(context.target_namespace, context.labels)
    return used


async def _dry_run(ref: RunRef, context: RunContext, client: KubeApi) -> None:
    """One of each object as a server-side dry run. The run's own namespace does not exist yet: its objects are
    tried in the BenchmarkRun's namespace, where only a refusal of the object itself (400/422) counts."""
    namespace = ref.namespace if context.own_namespace else context.target_namespace
    resources = {step.report_key: step.resource for step in context.plan if step.report_key is not None}
    resources.update({step.companion.report_key: step.companion.resource for step in context.plan
                      if step.companion is not None})
    for key, body in representative_manifests(context).items():
        path = r.NAMESPACES.path() if key == "namespace" else resources[key].path(namespace)
        try:
            await client.create(path, body, dry_run=True)
        except ApiError as error:
            in_target = not context.own_namespace or key == "namespace"
            if error.status in (400, 422) or (in_target and error.status == 403):
                raise PlanError(ConditionReason.MANIFEST_REJECTED, f"the API server refuses the {body['kind']} this "
                                f"run would create: {error.message}") from error
            log.info("dry run of a %s outside the target namespace answered %s; not conclusive", body["kind"], error)


async def check_still_there(client: KubeApi, context: RunContext) -> None:
    """Between steps: a deleted target namespace or StorageClass ends the run cleanly, with the reason."""
    namespace = await client.get(r.NAMESPACES.path(name=context.target_namespace))
    if namespace is None or (namespace.get("metadata") or {}).get("deletionTimestamp"):
        raise RunAborted(ConditionReason.TARGET_NAMESPACE_DELETED,
                         f"target namespace {context.target_namespace!r} was deleted during the run")
    if await client.get(r.STORAGE_CLASSES.path(name=context.spec.storageClassName)) is None:
        raise RunAborted(ConditionReason.STORAGE_CLASS_DELETED,
                         f"StorageClass {context.spec.storageClassName!r} was deleted during the run")
