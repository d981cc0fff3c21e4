"""Events about csibench's own objects (a run, a suite): what ``kubectl describe`` and ``kubectl get events``
show, written the same way whichever object they are about. ``build_event`` is pure; ``post_event`` never fails its
caller (an Event is a note, not a record: status holds what must last)."""

from __future__ import annotations

import logging
import time

from csibench.api.text import shorten
from csibench.kube import resources as r
from csibench.kube.api import KubeApi
from csibench.kube.client import ApiError, Json
from csibench.kube.resources import ObjectRef

log = logging.getLogger(__name__)
MAX_EVENT_MESSAGE = 1024
OWN_API_VERSION = "csibench.io/v1alpha1"


def build_event(kind: str, ref: ObjectRef, reason: str, message: str, warning: bool, stamp: str) -> Json:
    """An Event about ``ref`` (of ``kind``), stamped ``stamp`` (RFC 3339)."""
    return {
        "metadata": {"generateName": f"{ref.name}.", "namespace": ref.namespace},
        "involvedObject": {"apiVersion": OWN_API_VERSION, "kind": kind, "name": ref.name,
                           "namespace": ref.namespace, "uid": ref.uid},
        "reason": reason, "message": shorten(message, MAX_EVENT_MESSAGE),
        "type": "Warning" if warning else "Normal",
        "source": {"component": "csibench"}, "reportingComponent": "csibench.io/operator",
        "reportingInstance": "csibench", "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


async def post_event(client: KubeApi, kind: str, ref: ObjectRef, reason: str, message: str,
                     warning: bool = False) -> None:
    try:
        await client.create(r.EVENTS.path(ref.namespace), build_event(kind, ref, reason, message, warning, now()))
    except ApiError as error:
        log.warning("could not record event %s: %s", reason, error)
