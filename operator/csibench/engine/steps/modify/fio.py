"""The fio each volume runs before and after the class change (pure): 4 KiB random reads and writes, half each,
direct I/O, time-based, one job per volume, JSON out; and what its log says.

One job at a queue depth of 16 (libaio) asks more of a volume than a QoS policy of a few thousand IOPS allows, so
a limit shows as the ceiling it is; the same command before and after, so the two rows differ only by the class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from csibench.engine.fio_log import messages_of, split_log

MOUNT_PATH = "/data"
FILE_NAME = "csibench-modify"
MIB = 1 << 20
NO_RESULT = "fio wrote no result"


class FioFailed(ValueError):
    """The pod's log holds no fio result; the message is fio's own words where it printed some."""


@dataclass(frozen=True)
class Delivered:
    """What one volume delivered: IOPS and bytes per second, each direction."""

    read_iops: float
    write_iops: float
    read_bps: float
    write_bps: float


def build_command(seconds: int, size_bytes: int) -> list[str]:
    """fio's command line: numbers of the validated spec and fixed paths, never free text."""
    return ["fio", "--name=modify", f"--filename={MOUNT_PATH}/{FILE_NAME}", f"--size={size_bytes}",
            "--rw=randrw", "--rwmixread=50", "--bs=4096", "--direct=1", "--ioengine=libaio", "--iodepth=16",
            "--time_based", f"--runtime={seconds}", "--ramp_time=1", "--output-format=json"]


def parse_log(log: str) -> Delivered:
    """The last JSON document fio printed; fio's own words (its lines around the JSON) when there is none or its
    job failed."""
    documents, _ = split_log(log)
    document = documents[-1] if documents and isinstance(documents[-1], dict) else {}
    jobs = document.get("jobs")
    if not isinstance(jobs, list) or not jobs or not isinstance(jobs[0], dict):
        raise FioFailed(messages_of(log) or NO_RESULT)
    job = jobs[0]
    if job.get("error"):
        raise FioFailed(messages_of(log) or f"fio ended with error {job.get('error')}")

    def number(direction: str, key: str) -> float:
        value = (job.get(direction) or {}).get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            return 0.0
        return float(value)

    return Delivered(number("read", "iops"), number("write", "iops"), number("read", "bw_bytes"),
                     number("write", "bw_bytes"))
