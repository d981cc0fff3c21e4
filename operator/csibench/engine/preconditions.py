"""Everything that can be checked before the first object is created, and re-checked between steps.

Before: the plan (steps, order, classes), the StorageClass, the snapshot API and class, the nodes a step that
places pods itself may use (and the driver's room on each), each planned step's own check (``StepSpec.check``:
the class allows expansion, the data path's files fit a volume, a density level fits its node, ...), the target
namespace (exists, is not a system or the operator's own namespace), the rights each disruption needs on its
component's pods, cluster facts and the preflight of the CSI
machinery serving the class (``csibench.preflight``; what to do with its findings is the run's decision), and a
server-side dry run of one of each object the run will create, so that whatever the API server would refuse (a
LimitRange, an admission policy) fails the run now with the API's own message. A run that fails here leaves
nothing behind. Between steps: a deleted target namespace or StorageClass stops the run with the reason.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from csibench.api.models import BenchmarkRunSpec, ConditionReason, Environment, Machinery, PreflightMode
from csibench.api.steps import WFFC
from csibench.api.validation import namespace_problem
from csibench.engine import manifests
from csibench.engine.checks import PlanCheck, check_class_driver
from csibench.engine.context import RunContext, scope_of
from csibench.engine.disruptions import access_problem, admission_problem, locality_problem
from csibench.engine.errors import PlanError, RunAborted
from csibench.engine.naming import Names
from csibench.engine.observed import ZONE_KEY, Observed
from csibench.engine.plan import resolve_steps
from csibench.engine.population.sharing import shared_population
from csibench.engine.step import StepSpec
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
    steps = [step.name for step in plan]
    population = spec.population
    if any(step.needs_snapshot_class for step in plan):
        await _check_snapshots(spec, client, storage_class, binding_mode, steps)
    elif population is not None and population.snapshots:
        await _check_snapshots(spec, client, storage_class, binding_mode, steps, why="population.snapshots")
    check = await _placement(PlanCheck(spec, client, storage_class, binding_mode, steps), plan)
    for step in plan:
        if step.check is not None:
            await step.check(check)
    nodes, node_limits = check.nodes, {node: None if limit is None else max(0, limit - check.attached.get(node, 0))
                                       for node, limit in check.limits.items()}
    if spec.targetNamespace and await client.get(r.NAMESPACES.path(name=spec.targetNamespace)) is None:
        raise PlanError(ConditionReason.TARGET_NAMESPACE_NOT_FOUND, f"target namespace {spec.targetNamespace!r} "
                        "does not exist (omit targetNamespace to let the run create its own)")
    seed_node = await _population_prerequisites(client, spec, binding_mode, steps) \
        if population is not None and not population.empty else None
    shared = await shared_population(client, ref, spec.labels) \
        if population is not None and population.shared else None
    context = RunContext(
        spec=spec, names=names, plan=plan, scope=scope_of(ref, spec.targetNamespace), seed_node=seed_node,
        shared_population=shared,
        own_namespace=spec.targetNamespace is None, binding_mode=binding_mode,
        labels=run_labels(ref.name, ref.uid, spec.labels),
        environment=await _environment(client, storage_class, binding_mode), nodes=nodes, node_limits=node_limits,
        node_zones=dict(check.zones))
    for disruption in spec.disruptions:
        if disruption.target_namespace() == operator_namespace():
            raise PlanError(ConditionReason.INVALID_SPEC, f"a disruption may not act in the operator's own namespace "
                            f"({disruption.target_namespace()}): it would disrupt the operator measuring it")
        problem = await access_problem(client, disruption)
        if problem is not None:
            raise PlanError(ConditionReason.MISSING_RIGHTS, problem)
        problem = await locality_problem(client, disruption, storage_class)
        if problem is not None:
            raise PlanError(ConditionReason.INVALID_SPEC, problem)
        problem = await admission_problem(client, disruption, ref.uid)
        if problem is not None:
            raise PlanError(ConditionReason.MISSING_RIGHTS, problem)
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


async def _placement(check: PlanCheck, plan: list[StepSpec]) -> PlanCheck:
    """The nodes a step pins pods to (those that can run the publish pods, by name), the driver's volume limit on
    each (CSINode allocatable.count; None where it reports none) and how many of that driver's volumes are attached
    there already (other workloads', other runs'). Only when a planned step places pods itself (``places_pods``: a
    move needs two nodes; the density ramp, Pack and the data path's spread one)."""
    spec = check.spec
    needs = [needed for step in plan if step.places_pods is not None and (needed := step.places_pods(spec))]
    if not needs:
        return check
    need = max(needs, key=lambda needed: needed.count)
    client = check.client
    listed = await client.get(r.NODES.path(), query={"limit": "5000"}) or {}
    usable = schedulable_nodes(listed.get("items") or [], RunShape.of(spec, check.steps, check.binding_mode))
    names = tuple(sorted(str(node["metadata"]["name"]) for node in usable))
    if len(names) < need.count:
        raise PlanError(ConditionReason.NOT_ENOUGH_NODES, (
            f"{need.why}, and {len(names)} node(s) can run the publish pods (Ready, not cordoned, matching "
            f"pod.nodeSelector {dict(spec.pod.nodeSelector)}, taints tolerated): it needs at least {need.count}"))
    driver = check.driver
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
    zones = {str(node["metadata"]["name"]): str(zone) for node in usable
             if (zone := ((node["metadata"].get("labels") or {}).get(ZONE_KEY)))}
    return replace(check, nodes=names, limits=limits, attached=used, zones=zones)


async def _population_prerequisites(client: KubeApi, spec: BenchmarkRunSpec, binding_mode: str,
                                    steps: list[str]) -> str | None:
    """The rights spec.population needs beyond deploy/base's (a SelfSubjectAccessReview each), and with a
    WaitForFirstConsumer class the node its seed volume is made for (the first schedulable one by name, as if the
    scheduler chose it: the provisioner makes the volume without a pod)."""
    wanted = [("create", "persistentvolumes", ""), ("deletecollection", "persistentvolumes", "")]
    if spec.population is not None and spec.population.snapshots:
        wanted += [("create", "volumesnapshotcontents", manifests.SNAPSHOT_API_GROUP),
                   ("deletecollection", "volumesnapshotcontents", manifests.SNAPSHOT_API_GROUP)]
    missing = [f"{verb} {resource}" for verb, resource, group in wanted if not await client.can_i(verb, resource, "",
                                                                                                   group)]
    if missing:
        raise PlanError(ConditionReason.MISSING_RIGHTS, f"spec.population needs {', '.join(missing)} (cluster-wide), "
                        "which the operator's identity lacks (deploy/components/population grants them, and admits "
                        "only Retain objects carrying a population's label)")
    if binding_mode != WFFC:
        return None
    listed = await client.get(r.NODES.path(), query={"limit": "5000"}) or {}
    usable = schedulable_nodes(listed.get("items") or [], RunShape.of(spec, steps, binding_mode))
    if not usable:
        raise PlanError(ConditionReason.NOT_ENOUGH_NODES, f"StorageClass {spec.storageClassName!r} is {WFFC} and no "
                        "node can run the run's pods: the population's seed volume has no node to be made for")
    return min(str(node["metadata"]["name"]) for node in usable)


async def _check_snapshots(spec: BenchmarkRunSpec, client: KubeApi, storage_class: dict[str, Any],
                           binding_mode: str, steps: list[str], why: str = "snapshot steps") -> None:
    """The snapshot API, a class of the class's driver, and volumes that exist when the snapshots are taken."""
    if await client.get(r.SNAPSHOT_API) is None:
        raise PlanError(ConditionReason.SNAPSHOT_API_NOT_INSTALLED, f"the run has {why} but the cluster "
                        "does not serve snapshot.storage.k8s.io/v1 (install the external-snapshotter CRDs)")
    assert spec.volumeSnapshotClassName is not None
    snapshot_class = await client.get(r.SNAPSHOT_CLASSES.path(name=spec.volumeSnapshotClassName))
    if snapshot_class is None:
        raise PlanError(ConditionReason.VOLUME_SNAPSHOT_CLASS_NOT_FOUND,
                        f"VolumeSnapshotClass {spec.volumeSnapshotClassName!r} does not exist")
    check_class_driver("VolumeSnapshotClass", spec.volumeSnapshotClassName, snapshot_class, spec, storage_class,
                        "its snapshots would never be taken, and nothing would ever delete them")
    if binding_mode == WFFC and "publish" not in steps and why == "snapshot steps":
        raise PlanError(ConditionReason.INVALID_STEPS, f"StorageClass {spec.storageClassName!r} is {WFFC}: volumes "
                        "are only provisioned when a pod uses them, so snapshot steps need the publish step")


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
