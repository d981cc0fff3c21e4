"""A VolumeSnapshot the run created: whether it is ready to use, the content bound to it, and its error."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from csibench.engine.kinds.fields import Field, one, signature_of

SNAPSHOT = "snapshot"
_READY_TO_USE = re.compile(rb'"readyToUse":(true|false)')
_BOUND_CONTENT = re.compile(rb'"boundVolumeSnapshotContentName":"([^"]*)"')


def _error(line: bytes) -> bytes | None:
    return None if b'"error":' in line else b""  # its message is part of the state: always decode


FIELDS = (Field("ready", one(_READY_TO_USE)), Field("content", one(_BOUND_CONTENT)), Field("error", _error))
SIGNATURE = signature_of(FIELDS)


@dataclass
class SnapshotState:
    uid: str = ""
    ready: bool = False
    content: str | None = None
    error: str | None = None
    exists: bool = True
    gone_at: float | None = None  # arrival of the event that said it was gone (DELETED or a relist)


def update(state: SnapshotState, obj: dict[str, Any]) -> None:
    """The fields, from the object as one event carries it (a content once bound stays named)."""
    status = obj.get("status") or {}
    state.ready = bool(status.get("readyToUse"))
    state.content = status.get("boundVolumeSnapshotContentName") or state.content
    error = status.get("error") or {}
    state.error = error.get("message") if error else None
