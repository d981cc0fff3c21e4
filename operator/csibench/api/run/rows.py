"""Status rows of the workload steps' own tables: data path (fio), density and database (pgbench).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from csibench.api.base import Model as _Model
from csibench.api.run.common import StepState
from csibench.api.run.database import PgbenchMode
from csibench.api.run.datapath import MAX_RATE_LEVELS
from csibench.api.run.observations import MAX_ZONES, Latency


class DataPathLatency(_Model):
    """Completion latency (fio's clat) of a data-path row, in seconds, per direction: percentiles of every
    completion of every pod of the row, read from their fio latency histograms merged (exact to fio's bins, as one
    fio would report them for all those completions); the maximum is the largest completion seen."""

    readP50: float | None = Field(None, description="Read clat p50 over all pods' completions, seconds.")
    readP90: float | None = Field(None, description="Read clat p90 over all pods' completions, seconds.")
    readP99: float | None = Field(None, description="Read clat p99 over all pods' completions, seconds.")
    readP999: float | None = Field(None, description="Read clat p99.9 over all pods' completions, seconds.")
    readMax: float | None = Field(None, description="Slowest read completion, seconds.")
    writeP50: float | None = Field(None, description="Write clat p50 over all pods' completions, seconds.")
    writeP90: float | None = Field(None, description="Write clat p90 over all pods' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over all pods' completions, seconds.")
    writeP999: float | None = Field(None, description="Write clat p99.9 over all pods' completions, seconds.")
    writeMax: float | None = Field(None, description="Slowest write completion, seconds.")


class DataPathLevel(_Model):
    """One rate level of a data-path row: the workload run again, throttled to a share of the IOPS its
    unthrottled row reached; what it achieved and its completions' p99 (every pod's histograms merged)."""

    percent: int = Field(..., description="The level: percent of the unthrottled row's IOPS.")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    targetIOPS: float | None = Field(None, description="IOPS asked for in all (fio --rate_iops per job, read and "
                                                       "write, times the jobs).")
    readIOPS: float | None = Field(None, description="Read IOPS achieved, summed over volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS achieved, summed over volumes.")
    readP99: float | None = Field(None, description="Read clat p99 over all pods' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over all pods' completions, seconds.")
    startSkewSeconds: float | None = Field(None, description="The latest pod's measured start minus the earliest's.")
    skewed: bool | None = Field(None, description="True: the pods did not all run together (as for the row).")
    message: str | None = Field(None, description="Why the level failed or was not run.")


class DataPathBaseline(_Model):
    """A workload run on the nodes' own disk (an emptyDir per pod, on the same nodes): what the class is held
    against."""

    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    readMiBps: float | None = Field(None, description="Read bandwidth summed over the pods, MiB/s.")
    writeMiBps: float | None = Field(None, description="Write bandwidth summed over the pods, MiB/s.")
    readIOPS: float | None = Field(None, description="Read IOPS summed over the pods.")
    writeIOPS: float | None = Field(None, description="Write IOPS summed over the pods.")
    readP99: float | None = Field(None, description="Read clat p99 over all pods' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over all pods' completions, seconds.")
    fasterThanLocal: bool | None = Field(None, description="True: the class's row moved more MiB/s than the local "
                                                           "disk did (a cache, not the storage?).")
    message: str | None = Field(None, description="Why the baseline failed.")


class DataPathShare(_Model):
    """A part of a data-path row (a node's or a zone's pods): its volumes, their I/O summed, their completions'
    p99 (histograms merged)."""

    volumes: int = Field(0, description="Volumes (pods) of the row here.")
    readMiBps: float | None = Field(None, description="Read bandwidth summed over these volumes, MiB/s.")
    writeMiBps: float | None = Field(None, description="Write bandwidth summed over these volumes, MiB/s.")
    readIOPS: float | None = Field(None, description="Read IOPS summed over these volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS summed over these volumes.")
    readP99: float | None = Field(None, description="Read clat p99 over these volumes' completions, seconds.")
    writeP99: float | None = Field(None, description="Write clat p99 over these volumes' completions, seconds.")


class DataPathNodeRow(DataPathShare):
    """One node's share of a data-path row, so a slow node shows."""

    node: str = Field(..., description="Node the pods ran on.")


class DataPathZoneRow(DataPathShare):
    """One zone's share of a data-path row (its pods' nodes' zone): a slow zone, or what crossing zones costs."""

    zone: str = Field(..., description="Zone of the nodes the pods ran on (their topology.kubernetes.io/zone).")


class DataPathRow(_Model):
    """One workload of the data path: aggregates over the volumes it ran on (per-volume rows are in the report)."""

    name: str = Field(..., description="Workload name, e.g. seqRead.")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    pattern: str = Field("", description="fio --rw.")
    blockSize: str = Field("", description="fio --bs.")
    volumes: int = Field(0, description="Volumes (pods) the workload ran on.")
    jobs: int = Field(0, description="fio jobs in all (volumes x jobs per volume).")
    failed: int = Field(0, description="Pods that failed (non-zero exit, refused, timeout).")
    durationSeconds: float | None = Field(None, description="Wall time of the row: pods created to pods done.")
    readMiBps: float | None = Field(None, description="Read bandwidth summed over volumes, MiB/s.")
    writeMiBps: float | None = Field(None, description="Write bandwidth summed over volumes, MiB/s.")
    readIOPS: float | None = Field(None, description="Read IOPS summed over volumes.")
    writeIOPS: float | None = Field(None, description="Write IOPS summed over volumes.")
    minVolumeMiBps: float | None = Field(None, description="Slowest volume's bandwidth (read + write), MiB/s.")
    maxVolumeMiBps: float | None = Field(None, description="Fastest volume's bandwidth (read + write), MiB/s.")
    latency: DataPathLatency | None = Field(None, description="Completion latency percentiles.")
    startSkewSeconds: float | None = Field(None, description="The latest pod's measured start minus the earliest's "
                                                             "(fio's own clock), seconds.")
    togetherSeconds: float | None = Field(None, description="How long every pod measured at once: the earliest "
                                                            "end minus the latest start (0: never all at once).")
    skewed: bool | None = Field(None, description="True: the start skew exceeds 10% of the runtime, so the sums "
                                                  "add up pods that did not all run at once (togetherSeconds says "
                                                  "for how long they did); a Warning DataPathStartSkew says so.")
    startAt: int | None = Field(None, description="The start time the barrier gave the pods (epoch seconds).")
    slowVolumes: list[str] = Field(default_factory=list, max_length=16,
                                   description="Volumes whose bandwidth was under half the row's median per volume "
                                               "(slowest first, at most 16; with 3 volumes or more): a Warning "
                                               "DataPathSlowVolume names them with their nodes.")
    levels: list[DataPathLevel] = Field(default_factory=list, max_length=MAX_RATE_LEVELS,
                                        description="Latency under load (spec.dataPath.rateLevels), in order.")
    baseline: DataPathBaseline | None = Field(None, description="The same workload on the nodes' own disk "
                                                                "(spec.dataPath.localBaseline).")
    nodes: list[DataPathNodeRow] = Field(default_factory=list, max_length=64,
                                         description="Per node: its volumes, their I/O summed and p99; the "
                                                     "volumes add up to the row's measured ones (beyond 64 "
                                                     "nodes, the 64 slowest per volume).")
    zones: list[DataPathZoneRow] = Field(default_factory=list, max_length=MAX_ZONES,
                                         description="Per zone of the pods' nodes: its volumes, their I/O summed "
                                                     "and p99 (none when no node has a zone label).")
    message: str | None = Field(None, description="Why the row failed: the tool's own message (first failure).")


class DensityRow(_Model):
    """One level of the density ramp: its volumes published at once on one node, then unpublished."""

    volumesPerNode: int = Field(..., description="Volumes on the node at this level.")
    node: str = Field("", description="The node they were published on.")
    pods: int = Field(0, description="Pods that mounted them (pvcsPerPod each).")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    failed: int = Field(0, description="Pods that did not become Ready (or were not removed).")
    durationSeconds: float | None = Field(None, description="Publish: pods created to the last Ready, seconds.")
    throughput: float | None = Field(None, description="Volumes published per second of that time.")
    latency: Latency | None = Field(None, description="Per pod, created to Ready (attach, mount, start), seconds.")
    attach: Latency | None = Field(None, description="Per pod, created to every volume attached (the "
                                                     "VolumeAttachments say attached, or Ready when that was seen "
                                                     "later), seconds.")
    detachSeconds: float | None = Field(None, description="Unpublish: pods deleted to all gone and detached, "
                                                          "seconds.")
    message: str | None = Field(None, description="Why the level failed (the first failure).")


class DatabaseRowKind(StrEnum):
    INITIALIZE = "initialize"  # pgbench -i -s SCALE: its wall time
    RUN = "run"  # one pgbench run of a mode and a client count


class DatabaseRow(_Model):
    """One row of the database table: a scale's initialization (its wall time) or one pgbench run."""

    kind: DatabaseRowKind = Field(..., description="initialize (pgbench -i) or run.")
    scale: int = Field(..., description="pgbench scale factor.")
    mode: PgbenchMode | None = Field(None, description="readOnly or readWrite (runs only).")
    clients: int | None = Field(None, description="pgbench clients (runs only).")
    threads: int | None = Field(None, description="pgbench threads, as pgbench reported them (runs only).")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    durationSeconds: float | None = Field(None, description="Wall time: of the initialization, or of the run.")
    tps: float | None = Field(None, description="Transactions per second, excluding connection time (pgbench's "
                                                "'without initial connection time').")
    latencyAverageMs: float | None = Field(None, description="pgbench's latency average, ms.")
    latencyStddevMs: float | None = Field(None, description="pgbench's latency stddev, ms.")
    transactions: int | None = Field(None, description="Transactions processed.")
    failedTransactions: int | None = Field(None, description="Failed transactions (pgbench's count).")
    walBytes: int | None = Field(None, description="WAL generated, bytes: pg_current_wal_lsn() after minus before.")
    message: str | None = Field(None, description="Why the row failed: PostgreSQL's or pgbench's own message.")
