"""The spec parts of the lifecycle steps that have their own: group snapshots, density, move and expand.
"""

from __future__ import annotations

import itertools
from typing import Annotated

from pydantic import ConfigDict, Field, field_validator, model_validator

from csibench.api import validation as v
from csibench.api.base import Model as _Model
from csibench.api.run.common import MAX_VOLUMES_PER_GROUP, QUANTITY_PATTERN, cel


class GroupSnapshotSpec(_Model):
    """The group snapshot steps: volumes i*n .. i*n+n-1 form group i (n = volumesPerGroup; the last may be
    smaller), each snapshotted by one VolumeGroupSnapshot selecting its claims by the run's labels."""

    volumesPerGroup: int = Field(5, ge=1, le=MAX_VOLUMES_PER_GROUP,
                                 description="Volumes in each group (one VolumeGroupSnapshot per group).")
    volumeGroupSnapshotClassName: str = Field(
        ..., min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
        description="VolumeGroupSnapshotClass of the groups (must exist, for the class's driver).")


MAX_DENSITY_LEVELS = 16
DensityLevel = Annotated[int, Field(ge=1, le=10000)]


class DensitySpec(_Model):
    """The density step: for each level of volumesPerNode, in order, that many of the run's volumes published at
    once in pods pinned to one node, timed, then unpublished, timed."""

    volumesPerNode: list[DensityLevel] = Field(
        ..., min_length=1, max_length=MAX_DENSITY_LEVELS, json_schema_extra=cel(
            ("self.all(x, self.exists_one(y, y == x)) && self.isSorted()",
             "density.volumesPerNode must be strictly increasing")),
        description="Volumes on the node at each level, e.g. [8, 16, 32, 64] (strictly increasing, each at most "
                    "spec.volumes and the driver's per-node limit).")
    node: str | None = Field(None, min_length=1, max_length=v.DNS_SUBDOMAIN_MAX, pattern=v.DNS_SUBDOMAIN_PATTERN,
                             description="The node to fill (one that can run the publish pods). Default: the first "
                                         "by name.")

    @field_validator("volumesPerNode")
    @classmethod
    def _increasing(cls, value: list[int]) -> list[int]:
        if any(later <= earlier for earlier, later in itertools.pairwise(value)):
            raise ValueError("density.volumesPerNode must be strictly increasing")
        return value


class MoveSpec(_Model):
    """The moveVolume step: publish pods deleted on their node and made again on another, their volumes following."""

    percent: int = Field(100, ge=1, le=100,
                         description="Share of the publish pods that move (the first ones, by index), in percent; "
                                     "at least one pod moves.")

    def pods(self, total: int) -> int:
        """How many of ``total`` publish pods move (rounded up, so at least one)."""
        return min(total, max(1, -(-total * self.percent // 100)))


class ExpandSpec(_Model):
    """The expandVolume step: each claim's request raised to ``to``, or by ``by``, in one batch."""

    model_config = ConfigDict(json_schema_extra=cel(
        ("has(self.to) != has(self.by)", "expand needs exactly one of to and by")))

    # Whole bytes are checked by the operator, not at admission: CEL's isInteger() says no to whole byte counts
    # written with a fractional binary suffix ("1.5Gi") or many digits ("100Ti", even "1Pi").
    to: str | None = Field(None, max_length=64, pattern=QUANTITY_PATTERN,
                           description="The new size of every volume, e.g. 2Gi (more than spec.size; whole bytes).")
    by: str | None = Field(None, max_length=64, pattern=QUANTITY_PATTERN, json_schema_extra=cel((
        "quantity(self).isGreaterThan(quantity('0'))", "expand.by must be greater than 0")),
        description="How much every volume grows, e.g. 1Gi: the new size is spec.size plus this (whole bytes).")

    @model_validator(mode="after")
    def _one_of(self) -> ExpandSpec:
        if (self.to is None) == (self.by is None):
            raise ValueError("expand needs exactly one of to and by")
        if self.by is not None and v.parse_quantity(self.by) <= 0:
            raise ValueError("expand.by must be greater than 0")
        for name, value in (("to", self.to), ("by", self.by)):
            if value is not None and v.parse_quantity(value) != int(v.parse_quantity(value)):
                raise ValueError(f"expand.{name} must be a whole number of bytes")
        return self

    def new_size(self, size: str) -> str:
        """The size the claims are raised to from ``size`` (``by`` is added in bytes: 1Gi by 512Mi is 1610612736)."""
        if self.to is not None:
            return self.to
        assert self.by is not None
        return str(int(v.parse_quantity(size) + v.parse_quantity(self.by)))


MAX_EPHEMERAL_PODS = 1000
MAX_EPHEMERAL_VOLUMES_PER_POD = 16


class EphemeralSpec(_Model):
    """createEphemeral and deleteEphemeral: pods with generic ephemeral volumes (each a claim made from the pod's
    template by the controller-manager, owned by the pod), timed from the pod's creation to Ready and from its
    deletion to its claims and volumes gone: the volume's whole life inside the pod's."""

    pods: int = Field(..., ge=1, le=MAX_EPHEMERAL_PODS, description="Pods made at once, each with volumesPerPod "
                                                                    "ephemeral volumes.")
    volumesPerPod: int = Field(1, ge=1, le=MAX_EPHEMERAL_VOLUMES_PER_POD,
                               description="Generic ephemeral volumes per pod (each of the run's class, size, "
                                           "accessModes and volumeMode).")
