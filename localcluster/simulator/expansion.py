"""The kubelet's half of volume expansion: NodeExpandVolume once the resizer has grown a volume, then the claim's
status says the new size.

external-resizer grows the volume (ControllerExpandVolume) and, when the driver answers that the node must grow
it too (a filesystem: the ext4 class), marks the claim ``allocatedResourceStatuses[storage] = NodeResizePending``
with a ``FileSystemResizePending`` condition, its ``status.capacity`` still the old size. The kubelet of a node
where the volume is mounted then calls NodeExpandVolume with the size the PV now has (online), or does so at the
next mount (offline), and on success writes what the real kubelet's ``MarkNodeExpansionFinishedWithRecovery``
writes: the capacity, no resize condition, no ``allocatedResourceStatuses`` entry for storage. A failure is a
``FileSystemResizeFailed`` Warning, retried with the kubelet's backoff. Where the real kubelet puts that Warning
on the pod, this one puts it on the claim too: it is the claim whose expansion failed.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

NODE_RESIZE_PENDING = "NodeResizePending"
RESIZE_CONDITIONS = frozenset({"FileSystemResizePending", "Resizing"})
_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_FACTORS = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


def quantity_bytes(text: str) -> int:
    """A storage quantity as the API server normalizes it ("2Gi", "1500M", "1073741824") in bytes (pure)."""
    match = _QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"not a storage quantity: {text!r}")
    return int(Decimal(match.group(1)) * _FACTORS[match.group(2)])


def node_resize_pending(claim: dict[str, Any]) -> bool:
    statuses = (claim.get("status") or {}).get("allocatedResourceStatuses") or {}
    return bool(statuses.get("storage") == NODE_RESIZE_PENDING)


def build_expansion_finished(claim: dict[str, Any], capacity: str) -> dict[str, Any]:
    """The merge patch of the claim's status once the node has grown it (pure): a merge patch replaces the
    conditions list whole, and ``null`` removes the storage entry of ``allocatedResourceStatuses``."""
    conditions = [c for c in (claim.get("status") or {}).get("conditions") or [] if c.get("type") not in
                  RESIZE_CONDITIONS]
    return {"status": {"capacity": {"storage": capacity}, "conditions": conditions or None,
                       "allocatedResourceStatuses": {"storage": None}}}
