"""A data-path row from its volumes' results, and the per-volume records the report keeps (pure).

Bandwidth and IOPS are summed over volumes (the array delivers them at once). Completion-latency percentiles
cannot be summed or averaged honestly: within a pod, fio merges its jobs' latency histograms itself
(``--group_reporting``); across pods the row takes the largest per-pod p50 and p99, the slowest volume's, so a
row's latency is never better than any volume's. Min and max per-volume bandwidth (read + write) show the spread.
A row fails when any of its pods failed; its message is the first failure's (fio's own words).
"""

from __future__ import annotations

from typing import Any

from csibench.api.models import DataPathLatency, DataPathRow, DataPathSpec, DataPathWorkload, StepState
from csibench.api.text import shorten
from csibench.engine.datapath.fio import MIB, VolumeResult


def pending_row(spec: DataPathSpec, workload: DataPathWorkload, volumes: int) -> DataPathRow:
    return DataPathRow(name=workload.name, pattern=workload.pattern.value, blockSize=workload.blockSize,
                       volumes=volumes, jobs=volumes * spec.jobsPerVolume)


def _max(values: list[float | None]) -> float | None:
    present = [x for x in values if x is not None]
    return round(max(present), 6) if present else None


def build_row(spec: DataPathSpec, workload: DataPathWorkload, results: list[VolumeResult],
              failures: list[tuple[str, str]], seconds: float) -> DataPathRow:
    """``results``: the volumes that measured; ``failures``: (reason, message) of the pods that did not."""
    row = pending_row(spec, workload, len(results) + len(failures))
    row.durationSeconds = round(seconds, 3)
    row.failed = len(failures)
    row.state = StepState.FAILED if failures or not results else StepState.SUCCEEDED
    if failures:
        reason, message = failures[0]
        row.message = shorten(f"{len(failures)} of {row.volumes} pods failed ({reason}): {message}", 600)
    if results:
        row.readMiBps = round(sum(r.read.bytes_per_second for r in results) / MIB, 3)
        row.writeMiBps = round(sum(r.write.bytes_per_second for r in results) / MIB, 3)
        row.readIOPS = round(sum(r.read.iops for r in results), 1)
        row.writeIOPS = round(sum(r.write.iops for r in results), 1)
        per_volume = [r.bytes_per_second / MIB for r in results]
        row.minVolumeMiBps, row.maxVolumeMiBps = round(min(per_volume), 3), round(max(per_volume), 3)
        row.latency = DataPathLatency(readP50=_max([r.read.clat_p50 for r in results]),
                                      readP99=_max([r.read.clat_p99 for r in results]),
                                      writeP50=_max([r.write.clat_p50 for r in results]),
                                      writeP99=_max([r.write.clat_p99 for r in results]))
    return row


def volume_record(workload: str, volume: str, pod: str, result: VolumeResult | None,
                  failure: tuple[str, str] | None) -> dict[str, Any]:
    """One volume of one workload, for the report."""
    record: dict[str, Any] = {"workload": workload, "volume": volume, "pod": pod}
    if result is not None:
        record.update(readBytesPerSecond=round(result.read.bytes_per_second, 1),
                      writeBytesPerSecond=round(result.write.bytes_per_second, 1),
                      readIOPS=round(result.read.iops, 1), writeIOPS=round(result.write.iops, 1),
                      readClatP50=result.read.clat_p50, readClatP99=result.read.clat_p99,
                      writeClatP50=result.write.clat_p50, writeClatP99=result.write.clat_p99, jobs=result.jobs)
    if failure is not None:
        record.update(reason=failure[0], message=failure[1])
    return record
