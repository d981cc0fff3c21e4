"""DrainNode's cordon: a node marked unschedulable by a run, and given back on every exit path.

The node is not the run's, so what the run did to it is written on the node itself, in the same request that
cordons it (one merge patch, the node's uid a precondition): the label ``csibench.io/cordoned-by`` holds the run's
uid and ``spec.unschedulable`` goes to true. A node that is unschedulable already (someone else cordoned it) is
refused and left alone: the run would not know whether to uncordon it. Uncordoning (``uncordon``) reads the node,
and only when the label names this run (ownership proven on the object, whatever the spec or status say) removes
the label and, in the same patch, makes it schedulable again. It is idempotent, so every path calls it without
knowing whether an earlier one did: the disruption once its pods moved (or that timed out), the disruption
cancelled (shielded), the run's end, the deleted run's cleanup, and an operator that starts again
(``uncordon_all`` finds the nodes by the label, so a chosen node needs no record in status).

A label and not an annotation: the nodes a run cordoned are found by a label selector, one list request.

What cannot be undone: the pods the drain deleted are gone; the run makes each again (same name, another uid),
placed by the scheduler on another node (``build_replacement``).
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Iterable

from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.reads import read_by_name

log = logging.getLogger(__name__)
CORDONED_BY_LABEL = "csibench.io/cordoned-by"  # the uid of the run that cordoned the node


class CordonError(Exception):
    """The node cannot be cordoned by the run (missing, cordoned by someone else); the message says why."""


def build_cordon(node_uid: str, run_uid: str, resource_version: str | None = None) -> Json:
    """The one merge patch that marks the node as this run's and cordons it (pure); with ``resource_version``,
    only the node as it was read (somebody's cordon since then is a conflict, never taken over)."""
    meta: Json = {"uid": node_uid, "labels": {CORDONED_BY_LABEL: run_uid}}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"metadata": meta, "spec": {"unschedulable": True}}


def build_uncordon(node_uid: str) -> Json:
    """The one merge patch that removes the run's mark and makes the node schedulable again (pure)."""
    return {"metadata": {"uid": node_uid, "labels": {CORDONED_BY_LABEL: None}}, "spec": {"unschedulable": None}}


def cordoned_by(node: Json) -> str | None:
    """The run uid of the mark on the node (pure); None when it carries none."""
    holder = ((node.get("metadata") or {}).get("labels") or {}).get(CORDONED_BY_LABEL)
    return str(holder) if holder else None


def unschedulable(node: Json) -> bool:
    return (node.get("spec") or {}).get("unschedulable") is True


def busiest_node(pods: Iterable[Json]) -> str | None:
    """The node that runs the most of ``pods`` (ties: the first by name), None when none is placed (pure): the
    node whose drain moves the most volumes."""
    counts = Counter(str(node) for pod in pods if (node := (pod.get("spec") or {}).get("nodeName")))
    if not counts:
        return None
    most = max(counts.values())
    return min(node for node, count in counts.items() if count == most)


def build_replacement(manifest: Json) -> Json:
    """A drained pod made again (pure): the same manifest with no node pinned (a Pack placement's affinity, a
    nodeName), so the scheduler places it off the cordoned node."""
    again = copy.deepcopy(manifest)
    spec = again.get("spec") or {}
    spec.pop("nodeName", None)
    affinity = spec.get("affinity") or {}
    affinity.pop("nodeAffinity", None)
    if not affinity:
        spec.pop("affinity", None)
    return again


async def read_node(client: KubeApi, name: str) -> Json | None:
    """The node by name, read with a list (the operator may list nodes, not get them); None when it is gone."""
    return await read_by_name(client, r.NODES, None, name)


async def cordonable(client: KubeApi, name: str, run_uid: str) -> Json:
    """The node, when this run may cordon it: it exists and nobody else cordoned it (CordonError otherwise)."""
    node = await read_node(client, name)
    if node is None:
        raise CordonError(f"node {name} does not exist")
    holder = cordoned_by(node)
    if holder and holder != run_uid:
        raise CordonError(f"node {name} is cordoned by another run (uid {holder}): left alone")
    if unschedulable(node) and holder != run_uid:
        raise CordonError(f"node {name} is cordoned already (by someone else): left alone, nothing was injected")
    return node


async def cordon(client: KubeApi, name: str, run_uid: str, on_send: Callable[[float], None] | None = None) -> None:
    """Mark the node as this run's and cordon it, in one patch. A node this run cordoned already (an operator
    restarted before it was given back) is cordoned again as it is."""
    node = await cordonable(client, name, run_uid)
    meta = node.get("metadata") or {}
    try:
        patched = await client.merge_patch(r.NODES.path(name=name), build_cordon(
            str(meta.get("uid", "")), run_uid, str(meta.get("resourceVersion") or "") or None), on_send=on_send)
    except ApiError as error:
        if error.status != 409:
            raise
        raise CordonError(f"node {name} changed while it was being cordoned: left alone, nothing was injected") \
            from None
    if patched is None:
        raise CordonError(f"node {name} disappeared while it was being cordoned")


async def uncordon(client: KubeApi, name: str, run_uid: str, on_send: Callable[[float], None] | None = None) -> bool:
    """Remove this run's mark from the node and make it schedulable again; False when it carries no mark of this
    run (never cordoned by it, or already given back)."""
    node = await read_node(client, name)
    if node is None or cordoned_by(node) != run_uid or not run_uid:
        return False
    await client.merge_patch(r.NODES.path(name=name), build_uncordon(str(node["metadata"].get("uid", ""))),
                             on_send=on_send)
    log.info("node %s uncordoned (cordoned by run %s)", name, run_uid)
    return True


async def uncordon_all(client: KubeApi, run_uid: str) -> list[str]:
    """Every node carrying this run's mark, uncordoned; what could not be, with why (the caller says so)."""
    if not run_uid:
        return []
    try:
        listing = await client.get(r.NODES.path(), {"labelSelector": f"{CORDONED_BY_LABEL}={run_uid}"}) or {}
    except ApiError as error:
        return [f"nodes cordoned by the run not listed: {error.message}"]
    problems = []
    for node in listing.get("items") or []:
        name = str((node.get("metadata") or {}).get("name", ""))
        try:
            await uncordon(client, name, run_uid)
        except ApiError as error:
            problems.append(f"node {name}: {error.message}")
    return problems
