"""The simulated driver's name and its backend model, read from StorageClass parameters (pure, unit-tested).

A StorageClass of the simulator describes one storage array. Its parameters (all strings, as Kubernetes
requires) set how that array behaves:

``latency``            base latency of every operation ("100ms", "1.5s", "0")
``<operation>Latency`` per-operation override, e.g. ``createVolumeLatency``, ``attachLatency``; expansion's is
                       ``expandLatency`` (the controller's ControllerExpandVolume; the node's resize2fs is the
                       filesystem's own time); a group snapshot's is ``groupSnapshotLatency`` (one operation
                       for all its members)
``jitter``             uniform +/- jitter added to each latency ("20ms")
``concurrency``        operations in flight at once on this array; "1" is a global lock, "0"/absent unlimited
``failureRate``        probability in [0, 1] that an operation fails (transiently: it is retried, like CSI)
``failureOperations``  comma list of operations the failure rate applies to (default: all)
``hangOperations``     comma list of operations that never complete ("all" for every one)
``seed``               seed of the jitter/failure random generator, for repeatable runs
``nodeAttachLatency``  extra attach latency on named nodes, "node-a=10s,node-b=500ms": one slow node
``corruptCloneSuffix`` a clone whose claim's name ends with this gets one byte of its largest file flipped after
                       the copy (directory volumes only: a class with an fstype is left alone, and the ground
                       truth records ``corrupted`` only where a byte was flipped): a bug verification must catch
``leakEvery``          "N": every Nth delete of ``leakOperations`` on this array is acknowledged without being done
                       (the volume or snapshot stays on the array, the ground truth records ``leaked: true``): a
                       leak made on purpose, that a disruption's or a churn's leak count must find exactly
``leakOperations``     comma list of deleteVolume, deleteSnapshot (default deleteVolume)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

DRIVER_NAME: Final = "sim.csibench.io"
# The label of the ConfigMaps that ask the array for an audit (``audit.py``), and the CSIDriver annotation saying
# this driver's array answers them.
ARRAY_AUDIT = "csibench.io/array-audit"
ARRAY_FAULTS = "csibench.io/array-faults"  # likewise for the fault windows a run opens (``faults.py``)
# Topology: each simulated node is in a zone (node i in ZONES[i mod 3]), which its Node carries as the well-known
# label and as the driver's own key (as a kubelet adds a CSI driver's topology to its Node), and which NodeGetInfo
# reports. A class with ``zonal: "true"`` makes volumes that live in one zone: CreateVolume places the volume in
# the zone the provisioner prefers and says so (accessible_topology), and an attach from another zone is refused.
TOPOLOGY_KEY: Final = "topology.sim.csibench.io/zone"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
ZONES: Final = ("zone-a", "zone-b", "zone-c")
ZONAL_PARAMETER: Final = "zonal"
# A class with ``homeZone: zone-b`` makes volumes that any node may use (no topology, as a shared filesystem or a
# regional service has) but that live in that zone: staged on a node of another zone, the volume is held to the
# class's ``crossZoneMaxIOPS`` / ``crossZoneMaxMiBps`` (ext4 volumes: throttled on their loop device, ``qos.py``),
# the cost of crossing zones that a data-path row run in another zone shows.
HOME_ZONE_PARAMETER: Final = "homeZone"
CROSS_ZONE_PARAMETERS: Final = {"crossZoneMaxIOPS": "maxIOPS", "crossZoneMaxMiBps": "maxMiBps"}


def zone_of_node(name: str) -> str:
    """The zone of a simulated node by its name's index (``sim-node-4``: zone-b); a name without one: zone-a."""
    index = name.rsplit("-", 1)[-1]
    return ZONES[int(index) % len(ZONES)] if index.isascii() and index.isdigit() else ZONES[0]


class Operation(StrEnum):
    """Backend operations, named after the CSI calls they stand for."""

    CREATE_VOLUME = "createVolume"  # CreateVolume
    CLONE_VOLUME = "cloneVolume"  # CreateVolume with a snapshot (or volume) content source
    DELETE_VOLUME = "deleteVolume"  # DeleteVolume
    ATTACH = "attach"  # ControllerPublishVolume
    DETACH = "detach"  # ControllerUnpublishVolume
    MOUNT = "mount"  # NodeStageVolume + NodePublishVolume
    UNMOUNT = "unmount"  # NodeUnpublishVolume + NodeUnstageVolume
    CREATE_SNAPSHOT = "createSnapshot"  # CreateSnapshot
    DELETE_SNAPSHOT = "deleteSnapshot"  # DeleteSnapshot
    EXPAND_VOLUME = "expandVolume"  # ControllerExpandVolume
    CREATE_GROUP_SNAPSHOT = "createGroupSnapshot"  # CreateVolumeGroupSnapshot: every member at one instant
    DELETE_GROUP_SNAPSHOT = "deleteGroupSnapshot"  # DeleteVolumeGroupSnapshot
    MODIFY_VOLUME = "modifyVolume"  # ControllerModifyVolume (a VolumeAttributesClass change)


# The deletes an array can acknowledge without doing (``leakEvery``).
LEAKABLE: Final = frozenset({Operation.DELETE_VOLUME, Operation.DELETE_SNAPSHOT})

# Latency parameters named other than ``<operation>Latency``.
LATENCY_PARAMETERS = {Operation.EXPAND_VOLUME: "expandLatency",
                      Operation.CREATE_GROUP_SNAPSHOT: "groupSnapshotLatency"}


def latency_parameter(operation: Operation) -> str:
    return LATENCY_PARAMETERS.get(operation, f"{operation.value}Latency")


class ParameterError(ValueError):
    """A StorageClass parameter of the simulator cannot be parsed."""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration(text: str) -> float:
    """'100ms' -> 0.1, '1.5s' -> 1.5, '2m' -> 120, '0' -> 0 (a bare number means seconds)."""
    match = _DURATION.match(text)
    if not match:
        raise ParameterError(f"not a duration: {text!r} (use e.g. '100ms', '1.5s', '0')")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _parse_operations(text: str, name: str) -> frozenset[Operation]:
    if text.strip() == "all":
        return frozenset(Operation)
    chosen = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            chosen.add(Operation(part))
        except ValueError:
            valid = ", ".join(o.value for o in Operation)
            raise ParameterError(f"{name}: unknown operation {part!r} (valid: all, {valid})") from None
    return frozenset(chosen)


@dataclass(frozen=True)
class BackendModel:
    """How one simulated array behaves."""

    latencies: dict[Operation, float]
    jitter: float = 0.0
    concurrency: int = 0  # 0 = unlimited
    failure_rate: float = 0.0
    failure_operations: frozenset[Operation] = frozenset(Operation)
    hang_operations: frozenset[Operation] = frozenset()
    seed: int | None = None
    # Added to an attach's latency per volume already attached to (or being attached to) the same node: attach
    # rates that degrade as a node fills (the density ramp's curve is then not flat by construction).
    attach_latency_per_attached: float = 0.0
    node_attach_latency: dict[str, float] = field(default_factory=dict)  # node -> added to its attaches
    corrupt_clone_suffix: str = ""  # clones of claims whose name ends so are corrupted (none when empty)
    leak_every: int = 0  # every Nth delete of leak_operations is acknowledged and not done (0: none)
    leak_operations: frozenset[Operation] = frozenset({Operation.DELETE_VOLUME})

    def latency(self, operation: Operation) -> float:
        return self.latencies.get(operation, 0.0)


def parse_backend_model(parameters: dict[str, str] | None) -> BackendModel:
    """Build the model from StorageClass parameters; unknown keys are ignored (real drivers have many, and the
    provisioner adds ``csi.storage.k8s.io/*`` ones)."""
    params = parameters or {}
    base = parse_duration(params.get("latency", "0"))
    latencies = {op: parse_duration(params[latency_parameter(op)]) if params.get(latency_parameter(op))
                 else base for op in Operation}
    try:
        concurrency = int(params.get("concurrency", "0"))
        failure_rate = float(params.get("failureRate", "0"))
        seed = int(params["seed"]) if "seed" in params else None
        leak_every = int(params.get("leakEvery", "0"))
    except ValueError as error:
        raise ParameterError(str(error)) from None
    if concurrency < 0:
        raise ParameterError(f"concurrency must be >= 0, got {concurrency}")
    if leak_every < 0:
        raise ParameterError(f"leakEvery must be >= 0, got {leak_every}")
    leak_operations = _parse_operations(params.get("leakOperations", Operation.DELETE_VOLUME.value), "leakOperations")
    if not leak_operations <= LEAKABLE:
        raise ParameterError(f"leakOperations: only {', '.join(sorted(LEAKABLE))} can leak, got "
                             f"{', '.join(sorted(leak_operations - LEAKABLE))}")
    if not 0.0 <= failure_rate <= 1.0:
        raise ParameterError(f"failureRate must be within [0, 1], got {failure_rate}")
    return BackendModel(
        latencies=latencies,
        jitter=parse_duration(params.get("jitter", "0")),
        concurrency=concurrency,
        failure_rate=failure_rate,
        failure_operations=_parse_operations(params.get("failureOperations", "all"), "failureOperations"),
        hang_operations=_parse_operations(params.get("hangOperations", ""), "hangOperations"),
        seed=seed,
        attach_latency_per_attached=parse_duration(params.get("attachLatencyPerAttached", "0")),
        node_attach_latency=_parse_node_latencies(params.get("nodeAttachLatency", "")),
        corrupt_clone_suffix=params.get("corruptCloneSuffix", "").strip(),
        leak_every=leak_every,
        leak_operations=leak_operations,
    )


def _parse_node_latencies(text: str) -> dict[str, float]:
    """"node-a=10s,node-b=500ms" -> {"node-a": 10.0, "node-b": 0.5}."""
    found = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        node, separator, duration = part.partition("=")
        if not separator or not node.strip():
            raise ParameterError(f"nodeAttachLatency: {part!r} is not node=duration")
        found[node.strip()] = parse_duration(duration)
    return found


def volume_handle(pvc_uid: str, storage_class: str) -> str:
    """Volume IDs carry the class (= the array) so later CSI calls find their backend from the ID alone."""
    return f"{pvc_uid}@{storage_class}"


def pv_name_of_handle(handle: str) -> str:
    """The PV external-provisioner created for a handle (it names PVs and volumes ``pvc-<claim uid>``)."""
    return f"pvc-{handle.partition('@')[0]}"


def class_of_handle(handle: str) -> str:
    return handle.rpartition("@")[2] if "@" in handle else ""
