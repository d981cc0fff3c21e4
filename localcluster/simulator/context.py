"""What the driver and the kubelet share: the API client, the informer caches, the backends and event emission."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from localcluster.simulator import api
from localcluster.simulator.backend import Backend, GroundTruth
from localcluster.simulator.config import BackendModel, ParameterError, parse_backend_model
from localcluster.simulator.faults import FaultWindows

RUN_UID_LABEL = "csibench.io/run-uid"  # on every object a BenchmarkRun creates

log = logging.getLogger("simulator")


@dataclass
class Informers:
    storage_classes: api.Informer
    pvcs: api.Informer
    pvs: api.Informer
    pods: api.Informer
    attachments: api.Informer

    def all(self) -> list[api.Informer]:
        return [self.storage_classes, self.pvcs, self.pvs, self.attachments, self.pods]


@dataclass
class Context:
    client: api.Client
    informers: Informers
    truth: GroundTruth
    node_names: set[str] = field(default_factory=set)
    faults: FaultWindows | None = None  # windows a run's ArrayFault opened (``faults.py``)
    _backends: dict[str, tuple[str, Backend]] = field(default_factory=dict)
    _fetched_claims: dict[str, api.Obj] = field(default_factory=dict)  # read from the API server, not yet seen

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
        backend = Backend(storage_class, model, self.truth, self.faults)
        self._backends[storage_class] = (fingerprint, backend)
        return backend

    async def storage_class_of_claim(self, namespace: str, name: str) -> str | None:
        """The class a claim names (from the informer, or the API server when the informer has not seen it)."""
        claim = self.informers.pvcs.get(f"{namespace}/{name}")
        if claim is None:
            claim = await self.client.get(api.PVC.path(namespace, name))
            if claim is not None:  # run_of_claim reads it next (kept apart: the informer's cache is the watch's)
                self._fetched_claims[f"{namespace}/{name}"] = claim
        storage_class = (claim or {}).get("spec", {}).get("storageClassName")
        return str(storage_class) if storage_class else None

    def run_of_claim(self, namespace: str, name: str) -> str:
        """The uid of the BenchmarkRun that made a claim (its ``csibench.io/run-uid`` label, as the informer has
        it; "" for none): the array remembers whose each volume is, for its audit (``audit.py``)."""
        key = f"{namespace}/{name}"
        claim = self._fetched_claims.pop(key, None) or self.informers.pvcs.get(key) or {}
        return str(((claim.get("metadata") or {}).get("labels") or {}).get(RUN_UID_LABEL, ""))

    async def event(self, obj: api.Obj, reason: str, message: str, component: str, warning: bool = True,
                    field_path: str | None = None) -> None:
        """A core/v1 Event on ``obj``, as the sidecar or kubelet would record it (``field_path``: the part of it the
        event is about, a kubelet's ``spec.containers{name}``)."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        stamp = api.now_rfc3339()
        involved = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": meta["name"],
                    "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                    "resourceVersion": meta.get("resourceVersion")}
        if field_path:
            involved["fieldPath"] = field_path
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason, "message": message, "type": "Warning" if warning else "Normal",
            "source": {"component": component}, "reportingComponent": component,
            "reportingInstance": component, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        try:
            await self.client.create(api.EVENT, body, namespace)
        except api.ApiError as error:
            log.warning("could not record event %s on %s: %s", reason, meta["name"], error)
