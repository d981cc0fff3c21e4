"""What a step's own check before the run reads (``PlanCheck``), and the check several steps share: a snapshot
or group snapshot class serves the StorageClass's driver.

``preconditions.prepare`` builds one ``PlanCheck`` once the StorageClass is read and the nodes are placed, and
calls each planned step's ``check`` with it (expandVolume: the class allows expansion; density: its node has room
for the highest level; ...). A check raises ``PlanError``: nothing exists yet, so nothing is left behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from csibench.api.models import BenchmarkRunSpec, ConditionReason
from csibench.engine.errors import PlanError
from csibench.kube.api import KubeApi


@dataclass(frozen=True)
class PlanCheck:
    """What a step's check may read: the spec, the API, the StorageClass and its binding mode, the planned steps'
    names and, when a step places pods, the nodes that can run them, the driver's volume limit on each (CSINode
    allocatable.count; None: it reports none) and how many of its volumes are attached there already."""

    spec: BenchmarkRunSpec
    client: KubeApi
    storage_class: Mapping[str, Any]
    binding_mode: str
    steps: list[str]
    nodes: tuple[str, ...] = ()
    limits: Mapping[str, int | None] = field(default_factory=dict)
    attached: Mapping[str, int] = field(default_factory=dict)
    zones: Mapping[str, str] = field(default_factory=dict)  # node -> its topology.kubernetes.io/zone (if labelled)

    @property
    def driver(self) -> str:
        return str(self.storage_class.get("provisioner") or "")


def check_class_driver(kind: str, name: str, found: Mapping[str, Any], spec: BenchmarkRunSpec,
                       storage_class: Mapping[str, Any], consequence: str) -> None:
    """A snapshot or group snapshot class serves the StorageClass's driver: a class of another driver hands the
    run's objects to a driver (or no driver at all) that never answers, and to a cleanup that cannot finish."""
    driver, provisioner = found.get("driver"), storage_class.get("provisioner")
    if driver != provisioner:
        raise PlanError(ConditionReason.INVALID_SPEC, f"{kind} {name!r} is for driver {driver!r}, not {provisioner!r} "
                        f"(the provisioner of StorageClass {spec.storageClassName!r}): {consequence}")
