"""spec.shared and its rows: one ReadWriteMany volume mounted by pods on different nodes, measured as shared
storage's users feel it (what another node sees and when, locks, small files, listings); or one ReadOnlyMany
volume, a clone of a volume filled first, read by pods on different nodes at once (listings, every reader's fio).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import (
    QUANTITY_PATTERN,
    StepState,
    WorkloadPods,
    cel,
)
from csibench.api.run.datapath import WHOLE_MIB_PATTERN


class SharedAccessMode(StrEnum):
    """How the pods share the volume."""

    READ_WRITE_MANY = "ReadWriteMany"
    READ_ONLY_MANY = "ReadOnlyMany"


MAX_SHARED_PODS = 16
MAX_LIST_FILES = 10_000_000
_BLOCK_BYTES = 4096  # a small file takes a whole block of most filesystems, however few bytes it holds


class SharedSpec(WorkloadPods):
    """The sharedVolume step: a ReadWriteMany claim of the run's class mounted by ``pods`` pods at once (spread
    apart by a preferred pod anti-affinity, so each is on a node of its own where there are enough), all running
    the same probe, which meets the others at barriers on the volume itself around each phase; or (accessMode
    ReadOnlyMany) a filled claim's read-only clone read by them all from one start time."""

    pods: int = Field(3, ge=2, le=MAX_SHARED_PODS,
                      description="Pods mounting the volume at once, each preferring a node no other has.")
    accessMode: SharedAccessMode = Field(
        SharedAccessMode.READ_WRITE_MANY,
        description="ReadWriteMany: every phase, on one RWX claim. ReadOnlyMany: a ReadWriteOnce claim is filled "
                    "first by one pod (listFiles files, and a fioSize file per reader), then cloned into a "
                    "ReadOnlyMany claim (the class must clone) that the pods mount read-only and read at one "
                    "instant: fio (sequential 1 MiB direct reads of a file each, the aggregate of all readers), "
                    "then the listing; the other phases need writes and are not run.")
    size: str = Field("1Gi", max_length=64, pattern=QUANTITY_PATTERN, json_schema_extra=cel((
        f"quantity(self).isGreaterThan(quantity('0')) && quantity(self).compareTo(quantity('{v.SIZE_MAX}')) <= 0",
        f"shared.size must be greater than 0 and at most {v.SIZE_MAX}")),
        description="Size of the shared claim (Filesystem, the run's class; on ReadOnlyMany, of the filled claim and "
                    "of its clone).")
    files: int = Field(100, ge=1, le=100_000,
                       description="ReadWriteMany: visibility rounds: in round k pod k mod pods creates a file and "
                                   "every other pod answers once it sees it; one sample per round and reader.")
    pollMilliseconds: int = Field(1, ge=1, le=1000,
                                  description="ReadWriteMany: how often a waiting pod looks for a file: the "
                                              "visibility latency's resolution.")
    lockRounds: int = Field(100, ge=1, le=100_000,
                            description="ReadWriteMany: flock rounds per pod on one shared file (lock, counter "
                                        "read and written plus one, unlock).")
    smallFiles: int = Field(1000, ge=1, le=1_000_000,
                            description="ReadWriteMany: small files each pod creates, its neighbour stats and "
                                        "lists, and it deletes.")
    fileBytes: int = Field(4096, ge=0, le=1_048_576,
                           description="ReadWriteMany: bytes written into each small file.")
    listFiles: int = Field(10_000, ge=0, le=MAX_LIST_FILES,
                           description="Files in the directory every pod lists at once (0: no listing phase); pod 0 "
                                       "creates them first (on ReadOnlyMany, the pod that fills the volume).")
    fioSeconds: int = Field(10, ge=0, le=3600,
                            description="Seconds of fio in every pod at once, sequential 1 MiB direct writes to a "
                                        "file of its own (reads, on ReadOnlyMany): the aggregate throughput of "
                                        "all writers (readers) (0: no fio phase).")
    fioSize: str = Field("64Mi", max_length=16, pattern=WHOLE_MIB_PATTERN, json_schema_extra=cel((
        "quantity(self).compareTo(quantity('64Gi')) <= 0", "shared.fioSize must be at most 64Gi")),
        description="Each pod's fio file (fio writes it over and over for fioSeconds; on ReadOnlyMany, the file "
                    "each reader reads, written when the volume is filled).")

    startDelaySeconds: int = Field(5, ge=1, le=300,
                                   description="ReadOnlyMany: once every reader runs, they all begin this many "
                                               "seconds later, at one instant (room for each node's kubelet to "
                                               "write the start time into the pods); a reader that starts late "
                                               "shows in the rows' skew, and fails them when it spoils the sum.")

    @field_validator("size")
    @classmethod
    def _size_in_bounds(cls, value: str) -> str:
        return v.size_in_bounds(value, "shared.size")

    @model_validator(mode="after")
    def _something_to_read(self) -> SharedSpec:
        if self.accessMode == SharedAccessMode.READ_ONLY_MANY and self.listFiles <= 0 and self.fioSeconds <= 0:
            raise ValueError("shared: a ReadOnlyMany volume is measured by its listing and its readers' fio: "
                             "listFiles or fioSeconds must be above 0")
        return self

    @model_validator(mode="after")
    def _small_files_fit(self) -> SharedSpec:
        """Every pod's small files at once, each at least a block: a run that cannot hold them is refused, not
        failed half-way with a full volume."""
        writes = self.accessMode == SharedAccessMode.READ_WRITE_MANY  # a read-only volume gets no small files
        needed = self.pods * self.smallFiles * max(self.fileBytes, _BLOCK_BYTES) if writes else 0
        fio = self.pods * int(v.parse_quantity(self.fioSize)) if self.fioSeconds > 0 else 0
        if needed + fio > v.parse_quantity(self.size):
            raise ValueError(f"shared: pods x smallFiles x fileBytes (each file at least {_BLOCK_BYTES} bytes) and "
                             f"pods x fioSize need {needed + fio} bytes, more than shared.size {self.size}: raise "
                             "size or lower them")
        return self


class SharedPhase(StrEnum):
    """The probe's phases, in the order they run (one row each)."""

    VISIBILITY = "visibility"  # one pod creates a file, the others answer when they see it: half the round trip
    LOCK = "lock"  # flock on one shared file, a counter under the lock
    CREATE = "create"  # small files, each pod in its own directory
    STAT = "stat"  # each pod stats its neighbour's files
    LIST = "list"  # each pod lists its neighbour's directory
    DELETE = "delete"  # each pod unlinks its own files
    LISTING = "listing"  # every pod lists one directory of listFiles files
    FIO = "fio"  # every pod's fio at once: sequential 1 MiB direct writes (reads on ReadOnlyMany), the aggregate


MAX_SHARED_ROWS = len(SharedPhase)


class SharedLatency(_Model):
    """Per-operation latency of a phase over every pod, in milliseconds (the pods' histograms merged, fio's bins:
    within 1/128 of the value)."""

    p50: float = Field(..., description="Median, ms.")
    p90: float = Field(..., description="90th percentile, ms.")
    p99: float = Field(..., description="99th percentile, ms.")
    p999: float = Field(..., description="99.9th percentile, ms.")
    max: float = Field(..., description="Slowest operation (exact), ms.")


class SharedRow(_Model):
    """One phase of the shared-volume probe over all its pods."""

    phase: SharedPhase = Field(..., description="visibility, lock, create, stat, list, delete or listing.")
    state: StepState = Field(StepState.PENDING, description="Pending, Running, Succeeded, Failed or Interrupted.")
    pods: int = Field(0, description="Pods that reported this phase.")
    nodes: int = Field(0, description="Distinct nodes those pods ran on.")
    operations: int | None = Field(None, description="Operations timed: visibility samples (rounds x readers), "
                                                     "lock acquisitions, files, listings, or fio's writes.")
    durationSeconds: float | None = Field(None, description="The slowest pod's time in the phase, from leaving the "
                                                            "barrier before it to leaving the one after it, "
                                                            "seconds.")
    opsPerSecond: float | None = Field(None, description="Operations over that time, every pod together (list and "
                                                         "listing: names read per second by the slowest pod).")
    latency: SharedLatency | None = Field(None, description="Per operation: visibility is half the round trip "
                                                            "(create, seen on another node, answered, seen back); "
                                                            "fio's is its completion latency.")
    lostUpdates: int | None = Field(None, description="lock: increments under the lock that the counter does not "
                                                      "hold (0 when flock serialises the pods).")
    missing: int | None = Field(None, description="stat, list, listing: files another pod created that a pod did "
                                                  "not find; delete: files a pod created that it could not find.")
    entries: int | None = Field(None, description="list, listing: the fewest names a pod read.")
    createSeconds: float | None = Field(None, description="listing: pod 0's time to create the files, seconds.")
    writeMiBps: float | None = Field(None, description="fio: MiB/s written, every pod's fio together.")
    readMiBps: float | None = Field(None, description="fio on a ReadOnlyMany volume: MiB/s read, every pod's fio "
                                                      "together.")
    startSkewSeconds: float | None = Field(None, description="ReadOnlyMany (no barriers): the latest reader's "
                                                             "start of the phase minus the earliest's, by their "
                                                             "clocks, seconds.")
    togetherSeconds: float | None = Field(None, description="ReadOnlyMany fio: how long every reader read at once "
                                                            "(the earliest end minus the latest start), seconds.")
    skewed: bool | None = Field(None, description="ReadOnlyMany: the readers' starts spread over more than 10% of "
                                                  "the phase (fio: its runtime), so the row's sum adds up readers "
                                                  "that did not all read at once; the row fails and says so.")
    message: str | None = Field(None, description="Why the phase failed, in the probe's or Kubernetes' words.")
