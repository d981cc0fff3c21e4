"""A data-path row from its volumes' results, and the per-volume records the report keeps (pure).

Bandwidth and IOPS are summed over volumes (the array delivers them at once). Completion-latency percentiles
cannot be summed or averaged honestly: within a pod, fio merges its jobs' latency histograms itself
(``--group_reporting``); across pods the row merges the pods' histograms (``api.histogram``) and reads its
percentiles from the merge, so a row's p99 is the p99 of all its completions, between the smallest and the largest
per-pod p99. Each volume's histograms stay in the report, so anyone can merge them again. Min and max per-volume
bandwidth (read + write) show the spread.
A row fails when any of its pods failed; its message is the first failure's (fio's own words).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from csibench.api import histogram
from csibench.api.models import (
    MAX_ZONES,
    DataPathLatency,
    DataPathNodeRow,
    DataPathRow,
    DataPathSpec,
    DataPathWorkload,
    DataPathZoneRow,
    StepState,
)
from csibench.api.skew import is_skewed
from csibench.api.text import shorten
from csibench.engine.steps.datapath.fio import MIB, Direction, VolumeResult


def pending_row(spec: DataPathSpec, workload: DataPathWorkload, volumes: int) -> DataPathRow:
    return DataPathRow(name=workload.name, pattern=workload.pattern.value, blockSize=workload.blockSize,
                       volumes=volumes, jobs=volumes * spec.jobsPerVolume)


def _seconds(nanoseconds: int | None) -> float | None:
    return None if nanoseconds is None else round(nanoseconds / 1e9, 9)


def merged_latency(directions: list[Direction]) -> dict[str, float | None]:
    """P50, P90, P99, P999 and Max (seconds) of one direction over every pod's completions (None: no I/O)."""
    merged = histogram.merge(d.clat_bins for d in directions)
    found = histogram.percentiles(merged)
    largest = [d.clat_max for d in directions if d.clat_max is not None]
    return {"P50": _seconds(found[50.0]), "P90": _seconds(found[90.0]), "P99": _seconds(found[99.0]),
            "P999": _seconds(found[99.9]), "Max": round(max(largest), 9) if merged and largest else None}


NODE_ROWS = 64  # per row in status, so 16 workloads of up to 1024 volumes stay far below etcd's object limit


def _grouped(results: Sequence[VolumeResult], keys: Sequence[str | None]) -> list[tuple[str, list[VolumeResult]]]:
    """The results by key (a node's or a zone's name; one without a key is left out), in the keys' order."""
    by_key: dict[str, list[VolumeResult]] = {}
    for result, key in zip(results, keys, strict=True):
        if key:
            by_key.setdefault(key, []).append(result)
    return sorted(by_key.items())


def _share(found: list[VolumeResult]) -> dict[str, Any]:
    """A share's fields (``DataPathShare``): its volumes' I/O summed and their completions' p99."""
    return {"volumes": len(found), "readMiBps": sum(r.read.bytes_per_second for r in found) / MIB,
            "writeMiBps": sum(r.write.bytes_per_second for r in found) / MIB,
            "readIOPS": sum(r.read.iops for r in found), "writeIOPS": sum(r.write.iops for r in found),
            "readP99": merged_latency([r.read for r in found])["P99"],
            "writeP99": merged_latency([r.write for r in found])["P99"]}


def zone_rows(results: Sequence[VolumeResult], nodes: Sequence[str | None],
              zones: Mapping[str, str]) -> list[DataPathZoneRow]:
    """Per zone of the pods' nodes (``zones``: node -> zone; a pod on a node without one is left out), in name
    order; at most MAX_ZONES (the first by name)."""
    keys = [zones.get(node) if node else None for node in nodes]
    return [DataPathZoneRow(zone=zone, **_share(found)) for zone, found in _grouped(results, keys)][:MAX_ZONES]


def node_rows(results: Sequence[VolumeResult], nodes: Sequence[str | None]) -> list[DataPathNodeRow]:
    """Per node (by name; a pod whose node was never seen is left out), in name order: its volumes' I/O summed
    and their completions' p99. Beyond NODE_ROWS nodes, the NODE_ROWS slowest per volume (a slow node is what
    the rows are for); the per-volume records in the report name every pod's node."""
    rows = [DataPathNodeRow(node=node, **_share(found)) for node, found in _grouped(results, nodes)]
    if len(rows) > NODE_ROWS:
        rows = sorted(sorted(rows, key=lambda n: ((n.readMiBps or 0) + (n.writeMiBps or 0)) / n.volumes)[:NODE_ROWS],
                      key=lambda n: n.node)
    return rows


SLOW_SHARE = 0.5  # of the row's median per-volume bandwidth: a volume below it is much slower than the rest
SLOW_SHOWN = 16
MIN_VOLUMES_FOR_MEDIAN = 3


def slow_volumes(results: Sequence[VolumeResult], volumes: Sequence[str]) -> list[tuple[str, float]]:
    """(volume, MiB/s) of the volumes whose bandwidth (read + write) was under SLOW_SHARE of the row's median per
    volume, slowest first (none with fewer than 3 volumes: no median to speak of); status shows SLOW_SHOWN."""
    if len(results) < MIN_VOLUMES_FOR_MEDIAN:
        return []
    rates = [r.bytes_per_second / MIB for r in results]
    median = statistics.median(rates)
    slow = sorted(((volume, rate) for volume, rate in zip(volumes, rates, strict=True) if rate < SLOW_SHARE * median),
                  key=lambda pair: pair[1])
    return [(volume, round(rate, 3)) for volume, rate in slow]


def build_row(spec: DataPathSpec, workload: DataPathWorkload, results: list[VolumeResult],
              failures: list[tuple[str, str]], seconds: float, nodes: Sequence[str | None] = (),
              zones: Mapping[str, str] | None = None) -> DataPathRow:
    """``results``: the volumes that measured; ``failures``: (reason, message) of the pods that did not;
    ``nodes``: where each of ``results`` ran (none known: no per-node rows); ``zones``: node -> zone (none known:
    no per-zone rows)."""
    row = pending_row(spec, workload, len(results) + len(failures))
    row.durationSeconds = round(seconds, 3)
    row.failed = len(failures)
    row.state = StepState.FAILED if failures or not results else StepState.SUCCEEDED
    if failures:
        reason, message = failures[0]
        row.message = shorten(f"{len(failures)} of {row.volumes} pods failed ({reason}): {message}", 600)
    if results:
        row.readMiBps = sum(r.read.bytes_per_second for r in results) / MIB  # full precision: judged, compared
        row.writeMiBps = sum(r.write.bytes_per_second for r in results) / MIB
        row.readIOPS = sum(r.read.iops for r in results)
        row.writeIOPS = sum(r.write.iops for r in results)
        per_volume = [r.bytes_per_second / MIB for r in results]
        row.minVolumeMiBps, row.maxVolumeMiBps = round(min(per_volume), 3), round(max(per_volume), 3)
        reads = merged_latency([r.read for r in results])
        writes = merged_latency([r.write for r in results])
        row.latency = DataPathLatency(**{f"read{k}": value for k, value in reads.items()},
                                      **{f"write{k}": value for k, value in writes.items()})
        if nodes:
            row.nodes = node_rows(results, nodes)
            row.zones = zone_rows(results, nodes, zones or {})
        windows = [r.window_ms for r in results if r.window_ms is not None]
        if windows:
            starts, ends = [start for start, _ in windows], [end for _, end in windows]
            row.startSkewSeconds = round((max(starts) - min(starts)) / 1000, 3)
            row.togetherSeconds = round(max(0, min(ends) - max(starts)) / 1000, 3)
            row.skewed = is_skewed(row.startSkewSeconds, spec.runtimeSeconds)
    return row


PER_POD_HISTOGRAMS = 64  # unthrottled pods of a run (workloads x volumes) up to which each one's histograms stay
NODE_HISTOGRAMS = 16  # nodes of a row up to which each one's merged histograms stay in the report


def row_histograms(results: Sequence[VolumeResult], nodes: Sequence[str | None]) -> dict[str, Any]:
    """What the report keeps of a row's latency, bounded whatever its size: every pod's histograms merged per
    direction (what the row's percentiles were read from), and per node while the row ran on at most
    NODE_HISTOGRAMS nodes. Per-pod histograms are kept only for runs of up to PER_POD_HISTOGRAMS pods: at 1024
    volumes x 16 workloads they would be about 130 MB of JSON (18 MB gzipped) in the operator and the report."""
    kept: dict[str, Any] = {direction: histogram.to_json(histogram.merge(getattr(r, direction).clat_bins
                                                                         for r in results))
                            for direction in ("read", "write")}
    by_node: dict[str, list[VolumeResult]] = {}
    for result, node in zip(results, nodes, strict=True):
        if node:
            by_node.setdefault(node, []).append(result)
    if 0 < len(by_node) <= NODE_HISTOGRAMS:
        kept["nodes"] = {node: {direction: histogram.to_json(histogram.merge(getattr(r, direction).clat_bins
                                                                             for r in found))
                                for direction in ("read", "write")} for node, found in sorted(by_node.items())}
    return kept


def volume_record(workload: str, volume: str, pod: str, result: VolumeResult | None,
                  failure: tuple[str, str] | None, node: str | None = None, bins: bool = True) -> dict[str, Any]:
    """One volume of one workload, for the report (``bins``: with its latency histograms)."""
    record: dict[str, Any] = {"workload": workload, "volume": volume, "pod": pod}
    if node:
        record["node"] = node
    if result is not None and result.window_ms is not None:
        record["startMs"], record["endMs"] = result.window_ms
    if result is not None:
        record.update(readBytesPerSecond=round(result.read.bytes_per_second, 1),
                      writeBytesPerSecond=round(result.write.bytes_per_second, 1),
                      readIOPS=round(result.read.iops, 1), writeIOPS=round(result.write.iops, 1),
                      readClatP50=result.read.clat_p50, readClatP99=result.read.clat_p99,
                      writeClatP50=result.write.clat_p50, writeClatP99=result.write.clat_p99, jobs=result.jobs)
        if bins:
            record.update(readClatBins=histogram.to_json(result.read.clat_bins),
                          writeClatBins=histogram.to_json(result.write.clat_bins))
    if failure is not None:
        record.update(reason=failure[0], message=failure[1])
    return record
