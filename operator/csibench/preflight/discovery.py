"""Reading the CSI machinery and the nodes from the cluster, read-only, before the run's first object.

Discovery needs more than a run does: ``get`` on CSIDrivers and ``list`` on pods in every namespace (where the
sidecars and the snapshot-controller run). Those rights come from a separate ClusterRole in deploy/ that can be
left out; the CSIDriver read comes first, and a refusal there means discovery is off: the run records that the
machinery was not visible and goes on, without trying the pod list (one refused request, no retry loop).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import BenchmarkRunSpec, Finding, Machinery
from csibench.api.validation import is_dns_subdomain
from csibench.kube import resources as r
from csibench.kube.api import Reader
from csibench.kube.client import ApiError
from csibench.preflight.checks import RunShape, run_checks, schedulable_nodes
from csibench.preflight.components import components_for

log = logging.getLogger(__name__)
PAGE = "500"
CSI_DRIVER_FIELDS = ("attachRequired", "podInfoOnMount", "fsGroupPolicy", "requiresRepublish", "storageCapacity",
                     "seLinuxMount")


@dataclass
class Preflight:
    machinery: Machinery
    findings: list[Finding] = field(default_factory=list)
    schedulable_nodes: int | None = None

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity.value == "Warning"]


async def list_all(client: Reader, path: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every item of a list, page by page (a large cluster's pods do not come in one answer)."""
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        page = await client.get(path, query={**(query or {}), "limit": PAGE, **({"continue": token} if token else {})})
        if page is None:
            return items
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


def _not_visible(driver: str, what: str, error: ApiError) -> Machinery:
    log.info("preflight: %s not readable (%s %s); recording the machinery as not visible", what, error.status,
             error.reason)
    return Machinery(visible=False, driver=driver, note=(
        f"the operator may not read {what} (HTTP {error.status}); bind the csibench-discovery ClusterRole "
        "(deploy/base/rbac-discovery.yaml) to record and check the sidecars' versions and flags"))


async def discover_machinery(client: Reader, driver: str) -> Machinery:
    if not is_dns_subdomain(driver):  # kubernetes.io/no-provisioner, rancher.io/local-path: not a CSI driver name
        return Machinery(visible=True, driver=driver, note=(
            f"the StorageClass's provisioner {driver!r} cannot name a CSI driver (CSI driver names are DNS "
            "subdomains): no CSI sidecars serve it, nothing to check"))
    try:
        csi_driver = await client.get(r.CSI_DRIVERS.path(name=driver))
    except ApiError as error:
        if error.status in (401, 403):
            return _not_visible(driver, "CSIDriver objects", error)
        raise
    try:
        pods = await list_all(client, r.PODS.path(), {"fieldSelector": "status.phase=Running"})
    except ApiError as error:
        if error.status in (401, 403):
            return _not_visible(driver, "pods in all namespaces", error)
        raise
    return Machinery(visible=True, driver=driver, csiDriver=None if csi_driver is None else _facts(csi_driver),
                     components=components_for(pods, driver, registered=csi_driver is not None)[:32])


def _facts(csi_driver: dict[str, Any]) -> dict[str, str]:
    """The CSIDriver fields that change what a step does (booleans as Kubernetes writes them)."""
    spec = csi_driver.get("spec") or {}
    return {key: (str(spec[key]).lower() if isinstance(spec[key], bool) else str(spec[key]))
            for key in CSI_DRIVER_FIELDS if key in spec}


async def run_preflight(client: Reader, spec: BenchmarkRunSpec, steps: Sequence[str],
                        storage_class: dict[str, Any]) -> Preflight:
    """Discover the machinery serving the class and check it against this run's shape."""
    driver = str(storage_class.get("provisioner") or "")
    shape = RunShape.of(spec, steps, storage_class.get("volumeBindingMode") or "Immediate")
    machinery = await discover_machinery(client, driver)
    nodes = await list_all(client, r.NODES.path())
    return Preflight(machinery, run_checks(shape, machinery, nodes), len(schedulable_nodes(nodes, shape)))
