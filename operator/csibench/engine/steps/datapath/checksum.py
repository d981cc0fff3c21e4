"""Integrity of the data path's data (``spec.dataPath.verify``): what a checksum pod runs, what its log says, and
whether a clone holds its source's data (pure).

A benchmark that only times a clone's ``Bound`` never learns whether the clone holds anything: arrays have shipped
clones that were Bound and empty, or restored from the wrong point. With ``verify``, the data path ends with one
pod per volume that checksums fio's files there (the data the snapshots then take); the verifyClone step runs the
same pod on each clone, and a clone whose files are missing or differ fails, the file and both digests named.

The pod runs ``sha256sum`` over fio's own files (``csibench.*``, the names ``fio.FILENAME_FORMAT`` gives them) from
the volume's root: a fixed command, nothing of the spec in it. A volume without such files makes ``sha256sum``
fail, which fails the pod: a clone with no data is not a clone that verified. On a raw block volume
(volumeMode Block) there are no files: the pod checksums each job's region of the device (``block.N``) instead.
"""

from __future__ import annotations

import re

from csibench.api.models import DataPathSpec
from csibench.engine.steps.datapath.fio import DEVICE_PATH, MOUNT_PATH, size_bytes

CONTAINER = "checksum"
SCRIPT = f'cd {MOUNT_PATH} && sha256sum -- csibench.*'
CHECKSUMS = "checksums"  # the data-path step's record: volume -> {file: sha256}
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](csibench\.[0-9]+\.[0-9]+|block\.[0-9]+)$")
SHOWN = 12  # hex digits of a digest in a message


def build_checksum_command() -> list[str]:
    return ["sh", "-c", SCRIPT]


def build_block_checksum_command(spec: DataPathSpec) -> list[str]:
    """On a raw block volume: the sha256 of each job's region (``block.N``: bytes N x R to (N + 1) x R, R the
    largest fileSize, the regions ``fio.build_block_layout_command`` wrote), read with ``dd`` in 1 MiB blocks.
    Numbers only come from validated fields. The pod fails, saying why, when the device holds fewer bytes than the
    regions (its last byte is read first) or when ``dd`` fails on a region: the shell takes a pipeline's status from
    its last command, so dd's own is carried out of the pipe on a descriptor of its own (POSIX sh, dash too),
    written before sha256sum's digest (the digest comes once its input closes, after dd's status was written)."""
    region = max(size_bytes(spec.file_size(workload)) for workload in spec.workloads)
    jobs = spec.jobsPerVolume
    script = (
        f'[ "$(dd if={DEVICE_PATH} iflag=skip_bytes skip={jobs * region - 1} bs=1 count=1 status=none | wc -c)" '
        f'-eq 1 ] || {{ echo "{DEVICE_PATH} holds fewer than {jobs} x {region} bytes: not every region fio wrote '
        f'is there" >&2; exit 1; }}; '
        'i=0; '
        f'while [ "$i" -lt {jobs} ]; do '
        f'set -- $( {{ {{ dd if={DEVICE_PATH} iflag=skip_bytes,count_bytes skip=$((i * {region})) count={region} '
        'bs=1M status=none; echo $? >&3; } | sha256sum; } 3>&1 ); '
        '[ "$1" = 0 ] || { echo "dd could not read region block.$i" >&2; exit 1; }; '
        'echo "$2  block.$i"; i=$((i + 1)); done')
    return ["sh", "-c", script]


def parse_checksums(log: str) -> dict[str, str]:
    """file -> sha256 from ``sha256sum``'s lines; anything else in the log is not a checksum and is left out."""
    found = {}
    for line in log.splitlines():
        match = _LINE.match(line.strip())
        if match is not None:
            found[match.group(2)] = match.group(1)
    return found


def mismatch(source: dict[str, str], clone: dict[str, str], clone_name: str, source_name: str) -> str | None:
    """Why a clone does not hold its source's data (None: every file of the source is there, the same)."""
    missing = sorted(set(source) - set(clone))
    if missing:
        return (f"clone {clone_name} lacks {len(missing)} of the {len(source)} files its source {source_name} had "
                f"when it was snapshotted ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})")
    differing = sorted(name for name in source if clone[name] != source[name])
    if differing:
        first = differing[0]
        return (f"clone {clone_name}: {first} has sha256 {clone[first][:SHOWN]}... but its source {source_name}'s "
                f"was {source[first][:SHOWN]}... ({len(differing)} of {len(source)} files differ)")
    return None
