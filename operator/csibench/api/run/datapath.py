"""spec.dataPath: fio's workloads on the run's volumes, their rate levels, the local baseline and verify.
"""

from __future__ import annotations

import itertools
from enum import StrEnum
from typing import Annotated

from pydantic import ConfigDict, Field, field_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import QUANTITY_PATTERN, Resources, cel


class FioPattern(StrEnum):
    """fio's ``--rw``: the I/O pattern of a workload."""

    READ = "read"
    WRITE = "write"
    RANDREAD = "randread"
    RANDWRITE = "randwrite"
    RANDRW = "randrw"


MAX_WORKLOADS = 16
MAX_RATE_LEVELS = 10
MAX_WORKLOAD_ZONES = 16
FIO_SIZE_PATTERN = r"^[1-9][0-9]{0,5}(Ki|Mi|Gi)?$"  # fio and Kubernetes read these the same way (binary units)
WHOLE_MIB_PATTERN = r"^[1-9][0-9]{0,5}(Mi|Gi)$"  # a file of whole MiB, as fio and Kubernetes both read it
IOENGINE_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
WORKLOAD_NAME_PATTERN = r"^[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?$"


class DataPathWorkload(_Model):
    """One row of the data-path matrix: one fio job file run on every selected volume at once."""

    name: str = Field(..., min_length=1, max_length=32, pattern=WORKLOAD_NAME_PATTERN,
                      description="Row name: letters, digits and '-', starting with a letter, e.g. seqRead; "
                                  "labels the row's metrics.")
    pattern: FioPattern = Field(..., description="fio --rw: read, write, randread, randwrite or randrw.")
    blockSize: str = Field(..., max_length=16, pattern=FIO_SIZE_PATTERN,
                           description="fio --bs, e.g. 64Ki or 8Ki.")
    readPercent: int = Field(50, ge=0, le=100, description="fio --rwmixread for randrw (percent reads).")
    fileSize: str | None = Field(None, max_length=16, pattern=FIO_SIZE_PATTERN,
                                 description="Overrides dataPath.fileSize for this row.")
    ioengine: str | None = Field(None, max_length=32, pattern=IOENGINE_PATTERN,
                                 description="Overrides dataPath.ioengine for this row.")
    iodepth: int | None = Field(None, ge=1, le=1024, description="Overrides dataPath.iodepth for this row.")
    zones: list[Annotated[str, Field(min_length=1, max_length=v.LABEL_VALUE_MAX, pattern=v.LABEL_VALUE_PATTERN)]] = \
        Field(default_factory=list, max_length=MAX_WORKLOAD_ZONES, json_schema_extra=cel(
            ("self.all(x, self.exists_one(y, y == x))", "a workload's zones must be unique")),
            description="Run this row's pods only on nodes in these zones (their topology.kubernetes.io/zone "
                        "label; default: wherever the volumes' own placement allows). With volumes that live in "
                        "one zone but may be used from any (a shared filesystem's, a service's), a row run in "
                        "another zone beside one run in theirs shows the cost of crossing zones. A volume whose "
                        "PV allows a single zone, not one of these, fails the row's pod on it at once "
                        "(VolumeZoneConflict: it could never be scheduled); one allowed in several zones is left "
                        "to the scheduler.")

    @field_validator("zones")
    @classmethod
    def _unique_zones(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a workload's zones must be unique")
        return value

    @property
    def reads(self) -> bool:
        return self.pattern in (FioPattern.READ, FioPattern.RANDREAD) or (
            self.pattern == FioPattern.RANDRW and self.readPercent > 0)

    @property
    def writes(self) -> bool:
        return self.pattern in (FioPattern.WRITE, FioPattern.RANDWRITE) or (
            self.pattern == FioPattern.RANDRW and self.readPercent < 100)


def default_workloads() -> list[DataPathWorkload]:
    """The published SIO-style table: sequential 64 KiB read/write, random 8 KiB read/write, random 50/50."""
    return [DataPathWorkload(name="seqRead", pattern=FioPattern.READ, blockSize="64Ki"),
            DataPathWorkload(name="seqWrite", pattern=FioPattern.WRITE, blockSize="64Ki"),
            DataPathWorkload(name="randRead", pattern=FioPattern.RANDREAD, blockSize="8Ki"),
            DataPathWorkload(name="randWrite", pattern=FioPattern.RANDWRITE, blockSize="8Ki"),
            DataPathWorkload(name="randReadWrite", pattern=FioPattern.RANDRW, blockSize="8Ki", readPercent=50)]


WORKLOAD_TITLES = {"seqRead": "Sequential read", "seqWrite": "Sequential write", "randRead": "Random read",
                   "randWrite": "Random write", "randReadWrite": "Random 50/50"}


class DataPathSpec(_Model):
    """The data path: fio on the run's volumes, one pod per volume at once, one workload after the other."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("!has(self.workloads) || self.workloads.all(a, self.workloads.exists_one(b, b.name == a.name))",
         "workload names must be unique"),
    ))

    workloads: list[DataPathWorkload] = Field(
        default_factory=default_workloads, min_length=1, max_length=MAX_WORKLOADS,
        description="The rows, run in order. Default: sequential 64Ki read and write, random 8Ki read and write, "
                    "random 8Ki 50/50.")
    volumes: int | None = Field(None, ge=1, le=1024,
                                description="How many of the run's volumes each workload uses (the first N); "
                                            "default all (at most 1024).")
    jobsPerVolume: int = Field(2, ge=1, le=64, description="fio --numjobs: processes per volume, one file each.")
    iodepth: int = Field(8, ge=1, le=1024, description="fio --iodepth.")
    fileSize: str = Field("16Mi", max_length=16, pattern=FIO_SIZE_PATTERN,
                          description="fio --size: the file of each job (jobsPerVolume x fileSize must fit the "
                                      "volume).")
    rampSeconds: int = Field(1, ge=0, le=3600, description="fio --ramp_time: seconds not measured.")
    runtimeSeconds: int = Field(5, ge=1, le=86400, description="fio --runtime, time based: seconds measured.")
    direct: bool = Field(True, description="fio --direct: O_DIRECT, bypassing the page cache.")
    startDelaySeconds: int = Field(5, ge=1, le=300,
                                   description="The start barrier: once every pod of a workload has laid out its "
                                               "files and runs, all begin this many seconds later, at one instant "
                                               "(room for each node's kubelet to write the start time into the "
                                               "pods; a pod that reads it late starts at once, and its skew "
                                               "shows).")
    startTimeoutSeconds: int = Field(300, ge=1, le=86400,
                                     description="How long the start barrier waits for every pod of a workload to "
                                                 "run; the start time is then given to all, and a pod not running "
                                                 "by then starts when it is (its row is flagged by its skew).")
    localBaseline: bool = Field(False, description="After each workload, the same workload (unthrottled, started "
                                                   "together) on an emptyDir, the nodes' own disk, in a pod per "
                                                   "volume on the same nodes; reported beside the class. A class "
                                                   "faster than local is a red flag: a cache, not the storage.")
    verify: bool = Field(False, description="Integrity: after the data path, each volume's fio files are "
                                            "checksummed (sha256, one pod per volume); the verifyClone step "
                                            "(after cloneFromSnapshot) checks each clone's files against its "
                                            "source's, and a clone whose data differs fails, the file named. Needs "
                                            "volumeSnapshotClassName.")
    rateLevels: list[Annotated[int, Field(ge=1, le=100)]] = Field(
        default_factory=list, max_length=MAX_RATE_LEVELS, json_schema_extra=cel(
            ("self.all(x, self.exists_one(y, y == x)) && self.isSorted()",
             "dataPath.rateLevels must be strictly increasing")),
        description="Latency under load: after each workload's unthrottled row, the same workload again at each of "
                    "these percents of the IOPS it reached (fio --rate_iops per job, read and write each), e.g. "
                    "[10, 25, 50, 75, 90, 100]: achieved IOPS and merged p99 per level, a table and a curve. Each "
                    "level is one more runtime.")
    arrayCacheBytes: str | None = Field(None, max_length=32, pattern=QUANTITY_PATTERN,
                                        description="The storage's cache, if known (a quantity, e.g. 64Gi): a "
                                                    "working set (volumes x jobsPerVolume x fileSize) smaller than "
                                                    "it is a preflight Warning (DataPathCache).")
    ioengine: str = Field("libaio", max_length=32, pattern=IOENGINE_PATTERN, description="fio --ioengine.")
    image: str | None = Field(None, min_length=1, max_length=v.IMAGE_MAX, pattern=v.IMAGE_PATTERN,
                              description="Workload image (fio inside); default: the operator's "
                                          "--workload-image / CSIBENCH_WORKLOAD_IMAGE.")
    resources: Resources = Field(default_factory=Resources,
                                 description="Resources of each workload container (nodeSelector and tolerations "
                                             "come from spec.pod).")

    @field_validator("rateLevels")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(later <= earlier for earlier, later in itertools.pairwise(value)):
            raise ValueError("dataPath.rateLevels must be strictly increasing")
        return value

    def file_size(self, workload: DataPathWorkload) -> str:
        return workload.fileSize or self.fileSize

    @property
    def slots(self) -> int:
        """Runs of each workload: the unthrottled one, one per rate level, then the local baseline's."""
        return 1 + len(self.rateLevels) + (1 if self.localBaseline else 0)

    def level_of(self, slot: int) -> int | None:
        """The rate level (percent) of a run of a workload; None for the unthrottled run and the baseline's."""
        return self.rateLevels[slot - 1] if 1 <= slot <= len(self.rateLevels) else None

    def is_baseline(self, slot: int) -> bool:
        return self.localBaseline and slot == self.slots - 1
