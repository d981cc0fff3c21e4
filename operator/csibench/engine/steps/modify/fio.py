"""The fio each volume runs before and after the class change (pure): 4 KiB random reads and writes, half each,
direct I/O, time-based, one job per volume, JSON out; and what its log says.

One job at a queue depth of 16 (libaio) asks more of a volume than a QoS policy of a few thousand IOPS allows, so
a limit shows as the ceiling it is; the same command before and after, so the two rows differ only by the class.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

MOUNT_PATH = "/data"
FILE_NAME = "csibench-modify"
MIB = 1 << 20


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
    """The JSON document fio printed last; fio's own words (the lines before it) when there is none."""
    start = log.find("{")
    try:
        document = json.loads(log[start:]) if start >= 0 else None
    except ValueError:
        document = None
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list) or not jobs or not isinstance(jobs[0], dict):
        words = " ".join(line.strip() for line in log[: start if start >= 0 else len(log)].splitlines()
                         if line.strip())
        raise FioFailed(words[:600] or "fio wrote no result")
    job = jobs[0]
    if job.get("error"):
        raise FioFailed(f"fio ended with error {job.get('error')}")

    def number(direction: str, key: str) -> float:
        value = (job.get(direction) or {}).get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else 0.0

    return Delivered(number("read", "iops"), number("write", "iops"), number("read", "bw_bytes"),
                     number("write", "bw_bytes"))
