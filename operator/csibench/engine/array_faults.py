"""ArrayFault: how the operator asks an array to be slow or failing for a window, through the API alone.

Only the storage can make itself slow, and csibench has no channel to it but the API server, so an array that
takes faults says so on its CSIDriver object (annotation ``csibench.io/array-faults: configmap``; csibench's local
array does) and watches for requests:

1. at the disruption's moment the operator creates a ConfigMap in the run's namespace,
   ``<prefix>-array-fault-<index>`` (``array_requests.py``), with ``data.request``: the id, the StorageClass, the
   seconds, the latency and failure rate, and the operations they apply to;
2. the array opens the window on that class's operations of the run's objects, by its own clock, and answers in
   the same ConfigMap (``data.answer``: the id and ``startedAt``), then, when the window closes, ``endedAt`` and
   how many operations it touched — so a window always ends, whatever happens to the operator or the run — or, if
   it will not, ``error``.

The request is the injection (its send is the moment stamped); the window's end is the fault undone; the answer
with ``endedAt`` arriving is the recovery. A class whose driver does not take faults is refused before the run
creates anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from csibench.api.models import DisruptionSpec
from csibench.engine.array_requests import (
    BY_CONFIGMAP,
    answer_in,
    build_request_configmap,
    driver_answers,
    send_request,
)
from csibench.kube.api import KubeApi
from csibench.kube.client import Json

ARRAY_FAULTS = "csibench.io/array-faults"  # the CSIDriver's annotation, and the request ConfigMap's label


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
    operations: int | None = None  # how many of the run's operations the window touched (once it closed)


def build_fault_request(place: FaultPlace, index: int, request_id: str, spec: DisruptionSpec) -> Json:
    """The ConfigMap that asks the array for the window (pure)."""
    fault = spec.arrayFault
    assert fault is not None and spec.seconds is not None
    request = {"id": request_id, "runUid": place.run_uid, "storageClass": place.storage_class, "seconds": spec.seconds,
               "latencySeconds": (fault.latencyMs or 0) / 1000, "failureRate": fault.failureRate or 0.0,
               "operations": [str(operation) for operation in fault.operations]}
    return build_request_configmap(place.request_name(index), ARRAY_FAULTS, place.run_name, place.run_uid, request)


def fault_answer(configmap: Mapping[str, Any] | None, request_id: str) -> FaultAnswer | None:
    """The array's answer to ``request_id`` so far (pure): None until there is one, or when it is malformed."""
    answer = answer_in(configmap, request_id)
    if answer is None:
        return None
    fields = [answer.get(key) for key in ("startedAt", "endedAt", "error")]
    if any(value is not None and not isinstance(value, str) for value in fields):
        return None
    touched = answer.get("operations")
    if touched is not None and (not isinstance(touched, int) or isinstance(touched, bool) or touched < 0):
        return None
    started, ended, error = fields
    return FaultAnswer(started, ended, error, touched)


async def takes_faults(client: KubeApi, storage_class: Mapping[str, Any]) -> bool:
    """Whether the class's driver says its array takes faults through the API (its CSIDriver's annotation)."""
    return await driver_answers(client, storage_class, ARRAY_FAULTS)


def no_fault_taker(storage_class: Mapping[str, Any]) -> str:
    name = (storage_class.get("metadata") or {}).get("name", "")
    return (f"ArrayFault needs an array that takes faults through the API: the CSIDriver of StorageClass {name!r}'s "
            f"provisioner {storage_class.get('provisioner')!r} does not carry {ARRAY_FAULTS}: {BY_CONFIGMAP} "
            "(csibench's local array does; a vendor's array is not the operator's to slow down)")


async def send_fault_request(client: KubeApi, place: FaultPlace, body: Json,
                             on_send: Callable[[float], None]) -> None:
    """Ask for the window (``array_requests.send_request``); ``on_send`` stamps the moment it leaves."""
    await send_request(client, place.namespace, body, place.run_uid, on_send=on_send)
