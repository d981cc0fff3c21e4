"""A claim the run created (a volume, a clone, the database's claim): its phase, the volume bound to it and the
capacity its status reports (what an expansion waits for)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from csibench.engine.kinds.fields import Field, one, signature_of

CLAIM = "claim"
_PHASE = re.compile(rb'"phase":"([A-Za-z]*)"')
_VOLUME_NAME = re.compile(rb'"volumeName":"([^"]*)"')
_CAPACITY = re.compile(rb'"capacity":\{"storage":"([^"]*)"')

FIELDS = (Field("phase", one(_PHASE)), Field("volume", one(_VOLUME_NAME)), Field("capacity", one(_CAPACITY)))
SIGNATURE = signature_of(FIELDS)


@dataclass
class ClaimState:
    uid: str = ""
    phase: str = "Pending"
    volume: str | None = None
    capacity: str | None = None  # status.capacity.storage, as the API server writes it ("1Gi")
    exists: bool = True
    gone_at: float | None = None  # arrival of the event that said it was gone (DELETED or a relist)


def update(state: ClaimState, obj: dict[str, Any]) -> None:
    """The fields, from the object as one event carries it (a volume once bound stays named)."""
    status = obj.get("status") or {}
    state.phase = status.get("phase", "Pending")
    state.volume = (obj.get("spec") or {}).get("volumeName") or state.volume
    state.capacity = (status.get("capacity") or {}).get("storage")
