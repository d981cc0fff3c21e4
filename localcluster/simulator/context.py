"""What every simulator role shares: the API client, the informer caches, the backends and event emission."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from localcluster.simulator import api
from localcluster.simulator.backend import Backend, GroundTruth
from localcluster.simulator.config import DRIVER_NAME, BackendModel, ParameterError, parse_backend_model

log = logging.getLogger("simulator")


@dataclass
class Informers:
    storage_classes: api.Informer
    snapshot_classes: api.Informer
    pvcs: api.Informer
    pvs: api.Informer
    pods: api.Informer
    attachments: api.Informer
    snapshots: api.Informer
    contents: api.Informer

    def all(self) -> list[api.Informer]:
        return [self.storage_classes, self.snapshot_classes, self.pvcs, self.pvs, self.attachments,
                self.snapshots, self.contents, self.pods]


@dataclass
class Context:
    client: api.Client
    informers: Informers
    truth: GroundTruth
    node_names: set[str] = field(default_factory=set)
    _backends: dict[str, tuple[str, Backend]] = field(default_factory=dict)

    def backend(self, storage_class: str) -> Backend:
        """The array behind a class; rebuilt when the class's parameters change (deleted classes: no latency)."""
        sc = self.informers.storage_classes.get(storage_class)
        params = (sc or {}).get("parameters") or {}
        fingerprint = repr(sorted(params.items()))
        cached = self._backends.get(storage_class)
        if cached and cached[0] == fingerprint:
            return cached[1]
        try:
            model = parse_backend_model(params)
        except ParameterError as error:
            log.warning("StorageClass %s has bad simulator parameters (%s); using no latency", storage_class, error)
            model = BackendModel(latencies={})
        backend = Backend(storage_class, model, self.truth)
        self._backends[storage_class] = (fingerprint, backend)
        return backend

    def our_class(self, storage_class: str | None) -> api.Obj | None:
        sc = self.informers.storage_classes.get(storage_class or "")
        return sc if sc and sc.get("provisioner") == DRIVER_NAME else None

    async def event(self, obj: api.Obj, reason: str, message: str, component: str, warning: bool = True) -> None:
        """A core/v1 Event on ``obj``, as the sidecar or kubelet would record it."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        stamp = api.now_rfc3339()
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": meta["name"],
                               "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
            "source": {"component": component}, "reportingComponent": component,
            "reportingInstance": component, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self.client.create(api.EVENT, body, namespace)
        except api.ApiError as error:
            log.warning("could not record event %s on %s: %s", reason, meta["name"], error)
