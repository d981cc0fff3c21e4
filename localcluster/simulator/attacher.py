"""The external-attacher's part: VolumeAttachment -> attached, and its deletion -> detached.

The real attach/detach controller creates a VolumeAttachment when a pod with a CSI volume lands on a node and
deletes it when the pod is gone. Like the real attacher, we hold a finalizer on it, so that the object only
disappears after the backend's ControllerUnpublish: "VolumeAttachment gone" then means "detached".
"""

from __future__ import annotations

from localcluster.simulator import api
from localcluster.simulator.backend import InjectedFailure
from localcluster.simulator.config import ATTACHER_FINALIZER, DRIVER_NAME, Operation, class_of_handle
from localcluster.simulator.context import Context
from localcluster.simulator.controller import Controller

COMPONENT = f"{DRIVER_NAME}_csi-attacher"


class Attacher:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.controller = Controller("attacher", self._reconcile)
        ctx.informers.attachments.handlers.append(self._on_attachment)

    def _on_attachment(self, event: str, attachment: api.Obj) -> None:
        if event != "DELETED" and attachment["spec"].get("attacher") == DRIVER_NAME:
            self.controller.kick(api.key_of(attachment))

    def _backend_for(self, attachment: api.Obj) -> str:
        pv = self.ctx.informers.pvs.get(attachment["spec"]["source"].get("persistentVolumeName") or "")
        return class_of_handle(pv["spec"]["csi"]["volumeHandle"]) if pv else ""

    async def _patch(self, path: str, body: api.Obj) -> None:
        self.ctx.informers.attachments.observe(await self.ctx.client.patch(path, body))

    async def _reconcile(self, key: str) -> bool:
        attachment = self.ctx.informers.attachments.get(key)
        if attachment is None:
            return False
        meta = attachment["metadata"]
        finalizers = meta.get("finalizers") or []
        path = api.VOLUME_ATTACHMENT.path(name=key)
        backend = self.ctx.backend(self._backend_for(attachment))
        if meta.get("deletionTimestamp"):
            if ATTACHER_FINALIZER not in finalizers:
                return False
            try:
                await backend.run(Operation.DETACH, key)
            except InjectedFailure as failure:
                await self._patch(path + "/status", {"status": {"detachError": {
                    "time": api.now_rfc3339(), "message": str(failure)}}})
                return True
            remaining = [f for f in finalizers if f != ATTACHER_FINALIZER]
            await self._patch(path, {"metadata": {"finalizers": remaining}})
            return False
        if (attachment.get("status") or {}).get("attached"):
            return False
        if ATTACHER_FINALIZER not in finalizers:
            await self._patch(path, {"metadata": {"finalizers": [*finalizers, ATTACHER_FINALIZER]}})
        try:
            await backend.run(Operation.ATTACH, key)
        except InjectedFailure as failure:
            await self._patch(path + "/status", {"status": {"attached": False, "attachError": {
                "time": api.now_rfc3339(), "message": str(failure)}}})
            await self.ctx.event(attachment, "FailedAttach", str(failure), COMPONENT)
            return True
        await self._patch(path + "/status", {"status": {"attached": True, "attachError": None}})
        return False
