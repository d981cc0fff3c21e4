"""Asking the storage array something through the API: the one channel csibench has to it.

An array that can be asked says so on its CSIDriver object (an annotation per kind of request, value
``configmap``). The run writes a request into a ConfigMap of its own namespace — owned by the run like its report,
labelled ``csibench.io/report-of`` (a record, garbage-collected with the run; cleanup never removes it) and with
the kind's label naming the run's uid — as ``data.request``: JSON with an ``id``. The array answers in the same
ConfigMap, ``data.answer``: JSON with the same ``id``. The audit after cleanup (``leak_audit.py``) and the fault
windows of ArrayFault (``array_faults.py``) are asked this way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from csibench.api.models import GROUP, KIND, VERSION
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.ownership import REPORT_OF_LABEL

REQUEST_KEY = "request"
ANSWER_KEY = "answer"
BY_CONFIGMAP = "configmap"  # the CSIDriver annotation's value: the array answers requests in ConfigMaps


def build_request_configmap(name: str, label: str, run_name: str, run_uid: str, request: Mapping[str, Any]) -> Json:
    """The ConfigMap that asks the array (pure): owned by the run, labelled as its record and with ``label``."""
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "labels": {REPORT_OF_LABEL: run_name, label: run_uid},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": run_name,
                                 "uid": run_uid, "controller": True, "blockOwnerDeletion": False}],
        },
        "data": {REQUEST_KEY: json.dumps(dict(request), sort_keys=True)},
    }


def answer_in(configmap: Mapping[str, Any] | None, request_id: str) -> dict[str, Any] | None:
    """The answer in a request's ConfigMap when it is to ``request_id`` (pure); None otherwise or when it is not
    a JSON object. What it holds is the caller's to check."""
    try:
        answer = json.loads(((configmap or {}).get("data") or {}).get(ANSWER_KEY) or "null")
    except ValueError:
        return None
    return answer if isinstance(answer, dict) and answer.get("id") == request_id else None


async def driver_answers(client: KubeApi, storage_class: Mapping[str, Any], annotation: str) -> bool:
    """Whether the class's driver says its array answers this kind of request (its CSIDriver's annotation). An
    operator not allowed to read CSIDrivers cannot know: no."""
    driver = str(storage_class.get("provisioner") or "")
    try:
        csi_driver = await client.get(r.CSI_DRIVERS.path(name=driver)) if driver else None
    except ApiError as error:
        if error.status in (401, 403):
            return False
        raise
    annotations = ((csi_driver or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(annotation) == BY_CONFIGMAP


async def send_request(client: KubeApi, namespace: str, body: Json, run_uid: str,
                       on_send: Callable[[float], None] | None = None) -> None:
    """Create the request; one left by an earlier attempt (a redone step or cleanup) is asked again, its old
    answer removed, if it is the run's own (its uid a precondition; ApiError 409 otherwise: nothing is touched).
    ``on_send`` stamps the moment the request that asks leaves (not a create refused as a duplicate)."""
    sent: list[float] = []
    if await client.create(r.CONFIGMAPS.path(namespace), body, on_send=sent.append):
        if on_send is not None and sent:
            on_send(sent[-1])
        return
    name = body["metadata"]["name"]
    path = r.CONFIGMAPS.path(namespace, name)
    existing = await client.get(path)
    if existing is None:
        raise ApiError(404, "NotFound", f"ConfigMap {namespace}/{name} went while it was asked again")
    owners = (existing.get("metadata") or {}).get("ownerReferences") or []
    if not any(owner.get("uid") == run_uid for owner in owners):
        raise ApiError(409, "AlreadyExists", f"ConfigMap {namespace}/{name} exists and is not this run's: the "
                                             "array was not asked")
    sent.clear()
    patched = await client.merge_patch(path, {"metadata": {"uid": existing["metadata"].get("uid")},
                                              "data": {REQUEST_KEY: body["data"][REQUEST_KEY], ANSWER_KEY: None}},
                                       on_send=sent.append)
    if patched is None:
        raise ApiError(404, "NotFound", f"ConfigMap {namespace}/{name} went while it was asked again")
    if on_send is not None and sent:
        on_send(sent[-1])
