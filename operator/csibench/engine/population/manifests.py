"""The population's objects (pure): the seed claim and snapshot, then per index a PersistentVolume and the claim
bound to it, a VolumeSnapshotContent and the snapshot bound to it.

Each PV is a copy of the seed's PV where it matters to the machinery (its CSI source: driver, handle, attributes,
secret references; its node affinity, so a zoned volume stays in its zone; its capacity), Retain, and pre-bound to
its claim by ``claimRef``; the claim names the PV (``volumeName``), so the PV controller binds the pair without a
provisioner. Each content names the seed's snapshot handle, Retain, pre-bound to its snapshot; the snapshot names
the content. Removing either half of a pair never asks the storage to delete anything.
"""

from __future__ import annotations

from typing import Any

from csibench.api.models import BenchmarkRunSpec
from csibench.api.population import POPULATION_PREFIX
from csibench.engine.manifests import SNAPSHOT_API_GROUP, Manifest, claim_spec
from csibench.kube.ownership import MANAGED_BY_LABEL, MANAGER

POPULATION_LABEL = "csibench.io/population-of"  # the owner's uid: the one proof removal accepts
SEED_LABEL = "csibench.io/population-seed"  # on the seed claim and snapshot: removed after the rest
SELECTED_NODE = "volume.kubernetes.io/selected-node"  # the scheduler's choice, for a WaitForFirstConsumer seed
_PV_KEYS = ("csi", "nodeAffinity", "mountOptions", "capacity")  # what a population PV copies of the seed's


def population_labels(owner_uid: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The population's labels: the user's extra labels, the owner's uid, csibench as the manager; never the run's
    own uid label, so the steps' watches and cleanup never select it."""
    return {**(extra or {}), POPULATION_LABEL: owner_uid, MANAGED_BY_LABEL: MANAGER}


def population_selector(owner_uid: str, members_only: bool = False) -> str:
    """The population's objects; ``members_only``: all but the seed's claim and snapshot."""
    return f"{POPULATION_LABEL}={owner_uid}" + (f",!{SEED_LABEL}" if members_only else "")


def seed_name(prefix: str) -> str:
    return f"{POPULATION_PREFIX}-{prefix}-seed"


def member_name(prefix: str, index: int) -> str:
    """A population object's name: its claim, PV, snapshot and content share it (PVs and contents are cluster-
    scoped; the prefix is the owner's name and 5 characters of its uid). It does not start with the run's own
    prefix, so the run's shared PV and content watches, which keep what names the run's objects, pass the
    population's over undecoded."""
    return f"{POPULATION_PREFIX}-{prefix}-{index:06d}"


def member_index(prefix: str, name: str) -> int | None:
    """The index ``member_name`` gave ``name``, or None when it is not a member's name (the seed's)."""
    head = f"{POPULATION_PREFIX}-{prefix}-"
    digits = name[len(head):] if name.startswith(head) else ""
    return int(digits) if len(digits) >= 6 and digits.isdigit() else None


def build_seed_claim(name: str, spec: BenchmarkRunSpec, labels: dict[str, str], node: str | None) -> Manifest:
    """The one claim provisioned through the class. ``node``: with WaitForFirstConsumer, the node the scheduler
    would have chosen, so the provisioner makes it without a pod."""
    claim: Manifest = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": name, "labels": {**labels, SEED_LABEL: "true"}}, "spec": claim_spec(spec)}
    if node is not None:
        claim["metadata"]["annotations"] = {SELECTED_NODE: node}
    return claim


def build_seed_snapshot(name: str, claim: str, snapshot_class: str, labels: dict[str, str]) -> Manifest:
    return {"apiVersion": f"{SNAPSHOT_API_GROUP}/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": {**labels, SEED_LABEL: "true"}},
            "spec": {"volumeSnapshotClassName": snapshot_class, "source": {"persistentVolumeClaimName": claim}}}


def build_volume(name: str, namespace: str, seed_pv: dict[str, Any], spec: BenchmarkRunSpec,
                 labels: dict[str, str]) -> Manifest:
    """A PV naming the seed's volume, Retain, pre-bound to claim ``name`` in ``namespace``."""
    seed = seed_pv.get("spec") or {}
    pv_spec: Manifest = {key: seed[key] for key in _PV_KEYS if key in seed}
    pv_spec.update({
        "accessModes": [mode.value for mode in spec.accessModes],
        "volumeMode": spec.volumeMode.value,
        "storageClassName": spec.storageClassName,
        "persistentVolumeReclaimPolicy": "Retain",
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace, "name": name},
    })
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels},
            "spec": pv_spec}


def build_claim(name: str, spec: BenchmarkRunSpec, labels: dict[str, str]) -> Manifest:
    """A claim of the run's shape naming its PV: bound by the PV controller, never provisioned."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "labels": labels},
            "spec": {**claim_spec(spec), "volumeName": name}}


def build_content(name: str, namespace: str, driver: str, snapshot_handle: str, snapshot_class: str,
                  labels: dict[str, str]) -> Manifest:
    """A pre-provisioned content naming the seed's snapshot, Retain, pre-bound to snapshot ``name``."""
    return {"apiVersion": f"{SNAPSHOT_API_GROUP}/v1", "kind": "VolumeSnapshotContent",
            "metadata": {"name": name, "labels": labels},
            "spec": {"deletionPolicy": "Retain", "driver": driver, "volumeSnapshotClassName": snapshot_class,
                     "source": {"snapshotHandle": snapshot_handle},
                     "volumeSnapshotRef": {"apiVersion": f"{SNAPSHOT_API_GROUP}/v1", "kind": "VolumeSnapshot",
                                           "namespace": namespace, "name": name}}}


def build_snapshot(name: str, labels: dict[str, str]) -> Manifest:
    """A snapshot naming its content: bound by the snapshot-controller, never taken."""
    return {"apiVersion": f"{SNAPSHOT_API_GROUP}/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, "labels": labels},
            "spec": {"source": {"volumeSnapshotContentName": name}}}
