"""ArrayFault: how the operator asks an array to be slow or failing for a window, through the API alone.

Only the storage can make itself slow, and csibench has no channel to it but the API server, so an array that
takes faults says so on its CSIDriver object (annotation ``csibench.io/array-faults: configmap``; csibench's local
array does) and watches for requests:

1. at the disruption's moment the operator creates a ConfigMap in the run's namespace,
   ``<prefix>-array-fault-<index>``, owned by the run like its report (labelled ``csibench.io/report-of``: a
   record, removed with the run), with ``data.request``: the id, the StorageClass, the seconds, the latency and
   failure rate, and the operations they apply to;
2. the array opens the window on that class's operations by its own clock and answers in the same ConfigMap
   (``data.answer``: the id and ``startedAt``), then, when the window closes, ``endedAt`` — so a window always
   ends, whatever happens to the operator or the run — or, if it will not, ``error``.

The request is the injection (its send is the moment stamped); the window's end is the fault undone; the answer
with ``endedAt`` arriving is the recovery. A class whose driver does not take faults is refused before the run
creates anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from csibench.api.models import GROUP, KIND, VERSION, DisruptionSpec
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.ownership import REPORT_OF_LABEL

ARRAY_FAULTS = "csibench.io/array-faults"  # the CSIDriver's annotation, and the request ConfigMap's label
TAKES_FAULTS_BY_CONFIGMAP = "configmap"
REQUEST_KEY = "request"
ANSWER_KEY = "answer"


@dataclass(frozen=True)
class FaultPlace:
    """Where a run asks for its array faults: its namespace and names, and the class whose array is asked."""

    namespace: str
    run_name: str
    run_uid: str
    prefix: str
    storage_class: str

    def request_name(self, index: int) -> str:
        return f"{self.prefix}-array-fault-{index}"


@dataclass(frozen=True)
class FaultAnswer:
    started_at: str | None
    ended_at: str | None
    error: str | None


def build_fault_request(place: FaultPlace, index: int, request_id: str, spec: DisruptionSpec) -> Json:
    """The ConfigMap that asks the array for the window (pure)."""
    fault = spec.arrayFault
    assert fault is not None and spec.seconds is not None
    request = {"id": request_id, "storageClass": place.storage_class, "seconds": spec.seconds,
               "latencySeconds": (fault.latencyMs or 0) / 1000, "failureRate": fault.failureRate or 0.0,
               "operations": [str(operation) for operation in fault.operations]}
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": place.request_name(index), "labels": {REPORT_OF_LABEL: place.run_name, ARRAY_FAULTS: place.run_uid},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": place.run_name,
                                 "uid": place.run_uid, "controller": True, "blockOwnerDeletion": False}],
        },
        "data": {REQUEST_KEY: json.dumps(request, sort_keys=True)},
    }


def fault_answer(configmap: Mapping[str, Any] | None, request_id: str) -> FaultAnswer | None:
    """The array's answer to ``request_id`` so far (pure): None until there is one, or when it is malformed."""
    try:
        answer = json.loads(((configmap or {}).get("data") or {}).get(ANSWER_KEY) or "null")
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("id") != request_id:
        return None
    fields = [answer.get(key) for key in ("startedAt", "endedAt", "error")]
    if any(value is not None and not isinstance(value, str) for value in fields):
        return None
    started, ended, error = fields
    return FaultAnswer(started, ended, error)


async def takes_faults(client: KubeApi, storage_class: Mapping[str, Any]) -> bool:
    """Whether the class's driver says its array takes faults through the API (its CSIDriver's annotation)."""
    driver = str(storage_class.get("provisioner") or "")
    try:
        csi_driver = await client.get(r.CSI_DRIVERS.path(name=driver)) if driver else None
    except ApiError as error:
        if error.status in (401, 403):
            return False
        raise
    annotations = ((csi_driver or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(ARRAY_FAULTS) == TAKES_FAULTS_BY_CONFIGMAP


def no_fault_taker(storage_class: Mapping[str, Any]) -> str:
    name = (storage_class.get("metadata") or {}).get("name", "")
    return (f"ArrayFault needs an array that takes faults through the API: the CSIDriver of StorageClass {name!r}'s "
            f"provisioner {storage_class.get('provisioner')!r} does not carry {ARRAY_FAULTS}: "
            f"{TAKES_FAULTS_BY_CONFIGMAP} (csibench's local array does; a vendor's array is not the operator's to "
            "slow down)")


async def send_fault_request(client: KubeApi, place: FaultPlace, body: Json,
                             on_send: Callable[[float], None]) -> None:
    """Create the request; one left by an earlier attempt at the step (a redo after a restart) is asked again,
    if it is the run's own. ``on_send`` stamps the moment the request leaves."""
    if await client.create(r.CONFIGMAPS.path(place.namespace), body, on_send=on_send):
        return
    name = body["metadata"]["name"]
    path = r.CONFIGMAPS.path(place.namespace, name)
    existing = await client.get(path)
    owners = ((existing or {}).get("metadata") or {}).get("ownerReferences") or []
    if not any(owner.get("uid") == place.run_uid for owner in owners):
        raise ApiError(409, "AlreadyExists", f"ConfigMap {place.namespace}/{name} exists and is not this run's: "
                                             "the array was not asked")
    await client.merge_patch(path, {"data": {REQUEST_KEY: body["data"][REQUEST_KEY], ANSWER_KEY: None}},
                             on_send=on_send)
