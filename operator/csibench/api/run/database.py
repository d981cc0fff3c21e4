"""spec.database: PostgreSQL and pgbench on a volume of its own, the matrix of scales, modes and clients.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, field_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import (
    QUANTITY_PATTERN,
    WorkloadPods,
    cel,
)


class PgbenchMode(StrEnum):
    """What pgbench runs: its built-in select-only script (readOnly) or its TPC-B-like script (readWrite)."""

    READ_ONLY = "readOnly"
    READ_WRITE = "readWrite"


class SynchronousCommit(StrEnum):
    """PostgreSQL's synchronous_commit: whether a commit waits for its WAL to reach the disk."""

    ON = "on"
    OFF = "off"
    LOCAL = "local"
    REMOTE_WRITE = "remote_write"
    REMOTE_APPLY = "remote_apply"


MAX_SCALES = 6
MAX_CLIENT_COUNTS = 8
MAX_DATABASE_ROWS = MAX_SCALES * (1 + len(PgbenchMode) * MAX_CLIENT_COUNTS)  # init rows + run rows
PG_SIZE_PATTERN = r"^[1-9][0-9]{0,8}(kB|MB|GB|TB)$"  # PostgreSQL's own memory units (1024-based)


class PostgresSettings(_Model):
    """The PostgreSQL settings that change what the storage sees; PostgreSQL's defaults unless set."""

    sharedBuffers: str = Field("128MB", max_length=16, pattern=PG_SIZE_PATTERN,
                               description="shared_buffers: PostgreSQL's cache; smaller than the data set means "
                                           "reads reach the volume (or the page cache in front of it).")
    maxWalSize: str = Field("1GB", max_length=16, pattern=PG_SIZE_PATTERN,
                            description="max_wal_size: WAL between automatic checkpoints; the volume must hold it "
                                        "besides the data.")
    synchronousCommit: SynchronousCommit = Field(SynchronousCommit.ON,
                                                 description="synchronous_commit: on waits for every commit's WAL "
                                                             "flush (fsync latency shows in readWrite TPS); off "
                                                             "does not.")
    checkpointTimeoutSeconds: int = Field(300, ge=30, le=86400,
                                          description="checkpoint_timeout in seconds: the longest time between "
                                                      "checkpoints.")


class ModeDurations(_Model):
    """How long each pgbench run of a mode lasts (pgbench -T), in seconds."""

    readOnly: int = Field(120, ge=1, le=86400, description="Seconds per readOnly run (published tests: 120-600).")
    readWrite: int = Field(60, ge=1, le=86400, description="Seconds per readWrite run (published tests: 60).")

    def of(self, mode: PgbenchMode) -> int:
        return self.readOnly if mode == PgbenchMode.READ_ONLY else self.readWrite


def _unique(values: list[Any], what: str) -> list[Any]:
    if len(set(values)) != len(values):
        raise ValueError(f"{what} must not repeat: {values}")
    return values


class DatabaseSpec(WorkloadPods):
    """The database workload: PostgreSQL with its data directory on a volume of its own (a PVC of the class under
    test) and pgbench beside it in one pod; for each scale, initialize (pgbench -i, timed), then every mode x
    clients run, with pauses in between."""

    scales: list[Annotated[int, Field(ge=1, le=100000)]] = Field(
        default_factory=lambda: [10, 100], min_length=1, max_length=MAX_SCALES,
        description="pgbench scale factors (-s), in order: 1 is 100,000 accounts, about 16 MB of tables and "
                    "indexes; 10000 is about 150 GB.")
    modes: list[PgbenchMode] = Field(
        default_factory=lambda: [PgbenchMode.READ_ONLY, PgbenchMode.READ_WRITE], min_length=1,
        max_length=len(PgbenchMode), description="readOnly (pgbench -S, select only) and/or readWrite (TPC-B-like), "
                                                 "in order.")
    clients: list[Annotated[int, Field(ge=1, le=1000)]] = Field(
        default_factory=lambda: [8, 32], min_length=1, max_length=MAX_CLIENT_COUNTS,
        description="pgbench client counts (-c), one run per count and mode.")
    threads: int | None = Field(None, ge=1, le=1000,
                                description="pgbench worker threads (-j), at most the run's clients; default "
                                            "min(clients, CPUs the pod sees).")
    durationSeconds: ModeDurations = Field(default_factory=ModeDurations,
                                           description="Length of each run, per mode (pgbench -T).")
    pauseSeconds: int = Field(30, ge=0, le=3600, description="Pause before each run (lets checkpoints and "
                                                             "writeback of the previous one settle).")
    phasePauseSeconds: int = Field(60, ge=0, le=3600,
                                   description="Pause after each scale's initialization and between modes.")
    size: str = Field("16Gi", max_length=64, pattern=QUANTITY_PATTERN, json_schema_extra=cel((
        f"quantity(self).isGreaterThan(quantity('0')) && quantity(self).compareTo(quantity('{v.SIZE_MAX}')) <= 0",
        f"database.size must be greater than 0 and at most {v.SIZE_MAX}")),
        description="Size of the database's PVC: it must hold the largest scale's tables and indexes (about 16 MB "
                    "per scale unit) plus max_wal_size of WAL; one that cannot fails the initialization row with "
                    "PostgreSQL's message.")
    postgres: PostgresSettings = Field(default_factory=PostgresSettings, description="PostgreSQL settings.")

    @field_validator("scales")
    @classmethod
    def _scales_unique(cls, value: list[int]) -> list[int]:
        return _unique(value, "database.scales")

    @field_validator("modes")
    @classmethod
    def _modes_unique(cls, value: list[PgbenchMode]) -> list[PgbenchMode]:
        return _unique(value, "database.modes")

    @field_validator("clients")
    @classmethod
    def _clients_unique(cls, value: list[int]) -> list[int]:
        return _unique(value, "database.clients")

    @field_validator("size")
    @classmethod
    def _size_in_bounds(cls, value: str) -> str:
        return v.size_in_bounds(value, "database.size")
