"""A claim the run created (a volume, a clone, the database's claim): its phase, the volume bound to it, and what an
expansion waits for: the capacity its status reports, the size the run asked for (the
``csibench.io/expand-to`` annotation its PATCH sets with the request, so an event that carries it is one after the
PATCH) and the resize still under way (the resize conditions and ``allocatedResourceStatuses``); what a class change
waits for (``currentVolumeAttributesClassName``, and ``modifyVolumeStatus`` while one is pending or refused); and
the run's own annotations (``csibench.io/*``), so a step that marks its claims is judged on its mark with no new
field."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from csibench.engine.kinds.fields import Field, one, signature_of

CLAIM = "claim"
EXPAND_TO = "csibench.io/expand-to"
_PHASE = re.compile(rb'"phase":"([A-Za-z]*)"')
_VOLUME_NAME = re.compile(rb'"volumeName":"([^"]*)"')
_CAPACITY = re.compile(rb'"capacity":\{"storage":"([^"]*)"')
_EXPAND_TO = re.compile(rb'"' + re.escape(EXPAND_TO.encode()) + rb'":"([^"]*)"')
_ALLOCATED = re.compile(rb'"allocatedResourceStatuses":\{([^}]*)\}')
_ATTRIBUTES_CLASS = re.compile(rb'"currentVolumeAttributesClassName":"([^"]*)"')
_MODIFY_STATUS = re.compile(rb'"modifyVolumeStatus":\{([^}]*)\}')
OWN = "csibench.io/"
# Every csibench.io/ key with its string value (its labels' too, which never change: a changed annotation of the
# run's changes the signature, so its line is decoded).
_OWN = re.compile(rb'"' + re.escape(OWN.encode()) + rb'[^"]*":"(?:[^"\\]|\\.)*"')

def _conditions(line: bytes) -> bytes | None:
    """A claim with conditions is always decoded: they come only while a resize is under way (rare), and a
    condition's message may hold any character, so no pattern could compare them safely."""
    return None if b'"conditions":' in line else b""


FIELDS = (Field("phase", one(_PHASE)), Field("volume", one(_VOLUME_NAME)), Field("capacity", one(_CAPACITY)),
          Field("expand_to", one(_EXPAND_TO)),
          Field("resizing", _conditions), Field("resize_status", one(_ALLOCATED)),
          Field("attributes_class", one(_ATTRIBUTES_CLASS)), Field("modify_status", one(_MODIFY_STATUS)),
          Field("annotations", lambda line: b"\0".join(_OWN.findall(line))))
SIGNATURE = signature_of(FIELDS)


@dataclass
class ClaimState:
    uid: str = ""
    phase: str = "Pending"
    volume: str | None = None
    capacity: str | None = None  # status.capacity.storage, as the API server writes it ("1Gi")
    expand_to: str | None = None  # the size the run's expansion PATCH asked for (its annotation)
    resizing: tuple[str, ...] = ()  # types of the resize conditions on it (Resizing, FileSystemResizePending, ...)
    resize_status: str | None = None  # allocatedResourceStatuses.storage (NodeResizePending, ...), while one is set
    annotations: dict[str, str] = field(default_factory=dict)  # its csibench.io/ annotations (the run's marks)
    attributes_class: str | None = None  # status.currentVolumeAttributesClassName: the class in effect
    modify_status: str | None = None  # status.modifyVolumeStatus.status (Pending, InProgress, Infeasible), while set
    exists: bool = True
    gone_at: float | None = None  # arrival of the event that said it was gone (DELETED or a relist)


def update(state: ClaimState, obj: dict[str, Any]) -> None:
    """The fields, from the object as one event carries it (a volume once bound stays named)."""
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    state.phase = status.get("phase", "Pending")
    state.volume = spec.get("volumeName") or state.volume
    state.capacity = (status.get("capacity") or {}).get("storage")
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    state.expand_to = annotations.get(EXPAND_TO)
    state.annotations = {key: str(value) for key, value in annotations.items() if key.startswith(OWN)}
    state.resizing = tuple(str(c.get("type")) for c in status.get("conditions") or []
                           if "Resiz" in str(c.get("type")) and c.get("status", "True") == "True")
    state.resize_status = (status.get("allocatedResourceStatuses") or {}).get("storage")
    state.attributes_class = status.get("currentVolumeAttributesClassName")
    state.modify_status = (status.get("modifyVolumeStatus") or {}).get("status")
