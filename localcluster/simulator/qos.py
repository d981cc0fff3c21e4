"""The simulated array's QoS: a volume's IOPS and MiB/s limits, enforced where its data is read and written.

A real array throttles a volume by its QoS policy; a VolumeAttributesClass changes that policy through
ControllerModifyVolume (issue: "changing a volume's class"). The simulated array keeps a volume's limits beside
its data (``qos.json`` in the volume's directory, written by the controller at CreateVolume and at every
ControllerModifyVolume) and enforces them on the volume's loop device, the one block device all of a volume's I/O
passes through: an ext4 volume's image is loop-mounted in the container (``sandbox.py``), so the host's block
throttling (cgroup v1 ``blkio.throttle.*_device`` of the root group, where every simulated container runs) caps
that device's reads and writes, IOPS and bytes per second, each direction at the limit, as an array's per-volume
QoS does. The sandbox sets the limits when it mounts the image (and clears a loop device's earlier rules when the
volume has none: loop devices are reused) and notes the device; when the container ends the runtime clears what
it set (``release``), so no rule outlives the volume's use on a device the host may give to anything else. The
controller sets the limits on the devices in use when a modify changes them, so a running fio sees the new policy
at once. A limit of 0 is no limit: mutable parameters merge, so a class lifts a limit by naming it 0.

A volume of a class with a home zone (``config.HOME_ZONE_PARAMETER``) staged on a node of another zone is held to
the class's cross-zone limits too (``crosszone-<node>.json`` beside the data, written by that node's plugin at
NodeStageVolume and removed at its NodeUnstageVolume); ``effective`` is the lowest of them all per limit, and that
is what a mount and a modify set on the device. All the simulated nodes share one host, so a volume used from
several nodes at once (read-only by many) has one loop device, held to one limit: the strictest any of its nodes
asks, as if every reader were as far away as the farthest.

Only volumes with a loop device can be throttled: a directory volume is a bind mount with no device of its own,
and a raw block volume is a file bound at the device path. The array refuses QoS parameters for those (the
driver's INVALID_ARGUMENT, which the resizer reports as Infeasible) rather than accept a limit it cannot keep.
Buffered I/O reaches the loop device only on writeback; the data path's fio uses direct I/O, which is throttled as
it is issued.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from localcluster.simulator.volumes import namespace_mounting, regular_file

QOS_NAME = "qos.json"
CROSS_ZONE_PREFIX = "crosszone-"  # + the staging node's name + ".json"
MAX_IOPS, MAX_MIBPS = "maxIOPS", "maxMiBps"  # the mutable parameters (and their keys in qos.json)
PARAMETERS = (MAX_IOPS, MAX_MIBPS)
LIMIT_MAX = 10**9
BLKIO = Path("/sys/fs/cgroup/blkio")  # cgroup v1's block I/O controller, its root group
IOPS_FILES = ("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device")
BPS_FILES = ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device")
MIB = 1 << 20

Limits = dict[str, int]


class QosUnavailable(OSError):
    """The host cannot throttle a device (no cgroup v1 blkio controller, or not ours to write)."""


def parse(parameters: dict[str, str]) -> tuple[Limits, str | None]:
    """The QoS limits among mutable parameters, and why they are refused (pure): each a whole number in
    [0, 10**9], 0 meaning no limit (a class that lifts one: mutable parameters merge, so only a value can undo a
    value)."""
    limits: Limits = {}
    for key in PARAMETERS:
        text = parameters.get(key)
        if text is None:
            continue
        if not text.isascii() or not text.isdigit() or not 0 <= int(text) <= LIMIT_MAX:
            return {}, f"{key} must be a whole number from 0 (no limit) to {LIMIT_MAX}, not {text!r}"
        if int(text) > 0:
            limits[key] = int(text)
    return limits, None


def write(volume_dir: Path, limits: Limits, name: str = QOS_NAME) -> None:
    """The volume's limits beside its data (none: the file removed, so a clone never keeps its source's);
    ``name`` a ``cross_zone_name``: the cross-zone limits of a node it is staged on."""
    path = volume_dir / name
    if not limits:
        if regular_file(path):
            path.unlink()
        return
    scratch = volume_dir / f".{name}.new"
    scratch.write_text(json.dumps(limits, sort_keys=True))
    os.replace(scratch, path)


def lower(first: Limits, second: Limits) -> Limits:
    """Both sets of limits at once (pure): per limit the lower one; a limit only one of them has stays."""
    return {key: min(value for value in (first.get(key), second.get(key)) if value is not None)
            for key in PARAMETERS if key in first or key in second}


def cross_zone_name(node: str) -> str:
    """The file of a node's cross-zone limits on a volume it staged (the node ID has no path separator: the
    simulator names its nodes)."""
    if "/" in node or node in ("", ".", ".."):
        raise ValueError(f"node {node!r} cannot name a file")
    return f"{CROSS_ZONE_PREFIX}{node}.json"


def cross_zone(volume_dir: Path) -> Limits:
    """The strictest cross-zone limits of the nodes that staged the volume from another zone (none: no such node)."""
    found: Limits = {}
    for path in sorted(volume_dir.glob(f"{CROSS_ZONE_PREFIX}*.json")):
        found = lower(found, read(volume_dir, path.name))
    return found


def effective(volume_dir: Path) -> Limits:
    """What the volume's device is held to: its own limits and, staged in another zone, the cross-zone ones."""
    return lower(read(volume_dir), cross_zone(volume_dir))


def read(volume_dir: Path, name: str = QOS_NAME) -> Limits:
    """The volume's limits; none when the file is missing, is not the array's own (a link) or is not valid."""
    path = volume_dir / name
    if not regular_file(path):
        return {}
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {key: value for key, value in found.items()
            if key in PARAMETERS and isinstance(value, int) and not isinstance(value, bool) and 0 < value <= LIMIT_MAX}


def rules(device_number: str, limits: Limits) -> dict[str, str]:
    """blkio file -> the line that sets (or, 0, clears) the device's limit there (pure)."""
    iops, mibps = limits.get(MAX_IOPS, 0), limits.get(MAX_MIBPS, 0)
    lines = {name: f"{device_number} {iops}" for name in IOPS_FILES}
    lines.update({name: f"{device_number} {mibps * MIB}" for name in BPS_FILES})
    return lines


def record(record_file: Path, device: str, image: str) -> None:
    """The container's sandbox notes a device it throttled (its number and the image on it), for ``release``."""
    number = os.stat(device).st_rdev
    with open(record_file, "a") as noted:
        noted.write(f"{os.major(number)}:{os.minor(number)} {image}\n")


def release(record_file: Path, root: Path = BLKIO, settle_seconds: float = 2.0) -> None:
    """After a container ended: the rules its sandbox set cleared from each device it throttled, so a loop device
    the host reuses for anything else is not held to a volume's limit. A device bound to another image by now
    (someone else's) keeps its rules; one still mounted (the container's namespace going away, or the same volume
    in another container on this node) is waited for up to ``settle_seconds``, then kept as it is. Blocking: the
    runtime calls it in a thread."""
    try:
        lines = record_file.read_text().splitlines()
    except FileNotFoundError:
        return
    for line in lines:
        number, _, image = line.partition(" ")
        if _ours_to_clear(number, image, time.monotonic() + settle_seconds):
            for name in (*IOPS_FILES, *BPS_FILES):
                with contextlib.suppress(OSError):
                    (root / name).write_text(f"{number} 0")
    record_file.unlink(missing_ok=True)


def _ours_to_clear(number: str, image: str, deadline: float) -> bool:
    block = Path("/sys/dev/block") / number
    while True:
        try:
            backing = (block / "loop" / "backing_file").read_text().strip()
        except OSError:
            return True  # unbound: free for anyone, with no rule of ours left on it
        if os.path.realpath(backing) != image:
            return False  # another volume's now: its rules are its own
        if namespace_mounting(f"/dev/{block.resolve().name}") is None or time.monotonic() > deadline:
            return namespace_mounting(f"/dev/{block.resolve().name}") is None
        time.sleep(0.05)


def apply(device: str, limits: Limits, root: Path = BLKIO) -> None:
    """Set the device's limits (clear them where ``limits`` has none). QosUnavailable when the host cannot."""
    number = os.stat(device).st_rdev
    for name, line in rules(f"{os.major(number)}:{os.minor(number)}", limits).items():
        try:
            (root / name).write_text(line)
        except OSError as error:
            raise QosUnavailable(f"cannot throttle {device} on this host ({root / name}: {error})") from error
