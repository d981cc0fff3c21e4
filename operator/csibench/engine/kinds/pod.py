"""A pod the run created (publish, and moveVolume's successor under the same name; density; the data path's fio
and checksum pods; verifyClone's; the database's; createEphemeral's): its phase, node and readiness, and the
claims it mounts (its generic ephemeral volumes' too)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from csibench.engine.kinds.fields import Field, one, signature_of

POD = "pod"
_PHASE = re.compile(rb'"phase":"([A-Za-z]*)"')
_NODE_NAME = re.compile(rb'"nodeName":"([^"]*)"')
_READY = re.compile(rb'"type":"Ready",(?:"observedGeneration":\d+,)?"status":"([A-Za-z]+)"')
_read_ready = one(_READY)


def _ready(line: bytes) -> bytes | None:
    ready = _read_ready(line)
    if ready == b"" and b'"type":"Ready"' in line:
        return None  # a Ready condition in a shape the pattern does not know
    return ready


FIELDS = (Field("phase", one(_PHASE)), Field("node", one(_NODE_NAME)), Field("ready", _ready),
          Field("claims", None))  # a pod's volumes never change
SIGNATURE = signature_of(FIELDS)


@dataclass
class PodState:
    uid: str = ""
    ready: bool = False
    phase: str = "Pending"
    node: str | None = None
    claims: list[str] = field(default_factory=list)
    exists: bool = True
    gone_at: float | None = None  # arrival of the event that said it was gone (DELETED or a relist)


def update(state: PodState, obj: dict[str, Any]) -> list[str]:
    """The fields, from the object as one event carries it; the claims it mounts when they are new to the state."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    state.node = spec.get("nodeName") or state.node
    state.phase = status.get("phase", "Pending")
    state.ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    if state.claims:
        return []
    state.claims = claims_of(obj)
    return state.claims


def claims_of(obj: dict[str, Any]) -> list[str]:
    """The claims a pod mounts: its persistentVolumeClaim volumes', and its generic ephemeral volumes' (the claim
    Kubernetes makes for one is named after the pod and the volume: ``<pod>-<volume>``)."""
    pod_name = (obj.get("metadata") or {}).get("name", "")
    volumes = (obj.get("spec") or {}).get("volumes") or []
    return [v["persistentVolumeClaim"]["claimName"] if v.get("persistentVolumeClaim") else f"{pod_name}-{v['name']}"
            for v in volumes if v.get("persistentVolumeClaim") or v.get("ephemeral")]
