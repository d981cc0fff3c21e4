"""The external-provisioner's part: PVC -> PV (new or from a snapshot), and Released PV -> deleted.

It acts only on claims the real PV controller has handed to this driver (the ``storage-provisioner``
annotation) and, for WaitForFirstConsumer classes, only once the scheduler picked a node. The PV carries the
claim's uid in ``claimRef``: without it the PV controller treats the PV as pre-bound by a user and binds on its
periodic resync, seconds later, which would swamp every measurement. Binding itself is the PV controller's job.
"""

from __future__ import annotations

import logging

from localcluster.simulator import api
from localcluster.simulator.backend import InjectedFailure
from localcluster.simulator.config import (
    DRIVER_NAME,
    Operation,
    class_of_handle,
    quantity_bytes,
    volume_handle,
)
from localcluster.simulator.context import Context
from localcluster.simulator.controller import Controller

log = logging.getLogger("simulator.provisioner")
COMPONENT = f"{DRIVER_NAME}_csi-provisioner"
PROVISIONER_ANNOTATIONS = ("volume.kubernetes.io/storage-provisioner", "volume.beta.kubernetes.io/storage-provisioner")
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def build_pv(pvc: api.Obj, storage_class: api.Obj) -> api.Obj:
    """The PV a CSI provisioner creates for a claim (pure)."""
    meta, spec = pvc["metadata"], pvc["spec"]
    class_name = storage_class["metadata"]["name"]
    return {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta['uid']}", "annotations": {"pv.kubernetes.io/provisioned-by": DRIVER_NAME}},
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "storageClassName": class_name,
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                         "name": meta["name"], "uid": meta["uid"]},
            "csi": {"driver": DRIVER_NAME, "volumeHandle": volume_handle(meta["uid"], class_name),
                    "fsType": "ext4", "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "sim"}},
        },
    }


def wants_provisioning(pvc: api.Obj, storage_class: api.Obj | None) -> bool:
    """Is this claim ours to provision now? (pure)"""
    meta, spec = pvc["metadata"], pvc.get("spec") or {}
    annotations = meta.get("annotations") or {}
    if storage_class is None or meta.get("deletionTimestamp") or spec.get("volumeName"):
        return False
    if (pvc.get("status") or {}).get("phase", "Pending") != "Pending":
        return False
    if not any(annotations.get(a) == DRIVER_NAME for a in PROVISIONER_ANNOTATIONS):
        return False
    return not (storage_class.get("volumeBindingMode") == "WaitForFirstConsumer" and SELECTED_NODE not in annotations)


class Provisioner:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.provisioning = Controller("provisioner", self._provision)
        self.deleting = Controller("deleter", self._delete)
        ctx.informers.pvcs.handlers.append(self._on_pvc)
        ctx.informers.pvs.handlers.append(self._on_pv)

    def _on_pvc(self, event: str, pvc: api.Obj) -> None:
        key = api.key_of(pvc)
        if event == "DELETED":
            self.provisioning.cancel(key)
        elif wants_provisioning(pvc, self.ctx.our_class(pvc["spec"].get("storageClassName"))):
            self.provisioning.kick(key)

    def _on_pv(self, event: str, pv: api.Obj) -> None:
        if event != "DELETED" and self._wants_deletion(pv):
            self.deleting.kick(api.key_of(pv))

    @staticmethod
    def _wants_deletion(pv: api.Obj) -> bool:
        annotations = pv["metadata"].get("annotations") or {}
        return (annotations.get("pv.kubernetes.io/provisioned-by") == DRIVER_NAME
                and not pv["metadata"].get("deletionTimestamp")
                and (pv.get("status") or {}).get("phase") == "Released"
                and pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete")

    async def _provision(self, key: str) -> bool:
        pvc = self.ctx.informers.pvcs.get(key)
        storage_class = self.ctx.our_class(pvc["spec"].get("storageClassName")) if pvc else None
        if pvc is None or storage_class is None or not wants_provisioning(pvc, storage_class):
            return False
        pv = build_pv(pvc, storage_class)
        if self.ctx.informers.pvs.get(pv["metadata"]["name"]) is not None:
            return False  # provisioned already; the PV controller has yet to bind the claim
        class_name = storage_class["metadata"]["name"]
        source = pvc["spec"].get("dataSource") or pvc["spec"].get("dataSourceRef")
        operation = Operation.CREATE_VOLUME
        if source:
            problem = self._snapshot_source_problem(pvc, source, storage_class)
            if problem:
                await self.ctx.event(pvc, "ProvisioningFailed", f"failed to provision volume with StorageClass "
                                     f"{class_name!r}: {problem}", COMPONENT)
                return True
            operation = Operation.CLONE_VOLUME
        try:
            await self.ctx.backend(class_name).run(operation, key)
        except InjectedFailure as failure:
            await self.ctx.event(pvc, "ProvisioningFailed",
                                 f"failed to provision volume with StorageClass {class_name!r}: {failure}", COMPONENT)
            return True
        self.ctx.informers.pvs.observe(await self.ctx.client.create(api.PV, pv))
        return False

    def _snapshot_source_problem(self, pvc: api.Obj, source: api.Obj, storage_class: api.Obj) -> str | None:
        """Why a claim cannot be restored from its data source yet, or None when it can (as the real checks)."""
        if source.get("kind") != "VolumeSnapshot" or source.get("apiGroup") != "snapshot.storage.k8s.io":
            return f"data source {source.get('kind')} is not supported by {DRIVER_NAME}"
        name = source["name"]
        snapshot = self.ctx.informers.snapshots.get(f"{pvc['metadata']['namespace']}/{name}")
        status = (snapshot or {}).get("status") or {}
        if snapshot is None:
            return f"error getting handle for DataSource Type VolumeSnapshot by Name {name}: snapshot not found"
        if not status.get("readyToUse") or not status.get("boundVolumeSnapshotContentName"):
            return f"error getting handle for DataSource Type VolumeSnapshot by Name {name}: snapshot is not Ready"
        content = self.ctx.informers.contents.get(status["boundVolumeSnapshotContentName"])
        if content is None or content["spec"].get("driver") != storage_class.get("provisioner"):
            return f"snapshot content of {name} does not belong to driver {storage_class.get('provisioner')}"
        restore = int((content.get("status") or {}).get("restoreSize") or 0)
        if quantity_bytes(pvc["spec"]["resources"]["requests"]["storage"]) < restore:
            return f"requested volume size is less than the size {restore} for the source snapshot {name}"
        return None

    async def _delete(self, key: str) -> bool:
        pv = self.ctx.informers.pvs.get(key)
        if pv is None or not self._wants_deletion(pv):
            return False
        handle = pv["spec"]["csi"]["volumeHandle"]
        try:
            await self.ctx.backend(class_of_handle(handle)).run(Operation.DELETE_VOLUME, key)
        except InjectedFailure as failure:
            await self.ctx.event(pv, "VolumeFailedDelete", str(failure), COMPONENT)
            return True
        self.ctx.informers.pvs.observe_deleted(pv, await self.ctx.client.delete(api.PV.path(name=key)))
        return False
