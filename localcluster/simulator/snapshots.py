"""The snapshot controller and the CSI snapshotter: VolumeSnapshot -> content -> readyToUse, and deletion.

Two roles, as upstream splits them. The controller (driver-agnostic upstream; here limited to our driver's
classes) creates ``snapcontent-<snapshot uid>`` for a new VolumeSnapshot, protects both with finalizers and
copies the content's status back to the snapshot. The snapshotter (driver side) runs the backend's
CreateSnapshot/DeleteSnapshot and writes the content's status. Deleting a snapshot with deletionPolicy Delete
deletes its content first; the snapshot disappears only after the backend deleted the snapshot, so
"VolumeSnapshot gone" means "snapshot deleted on the array".
"""

from __future__ import annotations

import datetime as dt
import time

from localcluster.simulator import api
from localcluster.simulator.backend import InjectedFailure
from localcluster.simulator.config import (
    CONTENT_FINALIZER,
    DRIVER_NAME,
    SNAPSHOT_FINALIZER,
    Operation,
    class_of_handle,
    pv_name_of_handle,
    quantity_bytes,
)
from localcluster.simulator.context import Context
from localcluster.simulator.controller import Controller

CONTROLLER = "snapshot-controller"
SNAPSHOTTER = f"{DRIVER_NAME}_csi-snapshotter"


def build_content(snapshot: api.Obj, snapshot_class: api.Obj, volume_handle: str) -> api.Obj:
    """The VolumeSnapshotContent the snapshot controller creates for a dynamic snapshot (pure)."""
    meta = snapshot["metadata"]
    return {
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
        "metadata": {"name": f"snapcontent-{meta['uid']}", "finalizers": [CONTENT_FINALIZER]},
        "spec": {
            "volumeSnapshotRef": {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                                  "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "source": {"volumeHandle": volume_handle},
            "driver": snapshot_class["driver"],
            "deletionPolicy": snapshot_class.get("deletionPolicy") or "Delete",
            "volumeSnapshotClassName": snapshot_class["metadata"]["name"],
        },
    }


def _rfc3339_from_nanos(nanos: int) -> str:
    return dt.datetime.fromtimestamp(nanos / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Snapshots:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.controller = Controller(CONTROLLER, self._reconcile_snapshot)
        self.snapshotter = Controller("snapshotter", self._reconcile_content)
        ctx.informers.snapshots.handlers.append(self._on_snapshot)
        ctx.informers.contents.handlers.append(self._on_content)

    def _on_snapshot(self, event: str, snapshot: api.Obj) -> None:
        key = api.key_of(snapshot)
        if event == "DELETED":
            self.controller.cancel(key)
        else:
            self.controller.kick(key)

    def _on_content(self, event: str, content: api.Obj) -> None:
        ref = content["spec"].get("volumeSnapshotRef") or {}
        if ref.get("namespace") and ref.get("name"):
            self.controller.kick(f"{ref['namespace']}/{ref['name']}")
        if content["spec"].get("driver") != DRIVER_NAME:
            return
        if event == "DELETED":
            self.snapshotter.cancel(api.key_of(content))
        else:
            self.snapshotter.kick(api.key_of(content))

    def _class_of(self, snapshot: api.Obj) -> api.Obj | None:
        name = snapshot["spec"].get("volumeSnapshotClassName")
        classes = self.ctx.informers.snapshot_classes.cache.values()
        if name:
            chosen = self.ctx.informers.snapshot_classes.get(name)
        else:
            defaults = [c for c in classes if (c["metadata"].get("annotations") or {}).get(
                "snapshot.storage.kubernetes.io/is-default-class") == "true" and c.get("driver") == DRIVER_NAME]
            chosen = defaults[0] if len(defaults) == 1 else None
        return chosen if chosen and chosen.get("driver") == DRIVER_NAME else None

    async def _patch_snapshot(self, path: str, body: api.Obj) -> None:
        self.ctx.informers.snapshots.observe(await self.ctx.client.patch(path, body))

    async def _patch_content(self, path: str, body: api.Obj) -> None:
        self.ctx.informers.contents.observe(await self.ctx.client.patch(path, body))

    # -- snapshot controller ---------------------------------------------------------------------------------
    async def _reconcile_snapshot(self, key: str) -> bool:
        snapshot = self.ctx.informers.snapshots.get(key)
        if snapshot is None:
            return False
        meta = snapshot["metadata"]
        status = snapshot.get("status") or {}
        path = api.SNAPSHOT.path(meta["namespace"], meta["name"])
        finalizers = meta.get("finalizers") or []
        content_name = status.get("boundVolumeSnapshotContentName")
        content = self.ctx.informers.contents.get(content_name) if content_name else None
        if meta.get("deletionTimestamp"):
            if SNAPSHOT_FINALIZER not in finalizers:
                return False
            if content is not None and content["spec"].get("deletionPolicy") == "Delete":
                if not content["metadata"].get("deletionTimestamp"):
                    answer = await self.ctx.client.delete(api.SNAPSHOT_CONTENT.path(name=content_name))
                    self.ctx.informers.contents.observe_deleted(content, answer)
                return False  # woken again when the content is gone
            await self._patch_snapshot(path, {"metadata": {"finalizers": [
                f for f in finalizers if f != SNAPSHOT_FINALIZER]}})
            return False
        if content_name is None:
            return await self._bind_new_content(snapshot, path, finalizers)
        if content is None:
            return False
        content_status = content.get("status") or {}
        if content_status.get("error") and not content_status.get("readyToUse"):
            if status.get("error") != content_status["error"]:
                await self._patch_snapshot(path + "/status", {"status": {"error": content_status["error"]}})
            return False
        if content_status.get("readyToUse") and not status.get("readyToUse"):
            await self._patch_snapshot(path + "/status", {"status": {
                "readyToUse": True, "restoreSize": str(content_status.get("restoreSize", 0)),
                "creationTime": _rfc3339_from_nanos(int(content_status.get("creationTime", 0))), "error": None}})
        return False

    async def _bind_new_content(self, snapshot: api.Obj, path: str, finalizers: list[str]) -> bool:
        meta = snapshot["metadata"]
        source = snapshot["spec"].get("source") or {}
        claim = source.get("persistentVolumeClaimName")
        snapshot_class = self._class_of(snapshot)
        if snapshot_class is None or not claim:
            return False  # another driver's snapshot, or a pre-provisioned one
        pvc = self.ctx.informers.pvcs.get(f"{meta['namespace']}/{claim}")
        pv = self.ctx.informers.pvs.get(((pvc or {}).get("spec") or {}).get("volumeName") or "")
        if pv is None:
            await self.ctx.event(snapshot, "SnapshotPending", f"source PVC {claim!r} is not bound yet", CONTROLLER,
                                 warning=False)
            return True
        if SNAPSHOT_FINALIZER not in finalizers:
            await self._patch_snapshot(path, {"metadata": {"finalizers": [*finalizers, SNAPSHOT_FINALIZER]}})
        content = build_content(snapshot, snapshot_class, pv["spec"]["csi"]["volumeHandle"])
        self.ctx.informers.contents.observe(await self.ctx.client.create(api.SNAPSHOT_CONTENT, content))
        await self._patch_snapshot(path + "/status", {"status": {
            "boundVolumeSnapshotContentName": content["metadata"]["name"], "readyToUse": False}})
        return False

    # -- snapshotter ---------------------------------------------------------------------------------------------
    async def _reconcile_content(self, key: str) -> bool:
        content = self.ctx.informers.contents.get(key)
        if content is None:
            return False
        meta, spec = content["metadata"], content["spec"]
        status = content.get("status") or {}
        source_handle = (spec.get("source") or {}).get("volumeHandle", "")
        backend = self.ctx.backend(class_of_handle(status.get("snapshotHandle") or source_handle))
        path = api.SNAPSHOT_CONTENT.path(name=key)
        if meta.get("deletionTimestamp"):
            if CONTENT_FINALIZER not in (meta.get("finalizers") or []):
                return False
            if spec.get("deletionPolicy") == "Delete" and status.get("snapshotHandle"):
                try:
                    await backend.run(Operation.DELETE_SNAPSHOT, key)
                except InjectedFailure as failure:
                    await self.ctx.event(content, "SnapshotDeleteError", str(failure), SNAPSHOTTER)
                    return True
            await self._patch_content(path, {"metadata": {"finalizers": [
                f for f in meta.get("finalizers") or [] if f != CONTENT_FINALIZER]}})
            return False
        if status.get("readyToUse"):
            return False
        try:
            await backend.run(Operation.CREATE_SNAPSHOT, key)
        except InjectedFailure as failure:
            error = {"time": api.now_rfc3339(), "message": f"Failed to check and update snapshot content: {failure}"}
            await self._patch_content(path + "/status", {"status": {"error": error}})
            ref = spec["volumeSnapshotRef"]
            snapshot = self.ctx.informers.snapshots.get(f"{ref['namespace']}/{ref['name']}")
            if snapshot is not None:
                await self.ctx.event(snapshot, "SnapshotCreationFailed", str(failure), SNAPSHOTTER)
            return True
        pv = self.ctx.informers.pvs.get(pv_name_of_handle(source_handle))
        restore_size = quantity_bytes(pv["spec"]["capacity"]["storage"]) if pv else 0
        snapshot_uid = spec["volumeSnapshotRef"].get("uid", key)
        await self._patch_content(path + "/status", {"status": {
            "snapshotHandle": f"snap-{snapshot_uid}@{class_of_handle(source_handle)}",
            "creationTime": time.time_ns(), "readyToUse": True, "restoreSize": restore_size, "error": None}})
        return False
